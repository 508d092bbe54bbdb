"""A gradient that skips an in-place update of an alias (``gradient-skips-update``).

Thunder's alias-update step (``insert_alias_updates``) follows each in-place
update of a tensor with ``prims.update_aliases`` over the tensors that share its
storage: the update's output and the other aliases, each from before the update
(a view taken earlier). The values it hands on are the storage as updated, but
the grad rule of ``update_aliases`` gives each output's gradient to the input
at its position, so the gradient of an alias read after the update flows to its
value from before the update and skips the update; an alias the program returns
without reading it again is never handed on at all. ``a = x * 1; b = a.view(3);
a.mul_(2); return b * y`` gives ``x`` the gradient ``y`` where eager PyTorch gives
``2 * y``, silently (Thunder 0.2.6 and main). Reads only::

    >>> import torch, thunder
    >>> from safe_tracectx.traces.skipped_updates import skipped_updates
    >>> def f(x, y):
    ...     a = x * 1
    ...     a.mul_(2)  # no other alias: nothing skips the update
    ...     return a * y
    >>> jitted = thunder.jit(f)
    >>> _ = jitted(torch.ones(3, requires_grad=True), torch.ones(3))
    >>> skipped_updates(thunder.last_traces(jitted)[0], grad_enabled=True)
    []
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.skipped_updates")

import math
from typing import Any, Final, NamedTuple

from thunder.core.prims import PrimIDs
from thunder.core.proxies import TensorProxy

from safe_tracectx.traces.bound_proxies import proxy_args
from safe_tracectx.traces.grad_mode import needing_inputs, tensor_outs, written
from safe_tracectx.traces.gradient_flow import differentiated, floating, gradient_reads, handed_on
from safe_tracectx.traces.returns import is_return, returned
from safe_tracectx.traces.violations import Violation, bsym_label
from safe_tracectx.traces.views import SEVERAL_VIEWS, changes_nothing, covering, takes_view

__all__ = ["skipped_updates"]

#: ``prims.update_aliases`` (Thunder >= 0.2.4; before it, functionalization made no aliases to hand on).
_UPDATE_ALIASES: Final = getattr(PrimIDs, "UPDATE_ALIASES", None)
#: Charged: the rule that sends each handed-on alias's gradient to its value from before the update.
_RULE: Final = ("the grad rule of prims.update_aliases", "thunder.core.transforms._update_aliases_prim_grad")
#: In-place updates that write only some elements of their target (which ones is known only when it runs).
_PARTIAL: Final = frozenset({"setitem_", "index_add_", "index_copy_", "index_put_", "index_fill_", "scatter_",
                             "scatter_add_", "masked_fill_", "masked_scatter_", "tril_", "triu_"})
#: In-place updates whose derivative in their target is the identity (what they add needs no grad: no change).
_ADDING: Final = frozenset({"add_", "sub_", "addcmul_", "addcdiv_"})


#: A region a gradient reads a tensor through, and the parts of it overwritten before the read (read as nothing).
_Read = tuple[str, frozenset[str]]


class _Update(NamedTuple):
    at: int
    output: Any
    #: The region (:class:`_Walk`) of the tensor it updated.
    target: str
    #: It writes every element of its target (not an indexed or masked write).
    whole: bool


def skipped_updates(program: Any, *, grad_enabled: bool) -> list[Violation]:
    """Each alias of ``program`` (the trace the split differentiates, in the jit call's grad mode ``grad_enabled``)
    that an ``update_aliases`` hands on, or the return returns, from before a differentiated in-place update of
    elements it holds, where skipping the update changes a gradient and the alias reaches what the program returns.
    Only aliases eager PyTorch also sees as views of one storage are judged."""
    bsyms = program.bound_symbols
    if _UPDATE_ALIASES is None or not any(b.sym.id == _UPDATE_ALIASES for b in bsyms):
        return []
    walk = _Walk(program, grad_enabled)
    for index, bsym in enumerate(bsyms):
        walk.step(index, bsym)
    walk.read = _read_parts(program, walk)
    for old, new, index, bsym, how in walk.pending:
        walk.judge(old, new, index, bsym, how=how)
    return list(walk.found.values())


class _Walk:
    """The program in order: each tensor's region of its storage, who needs grad, each storage's updates.

    A region is a set of a storage's elements, named by the first tensor that held exactly them: a view that holds
    every element of what it views (:data:`safe_tracectx.traces.views.COVERING`) is in its region, any other view makes a region inside it
    (``parent``), an in-place update's output and what ``update_aliases`` hands on are in the region they stand
    for. Two regions certainly share elements when one is inside the other (or they are one); two slices of one
    storage are regions side by side, which may share none.
    """

    def __init__(self, program: Any, grad_enabled: bool) -> None:
        self.program = program
        self.by_split = differentiated(program, grad_enabled=grad_enabled)
        #: Each tensor a gradient reads -> the regions it is read through, each less the parts overwritten before it is
        #: read (:func:`_read_parts`), once all is walked.
        self.read: dict[str, set[_Read]] = {}
        #: What update_aliases hands on, and the return returns: (alias before, alias handed on, index, symbol, how:
        #: "hands on" or "returns").
        self.pending: list[tuple[Any, Any, int, Any, str]] = []
        self.needing = needing_inputs(program)
        self.defined = {p.name: -1 for p in getattr(program, "args", None) or () if isinstance(p, TensorProxy)}
        self.region: dict[str, str] = {}  # tensor -> its region (itself when absent: a storage of its own)
        self.parent: dict[str, str] = {}  # region -> the region it is inside
        self.updates: dict[str, list[_Update]] = {}  # storage (its outermost region) -> its differentiated updates
        #: Views eager refuses to use after their base was updated (made with grad disabled, or by a call that makes
        #: several), and views it refuses to update (those, and expansions and unfoldings: one element at several
        #: places).
        self.refused: set[str] = set()
        self.unwritable: set[str] = set()
        self.origin: dict[str, str] = {}  # what update_aliases hands on -> the program's first name of that alias
        self.found: dict[str, Violation] = {}  # one report per alias of the program
        self.writers: dict[int, tuple[bool, bool]] = {}  # an update's index -> _writer of it, once
        self.parts: dict[tuple[Any, ...], str] = {}  # (region, view, its arguments, output) -> the part it is

    def step(self, index: int, bsym: Any) -> None:
        outs = tensor_outs(bsym)
        aliases = bsym.sym.id == _UPDATE_ALIASES and bsym.args
        if aliases:  # each output stands for the input at its position (a detached alias needs no grad)
            self.needing |= {q.name for p, q in handed_on(bsym) if p.name in self.needing}
        elif self.by_split[index] and gradient_reads(bsym) & self.needing:
            self.needing |= {p.name for p in outs if floating(p)} | written(bsym)
        for proxy in outs:
            self.defined.setdefault(proxy.name, index)
        name = getattr(bsym.sym, "name", "")
        into = sorted(written(bsym))
        if aliases:
            pairs = handed_on(bsym)
            for old, new in pairs:
                self._same_elements(old.name, new.name)
                self.origin[new.name] = self.origin.get(old.name, old.name)
            self.pending += [(old, new, index, bsym, "hands on") for old, new in pairs]
        elif into:
            for proxy in outs:
                self._same_elements(into[0], proxy.name)
            if self.by_split[index] and outs and into[0] not in self.unwritable:  # setitem_ returns nothing
                target = self.region_of(into[0])
                self.updates.setdefault(self._storage(target), []).append(
                    _Update(index, outs[0], target, name not in _PARTIAL))
        elif is_return(bsym):
            self.pending += [(p, p, index, bsym, "returns") for p in returned(self.program) or () if isinstance(p, TensorProxy)]
        elif takes_view(bsym):
            given = next((p for p in proxy_args(bsym) if isinstance(p, TensorProxy)), None)
            if given is None:
                return
            several = name in SEVERAL_VIEWS or len(outs) > 1
            # the same part of the same region taken again (a[0:2] twice) is that region, not one beside it
            key = (self.region_of(given.name), name, repr(bsym.args[1:]), repr(sorted(bsym.kwargs.items())))
            for position, proxy in enumerate(outs):
                self._same_elements(given.name, proxy.name)
                if several or not covering(bsym):
                    part = self.parts.setdefault((*key, position), proxy.name)
                    self.parent.setdefault(part, self.region[proxy.name])
                    self.region[proxy.name] = part  # a part of what it views: a region inside it
                if several or not self.by_split[index]:
                    self.refused.add(proxy.name)
                if several or not self.by_split[index] or name.startswith(("expand", "unfold")):
                    self.unwritable.add(proxy.name)

    def judge(self, old: Any, new: Any, index: int, bsym: Any, *, how: str) -> None:
        """Report ``new``, handed on (or returned: ``how``) at ``index`` for ``old``, if a gradient reads it and skips an
        update of elements it is read through."""
        parts = self.read.get(new.name)
        if not parts or old.name in self.refused:  # most are handed on only, never read
            return
        user = self.origin.get(old.name, old.name)
        if user in self.found or not floating(new):
            return
        if _numel(old) == 0:
            return  # holds no element: nothing to skip
        held, since = self.region_of(old.name), self.defined.get(old.name, math.inf)
        update = next((u for u in self.updates.get(self._storage(held), ())
                       if since < u.at < index and u.output is not old
                       # an element the update wrote that the gradient reads: a part the alias is read through is
                       # around the update's target, or inside what it all wrote
                       and any((self._inside(u.target, r) or u.whole and self._inside(r, u.target))
                               and not any(self._inside(u.target, e) for e in overwritten) for r, overwritten in parts)
                       and self._changes_gradient(old, u.at)), None)
        if update is None:
            return
        writer = self.program.bound_symbols[update.at]
        named = f"{user} ({new.name} here)" if user != new.name else new.name
        self.found[user] = Violation(
            "gradient-skips-update", user,
            f"{bsym_label(index, bsym)} {how} {named} after {bsym_label(update.at, writer)} updated its storage "
            f"in place ({update.output.name}): {new.name} holds the updated values, but its gradient goes to "
            f"{old.name}, the value from before the update (Thunder's grad rule of update_aliases gives each alias's "
            "gradient to the alias it was handed, and a returned alias is handed nothing), so the gradient skips the "
            "update and the program's gradients are other than eager PyTorch's, silently",
            bsym_label(index, bsym), also=tuple(dict.fromkeys((new.name, old.name, update.output.name))),
            culprit=_RULE,
        )

    def _changes_gradient(self, old: Any, at: int) -> bool:
        """Whether skipping the update at ``at`` changes a gradient: what it reads besides its target needs grad, or
        it is not an addition to its target (``add_``, ``sub_``) of something else than its own storage, and the
        alias needs grad."""
        known = self.writers.get(at)
        if known is None:
            known = self.writers[at] = self._writer(self.program.bound_symbols[at])
        reads_needing, adding = known
        return reads_needing or not adding and old.name in self.needing

    def _writer(self, writer: Any) -> tuple[bool, bool]:
        """(what ``writer`` reads besides its target needs grad, its derivative in its target is the identity)."""
        target = sorted(written(writer))
        name, args = getattr(writer.sym, "name", ""), writer.args
        if changes_nothing(writer):
            return False, True  # the identity
        given = [p.name for p in proxy_args(writer)]
        others = (gradient_reads(writer) & set(given)) - set(target)
        storage = self._storage(self.region_of(target[0])) if target else None
        adding = (name in _ADDING  # a.add_(a) adds its target twice; a.add_(a.detach()) once
                  and all(self._storage(self.region_of(n)) != storage for n in given[1:] if n in self.needing))
        return bool(others & self.needing), adding

    def region_of(self, name: str) -> str:
        """The region ``name`` holds (its own name: a storage of its own)."""
        return self.region.get(name, name)

    def overwritten_part(self, bsym: Any) -> tuple[str, str] | None:
        """(target, the part) of a ``setitem_`` whose index took a part of its target's region before (``h[:, :2] *=
        2`` writes back the part it updated): the elements there are replaced, their old values never read."""
        if getattr(bsym.sym, "name", "") != "setitem_" or len(bsym.args) < 3 or not isinstance(bsym.args[0], TensorProxy):
            return None
        target = bsym.args[0].name
        part = self.parts.get((self.region_of(target), "getitem", repr(bsym.args[1:2]), "[]", 0))
        return None if part is None else (target, part)

    def _same_elements(self, given: str, made: str) -> None:
        """``made`` holds what ``given`` holds (a covering view, an update's output, an alias handed on)."""
        self.region[made] = self.region_of(given)
        if given in self.refused:
            self.refused.add(made)
        if given in self.unwritable:
            self.unwritable.add(made)

    def _storage(self, region: str) -> str:
        while region in self.parent:
            region = self.parent[region]
        return region

    def _inside(self, inner: str, outer: str) -> bool:
        """Whether region ``inner`` is ``outer`` or inside it."""
        while inner != outer and inner in self.parent:
            inner = self.parent[inner]
        return inner == outer


def _read_parts(program: Any, walk: _Walk) -> dict[str, set[_Read]]:
    """Each floating tensor a gradient flows through back from what ``program`` returns -> the regions
    (:class:`_Walk`) it is read through: its own, or the part a view of it takes (a slice read after an update
    of another part reads none of it), each less the parts a ``setitem_`` overwrote before the read (their old
    values get no gradient). As Thunder's split follows it: through ``update_aliases`` only from each output to
    the input at its position (its grad rule), so an alias only handed on from one ``update_aliases`` to the next,
    and never read, is not reached."""
    bsyms, region_of, whole = program.bound_symbols, walk.region_of, frozenset[str]()
    read: dict[str, set[_Read]] = {p.name: {(region_of(p.name), whole)} for p in returned(program) or () if floating(p)}
    for index in range(len(bsyms) - 2, -1, -1):
        bsym = bsyms[index]
        if not walk.by_split[index]:
            continue
        outs = tensor_outs(bsym)
        if bsym.sym.id == _UPDATE_ALIASES and bsym.args:
            for p, q in handed_on(bsym):
                if q.name in read:
                    read.setdefault(p.name, set()).update(read[q.name])
        elif ({p.name for p in outs} | written(bsym)) & read.keys():
            partial = takes_view(bsym) and not covering(bsym)
            through = set[_Read]().union(*(read[p.name] for p in outs if p.name in read))
            overwritten = walk.overwritten_part(bsym)
            for name in gradient_reads(bsym):
                if partial:
                    entries = through
                elif overwritten is not None and name == overwritten[0] and through:
                    entries = {(r, skip | {overwritten[1]}) for r, skip in through}  # the rest passes on unchanged
                else:
                    entries = {(region_of(name), whole)}
                read.setdefault(name, set()).update(entries)
    return read


def _numel(proxy: Any) -> int | None:
    shape = getattr(proxy, "shape", None)
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return int(math.prod(shape))
