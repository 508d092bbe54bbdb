"""How far a gradient is from autograd's, judged against the gradient's scale; what the replays compare with.

Rounding grows with each reduction's length, so an elementwise tolerance either
misses a few elements far off or reports a long sum's rounding. A gradient is
judged by its relative L2 error and its largest difference against its largest
element; one not finite where autograd's is (a NaN from an overflow) always
differs::

    >>> import torch
    >>> from safe_tracectx.hooks.gradient_compare import how_far
    >>> how_far(torch.ones(3), torch.ones(3), low=False) is None
    True
    >>> how_far(torch.tensor([1.0, float("nan")]), torch.ones(2), low=False)
    "1 of 2 elements not finite where autograd's are, or finite where they are not"
"""

from __future__ import annotations

from typing import Any

import torch
from thunder.core.proxies import TensorProxy

from safe_tracectx.hooks.replay import differs, wrong_elements
from safe_tracectx.traces.bound_proxies import proxy_args, proxy_outs

__all__ = ["floating", "how_far", "low_precision", "random_cotangent"]


def how_far(given: torch.Tensor, reference: torch.Tensor, *, low: bool) -> str | None:
    """How ``given`` differs from ``reference`` beyond rounding, or None. Rounding is judged against the gradient's
    scale, as it grows with each reduction's length: the relative L2 error (1e-3, 5e-2 for a program that computes
    in half precision), and for full precision also the largest difference against the largest element (1e-2), so
    that a few elements far off are seen too."""
    if given.shape != reference.shape:
        return f"shape {tuple(given.shape)} where autograd gives {tuple(reference.shape)}"
    if not (given.is_floating_point() or given.is_complex()):
        return None if not differs(given, reference) else f"{wrong_elements(given, reference)} elements differ"
    unlike = int((torch.isfinite(given) != torch.isfinite(reference)).sum())  # a NaN compares as nothing below
    if unlike:
        return f"{unlike} of {given.numel()} elements not finite where autograd's are, or finite where they are not"
    wide = torch.complex128 if given.is_complex() or reference.is_complex() else torch.float64
    difference, scale = (given - reference).to(wide), reference.to(wide)
    error, norm = float(torch.linalg.vector_norm(difference)), float(torch.linalg.vector_norm(scale))
    largest, peak = float(difference.abs().max()) if difference.numel() else 0.0, float(scale.abs().max()) if scale.numel() else 0.0
    floor = 1e-5 * max(1.0, reference.numel()) ** 0.5
    if error > (5e-2 if low else 1e-3) * norm + floor or (not low and largest > 1e-2 * peak + 1e-5):
        return f"relative error {error / max(norm, 1e-12):.2g}, largest difference {largest:.3g} where the largest " \
               f"element is {peak:.3g}"
    return None


def random_cotangent(output: Any, generator: torch.Generator) -> torch.Tensor | None:
    """A random cotangent for a floating tensor output, zeros for another tensor (as autograd hands one), else None."""
    if not isinstance(output, torch.Tensor):
        return None
    if output.is_floating_point() and output.requires_grad:
        return torch.randn(output.shape, generator=generator, dtype=output.dtype)
    return torch.zeros_like(output)


def low_precision(program: Any) -> bool:
    """Whether ``program`` computes any tensor in half precision (bf16, f16) or lower."""
    for bsym in program.bound_symbols:
        for proxy in (*proxy_outs(bsym), *proxy_args(bsym)):
            dtype = getattr(proxy, "dtype", None)
            if isinstance(proxy, TensorProxy) and getattr(dtype, "bytes", 4) < 4 and floating(proxy):
                return True
    return False


def floating(proxy: TensorProxy) -> bool:
    from thunder.core.dtypes import to_torch_dtype

    dtype = to_torch_dtype(proxy.dtype)
    return dtype is not None and (dtype.is_floating_point or dtype.is_complex)
