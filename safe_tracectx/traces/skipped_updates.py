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
from safe_tracectx.traces.gradient_flow import differentiated, floating, gradient_reads, returned
from safe_tracectx.traces.violations import Violation, bsym_label

__all__ = ["skipped_updates"]

#: ``prims.update_aliases`` (Thunder >= 0.2.4; before it, functionalization made no aliases to hand on).
_UPDATE_ALIASES: Final = getattr(PrimIDs, "UPDATE_ALIASES", None)
_RETURN: Final = PrimIDs.RETURN
#: Charged: the rule that sends each handed-on alias's gradient to its value from before the update.
_RULE: Final = ("the grad rule of prims.update_aliases", "thunder.core.transforms._update_aliases_prim_grad")
#: In-place updates that write only some elements of their target (which ones is known only when it runs).
_PARTIAL: Final = frozenset({"setitem_", "index_add_", "index_copy_", "index_put_", "index_fill_", "scatter_",
                             "scatter_add_", "masked_fill_", "masked_scatter_", "tril_", "triu_"})
#: In-place updates whose derivative in their target is the identity (what they add needs no grad: no change).
_ADDING: Final = frozenset({"add_", "sub_"})
#: Aliases Thunder groups that are not eager's views of one storage for autograd: what may copy (``reshape``,
#: ``contiguous``, ``to``; which it does is known only when it runs) and ``detach`` (autograd does not follow an
#: update through it). Their outputs are judged as a storage of their own.
_NOT_A_VIEW: Final = frozenset({"detach", "contiguous", "flatten", "reshape", "reshape_as", "to"})
#: Views eager PyTorch forbids updating in place (the outputs of one call that makes several views).
_SEVERAL_VIEWS: Final = frozenset({"split", "chunk", "unbind", "tensor_split", "split_with_sizes", "hsplit", "vsplit"})


class _Update(NamedTuple):
    index: int
    output: Any
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
    return list(walk.found.values())


