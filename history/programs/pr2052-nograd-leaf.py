"""#2052 (probe): an in-place update through a view of a leaf under ``torch.no_grad()``, which eager allows, is refused.

Inside ``with torch.no_grad():`` eager PyTorch allows updating a leaf that requires grad, through a view too (weight
initialization, an optimizer's step). The interpretation records the update's ``prims.copy_`` with
``grad_enabled=False``; functionalization (``functionalize_inplace_ops``) writes the update of the view back into the
leaf with a new ``prims.copy_(t, p, grad_enabled=True)``: the mode of the compile, not the one the update was made in.
The torch executor's ``copy_`` then raises eager's leaf error ("a leaf Variable that requires grad is being used in an
in-place operation"), in the forward from #1652 (682e0d13) on, in the backward once #1956 moved the write-back there
(with the forward leaving ``p`` as it was). #2052 makes alias updating the default, which keeps the update's own mode.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import executors  # noqa: E402

import thunder  # noqa: E402


def f(p: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        p.view(-1).mul_(2)  # allowed by eager: grad is disabled here
    return w * p.detach()


def main() -> None:
    torch.manual_seed(0)
    p, w = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    p_eager, w_eager = (t.detach().clone().requires_grad_(True) for t in (p, w))
    expected = f(p_eager, w_eager)
    expected.sum().backward()
    try:
        got = thunder.jit(f, executors=executors())(p, w)
        got.sum().backward()
    except RuntimeError as error:
        raise AssertionError(f"Thunder refuses an in-place update that eager PyTorch allows: {error}") from error
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(p.detach(), p_eager.detach(), msg=lambda m: f"the caller's leaf differs from eager's: {m}")
    torch.testing.assert_close(w.grad, w_eager.grad)
    assert p.grad is None and p_eager.grad is None
    print("ok")


if __name__ == "__main__":
    main()
