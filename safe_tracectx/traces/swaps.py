"""A symbol reading a name as another tensor than the one the name holds (``stale-proxy-after-swap``).

By Thunder's semantics a name is one variable: a symbol's recorded outputs were computed for the tensors it
reads, and the generated program gives it the value its name holds. A pass that swaps a proxy for another and
misses a use (a nested argument: Thunder #1964) leaves a symbol computed for another tensor. Two ways show it,
both cheap and read only (only stored attributes, only tensors whose shape is plain ints: comparing symbolic
dimensions under an active trace can record symbols):

- in one trace, a symbol reads an object of the name other than the one its definition gives, with another
  shape or dtype (:func:`other_tensor`, from ``check_trace``);
- in one trace, a prim reads a tensor its meta would not have made what it records: one whose arguments name
  one entry per dimension of its input (``broadcast_in_dim``'s broadcast dimensions, ``transpose``'s
  permutation) reads a tensor of another rank (:func:`made_for_another_rank`), an elementwise prim reads a
  tensor of another shape than its output (:func:`made_for_another_shape`). It was made for another tensor than
  the one it now reads: the grad transform of Thunder 0.2.6 and main swaps the gradient of a 0-dim value for a
  full-shape one, and the rules that read it (sum's, mean's) compute as if it were 0-dim;
- across a pass, the pass changed a tensor input of its trace in place, and a symbol computed before it (an
  output proxy of its input's symbols) still reads it (:func:`changed_in_place`, :func:`computed_before`,
  from the pass hooks)::

    >>> from thunder.core import devices, dtypes
    >>> from thunder.core.proxies import TensorProxy
    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx import tracectx
    >>> with tracectx(TraceCtx()):
    ...     a = TensorProxy("a", shape=(2, 3), device=devices.cpu, dtype=dtypes.float32)
    ...     b = TensorProxy("b", shape=(1, 3), device=devices.cpu, dtype=dtypes.float32)
    >>> other_tensor(a, b), other_tensor(a, a)
    (('f32[2, 3]', 'f32[1, 3]'), None)
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.swaps")

import functools
from collections.abc import Iterable
from typing import Any, Final

from thunder.core.prims import PrimIDs
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_flatten

from safe_tracectx.traces.bound_proxies import plain_shape, proxy_args, proxy_outs
from safe_tracectx.traces.violations import Violation, bsym_label

__all__ = [
    "Changed", "Metadata", "changed_in_place", "computed_before", "describe_metadata", "input_metadata", "is_elementwise",
    "made_for_another_rank", "made_for_another_shape", "made_for_another_tensor", "on_cpu", "other_tensor", "same_name_swap_is_safe",
    "tensor_metadata",
]

#: A tensor's (shape, dtype).
Metadata = tuple[tuple[int, ...], Any]
#: What :func:`changed_in_place` found: the pass's label, id of each changed input -> (before, now), and the ids
#: of the output proxies of the input's symbols that were there at entry.
Changed = tuple[str, dict[int, tuple[Metadata, Metadata]], set[int]]


def tensor_metadata(proxy: object) -> Metadata | None:
    """(shape, dtype) of a tensor proxy whose shape is all plain ints; None for anything else."""
    if not isinstance(proxy, TensorProxy):
        return None
    shape = plain_shape(proxy)
    return None if shape is None else (shape, getattr(proxy, "_dtype", None))


def describe_metadata(metadata: Metadata) -> str:
    """``f32[2, 3]``: a tensor's dtype and shape as Thunder prints them."""
    shape, dtype = metadata
    short = getattr(dtype, "shortname", None)
    return f"{short() if callable(short) else dtype}[{', '.join(map(str, shape))}]"


def other_tensor(read: Proxy, definition: Proxy, *, symbolic: bool = False) -> tuple[str, str] | None:
    """(what ``read`` is, what ``definition`` is) when both are tensors of known, different shape or dtype.

    With ``symbolic``, tensors whose shapes have symbolic dimensions are compared too, by dtype and device (and
    by shape where both are plain ints): nothing is compared that would record symbols in an active trace."""
    mine = tensor_metadata(read)
    theirs = tensor_metadata(definition)
    if mine is not None and theirs is not None and mine != theirs:
        return describe_metadata(mine), describe_metadata(theirs)
    if not symbolic or not isinstance(read, TensorProxy) or not isinstance(definition, TensorProxy):
        return None
    kinds = [(getattr(p, "_dtype", None), getattr(p, "_device", None)) for p in (read, definition)]
    if kinds[0] == kinds[1]:
        return None
    return tuple(_describe_kind(p) for p in (read, definition))  # type: ignore[return-value]


