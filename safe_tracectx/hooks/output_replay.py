"""What a program returns, replayed against the trace the interpretation made (``output-wrong-value``).

Every step after the interpretation (dead-code elimination, fusion, the executors'
implementations, rematerialization, the split's forward) may change what the program
returns while every name is still defined: only the values tell. So, once the form of the
program's computation Thunder compiled is about to run, it and the interpretation's
trace (made executable by Thunder's own ``transform_for_execution`` with the torch and
Python executors; where that form gives a value that is not finite, with eager's own
ops first: ``hooks.eager_ops``) are run on the same inputs, the call's own first, and
each tensor the program returns must be alike: judged against its scale and confirmed
in float64, as gradients are (``hooks.gradient_compare``); a tensor that shares storage
with an input is followed back to it (``hooks.passthrough_outputs``). A program that draws random
numbers, reads memory it never wrote, or updates its inputs (``update-wrong-value``
replays it) is not judged. Like the other replays, it is this package's own work::

    >>> import torch, thunder
    >>> from safe_tracectx.hooks.output_replay import wrong_outputs
    >>> jitted = thunder.jit(lambda x: x.sin() * 2)
    >>> _ = jitted(torch.ones(3))
    >>> wrong_outputs(thunder.last_traces(jitted)[0], thunder.last_traces(jitted)[-1], None, None)
    []
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, cast

import torch
from thunder.core import pytree
from thunder.core.proxies import TensorProxy

from safe_tracectx.hooks.eager_ops import eager_executor
from safe_tracectx.hooks.gradient_compare import beyond_rounding, how_far, in_float64, low_precision
from safe_tracectx.hooks.passthrough_outputs import aliased_outputs
from safe_tracectx.hooks.replay import draws_random, executable, own_work, random_inputs
from safe_tracectx.traces.violations import Violation

__all__ = ["KIND", "program_outputs", "wrong_outputs"]

KIND: Final = "output-wrong-value"
#: Words in the names of symbols whose values two runs on the same inputs need not share.
_UNDETERMINED: Final = ("empty", "scatter", "index_put", "index_copy", "put_")
_flatten: Final = cast(Callable[[Any], tuple[list[Any], Any]], pytree.tree_flatten)


def program_outputs(result: Any) -> list[Any]:
    """The flat values a computation hands its caller, whatever its form returns: the output itself, Thunder's
    ``{"output": ..., "flat_args": ...}``, or a split forward's ``(that, saved for backward)``."""
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], dict) and "output" in result[0]:
        result = result[0]
    if isinstance(result, dict) and "output" in result:
        result = result["output"]
    return _flatten((result,))[0]  # (Thunder's flattening takes no bare tensor)


def wrong_outputs(program: Any, trace: Any, function: Callable[..., Any] | None,
                  call_inputs: Mapping[str, Any] | None) -> list[Violation]:
    """Each tensor ``program`` (the interpretation's trace) returns that ``trace`` (a later form of it, run as
    ``function`` or made executable) returns otherwise, both run on the same inputs (``call_inputs``: the call's own,
    by name; else random), beyond float32's rounding there; nothing when either cannot be run so."""
    if draws_random(program) or draws_random(trace) or _undetermined(program):
        return []
    names = [str(getattr(a, "name", "")) for a in program.args]
    with torch.random.fork_rng(devices=[]):  # the user's random numbers stay the user's
        inputs = dict(call_inputs) if call_inputs is not None and all(n in call_inputs for n in names) else None
        inputs = inputs if inputs is not None else random_inputs(program)
        if inputs is None:
            return []
        expected = own_work(_reference, program, inputs)
        ran = own_work(_run, trace, function, inputs) if expected is not None else None
        if expected is None or ran is None or len(ran[0]) != len(expected):
            return []
        got, given = ran
        exact: list[list[Any] | None] = []
        low = low_precision(program)
        proxies = program_outputs(_returned(program))
        found = []
        for index, (have, want) in enumerate(zip(got, expected)):
            if not (isinstance(have, torch.Tensor) and isinstance(want, torch.Tensor)):
                continue
            how = how_far(have.to(want.dtype) if have.shape == want.shape else have, want, low=low, against="eager")
            if how is not None and have.dtype != want.dtype:
                how = f"dtype {have.dtype} where eager gives {want.dtype}"
            elif how is not None and bool(torch.isfinite(have).all()):
                if not exact:
                    exact.append(own_work(_reference, program, {n: in_float64(v) for n, v in inputs.items()}))
                truth = exact[0][index] if exact[0] is not None and index < len(exact[0]) else None
                how = beyond_rounding(have.to(want.dtype), want, truth if isinstance(truth, torch.Tensor) else None,
                                      low=low, against="eager")
            if how is None:
                continue
            proxy = proxies[index] if index < len(proxies) else None
            name = proxy.name if isinstance(proxy, TensorProxy) else f"output {index}"
            found.append(Violation(
                KIND, name,
                f"run on the same inputs, the program about to run returns another {name} than the trace the "
                f"interpretation made does ({how}): the call returns other values than eager PyTorch, silently",
                f"output {index}",
            ))
        found += own_work(aliased_outputs, program, got, given)
    return found


