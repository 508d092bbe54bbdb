"""Which symbols of a trace make the views eager PyTorch makes, and which in-place updates change nothing.

Thunder's alias analysis takes more symbols for views than eager autograd does: what may
copy (``reshape``, ``contiguous``, a ``to`` that converts), ``detach``, advanced indexing,
a reinterpretation as another dtype. The checks that follow an update through views
(``gradient-skips-update``, ``leaf-updated-in-place``, ``update-dropped``) take only the
views eager also makes, as read here::

    >>> import torch, thunder
    >>> from safe_tracectx.traces.views import takes_view
    >>> def f(x):
    ...     return x[0], x[[0, 1]], x.reshape(4), x.t()
    >>> jitted = thunder.jit(f)
    >>> _ = jitted(torch.ones(2, 2))
    >>> [takes_view(b) for b in thunder.last_traces(jitted)[0].bound_symbols if b.sym.name in ("getitem", "reshape", "t")]
    [True, False, False, True]
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.views")

import functools
from typing import Any, Final

import torch
from thunder.core import dtypes
from thunder.core.proxies import TensorProxy

from safe_tracectx.traces.bound_proxies import proxy_args, proxy_outs
from safe_tracectx.traces.grad_mode import tensor_outs

__all__ = [
    "BY_ONE", "COVERING", "MULTIPLE_VIEWS", "NOT_A_VIEW", "SEVERAL_VIEWS", "changes_nothing", "covering", "takes_view",
    "takes_view_at_any_stage",
]

#: In-place updates that change nothing when their second argument is the number 1 (``a *= 1``, ``a.pow_(1)``).
BY_ONE: Final = frozenset({"mul_", "div_", "true_divide_", "pow_"})
#: Aliases Thunder groups that are not eager's views of one storage for autograd: what may copy (``reshape``,
#: ``contiguous``, ``to``; which it does is known only when it runs) and ``detach`` (autograd does not follow an
#: update through it). Their outputs are judged as a storage of their own.
NOT_A_VIEW: Final = frozenset({"detach", "contiguous", "flatten", "reshape", "reshape_as", "to", "unfold"})
#: Views that hold every element of what they view (a permutation of them, or repeats: ``expand``); any other view
#: (a slice, ``select``, ``diagonal``, ``as_strided``) holds a part of it.
COVERING: Final = frozenset({"view", "view_as", "t", "transpose", "permute", "unsqueeze", "squeeze", "swapaxes",
                              "swapdims", "movedim", "adjoint", "unflatten", "shallow_copy", "expand", "expand_as", "to"})
#: Views eager PyTorch forbids updating in place, or using after their base was: those of one call that makes several.
SEVERAL_VIEWS: Final = frozenset({"split", "chunk", "unbind", "tensor_split", "split_with_sizes", "hsplit", "vsplit"})
#: Of those, the ones whose views eager refuses to update in place with an error of its own ("returns multiple
#: views"), not the leaf rule's.
MULTIPLE_VIEWS: Final = frozenset({"split", "chunk", "unbind", "split_with_sizes"})


def changes_nothing(bsym: Any) -> bool:
    """An in-place update by a number that leaves every value as it was: ``mul_``/``div_``/``pow_`` by 1,
    ``add_``/``sub_`` of 0."""
    name, args = getattr(bsym.sym, "name", ""), bsym.args
    if len(args) != 2 or type(args[1]) not in (int, float):
        return False
    return (name in BY_ONE and args[1] == 1) or (name in ("add_", "sub_") and args[1] == 0)


def takes_view(bsym: Any) -> bool:
    """A view eager PyTorch also makes: not one that may copy (:data:`NOT_A_VIEW`), nor advanced indexing, nor a
    reinterpretation as another dtype (``x.view(torch.int32)``: no gradient flows through it)."""
    name = getattr(bsym.sym, "name", "")
    return (bsym.sym in _view_symbols() and (name not in NOT_A_VIEW or _same_tensor(bsym)) and not _indexed(bsym)
            and not (name == "view" and any(isinstance(a, dtypes.dtype | torch.dtype) for a in bsym.args[1:])))


def takes_view_at_any_stage(bsym: Any) -> bool:
    """:func:`takes_view`, also of a symbol an executor claimed (``Tensor.view``, ``Tensor.__getitem__``), read through
    the one symbol it stands for (its only subsymbol, with its outputs)."""
    if takes_view(bsym):
        return True
    subs: list[Any] = list(getattr(bsym, "subsymbols", None) or ())
    return (len(subs) == 1 and [p.name for p in proxy_outs(subs[0])] == [p.name for p in proxy_outs(bsym)]
            and takes_view(subs[0]))


@functools.cache
def _view_symbols() -> tuple[Any, ...]:
    """The symbols Thunder's alias analysis takes for views (``thunder.torch``'s two lists; symbols compare by id)."""
    import thunder.torch as ltorch

    return (*getattr(ltorch, "_syms_returning_views", ()), *getattr(ltorch, "_syms_that_may_return_views", ()))


def covering(bsym: Any) -> bool:
    """A view that holds every element of what it views: :data:`COVERING`, or an index of nothing but full slices,
    ``...`` and ``None`` (``a[:]``, ``a[..., None]``)."""
    name = getattr(bsym.sym, "name", "")
    if name in COVERING:
        return True
    if name != "getitem" or len(bsym.args) < 2:
        return False
    key = bsym.args[1] if isinstance(bsym.args[1], tuple) else (bsym.args[1],)
    return all(k is None or k is Ellipsis or isinstance(k, slice) and k == slice(None) for k in key)


def _same_tensor(bsym: Any) -> bool:
    """A ``to`` that changes neither dtype nor device, asks for no copy and no memory format: eager returns the
    tensor itself."""
    given, outs = proxy_args(bsym)[:1], tensor_outs(bsym)
    return (getattr(bsym.sym, "name", "") == "to" and len(given) == 1 and len(outs) == 1
            and bsym.kwargs.get("copy") is not True and bsym.kwargs.get("memory_format") in (None, torch.preserve_format)
            and (given[0].dtype, given[0].device) == (outs[0].dtype, outs[0].device))


def _indexed(bsym: Any) -> bool:
    """A ``getitem`` with advanced indexing (a tensor, a list, a bool or a nested tuple among its indices): eager
    copies, it makes no view."""
    if getattr(bsym.sym, "name", "") != "getitem" or len(bsym.args) < 2:
        return False
    key = bsym.args[1] if isinstance(bsym.args[1], tuple) else (bsym.args[1],)
    return any(isinstance(k, TensorProxy | list | tuple | bool) for k in key) or any(
        isinstance(p, TensorProxy) for p in proxy_args(bsym)[1:])