class _Walk:
    """The program in order: alias groups (by storage), who needs grad, the latest update of each group."""

    def __init__(self, program: Any, grad_enabled: bool) -> None:
        self.program = program
        self.by_split = differentiated(program, grad_enabled=grad_enabled)
        self.reach = _read_later(program, self.by_split)
        self.needing = needing_inputs(program)
        args = [p for p in getattr(program, "args", None) or () if isinstance(p, TensorProxy)]
        self.defined = {p.name: -1 for p in args}
        self.group: dict[str, str] = {}  # name -> a name of its group (union-find parent)
        self.sizes: dict[str, int | None] = {p.name: _numel(p) for p in args}
        self.first: dict[str, str] = {}  # group -> its earliest tensor (the storage's base)
        self.updates: dict[str, list[_Update]] = {}  # group -> its differentiated in-place updates, in order
        self.not_eager: set[str] = set()  # groups with an alias eager would not take for a view
        self.origin: dict[str, str] = {}  # what update_aliases hands on -> the program's first name of that alias
        self.found: dict[str, Violation] = {}  # one report per alias of the program

    def step(self, index: int, bsym: Any) -> None:
        outs = tensor_outs(bsym)
        if self.by_split[index] and gradient_reads(bsym) & self.needing:
            self.needing |= {p.name for p in outs if floating(p)} | written(bsym)
        for proxy in outs:
            self.defined.setdefault(proxy.name, index)
            self.sizes.setdefault(proxy.name, _numel(proxy))
        name = getattr(bsym.sym, "name", "")
        into = sorted(written(bsym))
        if bsym.sym.id == _UPDATE_ALIASES and bsym.args:
            pairs = [(p, q) for p, q in zip(bsym.args[0], outs) if isinstance(p, TensorProxy)]
            for old, new in pairs:
                self._join(old.name, new.name)
                self.origin[new.name] = self.origin.get(old.name, old.name)
            for old, new in pairs:
                self._judge(old, new, index, bsym)
        elif into:
            for proxy in outs:
                self._join(into[0], proxy.name)
            if self.by_split[index] and outs:  # setitem_ returns nothing: what it updates keeps its names
                self.updates.setdefault(self._find(into[0]), []).append(_Update(index, outs[0], name not in _PARTIAL))
        elif bsym.sym.id == _RETURN:
            for proxy in returned(self.program) or ():
                if isinstance(proxy, TensorProxy) and proxy.name in self.group:
                    self._judge(proxy, proxy, index, bsym, returning=True)
        elif _is_view(bsym) and name not in _NOT_A_VIEW and not _indexed(bsym):
            given = next((p for p in bsym.flat_proxy_args if isinstance(p, TensorProxy)), None)
            if given is not None:
                for proxy in outs:
                    self._join(given.name, proxy.name)
                if name in _SEVERAL_VIEWS or len(outs) > 1 or not self.by_split[index]:
                    self.not_eager.add(self._find(given.name))  # a view made with grad disabled: eager refuses too

    def _judge(self, old: Any, new: Any, index: int, bsym: Any, *, returning: bool = False) -> None:
        group = self._find(old.name)
        user = self.origin.get(old.name, old.name)
        if group in self.not_eager or user in self.found or not floating(new) or new.name not in self.reach:
            return
        base, since = self.first.get(group), self.defined.get(old.name, math.inf)
        update = next((u for u in self.updates.get(group, ()) if u.index > since and u.output is not old
                       # both holding part of the storage (two slices), they may share no element
                       and (_whole(old, base, self.sizes) or u.whole and _whole(u.output, base, self.sizes))
                       and self._changes_gradient(old, self.program.bound_symbols[u.index])), None)
        if update is None:
            return
        writer = self.program.bound_symbols[update.index]
        named = f"{user} ({new.name} here)" if user != new.name else new.name
        handed = ("returns" if returning else "hands on")
        self.found[user] = Violation(
            "gradient-skips-update", user,
            f"{bsym_label(index, bsym)} {handed} {named} after {bsym_label(update.index, writer)} updated its storage "
            f"in place ({update.output.name}): {new.name} holds the updated values, but its gradient goes to "
            f"{old.name}, the value from before the update (Thunder's grad rule of update_aliases gives each alias's "
            "gradient to the alias it was handed, and a returned alias is handed nothing), so the gradient skips the "
            "update and the program's gradients are other than eager PyTorch's, silently",
            bsym_label(index, bsym), also=tuple(dict.fromkeys((new.name, old.name, update.output.name))),
            culprit=_RULE,
        )

    def _changes_gradient(self, old: Any, writer: Any) -> bool:
        """Whether skipping ``writer`` changes a gradient: what it reads besides its target needs grad, or it is not
        an addition to its target (``add_``, ``sub_``) and the alias needs grad."""
        given = {p.name for p in proxy_args(writer)}
        others = (gradient_reads(writer) & given) - written(writer)
        if others & self.needing:
            return True
        adding = getattr(writer.sym, "name", "") in _ADDING  # its derivative in its target is the identity
        return not adding and old.name in self.needing

    def _find(self, name: str) -> str:
        parent = self.group.setdefault(name, name)
        while parent != self.group.setdefault(parent, parent):
            parent = self.group[parent]
        self.group[name] = parent
        return parent

    def _join(self, a: str, b: str) -> None:
        first, second = self._find(a), self._find(b)
        if first == second:
            return
        base = min((self.first.get(first, first), self.first.get(second, second)),
                   key=lambda n: self.defined.get(n, math.inf))
        self.group[second] = first
        self.first[first] = base
        if second in self.not_eager:
            self.not_eager.add(first)
        if second in self.updates:
            self.updates[first] = sorted((*self.updates.get(first, ()), *self.updates.pop(second)))


def _read_later(program: Any, by_split: list[bool]) -> set[str]:
    """The floating tensors a gradient flows through back from what ``program`` returns, as Thunder's split
    follows it: through ``update_aliases`` only from each output to the input at its position (its grad rule), so
    an alias that is only handed on from one ``update_aliases`` to the next, and never read, is not reached."""
    bsyms = program.bound_symbols
    reach = {p.name for p in returned(program) or () if floating(p)}
    for index in range(len(bsyms) - 2, -1, -1):
        bsym = bsyms[index]
        if not by_split[index]:
            continue
        outs = tensor_outs(bsym)
        if bsym.sym.id == _UPDATE_ALIASES and bsym.args:
            reach |= {p.name for p, q in zip(bsym.args[0], outs) if q.name in reach and isinstance(p, TensorProxy)}
        elif ({p.name for p in outs} | written(bsym)) & reach:
            reach |= gradient_reads(bsym)
    return reach


def _is_view(bsym: Any) -> bool:
    import thunder.torch as ltorch

    views = (*getattr(ltorch, "_syms_returning_views", ()), *getattr(ltorch, "_syms_that_may_return_views", ()))
    return bsym.sym in views


def _indexed(bsym: Any) -> bool:
    """A ``getitem`` with a tensor among its indices: eager copies (advanced indexing), it makes no view."""
    return any(isinstance(p, TensorProxy) for p in bsym.flat_proxy_args[1:])


def _numel(proxy: Any) -> int | None:
    shape = getattr(proxy, "shape", None)
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return math.prod(shape)


def _whole(proxy: Any, base: str | None, sizes: dict[str, int | None]) -> bool:
    """Whether ``proxy`` holds every element of its storage (as many elements as its base, or more: an expansion)."""
    size, whole = sizes.get(proxy.name), sizes.get(base) if base is not None else None
    return size is not None and whole is not None and size >= whole
