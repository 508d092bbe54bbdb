"""#1780 (its grad-rule part): the gradient of ``prims.copy_`` gives its source no gradient.

``torch.zeros_like(x).copy_(x) * 2`` uses the value ``copy_`` returns. Thunder records
``t1 = ltorch.copy_(t0, x)`` (``prims.copy_(x, t0)``) and differentiates it with the rule in
``thunder.core.transforms.backward_impls``, which at the parent was ``lambda g: (None, None)``
("the copy should not be differentiable"): no gradient reaches ``x``, the split finds none to
return, and the jitted function's result has no ``grad_fn`` (eager PyTorch's has one, and the
gradient of ``x`` is 2). #1780 ("Introduce update_aliases") changed the rule to ``(g, None)``.
Checked against eager PyTorch, forward and backward.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import same_as_eager  # noqa: E402

import thunder  # noqa: E402


def copy_into_zeros(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(x).copy_(x) * 2


def main() -> None:
    torch.manual_seed(0)
    same_as_eager(copy_into_zeros, thunder.jit(copy_into_zeros), torch.randn(3, requires_grad=True))
    print("ok")


if __name__ == "__main__":
    main()
