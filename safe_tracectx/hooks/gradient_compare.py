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

__all__ = ["beyond_rounding", "floating", "how_far", "in_float64", "low_precision", "random_cotangent"]

#: How much further from the float64 gradient than the reference's own rounding a gradient may be.
_ROUNDING_FACTOR = 2.0


def how_far(given: torch.Tensor, reference: torch.Tensor, *, low: bool, against: str = "autograd") -> str | None:
    """How ``given`` differs from ``reference`` (what ``against`` gives) beyond rounding, or None. Rounding is judged
    against the value's scale, as it grows with each reduction's length: the relative L2 error (1e-3, 5e-2 for a
    program that computes in half precision), and for full precision also the largest difference against the
    largest element (1e-2), so that a few elements far off are seen too."""
    given, reference = given.detach(), reference.detach()  # (an input handed back as it is may require grad)
    if given.shape != reference.shape:
        return f"shape {tuple(given.shape)} where {against} gives {tuple(reference.shape)}"
    if not (given.is_floating_point() or given.is_complex()):
        return None if not differs(given, reference) else f"{wrong_elements(given, reference)} elements differ"
    unlike = int((torch.isfinite(given) != torch.isfinite(reference)).sum())  # a NaN compares as nothing below
    if unlike:
        return f"{unlike} of {given.numel()} elements not finite where {against}'s are, or finite where they are not"
    wide = torch.complex128 if given.is_complex() or reference.is_complex() else torch.float64
    difference, scale = (given - reference).to(wide), reference.to(wide)
    error, norm = float(torch.linalg.vector_norm(difference)), float(torch.linalg.vector_norm(scale))
    largest, peak = float(difference.abs().max()) if difference.numel() else 0.0, float(scale.abs().max()) if scale.numel() else 0.0
    floor = 1e-5 * max(1.0, reference.numel()) ** 0.5
    if error > (5e-2 if low else 1e-3) * norm + floor or (not low and largest > 1e-2 * peak + 1e-5):
        return f"relative error {error / max(norm, 1e-12):.2g}, largest difference {largest:.3g} where the largest " \
               f"element is {peak:.3g}"
    return None


def beyond_rounding(given: torch.Tensor, reference: torch.Tensor, exact: torch.Tensor | None, *,
                    low: bool, against: str = "autograd") -> str | None:
    """:func:`how_far` of ``given`` from ``reference``, unless ``exact`` (the reference computed in float64) shows
    ``given`` is within rounding of it, or no further from it than twice the reference's own error: on
    ill-conditioned values (a layer norm of 1e4 + 0.1 * randn) float32 is noise for both, and the difference is
    the reference's as much as the gradient's. Elements where float64 takes another branch than float32 (the
    reference more than a tenth of the largest element away from it: ``x > 0.1`` at 0.1f) excuse nothing but
    themselves, when they are a few (when they are most, float32 is noise throughout). Where the reference's
    own error is half the gradient or more (a gradient float32 computes as noise, as of a scale-invariant
    loss), only a value not finite where the reference's is can differ; such a value always does."""
    how = how_far(given, reference, low=low, against=against)
    if how is None or exact is None or exact.shape != given.shape or not bool(torch.isfinite(given).all()):
        return how
    wide = torch.complex128 if given.is_complex() else torch.float64
    given64, reference64, exact64 = (t.to(wide).reshape(-1) for t in (given, reference, exact))
    peak = max(float(exact64.abs().max()), float(reference64.abs().max())) if exact64.numel() else 0.0
    kept = (reference64 - exact64).abs() <= 0.1 * peak
    if 2 * int(kept.sum()) > kept.numel():  # a few elements took another branch; most far off is noise, not branches
        given64, reference64, exact64 = given64[kept], reference64[kept], exact64[kept]
    how = how_far(given64, reference64, low=low, against=against)
    if how is None or how_far(given64, exact64, low=low) is None:
        return None
    own, theirs = (float(torch.linalg.vector_norm(t - exact64)) for t in (given64, reference64))
    if theirs >= 0.5 * float(torch.linalg.vector_norm(exact64)):  # float32 gives eager no right digit here
        return None
    return None if own <= _ROUNDING_FACTOR * theirs else how


def in_float64(value: Any) -> Any:
    """``value`` with each real floating tensor in float64 (complex in complex128), for a gradient's exact form."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.detach().to(torch.float64)
    if isinstance(value, torch.Tensor) and value.is_complex():
        return value.detach().to(torch.complex128)
    return value


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
