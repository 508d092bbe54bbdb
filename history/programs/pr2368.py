"""#2368: a tensor read after ``copy_`` into it is read as it was before the copy, and the gradient is lost.

``z = torch.zeros_like(x); z.copy_(x); return z * 2``. Thunder records ``t1 = ltorch.copy_(z, x)``
and ``t2 = ltorch.mul(z, 2)``: by the trace's dataflow the product reads ``z``, not the copy's
result ``t1``; the alias-update pass (``insert_alias_updates``), the default way Thunder handles
in-place ops since #2052, is what rewrites later reads of ``z`` to the updated alias. At the
parent it returned early: it looked for in-place symbols with the functionalization path's
``is_in_place_op``, which counts only the symbols of ``_inplace_to_out_of_place`` and so not
``ltorch.copy_``. The forward computes the right values (``copy_`` runs in place), but no
gradient reaches ``x`` and the result has no ``grad_fn`` (eager PyTorch's has one). #2368
("Remove functionalization path") makes the pass use its own ``_is_inplace_op``. Checked against
eager PyTorch, forward and backward.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import same_as_eager  # noqa: E402

import thunder  # noqa: E402


def copy_then_scale(x: torch.Tensor) -> torch.Tensor:
    z = torch.zeros_like(x)
    z.copy_(x)
    return z * 2


def main() -> None:
    torch.manual_seed(0)
    same_as_eager(copy_then_scale, thunder.jit(copy_then_scale), torch.randn(3, requires_grad=True))
    print("ok")


if __name__ == "__main__":
    main()
