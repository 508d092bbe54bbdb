"""#1569: the custom backward of a ``torch.autograd.Function`` is ignored when a fusion executor can fuse its forward.

``Sin.forward`` computes ``torch.sin(x)``; ``Sin.backward`` returns ``g * cos(x) * 200``
(deliberately not sin's derivative). The jit's ``torch.autograd.Function`` lookaside
registers the custom symbol's forward and backward with the ad hoc executor, which
``thunder.jit`` put last among the executors. The grad transform asks the executors in
order (``_get_gradfn_and_executor`` in ``thunder/core/transforms.py``): the first that can
execute or fuse the symbol decides, and torch.compile's executor can fuse it (its only
subsymbol is sin) but has no grad rule for it, so the ad hoc executor's rule is never seen
and the symbol is differentiated through its decomposition: the backward computes
``cos(x) * g``, 200 times too small. The fix puts the ad hoc executor first.
Checked against eager PyTorch, forward and backward.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import same_as_eager  # noqa: E402

import thunder  # noqa: E402
from thunder.executors.torch_compile import torch_compile_ex


class Sin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(x)
        return torch.sin(x)

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        (x,) = ctx.saved_tensors
        return g * torch.cos(x) * 200


def func(x: torch.Tensor) -> torch.Tensor:
    return Sin.apply(x)


def main() -> None:
    same_as_eager(func, thunder.jit(func, executors=[torch_compile_ex]), torch.ones(2, requires_grad=True))
    print("ok")


if __name__ == "__main__":
    main()
