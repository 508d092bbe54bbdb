"""#2397: an in-place setitem inside a custom autograd.Function's forward, compiled by ThunderFX.

Dynamo turns ``F.apply`` into ``torch.ops.higher_order.autograd_function_apply``; Thunder's lookaside traces its
forward (``out = zeros(4, 3); out[idx] = x; return out``) and runs ``insert_alias_updates`` on that trace. At the
parent ``ltorch.setitem_`` returns None, so its bound symbol has no output; the alias-update pass gives it one
(``t5 = ltorch.setitem_(t0, ...)``) and returns ``t5``, but when the grad transform interprets that trace the
symbol still returns None: the forward's result is None and ``get_grad`` of it fails (ValueError). Fixed by
45a2e93e, where ``setitem_`` returns the updated input.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import same_as_eager  # noqa: E402

import thunder  # noqa: E402,F401
from thunder.dynamo import thunderfx  # noqa: E402


class ScatterRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(4, 3)
        out[idx] = x  # setitem_ on a tensor made inside the forward
        ctx.save_for_backward(idx)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (idx,) = ctx.saved_tensors
        return grad[idx], None


def f(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return ScatterRows.apply(x.sin(), idx) * 2


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3, requires_grad=True)
    idx = torch.tensor([0, 2])
    same_as_eager(f, thunderfx(f), x, idx)
    print("ok")


if __name__ == "__main__":
    main()
