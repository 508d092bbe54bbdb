"""#2624: silu had no grad rule; the backward differentiates its decomposition, which is NaN for large negative inputs.

``ltorch.silu`` is ``a * sigmoid(a)`` with sigmoid decomposed as ``1 / (1 + exp(-a))``.
The torch executor runs the forward as ``torch.nn.functional.silu`` (right), but the
backward is the chain rule through the decomposition: for ``a = -256``, ``exp(-a)`` is
``inf`` in float32 and the reciprocal's derivative is ``-1/(1+inf)**2 * inf``, i.e.
``0 * inf = nan``, where eager PyTorch's gradient is 0. The fix registers ``_silu_grad``
(``g * s * (1 + a * (1 - s))`` with ``s = 1 / (1 + exp(-a))``). The fix's regression test
(test_silu_decomposition_numerical_stability) needs CUDA; this is the same program on the
CPU, smaller. Checked against eager PyTorch, forward and backward.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import same_as_eager  # noqa: E402

import thunder  # noqa: E402


def linear_silu(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(torch.nn.functional.linear(x, w, bias=None))[0]


def main() -> None:
    x = torch.full((1, 8, 16), -4.0, requires_grad=True)
    w = torch.full((4, 16), 4.0, requires_grad=True)
    same_as_eager(linear_silu, thunder.jit(linear_silu), x, w)
    print("ok")


if __name__ == "__main__":
    main()