def _describe_kind(proxy: Any) -> str:
    dtype, device = getattr(proxy, "_dtype", None), getattr(proxy, "_device", None)
    short = getattr(dtype, "shortname", None)
    where = getattr(device, "device_str", None)
    return f"{short() if callable(short) else dtype} on {where() if callable(where) else device}"


#: Prims with an argument that lists one entry per dimension of their tensor input: (its position, its name).
_PER_DIMENSION: Final[dict[Any, tuple[int, str]]] = {
    PrimIDs.BROADCAST_IN_DIM: (2, "broadcast_dimensions"),
    PrimIDs.TRANSPOSE: (1, "permutation"),
}


def made_for_another_rank(bsym: Any) -> tuple[Proxy, str] | None:
    """(the tensor a prim reads, what it was made for) when its per-dimension argument does not fit that tensor's
    rank: its meta checked the argument against the tensor it was given, so it was given another one::

        >>> from thunder.core import devices, dtypes, prims
        >>> from thunder.core.trace import TraceCtx
        >>> from safe_tracectx import tracectx
        >>> with tracectx(TraceCtx()):
        ...     g = TensorProxy("g", shape=(3, 4), device=devices.cpu, dtype=dtypes.float32)
        ...     out = TensorProxy("out", shape=(3, 4), device=devices.cpu, dtype=dtypes.float32)
        >>> made_for_another_rank(prims.broadcast_in_dim.bind(g, (3, 4), (), output=out))
        (<TensorProxy(name="g", dtype=thunder.dtypes.float32, shape=(3, 4))>, '0-dimensional tensor')
    """
    spec = _PER_DIMENSION.get(getattr(getattr(bsym, "sym", None), "id", None))
    if spec is None:
        return None
    position, keyword = spec
    args = bsym.args
    tensor = args[0] if args else None
    entries = args[position] if len(args) > position else bsym.kwargs.get(keyword)
    if not isinstance(tensor, TensorProxy) or not isinstance(entries, tuple | list):
        return None
    shape = plain_shape(tensor)
    if shape is None or len(shape) == len(entries):
        return None  # symbolic dimensions: one element (where any rank gives the same values) cannot be told
    if all(s == 1 for s in shape):  # one element: any rank gives the same values
        return None
    return tensor, f"{len(entries)}-dimensional tensor"


#: Whether a prim is elementwise (its meta made by Thunder's elementwise meta factories), by the prim's id (a
#: ``PrimIDs`` member: the same prim for the life of the process; a symbol's address is another's once it is freed).
_ELEMENTWISE: Final[dict[Any, tuple[Any, bool]]] = {}
_ELEMENTWISE_METAS: Final = ("_elementwise_unary_meta_factory.", "_elementwise_binary_meta_factory.")


def is_elementwise(sym: Any) -> bool:
    """Whether ``sym`` is one of Thunder's elementwise prims: its meta made by the elementwise meta factories
    (cached for prims only, whose ids are theirs for good)."""
    key = getattr(sym, "id", None) if getattr(sym, "is_prim", False) else None
    meta = getattr(sym, "meta", None)
    if isinstance(key, PrimIDs) and (known := _ELEMENTWISE.get(key)) is not None and known[0] is meta:
        return known[1]
    qualname = getattr(meta, "__qualname__", "")
    found = isinstance(qualname, str) and qualname.startswith(_ELEMENTWISE_METAS)
    if isinstance(key, PrimIDs):  # with its meta: a copy of the prim under the same id (dataclasses.replace) has its own
        _ELEMENTWISE[key] = (meta, found)
    return found


def made_for_another_tensor(bsym: Any) -> tuple[Proxy, str] | None:
    """:func:`made_for_another_rank` or :func:`made_for_another_shape`: the tensor a prim reads and what its
    arguments were made for, or None."""
    return made_for_another_rank(bsym) or made_for_another_shape(bsym)


def made_for_another_shape(bsym: Any) -> tuple[Proxy, str] | None:
    """(the tensor an elementwise prim reads, what it was made for) when that tensor's shape is not its output's:
    the prim's meta gave the output its inputs' shape (a CPU scalar tensor aside), so it was given another one.
    Not for an output that is a CPU scalar tensor: Thunder's grad rules give such a value's gradient the other
    operand's shape by design, elementwise rules carry it on, and torch autograd sums it back for an input."""
    if not is_elementwise(getattr(bsym, "sym", None)):
        return None
    out = getattr(bsym, "output", None)
    made = tensor_metadata(out)
    if made is None or made[0] == () and on_cpu(out):
        return None
    for arg in bsym.args:
        metadata = tensor_metadata(arg)
        if metadata is None or metadata[0] == made[0] or metadata[0] == () and on_cpu(arg):
            continue
        return arg, f"{describe_metadata(made)} tensor (its output {getattr(out, 'name', '?')} is one)"
    return None


