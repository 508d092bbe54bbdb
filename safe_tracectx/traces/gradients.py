"""A gradient whose dtype or shape is not its primal's (``gradient-mismatch``), in Thunder's VJP backward pass.

By Thunder's semantics the cotangent of a value has the value's dtype and shape: the grad rules that read it
are built for that (a prim's meta checks it: ``pad`` of a float gradient made for an int tensor raises), and
torch autograd's ``validate_outputs`` enforces it for the gradients a backward returns. ``backward_pass``
(``thunder.core.transforms``) is handed the cotangents of a trace's outputs and returns its inputs'
gradients; both are compared here with their primals, tensor proxy with tensor proxy, reading only stored
attributes: the dtype always (its kind: a float gradient for an integer or bool primal, a real one for a
complex primal, or the reverse), the shape only where both are plain ints (symbolic dimensions are never
compared: that would record symbols in the active trace) and not for a scalar tensor primal (a CPU scalar tensor's gradient is
the other operand's shape, and ``vjp`` sums it back). A float gradient of another width (an ``f32``
cotangent of a ``bf16`` value) is not counted: torch autograd casts a returned gradient to its input's dtype,
and Thunder's mixed-precision rules compute in the wider type on purpose (#1878's class: ``grad_chooser_backward``
returned ``f32`` for an ``i64`` primal)::

    >>> from thunder.core import devices, dtypes
    >>> from thunder.core.proxies import TensorProxy
    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx import tracectx
    >>> with tracectx(TraceCtx()):
    ...     ids = TensorProxy("ids", shape=(512,), device=devices.cpu, dtype=dtypes.int64)
    ...     g = TensorProxy("g", shape=(512,), device=devices.cpu, dtype=dtypes.float32)
    ...     h = TensorProxy("h", shape=(512,), device=devices.cpu, dtype=dtypes.bfloat16)
    >>> [(p.name, c.name, why) for p, c, why in mismatches([ids, g], [g, h])]
    [('ids', 'g', "dtype float32 where the primal's is int64")]
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.gradients")

import inspect
from collections.abc import Callable, Iterator
from typing import Any, Final

from thunder.core import dtypes
from thunder.core.proxies import TensorProxy

from safe_tracectx.traces.bound_proxies import plain_shape, proxy_args

__all__ = ["KIND", "grad_rules", "is_inexact", "mismatch", "mismatches", "pairs", "rule_name"]

KIND: Final = "gradient-mismatch"
_MAX_DEPTH: Final = 16


def pairs(primals: Any, gradients: Any, depth: int = 0) -> Iterator[tuple[Any, Any]]:
    """(primal, gradient) for each leaf where ``primals`` and ``gradients`` (tuples, lists, dict values) line up."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(primals, tuple | list) and isinstance(gradients, tuple | list):
        for primal, gradient in zip(primals, gradients):
            yield from pairs(primal, gradient, depth + 1)
    elif isinstance(primals, dict) and isinstance(gradients, dict):
        for key, primal in primals.items():
            if key in gradients:
                yield from pairs(primal, gradients[key], depth + 1)
    else:
        yield primals, gradients


def _kind(dtype: Any) -> str | None:
    """What kind of number a Thunder dtype holds: bool, integer, float or complex (None when unknown)."""
    try:
        if dtypes.is_boolean_dtype(dtype):
            return "bool"
        if dtypes.is_complex_dtype(dtype):
            return "complex"
        if dtypes.is_float_dtype(dtype):
            return "float"
        if dtypes.is_exact_dtype(dtype):
            return "integer"
    except Exception:  # noqa: BLE001 - not a Thunder dtype
        return None
    return None


def is_inexact(proxy: Any) -> bool:
    """Whether ``proxy`` is a tensor proxy of a float or complex dtype (one whose cotangent is read)."""
    return isinstance(proxy, TensorProxy) and _kind(getattr(proxy, "_dtype", None)) in ("float", "complex")


def _long(dtype: Any) -> str:
    return str(dtype).removeprefix("thunder.dtypes.").removesuffix("_")


def mismatch(primal: Any, gradient: Any) -> str | None:
    """How ``gradient`` (a tensor proxy) is not ``primal``'s (a tensor proxy) gradient, or None."""
    if not isinstance(primal, TensorProxy) or not isinstance(gradient, TensorProxy) or primal is gradient:
        return None
    mine, theirs = getattr(primal, "_dtype", None), getattr(gradient, "_dtype", None)
    kind, got = _kind(mine), _kind(theirs)
    if kind is not None and got is not None and kind != got:
        return f"dtype {_long(theirs)} where the primal's is {_long(mine)}"
    shape, other = plain_shape(primal), plain_shape(gradient)
    if shape is not None and other is not None and not _sums_to(other, shape):
        return f"shape {list(other)} where the primal's is {list(shape)}"
    return None


def _sums_to(gradient: tuple[int, ...], primal: tuple[int, ...]) -> bool:
    """Whether ``gradient`` is ``primal``'s shape, or ``primal`` is a scalar tensor: Thunder's elementwise prims
    broadcast only a (CPU) scalar tensor, whose gradient has the other operand's shape and ``vjp`` sums back. Any
    other broadcast gradient is a rule's mistake that summing back turns into other numbers (an expand doubles it)."""
    return gradient == primal or primal == ()


def mismatches(primals: Any, gradients: Any) -> list[tuple[TensorProxy, TensorProxy, str]]:
    """(primal, gradient, how) for each gradient in ``gradients`` that is not its primal's (read only)."""
    found = []
    for primal, gradient in pairs(primals, gradients):
        why = mismatch(primal, gradient)
        if why is not None:
            found.append((primal, gradient, why))
    return found


def rule_name(rule: Any, module: Any = None) -> str:
    """A grad rule's name; a rule that hands its work to a backward helper (``_amax_prim_grad`` calls
    ``grad_chooser_backward``) is named with it: ``_amax_prim_grad via grad_chooser_backward``."""
    function = inspect.unwrap(getattr(rule, "func", rule))  # a functools.partial, a decorated rule
    name = str(getattr(function, "__qualname__", None) or getattr(function, "__name__", None) or type(rule).__name__)
    names = getattr(getattr(function, "__code__", None), "co_names", ())
    namespace = getattr(function, "__globals__", {}) if module is None else vars(module)
    helpers = [n for n in names if n != name and n.endswith("_backward") and callable(namespace.get(n))]
    return f"{name} via {', '.join(helpers)}" if helpers else name


def grad_rules(trace: Any, primal: Any, rules: dict[Any, Any], grads: dict[Any, Any]) -> list[tuple[str, str]]:
    """(label, qualname) of the grad rule of each symbol of ``trace`` that reads ``primal``: its registered
    backward (``rules``: ``backward_impls``), else its grad transform (``grads``: ``_grad_fn_map``)."""
    found: list[tuple[str, str]] = []
    for bsym in getattr(trace, "bound_symbols", ()):
        symbol_id = getattr(getattr(bsym, "sym", None), "id", None)
        try:
            reads = any(arg is primal for arg in proxy_args(bsym))
            rule: Callable[..., Any] | None = rules.get(symbol_id) or grads.get(symbol_id)
        except Exception:  # noqa: BLE001 - an id that does not hash, arguments that do not flatten
            continue
        if not reads or rule is None:
            continue
        function = inspect.unwrap(getattr(rule, "func", rule))
        qualname = f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', rule_name(rule))}"
        label = f"the grad rule of {getattr(bsym.sym, 'name', symbol_id)}, {rule_name(rule)}"
        if (label, qualname) not in found:
            found.append((label, qualname))
    return found
