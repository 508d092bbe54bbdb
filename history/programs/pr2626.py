"""#2626: the grad rule of prims.div recomputes the forward as ``a / b`` (true division), so under the grad transform
an integer division (torch.div(a, b, rounding_mode="trunc") on int64) becomes a float32 true_divide, and its float
result is used where the int64 quotient was: indexing with it fails.

``c[torch.div(a, b, rounding_mode="trunc")]`` with ``c`` requiring grad (the regression test test_div_exact, as #2665
extended it: the #2626 version leaves ``c`` without grad, so no grad transform runs). Fixed by 80461bae (a DIV_EXACT
prim for integer division, which has no gradient); #2665 later replaced that with ``prims.div`` in the grad rule.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import same_as_eager  # noqa: E402

import thunder  # noqa: E402


def fn(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    indices = torch.div(a, b, rounding_mode="trunc")
    return c[indices]


def main() -> None:
    torch.manual_seed(0)
    a = torch.randint(1, 5, (5,))
    b = torch.ones(5, dtype=torch.int32)
    same_as_eager(fn, thunder.jit(fn), a, b, torch.randn(5, 5, requires_grad=True))
    print("ok")


if __name__ == "__main__":
    main()
