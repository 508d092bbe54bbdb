"""#1787: ``Tensor.to(copy=True)`` is decomposed into an in-place copy into a new empty tensor, and the gradient is lost.

#1775 made ``ltorch.to`` return a copy when ``copy=True`` as ``_copy_(empty(a.shape), a)``,
i.e. ``t0 = prims.empty(...); t1 = prims.copy_(a, t0)``. ``prims.copy_``'s output is like
its destination, so ``t1`` does not require grad although it is computed from ``a``, which
does: the autograd split sees no output that needs a gradient and the jitted function's
result has no ``grad_fn`` (eager PyTorch's has one). The fix (which reverts #1775) clones
``a`` (``prims.clone``), which carries the gradient. Checked against eager PyTorch,
forward and backward.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import same_as_eager  # noqa: E402

import thunder  # noqa: E402


def copy_then_scale(a: torch.Tensor) -> torch.Tensor:
    return a.to(copy=True) * 2


def main() -> None:
    torch.manual_seed(0)
    same_as_eager(copy_then_scale, thunder.jit(copy_then_scale), torch.randn(3, requires_grad=True))
    print("ok")


if __name__ == "__main__":
    main()
