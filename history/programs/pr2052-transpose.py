"""#2052 (probe): an in-place update through a transposed view of an input is written back into the input reshaped.

Before #2052 Thunder's default in-place handling was functionalization (``functionalize_inplace_ops``): each in-place
op becomes its out-of-place form, and an update of a view of an argument is written back into the argument at the end
of the trace. For ``y = x.t(); y.mul_(2)`` the write-back is ``prims.reshape(t1, x.shape)`` copied into ``x``: the
transposed values are laid out in the input's shape without transposing them back, so the caller's ``x`` ends with its
elements in the wrong places (eager PyTorch doubles ``x`` where it is). The returned values are right. #2052 makes
alias updating (``insert_alias_updates``) the default, which writes through the view itself.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import executors  # noqa: E402

import thunder  # noqa: E402


def f(x: torch.Tensor) -> torch.Tensor:
    y = x.t()
    y.mul_(2)  # eager: doubles x in place, through the view
    return y + 1


def g(x: torch.Tensor) -> torch.Tensor:
    y = x.swapaxes(0, 1)
    y.mul_(2)
    return x + 1  # reads x after the update


def main() -> None:
    for function, shape in ((f, (2, 3)), (g, (3, 2, 4))):
        x = torch.arange(float(torch.Size(shape).numel())).reshape(shape)
        x_eager = x.clone()
        expected = function(x_eager)
        got = thunder.jit(function, executors=executors())(x)
        torch.testing.assert_close(
            x, x_eager, msg=lambda m: f"{function.__name__}: the caller's tensor differs from eager's: {m}"
        )
        torch.testing.assert_close(got, expected)
    print("ok")


if __name__ == "__main__":
    main()
