"""Checks and conversions of the Thunder-facing arguments, each a clear error naming the call and the fix.

    >>> from safe_tracectx._support.arguments import expect_trace
    >>> expect_trace("t0", "fresh_name(trace=...)")
    Traceback (most recent call last):
      ...
    TypeError: fresh_name(trace=...) takes a thunder TraceCtx, got str ('t0'); pass the trace object itself
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx._support.arguments")

import keyword
from collections.abc import Iterable
from typing import Any

from thunder.core import devices, dtypes
from thunder.core.trace import TraceCtx

__all__ = ["expect_name", "expect_prefix", "expect_shape", "expect_trace", "to_device", "to_dtype"]


def expect_trace(
    value: object, where: str, *, verb: str = "takes", allow_none: bool = False, hint: str = "pass the trace object itself"
) -> TraceCtx:
    """``value`` if it is a Thunder ``TraceCtx`` (or None with ``allow_none``); else a TypeError naming ``where``."""
    if not isinstance(value, TraceCtx) and not (allow_none and value is None):
        what = "a thunder TraceCtx or None" if allow_none else "a thunder TraceCtx"
        raise TypeError(f"{where} {verb} {what}, got {type(value).__name__} ({value!r:.60}); {hint}")
    return value  # type: ignore[return-value]


def expect_name(name: object, where: str) -> str:
    """A proxy name: a Python identifier that is not a keyword (Thunder prints traces as Python)."""
    if not isinstance(name, str):
        raise TypeError(f"{where} takes the new name as str, got {type(name).__name__} ({name!r:.60})")
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(
            f"{where}: {name!r:.60} is not a valid proxy name; use a Python identifier that is not a "
            "keyword (letters, digits and _, not starting with a digit), e.g. 'bw_t0'"
        )
    return name


def expect_prefix(prefix: object, where: str) -> str | None:
    """None or a name prefix (an identifier start: ``t``, ``bw_``)."""
    if prefix is None:
        return None
    if not isinstance(prefix, str):
        raise TypeError(f"{where} takes prefix as str or None, got {type(prefix).__name__} ({prefix!r:.60})")
    if not (prefix + "0").isidentifier():
        raise ValueError(f"{where}: prefix {prefix!r:.60} cannot start a proxy name; use letters and _, e.g. 'bw_'")
    return prefix


def expect_shape(shape: Iterable[int], where: str) -> tuple[int, ...]:
    """A shape: an iterable of non-negative ints."""
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"{where} takes shape as an iterable of ints, got {type(shape).__name__}") from None
    for dim in dims:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 0:
            raise ValueError(f"{where}: shape {dims!r:.60} must hold non-negative ints, e.g. (2, 3); got {dim!r:.30}")
    return dims


def to_device(device: Any, where: str) -> devices.Device:
    """Thunder's device for a Thunder or torch device or a string such as ``"cpu"``."""
    fix = "pass 'cpu', 'cuda:0', a torch.device or a thunder device"
    try:
        result = devices.to_device(device)
    except Exception as error:  # noqa: BLE001 - Thunder raises assorted errors for bad devices
        raise ValueError(f"{where}: {device!r:.40} is not a device; {fix}") from error
    if result is None:
        raise ValueError(f"{where}: device is required; {fix}")
    return result


def to_dtype(dtype: Any, where: str) -> dtypes.dtype:
    """Thunder's dtype for a Thunder or torch dtype or a name such as ``"float32"``."""
    if isinstance(dtype, str):
        import torch

        torch_dtype = getattr(torch, dtype, None)
        if not isinstance(torch_dtype, torch.dtype):
            raise ValueError(f"{where}: {dtype!r:.40} is not a dtype name; use e.g. 'float32', 'bfloat16', 'int64'")
        dtype = torch_dtype
    try:
        result: dtypes.dtype | None = dtypes.to_dtype(dtype)
    except Exception as error:  # noqa: BLE001
        raise ValueError(f"{where}: {dtype!r:.40} is not a dtype; pass a torch or thunder dtype, or its name") from error
    if result is None:
        raise ValueError(f"{where}: dtype is required; pass a torch or thunder dtype, or its name")
    return result
