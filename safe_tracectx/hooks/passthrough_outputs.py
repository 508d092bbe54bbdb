"""A program that hands back the caller's tensor where eager PyTorch returns a new one (``output-aliases-input``).

When the form of the program about to run is replayed (``hooks.output_replay``), each
tensor it returns that shares storage with one of the inputs it was given is followed
back through the interpretation's trace: from the symbol that defines the returned name,
through the argument computed from that input, to the input. Each symbol on that path
is called eagerly, as the torch function its id names, on zero tensors of its
arguments' shapes and dtypes: where one returns a tensor with a storage of its own
(``a.to(copy=True)``, ``x.repeat_interleave(1)``), eager's result is no alias of the
input, and Thunder's is. The report is charged to the function that is that symbol's
meta. A path through a symbol whose id names no torch function, or that eager does not
take with Thunder's arguments, is not judged; a symbol that rebinds its input's own name
(Thunder before 2025) is judged only when nothing but the return reads the name again::

    >>> import torch
    >>> from safe_tracectx.hooks.passthrough_outputs import shares_storage
    >>> a = torch.zeros(3)
    >>> shares_storage(a.to(copy=True), a), shares_storage(a.view(3), a), shares_storage(a[:0], torch.zeros(0))
    (False, True, False)
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Final

import torch
from thunder.core.proxies import Proxy, TensorProxy

from safe_tracectx.hooks.eager_ops import torch_function
from safe_tracectx.hooks.replay import exact_copy
from safe_tracectx.traces.bound_proxies import proxy_args, proxy_outs
from safe_tracectx.traces.grad_mode import meta_definer
from safe_tracectx.traces.violations import Violation, bsym_label

__all__ = ["KIND", "aliased_outputs", "shares_storage"]

KIND: Final = "output-aliases-input"
#: The most elements the eager call allocates for one symbol's inputs: a larger symbol is not judged.
_MOST_ELEMENTS: Final = 2**22
#: The most symbols followed back from one returned name.
_LONGEST: Final = 64


def shares_storage(result: Any, given: torch.Tensor) -> bool:
    """Whether ``result`` is ``given`` or a tensor that shares its storage (a view, a detached alias); two tensors
    with no elements share nothing but what is the same storage object."""
    if result is given:
        return True
    if not isinstance(result, torch.Tensor) or result.layout is not torch.strided or given.layout is not torch.strided:
        return False  # (a sparse tensor has no storage to share)
    return bool(result.untyped_storage()._cdata == given.untyped_storage()._cdata)


def aliased_outputs(program: Any, proxies: Sequence[Any], outputs: Sequence[Any],
                    given: Mapping[str, Any]) -> list[Violation]:
    """Each of ``outputs`` (what a form of ``program``, the interpretation's trace, returned when run on ``given``,
    its inputs by name, in the places of ``proxies``, what ``program`` returns) that shares storage with an input,
    where eager PyTorch's result along ``program``'s path from that input to the returned name does not."""
    found: list[Violation] = []
    for index, (value, proxy) in enumerate(zip(outputs, proxies)):
        if not isinstance(value, torch.Tensor) or not isinstance(proxy, TensorProxy):
            continue
        for name, tensor in given.items():
            if isinstance(tensor, torch.Tensor) and shares_storage(value, tensor):
                copying = _copying_step(program, proxy.name, name, given)
                if copying is not None:
                    found.append(_violation(proxy.name, name, *copying))
                break
    return found


def _violation(returned: str, input_name: str, at: int, bsym: Any) -> Violation:
    return Violation(
        KIND, returned,
        f"it hands back {returned} in the storage of the caller's own {input_name}, where eager PyTorch returns a "
        f"new tensor: {bsym_label(at, bsym)} runs as an alias of its argument, and eager's {bsym.sym.id} gives a "
        f"storage of its own, so an update of the result changes the caller's {input_name}",
        bsym_label(at, bsym),
        also=(input_name,),
        culprit=meta_definer(bsym),
    )


def _copying_step(program: Any, returned: str, input_name: str, given: Mapping[str, Any]) -> tuple[int, Any] | None:
    """(index, bound symbol) of the first symbol on ``program``'s path from ``input_name`` back from ``returned`` that
    eager runs into a new storage; None if eager keeps the input's storage all the way, or the path is not judged."""
    depends = _computed_from(program, input_name)
    current, limit = returned, len(program.bound_symbols)
    for _ in range(_LONGEST):
        if current == input_name and not _rebinds(program, current, limit):
            return None
        at = _producer(program, current, limit)
        if at is None:
            return None
        bsym = program.bound_symbols[at]
        reads = [p.name for p in proxy_args(bsym) if isinstance(p, TensorProxy) and p.name in depends]
        if not reads:
            return None
        if reads[0] == current and any(reads[0] in _read_by(b) for b in program.bound_symbols[at + 1:-1]):
            return None  # a rebinding of the input's own name that later symbols read: which value is meant is lost
        fresh = _fresh(bsym, current, reads[0], given)
        if fresh is None or fresh:
            return None if fresh is None else (at, bsym)
        current, limit = reads[0], at
    return None


