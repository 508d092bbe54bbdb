"""Which inputs of a ``thunder.jit`` call share storage, by the names the prologue unpacks them into.

Thunder's prologue unpacks the call's arguments by name (``unpack_trivial`` of
``args`` and ``kwargs``, then ``unpack_getitem``/``unpack_sequence`` into them);
the computation trace takes those names as its arguments. The call is kept as
its storages (:func:`call_storages`: the same tuples, lists and dicts, each plain
strided tensor replaced by the :class:`Region` of its elements, its storage as
Thunder compares it for its alias groups, ``untyped_storage().data_ptr()``, with its
offset, shape and strides; anything else by None), so nothing of
the user's is kept alive, and no user ``__getitem__`` runs::

    >>> import torch
    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx.traces.call_inputs import call_storages, storage_keys
    >>> x = torch.ones(4)
    >>> args, kwargs = call_storages((x, x.view(2, 2), x[2:], 3), {})
    >>> args[0].same_elements(args[1]), args[0].storage == args[2].storage, args[0].same_elements(args[2]), args[3]
    (True, True, False, None)
    >>> storage_keys([TraceCtx()], (args, kwargs))
    {}
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.call_inputs")

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, NamedTuple

import torch
from thunder.core.prims import PrimIDs
from thunder.core.proxies import Proxy

__all__ = ["NOT_GROUPED", "Region", "call_grad_leaves", "call_storages", "storage_keys", "unpacked"]

_TRIVIAL: Final = PrimIDs.UNPACK_TRIVIAL
_GETITEM: Final = PrimIDs.UNPACK_GETITEM
_SEQUENCES: Final = frozenset({PrimIDs.UNPACK_SEQUENCE, PrimIDs.UNPACK_TUPLE, PrimIDs.UNPACK_LIST})
_ATTR: Final = PrimIDs.UNPACK_ATTR
_MISSING: Final = object()
#: The storage of an input Thunder's alias groups never hold: not a plain strided tensor of the call's ``args`` and
#: ``kwargs`` (a tensor subclass, a module's parameter or attribute, a number).
NOT_GROUPED: Final = None


class Region(NamedTuple):
    """Where a plain strided tensor's elements are: its storage (as Thunder groups aliases), offset, shape, strides,
    and how its elements are read (dtype, conjugate and negative bits)."""

    storage: int
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    reading: tuple[str, bool, bool] = ("", False, False)

    def same_elements(self, other: Region) -> bool:
        """Whether the two are the same elements in the same order, read alike (one is a reshape of the other):
        what Thunder's alias pass assumes when it replaces one by ``reshape`` of the other."""
        if self.storage != other.storage or self.reading != other.reading:
            return False
        return self._order() == other._order()

    def _order(self) -> tuple[int, tuple[tuple[int, int], ...]] | None:
        """The elements in row-major order as (offset, (size, stride) runs): size-1 dimensions dropped, a
        dimension merged into the one before when it continues it; None for no elements at all."""
        if 0 in self.shape:
            return None
        runs: list[tuple[int, int]] = []
        for size, step in zip(self.shape, self.stride):
            if size == 1:
                continue
            if runs and runs[-1][1] == step * size:
                runs[-1] = (runs[-1][0] * size, step)
            else:
                runs.append((size, step))
        return self.offset, tuple(runs)

    def describe(self) -> str:
        """``offset 4, shape [2, 2], strides [2, 1], torch.float32`` (and ``conjugate``, ``negative`` when set)."""
        dtype, conj, neg = self.reading
        bits = [dtype] * bool(dtype) + ["conjugate"] * conj + ["negative"] * neg
        return ", ".join([f"offset {self.offset}, shape {list(self.shape)}, strides {list(self.stride)}", *bits])

    def contiguous(self) -> bool:
        expected = 1
        for size, step in reversed(tuple(zip(self.shape, self.stride))):
            if size != 1 and step != expected:
                return False
            expected *= size
        return True


def _stored(value: Any, path: frozenset[int] = frozenset(), leaf: Callable[[torch.Tensor], Any] | None = None) -> Any:
    if leaf is not None and isinstance(value, torch.Tensor):
        return leaf(value)
    if type(value) is torch.Tensor:  # as thunder.jit's _alias_tensor_of_args_kwargs_dict: subclasses have no data pointer
        if value.layout is not torch.strided:
            return None
        try:
            storage = int(value.untyped_storage().data_ptr())
        except (RuntimeError, NotImplementedError):  # a functorch wrapper (vmap's BatchedTensor) has no storage
            return None
        reading = (str(value.dtype), bool(value.is_conj()), bool(value.is_neg()))
        return Region(
            storage, int(value.storage_offset()), tuple(map(int, value.shape)), tuple(map(int, value.stride())), reading
        )
    if not isinstance(value, tuple | list | dict) or id(value) in path:
        return None  # another leaf, or a container holding itself (its inner copy is no input Thunder unpacks)
    inner = path | {id(value)}
    if isinstance(value, dict):
        return {key: _stored(item, inner, leaf) for key, item in value.items()}
    items = [_stored(item, inner, leaf) for item in value]
    if type(value) in (tuple, list):
        return type(value)(items)
    if isinstance(value, tuple) and isinstance(getattr(type(value), "_fields", None), tuple):
        try:  # a namedtuple keeps its class, so a field the prologue reads by name is found
            return type(value)(*items)
        except Exception:  # noqa: BLE001 - a tuple subclass with a constructor of its own: its items by position
            pass
    return tuple(items)


