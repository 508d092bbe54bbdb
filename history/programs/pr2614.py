"""#2614: ``Tensor.div_`` drops its ``rounding_mode``: the update is a true division where eager floors.

``ltorch.div_(a, b, rounding_mode=...)`` is ``_copy_(a, div(a, b))``: the rounding mode is not passed on, so
``y.div_(b, rounding_mode="floor")`` on an intermediate y computes ``y / b`` and the jitted function returns
3.5 where eager PyTorch returns 3.0 (and -3.5 for -4.0). The fix passes ``rounding_mode`` to ``div``. The fix
added no test; the program updates an intermediate (not an input) and compares the returned value with eager's.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import same_as_eager  # noqa: E402

import thunder  # noqa: E402


def floor_halves(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    y = a * 1
    y.div_(b, rounding_mode="floor")
    return y


def main() -> None:
    a = torch.tensor([7.0, -7.0, 5.5, -1.5])
    b = torch.full((4,), 2.0)
    same_as_eager(floor_halves, thunder.jit(floor_halves), a, b)
    print("ok")


if __name__ == "__main__":
    main()
