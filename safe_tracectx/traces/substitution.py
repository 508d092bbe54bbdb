"""A substitution that puts a tensor of another dtype where a traced value was (``dtype-changed-by-substitution``).

Thunder's trace substitution (``TraceSubstitutionProcessor``: the grad transform's augmented forward, the
operator executors, quantization) re-runs a symbol and swaps its recorded output for the result of what stands
in for it (a grad rule's forward, an executor's implementation). The symbols after it that read the old value
are kept (or decomposed) as they were traced, for its dtype; given a value of another dtype, the generated
program computes something else or fails (#2626: the grad rule of ``prims.div`` recomputed an int64 quotient
as a float32 true division, which indexing then read). A shape change is not one: the substitution re-shapes
the old proxy to the new one on purpose (the sharding transforms change shapes), so only the dtype is read.

:func:`dtype_swap` is read only (stored attributes, no proxy made)::

    >>> from thunder.core import devices, dtypes
    >>> from thunder.core.proxies import TensorProxy
    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx import tracectx
    >>> with tracectx(TraceCtx()):
    ...     old = TensorProxy("i", shape=(5,), device=devices.cpu, dtype=dtypes.int64)
    ...     new = TensorProxy("t", shape=(5,), device=devices.cpu, dtype=dtypes.float32)
    ...     same = TensorProxy("u", shape=(1, 5), device=devices.cpu, dtype=dtypes.int64)
    >>> swapped_dtypes(old, new), swapped_dtypes(old, same)
    (('i64[5]', 'f32[5]'), None)
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.substitution")

from collections.abc import Iterator
from typing import Any, Final

from thunder.core.proxies import TensorProxy

from safe_tracectx.traces.bound_proxies import proxy_args, proxy_outs
from safe_tracectx.traces.violations import Violation, bsym_label

__all__ = ["KIND", "dtype_swap", "grad_rule_of", "readers_of", "swapped_dtypes", "symbol_name"]

KIND: Final = "dtype-changed-by-substitution"
#: How deep subsymbols are followed when looking for the readers of a value.
_MAX_DEPTH: Final = 32


def _primal(value: Any) -> Any:
    """A VJPDual's primal (what stands in for the value), else the value."""
    primal = getattr(value, "primal", None)
    return primal if primal is not None and type(value).__name__ == "VJPDual" else value


def _describe(proxy: TensorProxy) -> str:
    dtype = getattr(proxy, "_dtype", None)
    short = getattr(dtype, "shortname", None)
    shape = getattr(proxy, "_shape", None)
    dims = ", ".join(map(str, shape)) if isinstance(shape, tuple | list) else "?"
    return f"{short() if callable(short) else dtype}[{dims}]"


def swapped_dtypes(old: Any, new: Any) -> tuple[str, str] | None:
    """(what ``old`` is, what ``new`` is) when both are tensor proxies of known, different dtypes, else None."""
    new = _primal(new)
    if not isinstance(old, TensorProxy) or not isinstance(new, TensorProxy):
        return None
    before, after = getattr(old, "_dtype", None), getattr(new, "_dtype", None)
    if before is None or after is None or before is after or before == after:
        return None
    return _describe(old), _describe(new)


def _walk(bsyms: Any, depth: int = 0) -> Iterator[tuple[Any, int]]:
    """Each bound symbol of ``bsyms`` and, below it, its subsymbols (with the index of its top-level symbol)."""
    for index, bsym in enumerate(bsyms):
        yield bsym, index
        if depth < _MAX_DEPTH:
            for sub, _ in _walk(getattr(bsym, "subsymbols", ()) or (), depth + 1):
                yield sub, index


def readers_of(trace: Any, name: str) -> list[str]:
    """The symbols of ``trace`` (subsymbols included, by their top-level symbol) that read ``name`` and do not
    compute it: what was traced for the value it holds."""
    found: dict[int, str] = {}
    for bsym, index in _walk(getattr(trace, "bound_symbols", ())):
        if any(p.name == name for p in proxy_outs(bsym)):
            continue
        if any(p.name == name for p in proxy_args(bsym)):
            top = trace.bound_symbols[index]
            label = bsym_label(index, top)
            if bsym is not top:
                label += f" (its {getattr(bsym.sym, 'name', '?')})"
            found.setdefault(index, label)
    return list(found.values())


def grad_rule_of(bsym: Any) -> str | None:
    """The name of the registered grad rule (or augmented forward) of ``bsym``'s symbol, if it has one."""
    try:
        import thunder.core.transforms as transforms
    except Exception:  # noqa: BLE001 - a Thunder without it: no rule to name
        return None
    symbol_id = getattr(getattr(bsym, "sym", None), "id", None)
    for table in ("_grad_fn_map", "augmented_forward_impls"):
        rule = getattr(transforms, table, {}).get(symbol_id)
        if rule is not None:
            return str(getattr(rule, "__qualname__", getattr(rule, "__name__", rule)))
    return None


def symbol_name(bsym: Any) -> str:
    """``prims.div``, ``ltorch.getitem``: a bound symbol's symbol as Thunder prints it."""
    sym = getattr(bsym, "sym", None)
    name = str(getattr(sym, "name", "?"))
    module = getattr(getattr(sym, "module", None), "__name__", "")
    short = {"thunder.core.prims": "prims", "thunder.torch": "ltorch", "thunder.clang": "clang"}.get(module, module)
    return f"{short}.{name}" if short else name


def dtype_swap(
    old: Any, new: Any, trace: Any, bsym: Any | None, step: str
) -> Violation | None:
    """The violation when the substitution run by ``step`` (over ``trace``, the trace it processes) swaps ``old``
    for ``new`` of another dtype and symbols of ``trace`` read ``old``; ``bsym``: the symbol it re-ran, if known."""
    found = swapped_dtypes(old, new)
    if found is None:
        return None
    new = _primal(new)
    readers = readers_of(trace, old.name)
    if not readers:
        return None
    before, after = found
    what = "the result"
    if bsym is not None:
        rule = grad_rule_of(bsym)
        what = f"the result of {symbol_name(bsym)}" + (f"'s grad rule {rule}" if rule else " as it was re-run")
    shown = ", ".join(readers[:3]) + (f" and {len(readers) - 3} more" if len(readers) > 3 else "")
    return Violation(
        KIND, new.name,
        f"{step} substitutes {new.name} ({after}), {what}, for {old.name} ({before}); {shown}, traced for "
        f"{old.name} as {before}, would read {new.name} as {after}: by Thunder's semantics the program computes "
        "something else than the trace says, or fails",
        f"the substitution of {old.name}" + (f" at {symbol_name(bsym)}" if bsym is not None else ""),
        also=(old.name,),
    )
