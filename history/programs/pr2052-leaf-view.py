"""#2052 (probe): an in-place update through a view of a leaf that requires grad, which eager PyTorch refuses, runs.

Eager PyTorch raises "a view of a leaf Variable that requires grad is being used in an in-place operation" for
``p.view(-1).mul_(2)`` with grad enabled. Thunder enforces eager's rule in the torch executor's ``copy_`` (since #1652),
so it raises where that copy runs. Since #1956 (ba561bf7) the forward/backward split puts functionalization's
write-back ``copy_(t, p)`` into the backward (see pr2052-split): the forward runs without the check, returns a result
that does not require grad (the backward's only work is the copy, and it returns no gradient), and leaves ``p`` as it
was; the error would come only from a backward, which this result cannot start. #2052 makes alias updating the
default: the copy is in the forward, and the call raises eager's error.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import executors, runtime_error  # noqa: E402

import thunder  # noqa: E402


def f(p: torch.Tensor) -> torch.Tensor:
    p.view(-1).mul_(2)  # p is a leaf that requires grad
    return p * 1


def main() -> None:
    torch.manual_seed(0)
    p = torch.randn(3, requires_grad=True)
    expected = runtime_error(f, p.detach().clone().requires_grad_(True))
    assert expected is not None and "leaf Variable" in expected, expected
    before = p.detach().clone()
    got = runtime_error(thunder.jit(f, executors=executors()), p)
    assert got is not None, (
        "Thunder ran an in-place update of a view of a leaf that requires grad, which eager PyTorch refuses "
        f"(p changed: {not torch.equal(before, p.detach())})"
    )
    assert "leaf Variable" in got, got
    print("ok")


if __name__ == "__main__":
    main()
