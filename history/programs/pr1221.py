"""#1221: a custom ``torch.autograd.Function`` whose forward records no operation.

``Fn.forward`` returns its input as it is, so while Thunder's jit traces it in
the ``torch.autograd.Function.apply`` lookaside (``thunder/core/jit_ext.py``) the
scope it swapped in for the forward's symbols stays empty. At the parent the
lookaside builds the custom symbol's bound symbol with ``_call_ctx`` and friends
taken from the first recorded subsymbol, ``custom_fwd_bsyms[0]``, and fails
(IndexError, wrapped in Thunder's InterpreterError). The fix pushes and pops a
scope on the trace, makes the output a ``prims.shallow_copy`` of the input (a new
name, as PyTorch returns a view) and binds the symbol through its meta. This is
the regression test of the fix (``test_autograd_function_empty_forward`` in
``thunder/tests/test_jit_general.py``, whose module imports litgpt), as a program.
Checked against eager PyTorch: forward without grad, then forward and backward.
"""

from __future__ import annotations

import torch

import thunder


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return x

    @staticmethod
    def backward(ctx, grad_x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return 2 * grad_x


def fn(x: torch.Tensor) -> torch.Tensor:
    return Fn.apply(x) * 3


def main() -> None:
    torch.manual_seed(0)
    jfn = thunder.jit(fn)

    a = torch.randn(2)
    torch.testing.assert_close(jfn(a), fn(a))

    a = torch.randn(2, requires_grad=True)
    go = torch.randn_like(a)
    out = jfn(a)
    ref = fn(a)
    (grad,) = torch.autograd.grad(out, a, go)
    (grad_ref,) = torch.autograd.grad(ref, a, go)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(grad, grad_ref)
    print("ok")


if __name__ == "__main__":
    main()
