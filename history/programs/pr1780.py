"""#1780 (its autodiff part): the forward keeps each symbol's residuals under the name of the symbol's first output.

``torch.max(x, 0)`` returns values and indices; only the indices are used, so dead-code elimination
turns the first output into ``_`` (None) and ``(_, i) = ltorch.torch_max(x, 0, False)`` is left.
Splitting forward and backward, ``deconstruct_forward_env_for_backward`` looks up the residuals under
``symbol.output[0].name``: None has no name. The fix keys them by the first output that is a proxy (``i``).
Forward and backward checked against eager PyTorch.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import same_as_eager  # noqa: E402

import thunder  # noqa: E402


def pick_row(x: torch.Tensor) -> torch.Tensor:
    _, indices = torch.max(x, 0)
    return x[indices[0]] * 2


def main() -> None:
    torch.manual_seed(0)
    same_as_eager(pick_row, thunder.jit(pick_row), torch.randn(3, 2, requires_grad=True))
    print("ok")


if __name__ == "__main__":
    main()
