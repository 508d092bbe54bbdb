"""The inputs a program updates in place: where eager PyTorch's leaf rule applies, and whether a step dropped one.

Eager PyTorch refuses an in-place update of a leaf tensor that requires grad, or of a
view of one, while grad is enabled ("a leaf Variable that requires grad is being used
in an in-place operation"); under ``torch.no_grad()`` it allows it (an optimizer's
step). Whether an input is such a leaf is known only at the call (a proxy carries
``requires_grad``, not ``is_leaf``), so this finds, in the trace the interpretation
made, each argument that a ``copy_`` writes into, itself or through a view eager also
makes, with the grad mode there followed from the trace's markers. A later form of the
program must still write into each such input (:func:`dropped_updates`), or the call
leaves the caller's tensor as it was (``update-dropped``). Reads only::

    >>> import torch, thunder
    >>> from safe_tracectx.traces.updated_inputs import updated_inputs, updated_under_grad
    >>> def step(p, g):
    ...     p.view(2, 2).mul_(2)  # p, through a view, with grad enabled
    ...     with torch.no_grad():
    ...         g.sub_(1)  # g, with grad disabled
    ...     return p
    >>> jitted = thunder.jit(step)
    >>> _ = jitted(torch.ones(4), torch.ones(4))
    >>> program = thunder.last_traces(jitted)[0]
    >>> [(u.input, u.written) for u in updated_under_grad(program, grad_enabled=True)]
    [('p', 't0')]
    >>> sorted(updated_inputs(program))
    ['g', 'p']
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.updated_inputs")

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from thunder.core.prims import OpTags, PrimIDs
from thunder.core.proxies import TensorProxy

from safe_tracectx.traces.bound_proxies import proxy_args, proxy_outs
from safe_tracectx.traces.call_inputs import Region
from safe_tracectx.traces.grad_mode import MARKER, marker_mode, tensor_outs, written
from safe_tracectx.traces.gradient_flow import handed_on
from safe_tracectx.traces.views import MULTIPLE_VIEWS, changes_nothing, takes_view, takes_view_at_any_stage
from safe_tracectx.traces.violations import Violation

__all__ = [
    "InputUpdate", "dropped_updates", "update_modes", "updated_inputs", "updated_under_grad", "writes_in_place",
    "wrong_update_modes",
]

#: Prims that write into their destination.
_WRITING: Final = frozenset(filter(None, (PrimIDs.COPY_, getattr(PrimIDs, "COPY_WITH_SETITEM", None))))
_IN_PLACE: Final = getattr(OpTags, "IN_PLACE", None)


class InputUpdate(NamedTuple):
    """An in-place update of an argument of the trace, made with grad enabled."""

    #: The argument's name.
    input: str
    #: The name written into: the argument, or a view of it.
    written: str
    #: The top-level symbol that writes it, and its index.
    at: int
    bsym: Any


def updated_under_grad(trace: Any, *, grad_enabled: bool, until: int | None = None) -> list[InputUpdate]:
    """Each update (the first per argument) of an argument of ``trace``, or of a view of one, made where the
    program's grad mode is enabled (``grad_enabled``: the mode at the start of the trace), judged up to the
    top-level symbol ``until`` (where the markers stop being eager's: ``hooks.grad_mode_requests``).

    Inside a jitted function ``torch.is_grad_enabled()`` reads PyTorch's mode, which Thunder leaves at the start
    mode, so a marker is taken for eager's only while the program is in the start mode (``no_grad``'s exit
    restores what its entry read, which inside a nested region is not eager's): nothing after a marker made in
    another mode is judged."""
    return _updates(trace, grad_enabled=grad_enabled, until=until, every_mode=False)


def updated_inputs(trace: Any) -> dict[str, InputUpdate]:
    """Each argument of ``trace`` it updates in place, itself or through a view, in any grad mode: its first update."""
    return {u.input: u for u in _updates(trace, grad_enabled=True, until=None, every_mode=True)}


def _updates(trace: Any, *, grad_enabled: bool, until: int | None, every_mode: bool) -> list[InputUpdate]:
    roots = {p.name: p.name for p in getattr(trace, "args", None) or () if isinstance(p, TensorProxy)}
    enabled: bool | None = grad_enabled
    found: dict[str, InputUpdate] = {}
    for index, bsym in enumerate(trace.bound_symbols[:until]):
        if getattr(bsym.sym, "id", None) == MARKER:
            if every_mode:
                continue
            if enabled != grad_enabled or (enabled := marker_mode(bsym)) is None:
                break
            continue
        targets = [roots[name] for name in written(bsym) if name in roots]
        if (enabled or every_mode) and not changes_nothing(bsym):
            for name in sorted(written(bsym)):
                if name in roots and roots[name] not in found:
                    found[roots[name]] = InputUpdate(roots[name], name, index, bsym)
        given = proxy_args(bsym)
        if len(set(targets)) == 1:  # an in-place op's result is its target
            root = targets[0]
        elif takes_view(bsym) and given and given[0].name in roots and (every_mode or bsym.sym.name not in MULTIPLE_VIEWS):
            root = roots[given[0].name]  # (eager refuses an update of one of split's views with its own error)
        else:
            continue
        for out in tensor_outs(bsym):
            roots.setdefault(out.name, root)
    return list(found.values())


def update_modes(trace: Any) -> dict[str, set[bool]]:
    """Each argument of ``trace`` that a ``copy_`` (at any depth: the prim's, or an executor's in a trace about to
    run) writes into, itself or through a view, -> the grad modes those copies carry (``grad_enabled``, which the
    torch executor's ``copy_`` reads for eager's leaf rule; a Thunder whose ``copy_`` has none gives nothing)."""
    roots = {p.name: p.name for p in getattr(trace, "args", None) or () if isinstance(p, TensorProxy)}
    modes: dict[str, set[bool]] = {}
    for bsym in trace.bound_symbols:
        for into, mode in _copies(bsym):
            if into in roots and isinstance(mode, bool):
                modes.setdefault(roots[into], set()).add(mode)
        if getattr(bsym.sym, "name", "") == "update_aliases":  # each alias under its next name (Thunder >= 0.2.4)
            for alias, handed in handed_on(bsym):
                if alias.name in roots:
                    roots.setdefault(handed.name, roots[alias.name])
            continue
        targets = {roots[name] for name in written(bsym) if name in roots}
        given = proxy_args(bsym)
        root = (next(iter(targets)) if len(targets) == 1
                else roots[given[0].name] if given and given[0].name in roots and takes_view_at_any_stage(bsym)
                else None)
        if root is not None:
            for out in tensor_outs(bsym):
                roots.setdefault(out.name, root)
    return modes


def _copies(bsym: Any) -> list[tuple[str, object]]:
    """(destination, ``grad_enabled``) of each ``copy_`` in ``bsym``, at any depth."""
    args = bsym.args
    own: list[tuple[str, object]] = []
    prim = getattr(bsym.sym, "id", None) == PrimIDs.COPY_ or (  # prims.copy_(src, dst), or an executor's
        getattr(bsym.sym, "name", "") == "copy_" and not bsym.subsymbols)  # (ltorch.copy_(dst, src) decomposes)
    if prim and len(args) > 1 and isinstance(args[1], TensorProxy):
        own.append((args[1].name, (bsym.kwargs or {}).get("grad_enabled", args[2] if len(args) > 2 else None)))
    return own + [c for sub in getattr(bsym, "subsymbols", ()) or () for c in _copies(sub)]


def wrong_update_modes(
    trace: Any, made: Mapping[str, set[bool]], leaves: set[str], *, backward: Any = None
) -> list[Violation]:
    """Each input of ``leaves`` (leaves requiring grad at the call) that ``trace`` (or its ``backward``) writes into
    with grad enabled where the program made every update of it with grad disabled (``made``: the modes of the
    interpretation's trace, :func:`update_modes`): the torch executor's ``copy_`` then refuses, with eager's leaf
    error, an update eager PyTorch allows (``torch.no_grad()``: weight initialization, an optimizer's step)."""
    later = update_modes(trace)
    if backward is not None:
        for name, modes in _backward_modes(backward, set(made)).items():
            later.setdefault(name, set()).update(modes)
    return [
        Violation(
            "update-grad-mode", name,
            f"the program updates its input {name} in place with grad disabled, which eager PyTorch allows for a "
            f"leaf that requires grad, as {name} is at this call; but here a copy_ writes the update into {name} "
            "with grad_enabled=True (the mode of the compile, not the update's), so the torch executor's copy_ "
            "refuses it with eager's leaf error: the program fails where eager runs",
            f"input {name}",
        )
        for name in sorted(made)
        if name in leaves and made[name] == {False} and True in later.get(name, ())
    ]


def _backward_modes(backward: Any, inputs: set[str]) -> dict[str, set[bool]]:
    """The grad modes of the copies a backward makes into what it is handed under an input's forward name."""
    modes: dict[str, set[bool]] = {}
    for bsym in backward.bound_symbols:
        for into, mode in _copies(bsym):
            if into in inputs and isinstance(mode, bool):
                modes.setdefault(into, set()).add(mode)
    return modes


def dropped_updates(
    trace: Any,
    updates: Mapping[str, InputUpdate],
    storages: Mapping[str, Region | None] | None = None,
    *,
    backward: Any = None,
) -> list[Violation]:
    """Each of ``updates`` (the program's updates of its inputs, from the trace the interpretation made) of an
    argument of ``trace`` into which ``trace`` writes nothing: no in-place symbol writes into the argument, into
    anything computed from it (what may share its storage, taken wide), or into another argument that shares its
    storage at the call (``storages``: by input name, ``hooks.compilation.Compilation.storages``; Thunder's alias
    step may write through one of them only); so the call returns with the caller's tensor as it was, where eager
    PyTorch has updated it. ``backward``: the split's backward of ``trace``, which may perform the update instead
    (only when a backward runs); the message says whether it does."""
    names = {p.name for p in getattr(trace, "args", None) or () if isinstance(p, TensorProxy)}
    judged = {name: u for name, u in updates.items() if name in names and _has_elements(u.bsym, u.written)}
    if not judged:
        return []
    written_into, family = _written_inputs(trace, {name: {name} for name in names})
    stored = {name: key.storage for name, key in (storages or {}).items() if isinstance(key, Region)}
    shared = {stored[name] for name in written_into if name in stored}
    written_into |= {name for name in judged if stored.get(name) in shared}
    later: set[str] = set()
    if backward is not None and not set(judged) <= written_into:
        later = _written_inputs(backward, family)[0]  # what it is handed keeps its forward name
    return [
        Violation(
            "update-dropped", name,
            f"the program's in-place update of its input {name}"
            f"{'' if u.written == name else f' through its view {u.written}'} (bound symbol {u.at} "
            f"({u.bsym.sym.name}) of the trace the interpretation made) is not in it: no symbol writes into {name} "
            f"or into anything computed from it, so the call returns with {name} as it was, where eager PyTorch "
            "has updated it" + (
                f"; the backward writes it instead, so {name} is updated only when a backward runs (never, if "
                "none does: an inference call, a cache filled for later calls)" if name in later
                else "; nor does the backward: the update is lost"),
            f"input {name}",
        )
        for name, u in judged.items() if name not in written_into
    ]


def _written_inputs(trace: Any, family: dict[str, set[str]]) -> tuple[set[str], dict[str, set[str]]]:
    """(the inputs ``trace`` may write into, each name -> the inputs it is computed from), starting from ``family``
    (each given name -> the inputs it stands for): an in-place symbol (at any depth) writes into the inputs of what
    it reads, and each output of a symbol is computed from all it reads."""
    family = {name: set(roots) for name, roots in family.items()}
    written: set[str] = set()
    for bsym in trace.bound_symbols:
        read = {root for p in proxy_args(bsym) for root in family.get(p.name, ())}
        if not read:
            continue
        if writes_in_place(bsym):
            written |= read
        for out in proxy_outs(bsym):
            family.setdefault(out.name, set()).update(read)
    return written, family


def writes_in_place(bsym: Any) -> bool:
    """Whether ``bsym`` or a symbol inside it writes into a tensor in place (``copy_``, ``copy_with_setitem``, a
    symbol tagged in-place, or one named like torch's in-place methods)."""
    sym = bsym.sym
    name = getattr(sym, "name", "") or ""
    if getattr(sym, "id", None) in _WRITING or _IN_PLACE in (getattr(sym, "tags", None) or ()):
        return True
    if name.endswith("_") and not name.startswith(("unpack", "_")):
        return True
    return any(writes_in_place(s) for s in getattr(bsym, "subsymbols", ()) or ())


def _has_elements(bsym: Any, name: str) -> bool:
    """Whether the tensor ``name`` written by ``bsym`` may hold an element (an update of nothing changes nothing)."""
    for p in proxy_args(bsym):
        if p.name == name:
            shape = getattr(p, "shape", None)
            return not (isinstance(shape, tuple | list) and any(d == 0 for d in shape))
    return True