def _rebinds(program: Any, name: str, limit: int) -> bool:
    at = _producer(program, name, limit)
    return at is not None and name in _read_by(program.bound_symbols[at])


def _producer(program: Any, name: str, limit: int) -> int | None:
    for at in range(limit - 1, -1, -1):
        if any(o.name == name for o in proxy_outs(program.bound_symbols[at])):
            return at
    return None


def _read_by(bsym: Any) -> set[str]:
    return {p.name for p in proxy_args(bsym)}


def _computed_from(program: Any, name: str) -> set[str]:
    found = {name}
    for bsym in program.bound_symbols:
        if _read_by(bsym) & found:
            found.update(o.name for o in proxy_outs(bsym))
    return found


def _fresh(bsym: Any, output: str, argument: str, given: Mapping[str, Any]) -> bool | None:
    """Whether eager's function of ``bsym``, called with its arguments (copies of the program's inputs ``given``,
    strides and all: ``contiguous`` of a channels-last input is the input; else zero tensors), returns ``output`` in
    a storage other than ``argument``'s; None when it cannot be called so (no torch function, another signature)."""
    function = torch_function(getattr(bsym.sym, "id", None))
    if function is None:
        return None
    values: dict[str, torch.Tensor] = {}
    try:
        args, kwargs = _real(bsym.args, values, given), _real(bsym.kwargs, values, given)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = function(*_without_trailing_defaults(bsym.sym, args), **kwargs)
    except Exception:  # noqa: BLE001 - eager does not take these arguments: not judged
        return None
    results = list(result) if isinstance(result, tuple | list) else [result]
    outs = list(bsym.output) if isinstance(bsym.output, tuple | list) else [bsym.output]
    place = next((i for i, o in enumerate(outs) if isinstance(o, TensorProxy) and o.name == output), None)
    if len(results) != len(outs) or place is None or argument not in values:
        return None
    return not shares_storage(results[place], values[argument])


def _real(value: Any, made: dict[str, torch.Tensor], given: Mapping[str, Any]) -> Any:
    """``value`` with each tensor proxy a copy of the input ``given`` under its name, else a zero tensor of its shape
    and dtype (the same tensor for the same name)."""
    from thunder.core.dtypes import to_torch_dtype

    if isinstance(value, TensorProxy):
        if value.name not in made:
            shape = tuple(int(d) for d in value.shape)
            if sum(t.numel() for t in made.values()) + torch.Size(shape).numel() > _MOST_ELEMENTS:
                raise ValueError("too large to judge")
            input_tensor = given.get(value.name)
            made[value.name] = exact_copy(input_tensor) if isinstance(input_tensor, torch.Tensor) else torch.zeros(
                shape, dtype=to_torch_dtype(value.dtype), device=str(value.device.type))
        return made[value.name]
    if isinstance(value, Proxy):
        return getattr(value, "value", value)
    if type(value) in (tuple, list):
        return type(value)(_real(v, made, given) for v in value)
    if type(value) is dict:
        return {k: _real(v, made, given) for k, v in value.items()}
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

