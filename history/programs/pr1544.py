"""#1544: a trace holding the symbol of a custom ``torch.autograd.Function`` cannot be printed.

The jit's ``torch.autograd.Function.apply`` lookaside records the custom forward as a symbol of
the ad hoc executor (``Fn_<id>_0``), which has no Python module. Printing a trace, or making
its Python callable, gathers each bound symbol's import context, and ``BoundSymbol.import_ctx``
(``thunder/core/symbol.py``) asserted ``self.sym.module is not None``: at the parent the first
computation trace of any program using a custom Function raises AssertionError when printed
(the computed values are right; the execution trace, where the symbol is replaced by its
implementation, prints). The fix gives ad hoc executor symbols an empty import context.
Checked against eager PyTorch, forward and backward, then every trace of the forward and of
the backward is printed, as a user inspecting Thunder's traces does.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import same_as_eager  # noqa: E402

import thunder  # noqa: E402


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(x)
        return torch.sin(x)

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        (x,) = ctx.saved_tensors
        return g * torch.cos(x)


def fn(x: torch.Tensor) -> torch.Tensor:
    return Fn.apply(x) * 3


def main() -> None:
    torch.manual_seed(0)
    jfn = thunder.jit(fn)
    same_as_eager(fn, jfn, torch.randn(2, requires_grad=True))
    for trace in (*thunder.last_traces(jfn), *thunder.last_backward_traces(jfn)):
        str(trace)
    print("ok")


if __name__ == "__main__":
    main()
