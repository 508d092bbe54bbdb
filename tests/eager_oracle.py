"""Eager PyTorch as the oracle of a check: two seeded inputs that require grad, their gradients, and a comparison.

    >>> same(gradients(lambda x, y: x * y, (3,)), gradients(lambda x, y: y * x, (3,)))
    True
"""

from __future__ import annotations

from collections.abc import Callable

import torch

T = torch.Tensor


def inputs(shape: tuple[int, ...]) -> tuple[T, T]:
    """Two tensors of ``shape`` that require grad, the same for every call."""
    generator = torch.Generator().manual_seed(0)
    return (torch.randn(*shape, generator=generator, requires_grad=True),
            torch.randn(*shape, generator=generator, requires_grad=True))


def gradients(function: Callable[[T, T], T], shape: tuple[int, ...]) -> list[T | None]:
    """The gradients of the two inputs from the sum of what ``function`` returns."""
    x, y = inputs(shape)
    function(x, y).sum().backward()  # type: ignore[no-untyped-call]
    return [x.grad, y.grad]


def same(a: list[T | None], b: list[T | None]) -> bool:
    """Both give the same gradients (None where the other gives None)."""
    return all((p is None) == (q is None) and (p is None or q is None or torch.allclose(p, q)) for p, q in zip(a, b))