def call_storages(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` with each plain strided tensor replaced by its :class:`Region`, any other leaf by
    None; never raises (an input with no storage is None, a container that holds itself is None inside itself)."""
    try:
        return tuple(_stored(a) for a in args), {key: _stored(value) for key, value in kwargs.items()}
    except RecursionError:  # nested deeper than Python's stack: nothing is known of the call
        return (), {}


def call_grad_leaves(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` with each tensor replaced by whether eager PyTorch refuses to update it in place
    with grad enabled (a leaf that requires grad, or a view of one), any other leaf by None (as
    :func:`call_storages`: the same containers, nothing of the user's kept)."""
    try:
        return (tuple(_stored(a, leaf=_grad_leaf) for a in args),
                {key: _stored(value, leaf=_grad_leaf) for key, value in kwargs.items()})
    except RecursionError:
        return (), {}


def _grad_leaf(tensor: torch.Tensor) -> bool:
    try:
        base = tensor._base
        return bool(tensor.requires_grad and (tensor.is_leaf or (base is not None and base.is_leaf and base.requires_grad)))
    except RuntimeError:  # one of several views (unbind's) updated in place: autograd refuses to read it
        return False


def _item(container: Any, key: Any) -> Any:
    if isinstance(container, tuple | list | dict):
        try:
            return container[key]
        except (IndexError, KeyError, TypeError):
            return _MISSING
    return _MISSING


def _field(container: Any, name: Any) -> Any:
    fields = getattr(type(container), "_fields", None)  # our own copy of a namedtuple: read by position
    if isinstance(container, tuple) and isinstance(fields, tuple) and name in fields:
        return container[fields.index(name)]
    return _MISSING


def unpacked(prologue: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Each name ``prologue`` unpacks, with its value in ``args`` and ``kwargs`` (as :func:`call_storages` keeps
    them), or :data:`NOT_GROUPED` for a name that does not come from them (the function object, a module's
    parameters and attributes, the cache info); a name the walk cannot follow from the call is left out."""
    values: dict[str, Any] = {}
    followed: set[str] = set()  # names from the call whose value is known
    unsure: set[str] = set()  # names from the call whose value is not
    for bsym in prologue.bound_symbols:
        sid = getattr(bsym.sym, "id", None)
        if not str(getattr(sid, "name", "")).startswith("UNPACK"):
            continue
        outputs = [p for p in (bsym.output if isinstance(bsym.output, tuple | list) else (bsym.output,))
                   if isinstance(p, Proxy)]
        parent = bsym.args[0] if bsym.args and isinstance(bsym.args[0], Proxy) else None
        if sid == _TRIVIAL:
            root = (bsym.kwargs or {}).get("name", outputs[0].name if outputs else None)
            for p in outputs:
                if root in ("args", "kwargs"):
                    values[p.name] = args if root == "args" else kwargs
                    followed.add(p.name)
                else:
                    values[p.name] = NOT_GROUPED
            continue
        if parent is None or parent.name in unsure or parent.name not in values:
            unsure.update(p.name for p in outputs if parent is not None and parent.name in unsure)
            if parent is None:
                values.update((p.name, NOT_GROUPED) for p in outputs)  # a root of its own: the function, cache info
            continue
        if parent.name not in followed:  # below a root that is not the call: never in an alias group
            values.update((p.name, NOT_GROUPED) for p in outputs)
            continue
        source = values[parent.name]
        found: list[tuple[str, Any]] = []
        if sid == _GETITEM and len(bsym.args) == 2 and len(outputs) == 1:
            found = [(outputs[0].name, _item(source, bsym.args[1]))]
        elif sid == _ATTR and len(bsym.args) == 2 and len(outputs) == 1:
            found = [(outputs[0].name, _field(source, bsym.args[1]))]
        elif sid in _SEQUENCES and isinstance(source, tuple | list) and len(outputs) == len(source):
            found = [(p.name, v) for p, v in zip(outputs, source)]
        else:
            found = [(p.name, _MISSING) for p in outputs]
        for name, value in found:
            if value is _MISSING:
                unsure.add(name)
            else:
                values[name] = value
                followed.add(name)
    return {name: value for name, value in values.items() if name not in unsure}


def storage_keys(prologues: Iterable[Any], call: tuple[tuple[Any, ...], Mapping[str, Any]]) -> dict[str, Region | None]:
    """Where each input name ``prologues`` unpack lives: a :class:`Region` for a plain tensor of ``call`` (as
    :func:`call_storages` gives it), :data:`NOT_GROUPED` for an input Thunder's alias groups never hold; a name
    the walk cannot follow, or two prologues unpack as different values, is left out."""
    keys: dict[str, Region | None] = {}
    unsure: set[str] = set()
    for prologue in prologues:
        for name, value in unpacked(prologue, *call).items():
            key = value if isinstance(value, Region) else NOT_GROUPED
            if name in keys and keys[name] != key:
                unsure.add(name)
            keys[name] = key
    return {name: key for name, key in keys.items() if name not in unsure}