def _undetermined(trace: Any) -> bool:
    """Whether ``trace`` has a symbol (at any depth) whose values two runs need not share: one that reads memory it
    never wrote (``empty``), or writes one place twice in an order PyTorch leaves open (``scatter``, ``index_put``
    and ``index_copy`` with repeated indices, which the random integer inputs, 0 or 1, make)."""
    def undetermined(bsym: Any) -> bool:
        name = str(getattr(bsym.sym, "name", "")).lower()
        return any(word in name for word in _UNDETERMINED) or any(map(undetermined, getattr(bsym, "subsymbols", ()) or ()))
    return any(map(undetermined, trace.bound_symbols))


def _returned(program: Any) -> Any:
    try:
        return program.output
    except Exception:  # noqa: BLE001 - no return: nothing is handed on
        return ()


def _reference(program: Any, inputs: Mapping[str, Any]) -> list[Any] | None:
    """What ``program`` returns run with the torch executor; where a value is not finite there, with eager's own
    ops first (a decomposition's overflow is not eager's); None if it cannot run."""
    ran = _run(program, None, inputs)
    found = ran[0] if ran is not None else None
    if found is None or all(bool(torch.isfinite(v).all()) for v in found
                            if isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex())):
        return found
    eager = eager_executor(program)
    again = _run(program, None, inputs, first=eager) if eager is not None else None
    return again[0] if again is not None and len(again[0]) == len(found) else found


def _run(trace: Any, function: Callable[..., Any] | None, inputs: Mapping[str, Any],
         first: Any = None) -> tuple[list[Any], dict[str, Any]] | None:
    """The flat values ``trace`` (run as ``function``, else made executable after ``first``) returns on ``inputs``,
    and the inputs it was given by name (each a copy: nothing of the run reaches the user's tensors or autograd
    graph); None if it cannot run."""
    args = list(getattr(trace, "args", None) or ())
    names = [str(getattr(a, "name", "")) for a in args]
    if any(n not in inputs for n in names):
        return None
    # A fusion's compiled region sees the flags the call's tensors had (torch.compile guards on them, and would
    # compile the region again for the user's next call).
    given = [_copy(inputs[n], bool(getattr(a, "requires_grad", False))) for n, a in zip(names, args)]
    try:
        run = function if function is not None else executable(trace, first=first)
        with torch.no_grad():
            return program_outputs(run(*given)), dict(zip(names, given))
    except Exception:  # noqa: BLE001 - a program that fails on these values, or a form Thunder cannot execute
        return None


def _copy(value: Any, requires_grad: bool) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    copy = value.detach().clone()
    return copy.requires_grad_() if requires_grad and (copy.is_floating_point() or copy.is_complex()) else copy
