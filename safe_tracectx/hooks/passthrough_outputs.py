"""A symbol that hands back its own input where eager PyTorch gives a new tensor (``output-aliases-input``).

A bound symbol whose output is one of its inputs (``a = ltorch.to(a, copy=True)``) says
the result *is* that input: a program that returns it hands the caller its own tensor,
and a later in-place update of it writes into the input. That is Thunder's semantics
exactly when eager PyTorch's function returns its input too, or a view of it
(``a.to(a.dtype)``, ``a.contiguous()``, ``a.reshape(a.shape)``). So each such symbol
of the interpretation's trace whose output is returned or written into is called
eagerly, as the torch function its id names, on tensors of its inputs' shapes and
dtypes; an output eager gives a storage of its own is reported, charged to the
function that is the symbol's meta. A symbol whose id names no torch function, or
that eager does not take with Thunder's arguments, is not judged::

    >>> import torch
    >>> from safe_tracectx.hooks.passthrough_outputs import shares_storage
    >>> a = torch.zeros(3)
    >>> shares_storage(a.to(copy=True), a), shares_storage(a.view(3), a)
    (False, True)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Final

import torch
from thunder.core.prims import PrimIDs
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_flatten

from safe_tracectx.hooks.eager_ops import torch_function
from safe_tracectx.traces.bound_proxies import proxy_args, proxy_outs
from safe_tracectx.traces.grad_mode import meta_definer
from safe_tracectx.traces.updated_inputs import writes_in_place
from safe_tracectx.traces.violations import Violation, bsym_label

__all__ = ["KIND", "across_traces", "aliased_outputs", "shares_storage"]

KIND: Final = "output-aliases-input"
_SHALLOW_COPY: Final = getattr(PrimIDs, "SHALLOW_COPY", None)
#: The most elements the eager call allocates for one symbol's inputs: a larger symbol is not judged.
_MOST_ELEMENTS: Final = 2**22


def shares_storage(result: Any, given: torch.Tensor) -> bool:
    """Whether ``result`` is ``given`` or a tensor that shares its storage (a view, a detached alias)."""
    if result is given:
        return True
    if not isinstance(result, torch.Tensor):
        return False
    return bool(result.untyped_storage().data_ptr() == given.untyped_storage().data_ptr())


def aliased_outputs(trace: Any) -> list[Violation]:
    """Each output of a symbol of ``trace`` that is one of its own inputs and the caller's tensor (an input of
    ``trace``), which ``trace`` returns or writes into, where eager PyTorch's function gives a tensor with a storage
    of its own (an intermediate's alias is seen by nothing else)."""
    returned, callers = _returned(trace), _inputs(trace)
    found: list[Violation] = []
    for index, bsym in enumerate(trace.bound_symbols):
        aliases = {out: given for out, given in _aliases(bsym).items() if given in callers}
        same = {o: a for o, a in aliases.items() if o in returned or _written_after(trace, index, o)}
        function = torch_function(getattr(bsym.sym, "id", None)) if same else None
        if function is None:
            continue
        fresh = _fresh_outputs(function, bsym, same)
        for name in (n for n in same if n in fresh):
            found.append(Violation(
                KIND, name,
                f"{bsym_label(index, bsym)} gives back its input {same[name]} as its output {name}, so the program "
                f"hands on the caller's own tensor (an update of {name} changes the caller's {same[name]}), where "
                f"eager PyTorch's {bsym.sym.id} returns a new tensor with a storage of its own",
                bsym_label(index, bsym),
                also=(same[name],),
                culprit=meta_definer(bsym),
            ))
    return found


def across_traces(traces: list[Any]) -> list[tuple[Violation, Any]]:
    """:func:`aliased_outputs` of the latest of the interpretation's computation traces (the earlier ones hold the
    same symbols under other names; the latest has the proxies renamed after the user's variables), with it."""
    return [(v, traces[-1]) for v in aliased_outputs(traces[-1])] if traces else []


def _returned(trace: Any) -> set[str]:
    try:
        output = trace.output
    except Exception:  # noqa: BLE001 - no return yet: nothing is handed on
        return set()
    flat, _ = tree_flatten(output)  # type: ignore[no-untyped-call]
    return {p.name for p in flat if isinstance(p, TensorProxy)}


def _aliases(bsym: Any) -> dict[str, str]:
    """Each tensor output of ``bsym`` that is one of its inputs by Thunder's semantics, by name, to that input's
    name: the input's own proxy (``a = ltorch.to(a, copy=True)``), or a proxy its symbol makes by
    ``prims.shallow_copy`` of it (how Thunder's ``Symbol.__call__`` hands back an input since 2025)."""
    given = {p.name for p in proxy_args(bsym) if isinstance(p, TensorProxy)}
    found = {o.name: o.name for o in proxy_outs(bsym) if isinstance(o, TensorProxy) and o.name in given}
    for sub in getattr(bsym, "subsymbols", ()) or ():
        if getattr(sub.sym, "id", None) == _SHALLOW_COPY and sub.args and getattr(sub.args[0], "name", None) in given:
            found.update({o.name: sub.args[0].name for o in proxy_outs(sub) if isinstance(o, TensorProxy)})
    outs = {o.name for o in proxy_outs(bsym)}
    return {o: a for o, a in found.items() if o in outs}


def _inputs(trace: Any) -> set[str]:
    flat, _ = tree_flatten((trace.args, trace.kwargs))  # type: ignore[no-untyped-call]
    return {p.name for p in flat if isinstance(p, TensorProxy)}


def _written_after(trace: Any, index: int, name: str) -> bool:
    return any(writes_in_place(b) and any(p.name == name for p in proxy_args(b)) for b in trace.bound_symbols[index + 1:])


def _fresh_outputs(function: Callable[..., Any], bsym: Any, aliases: dict[str, str]) -> set[str]:
    """The names of ``bsym``'s outputs that are its inputs (``aliases``: output to input name) where ``function``,
    called eagerly with its arguments (on zero tensors of their shapes and dtypes), returns a tensor sharing no
    storage with that input; nothing when it cannot be called so."""
    values: dict[str, torch.Tensor] = {}
    try:
        args, kwargs = _real(bsym.args, values), _real(bsym.kwargs, values)
        args = _without_trailing_defaults(bsym.sym, args)
        with torch.no_grad():
            result = function(*args, **kwargs)
    except Exception:  # noqa: BLE001 - eager does not take these arguments: not judged
        return set()
    results = list(result) if isinstance(result, tuple | list) else [result]
    outs = list(bsym.output) if isinstance(bsym.output, tuple | list) else [bsym.output]
    if len(results) != len(outs):
        return set()
    return {o.name for o, r in zip(outs, results) if isinstance(o, TensorProxy) and o.name in aliases
            and aliases[o.name] in values and not shares_storage(r, values[aliases[o.name]])}


def _real(value: Any, made: dict[str, torch.Tensor]) -> Any:
    """``value`` with each tensor proxy a zero tensor of its shape and dtype (the same tensor for the same name)."""
    from thunder.core.dtypes import to_torch_dtype

    if isinstance(value, TensorProxy):
        if value.name not in made:
            shape = tuple(int(d) for d in value.shape)
            if sum(t.numel() for t in made.values()) + torch.Size(shape).numel() > _MOST_ELEMENTS:
                raise ValueError("too large to judge")
            made[value.name] = torch.zeros(shape, dtype=to_torch_dtype(value.dtype), device=str(value.device.type))
        return made[value.name]
    if isinstance(value, Proxy):
        return getattr(value, "value", value)
    if type(value) in (tuple, list):
        return type(value)(_real(v, made) for v in value)
    if type(value) is dict:
        return {k: _real(v, made) for k, v in value.items()}
    return value


def _without_trailing_defaults(symbol: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``args`` without the trailing positional ones Thunder bound at their default None (``to(a, None, None)``),
    which torch's parser would read as given."""
    try:
        parameters = list(inspect.signature(symbol.meta).parameters.values())
    except (TypeError, ValueError, AttributeError):
        return args
    end = len(args)
    while end > 0 and args[end - 1] is None and end - 1 < len(parameters) and parameters[end - 1].default is None \
            and parameters[end - 1].kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
        end -= 1
    return tuple(args[:end])