def on_cpu(proxy: Any) -> bool:
    """Whether ``proxy``'s device is the CPU (a 0-dim CPU tensor mixes with full-shape ones in elementwise prims)."""
    return str(getattr(getattr(proxy, "_device", None), "devicetype", "")).lower().endswith("cpu")


def input_metadata(traces: Iterable[Any]) -> list[tuple[Any, Metadata]]:
    """Each tensor input (shape of plain ints) of ``traces``, with its metadata now (a pass about to run)."""
    found: list[tuple[Any, Metadata]] = []
    for trace in traces:
        try:
            flat, _ = tree_flatten((trace.args, trace.kwargs))  # type: ignore[no-untyped-call]
        except Exception:  # noqa: BLE001 - unusual argument containers: no tensor inputs to follow
            continue
        for proxy in flat:
            metadata = tensor_metadata(proxy)
            if metadata is not None:
                found.append((proxy, metadata))
    return found


def changed_in_place(
    label: str, entry: list[tuple[Any, Metadata]], inputs: Iterable[tuple[Any, tuple[int, ...]]]
) -> Changed | None:
    """The inputs the pass ``label`` changed in place since ``entry`` (:func:`input_metadata` then), None if
    none; ``inputs``: each input trace with the ids of its bound symbols at entry."""
    changed: dict[int, tuple[Metadata, Metadata]] = {}
    for proxy, before in entry:
        now = tensor_metadata(proxy)
        if now is not None and now != before:
            changed[id(proxy)] = (before, now)
    if not changed:
        return None
    computed: set[int] = set()
    for trace, symbols in inputs:
        kept = set(symbols)
        for bsym in trace.bound_symbols:
            if id(bsym) in kept:  # there at entry: computed before the pass
                computed.update(map(id, proxy_outs(bsym)))
    return label, changed, computed


def computed_before(changed: Changed, trace: Any) -> list[Violation]:
    """Each symbol of ``trace`` (what the pass returned) computed before the pass that reads an input it changed."""
    label, inputs, computed = changed
    found: list[Violation] = []
    for index, bsym in enumerate(trace.bound_symbols):
        outs = proxy_outs(bsym)
        if not any(id(p) in computed for p in outs):
            continue
        for proxy in proxy_args(bsym):
            hit = inputs.get(id(proxy))
            if hit is None or any(p is proxy for p in outs):
                continue
            before, now = map(describe_metadata, hit)
            made = ", ".join(f"{p.name}: {describe_metadata(m)}" for p in outs if (m := tensor_metadata(p)) is not None)
            where = bsym_label(index, bsym)
            found.append(Violation(
                "stale-proxy-after-swap", proxy.name,
                f"{label} changed {proxy.name}, an input of the trace, in place from {before} to {now}, and {where}, "
                f"computed before it for {before}" + (f" (its outputs {made})" if made else "") + f", still reads "
                f"{proxy.name}: its outputs were computed for another tensor than the one it gets (the pass swapped "
                "the proxy and missed this use)",
                where,
            ))
    return found


@functools.cache
def same_name_swap_is_safe() -> bool:
    """Whether the installed Thunder's proxy swap (``BoundSymbol.from_bsym_swap_proxies``) takes a proxy replaced
    by a new one of the same name for one variable, as Thunder 0.2.6 does; older Thunder raises "Detected a cycle
    while swapping" (#1545). Asked of Thunder itself, once, on proxies of a trace of its own.

    Where it is safe, a fresh proxy that takes the name of a subsymbol's output while an executor runs that
    subsymbol again is its replacement (one variable), not a second value::

        >>> same_name_swap_is_safe() in (True, False)
        True
    """
    from thunder.core import prims
    from thunder.core.proxies import variableify
    from thunder.core.trace import detached_trace

    # Plain proxies: a TensorProxy made outside a jit changes Thunder's state on older Thunder (its constructor
    # fails half-way there); a Proxy only takes its name in the trace made for it.
    try:
        with detached_trace():
            old, out = Proxy(name="a"), Proxy(name="b")
        with detached_trace():
            new = Proxy(name="a")
        bsym = prims.neg.bind(old, output=out)
        swapped = bsym.from_bsym_swap_proxies({variableify(old): new})
    except Exception:  # noqa: BLE001 - a Thunder whose swap refuses it ("Detected a cycle while swapping"): not safe
        return False
    return swapped.args[0] is new
