"""A custom ``torch.autograd.Function`` for the tests: its backward is part of the program's meaning.

    >>> import torch
    >>> x = torch.ones(1, requires_grad=True)
    >>> Scaled.apply(x).backward(); round(x.grad.item(), 2)
    108.06
"""

from __future__ import annotations

from typing import Any

import torch


class Scaled(torch.autograd.Function):
    """sin forward, a backward that is not sin's derivative (200 cos): Thunder records it as one symbol of the
    jit's temporary executor, with no module, and must use this backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return torch.sin(x)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return g * torch.cos(x) * 200
