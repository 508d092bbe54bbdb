"""#1875: softplus had no grad rule; the backward differentiates its decomposition, which is NaN for large inputs.

``ltorch.softplus(a, beta, threshold)`` is ``where(a * beta > threshold, a, log1p(exp(a * beta)) / beta)``.
The torch executor runs the forward as ``torch.nn.functional.softplus`` (right), but the
backward is the chain rule through the decomposition, both branches of the where: for
``a = 100`` the unselected branch's ``exp(100)`` is ``inf`` in float32, its cotangent is 0,
and ``log1p``'s and ``exp``'s derivatives make ``0 / (1 + inf) * inf = nan``, which the sum of
the two branches' gradients carries into the input's gradient (eager PyTorch's is 1). The
fix registers ``_softplus_grad`` (``g * where(a * beta > threshold, 1, sigmoid(a * beta))``).
The fix added no regression test (it narrowed the OpInfo's samples). Checked against
eager PyTorch, forward and backward.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import same_as_eager  # noqa: E402

import thunder  # noqa: E402


def softplus(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.softplus(x)


def main() -> None:
    x = torch.tensor([-3.0, 0.5, 30.0, 100.0], requires_grad=True)
    same_as_eager(softplus, thunder.jit(softplus), x)
    print("ok")


if __name__ == "__main__":
    main()
