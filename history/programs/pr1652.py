"""#1652 (issue #1284): an in-place operation on a leaf tensor that requires grad.

Eager PyTorch refuses ``x.mul_(2)`` on a leaf that requires grad ("a leaf Variable that requires grad is being used
in an in-place operation"). At the parent Thunder accepts it: the functionalized/alias-updated trace writes the result
into ``x`` with ``prims.copy_`` and the forward/backward split differentiates ``mul`` as if ``x`` had been an
ordinary intermediate, so the call returns a result with a gradient eager PyTorch never computes and the caller's
leaf is silently overwritten. Fixed by 682e0d13 (a redo of #1458), which records the grad mode on ``prims.copy_``
(``grad_enabled=``) and makes the torch executor's ``copy_`` raise eager's error for a leaf that requires grad when
grad is enabled. Under ``torch.no_grad()`` the same in-place update is allowed, in eager and in Thunder alike.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import executors, runtime_error  # noqa: E402

import thunder  # noqa: E402


def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x.mul_(2)  # x is a leaf that requires grad
    return x * y


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(3, 4, requires_grad=True)
    y = torch.randn(3, 4)
    expected = runtime_error(f, x.detach().clone().requires_grad_(True), y)
    assert expected is not None and "leaf Variable" in expected, expected
    jitted = thunder.jit(f, executors=executors())
    before = x.detach().clone()
    got = runtime_error(jitted, x, y)
    assert got is not None, (
        "Thunder ran an in-place update of a leaf that requires grad, which eager PyTorch refuses "
        f"(x changed: {not torch.equal(before, x.detach())})"
    )
    assert "leaf Variable" in got, got

    # under no_grad the update is allowed, in eager and in Thunder
    with torch.no_grad():
        x_eager = before.clone().requires_grad_(True)
        x_thunder = before.clone().requires_grad_(True)
        expected_out = f(x_eager, y)
        got_out = thunder.jit(f, executors=executors())(x_thunder, y)
    torch.testing.assert_close(got_out, expected_out)
    torch.testing.assert_close(x_thunder.detach(), x_eager.detach())
    print("ok")


if __name__ == "__main__":
    main()
