"""What a program returns, replayed against the trace the interpretation made (``output-wrong-value``).

Every step after the interpretation (dead-code elimination, fusion, the executors'
implementations, rematerialization, the split's forward) may change what the program
returns while every name is still defined: only the values tell. So, once the form of the
program's computation Thunder compiled is about to run, it and the interpretation's
trace (made executable by Thunder's own ``transform_for_execution``, each symbol run as
eager's own op where it takes Thunder's arguments: ``hooks.eager_reference``) are run on
the same inputs, the call's own first, and each tensor the program returns must be alike:
judged against its scale and confirmed in float64, as gradients are
(``hooks.gradient_compare``). Where the interpretation's trace run as the torch executor
runs it already differs from eager's ops, the first symbol that does is charged. A tensor
that shares storage with an input is followed back to it (``hooks.passthrough_outputs``).
A program that draws random numbers, reads memory it never wrote or writes one place twice
in an order PyTorch leaves open is not judged on its values. Like the other replays,
it is this package's own work::

    >>> import torch, thunder
    >>> from safe_tracectx.hooks.output_replay import wrong_outputs
    >>> jitted = thunder.jit(lambda x: x.sin() * 2)
    >>> _ = jitted(torch.ones(3))
    >>> wrong_outputs(thunder.last_traces(jitted)[0], thunder.last_traces(jitted)[-1], None, None)
    []
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import torch
from thunder.core.proxies import TensorProxy

from safe_tracectx.hooks.eager_reference import every_value, first_differing_symbol, wrong_metadata
from safe_tracectx.hooks.gradient_compare import beyond_rounding, how_far, in_float64, low_precision
from safe_tracectx.hooks.passthrough_outputs import aliased_outputs
from safe_tracectx.hooks.replay import (
    BUDGET_BYTES, copyable, draws_random, exact_copy, executable, own_work, random_inputs,
)
from safe_tracectx.traces.bound_proxies import proxy_outs
from safe_tracectx.traces.grad_mode import meta_definer
from safe_tracectx.traces.returns import handed_to_caller, returned
from safe_tracectx.traces.violations import Violation

__all__ = ["KIND", "wrong_outputs"]

KIND: Final = "output-wrong-value"
#: Words in the names of symbols whose values two runs on the same inputs need not share.
_UNDETERMINED: Final = ("empty", "scatter", "index_put", "index_copy", "put_")


def wrong_outputs(program: Any, trace: Any, function: Callable[..., Any] | None,
                  call_inputs: Mapping[str, Any] | None) -> list[Violation]:
    """Each tensor ``program`` (the interpretation's trace, its symbols run as eager's own ops) returns that
    ``trace`` (a later form of it, run as ``function`` or made executable) returns otherwise, both run on the same
    inputs (``call_inputs``: the call's own, by name; else random), beyond float32's rounding there; and a symbol
    whose output ``program`` records with another shape or dtype than eager gives it. Nothing when either cannot
    be run so."""
    names = [str(getattr(a, "name", "")) for a in program.args]
    with torch.random.fork_rng(devices=[]):  # the user's random numbers stay the user's
        inputs = dict(call_inputs) if call_inputs is not None and all(n in call_inputs for n in names) else None
        inputs = inputs if inputs is not None else random_inputs(program)
        if inputs is None or not _affordable(inputs):
            return []
        values = own_work(every_value, program, inputs)
        found = wrong_metadata(program, values) if values is not None else []
        if draws_random(program) or draws_random(trace) or _undetermined(program):
            return found
        proxies = returned(program) or []
        expected = _expected(proxies, values, inputs)
        ran = own_work(_run, trace, function, inputs) if expected is not None else None
        if expected is None or ran is None or len(ran[0]) != len(expected):
            return found
        got, given = ran
        low = low_precision(program)
        references: dict[str, list[Any] | None] = {}  # in float64, and on inputs moved by a few ulps: made once

        def reference(kind: str) -> list[Any] | None:
            if kind not in references:
                moved = {n: (in_float64 if kind == "exact" else _moved)(v) for n, v in inputs.items()}
                references[kind] = _expected(proxies, own_work(every_value, program, moved), moved)
            return references[kind]

        wrong = []
        for index, (have, want) in enumerate(zip(got, expected)):
            if not (isinstance(have, torch.Tensor) and isinstance(want, torch.Tensor)):
                continue
            try:
                how = _how(have, want, index, reference, low=low)
            except (RuntimeError, NotImplementedError, TypeError):  # a dtype torch cannot compare (float8)
                continue
            if how is not None:
                proxy = proxies[index] if index < len(proxies) else None
                wrong.append((index, proxy.name if isinstance(proxy, TensorProxy) else f"output {index}", how))
        found += _charged(program, inputs, wrong) + own_work(aliased_outputs, program, proxies, got, given)
    return found


def _how(have: torch.Tensor, want: torch.Tensor, index: int, reference: Callable[[str], list[Any] | None], *,
         low: bool) -> str | None:
    """How ``have`` differs from eager's ``want`` beyond rounding: confirmed against the reference in float64, or,
    where that cannot run (a float32 constant of the program meets a float64 input), not explained by how far the
    reference itself moves when its inputs move by a few ulps (an ill-conditioned value: float32 is noise there)."""
    how = how_far(have.to(want.dtype) if have.shape == want.shape else have, want, low=low, against="eager")
    if how is not None and have.dtype != want.dtype:
        return f"dtype {have.dtype} where eager gives {want.dtype}"
    if how is None or not bool(torch.isfinite(have).all()):
        return how
    exact = reference("exact")
    truth = exact[index] if exact is not None and index < len(exact) else None
    if isinstance(truth, torch.Tensor):
        return beyond_rounding(have.to(want.dtype), want, truth, low=low, against="eager")
    moved = reference("moved")
    shifted = moved[index] if moved is not None and index < len(moved) else None
    if isinstance(shifted, torch.Tensor) and shifted.shape == want.shape:
        wide = torch.complex128 if want.is_complex() else torch.float64
        own, noise = ((t.to(want.dtype) - want).to(wide).abs().reshape(-1) for t in (have, shifted))
        if own.numel() and (float(own.norm()) <= 4 * float(noise.norm()) or float(own.max()) <= 4 * float(noise.max())):
            return None
    return how


def _moved(value: Any) -> Any:
    """``value`` with each floating tensor moved by four ulps, up or down at random."""
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        return value
    sign = torch.randint(0, 2, value.shape, generator=torch.Generator().manual_seed(2)).to(value.dtype) * 2 - 1
    return value.detach() * (1 + 4 * torch.finfo(value.dtype).eps * sign)


def _affordable(inputs: Mapping[str, Any]) -> bool:
    """Whether the replay may copy ``inputs``: tensors it can copy (:func:`replay.copyable`: the call's own weights
    on an accelerator, or a sparse tensor, are not copied: the program is not judged), of
    :data:`replay.BUDGET_BYTES` in all, at most."""
    tensors = [v for v in inputs.values() if isinstance(v, torch.Tensor)]
    return all(map(copyable, tensors)) and sum(
        t.untyped_storage().nbytes() for t in tensors) <= 4 * BUDGET_BYTES


def _charged(program: Any, inputs: Mapping[str, Any], wrong: list[tuple[int, str, str]]) -> list[Violation]:
    """The wrong outputs, charged to the first symbol the interpretation's trace itself already computes otherwise
    than eager's op, when it does (a decomposition, a meta); else left to the first form that returns them."""
    at_fault = own_work(first_differing_symbol, program, inputs) if wrong else None
    said = "" if at_fault is None else (f": the interpretation's trace already computes it otherwise, first at "
                                        f"{getattr(at_fault.sym, 'name', '?')}, which runs otherwise than eager's "
                                        f"{at_fault.sym.id}")
    return [Violation(
        KIND, name,
        f"run on the same inputs, the program about to run returns another {name} than the trace the interpretation "
        f"made does, its symbols run as eager's own ops ({how}): the call returns other values than eager PyTorch, "
        f"silently{said}",
        f"output {index}",
        also=() if at_fault is None else tuple(o.name for o in proxy_outs(at_fault) if isinstance(o, TensorProxy)),
        culprit=None if at_fault is None else meta_definer(at_fault),
    ) for index, name, how in wrong]


def _expected(proxies: list[Any], values: Mapping[str, Any] | None, inputs: Mapping[str, Any]) -> list[Any] | None:
    """The values of ``proxies`` (what a program returns), from ``values`` (every tensor it computes, by name) and
    its ``inputs``."""
    if values is None:
        return None
    return [values.get(p.name, inputs.get(p.name)) if isinstance(p, TensorProxy) else None
            for p in proxies]


def _undetermined(trace: Any) -> bool:
    """Whether ``trace`` has a top-level symbol whose values two runs need not share: one that reads memory it never
    wrote (``empty``), or writes one place twice in an order PyTorch leaves open (``scatter``, ``index_put`` and
    ``index_copy`` with repeated indices, which the random integer inputs, 0 or 1, make). Inside a symbol, such a
    part is the symbol's own business (``one_hot``'s scatter, ``to(copy=True)``'s empty, which it fills)."""
    return any(word in str(getattr(b.sym, "name", "")).lower() for b in trace.bound_symbols for word in _UNDETERMINED)


def _run(trace: Any, function: Callable[..., Any] | None,
         inputs: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]] | None:
    """The flat values ``trace`` (run as ``function``, else made executable) returns on ``inputs``,
    and the inputs it was given by name (each a copy: nothing of the run reaches the user's tensors or autograd
    graph); None if it cannot run."""
    args = list(getattr(trace, "args", None) or ())
    names = [str(getattr(a, "name", "")) for a in args]
    if any(n not in inputs for n in names):
        return None
    # A fusion's compiled region sees the flags the call's tensors had (torch.compile guards on them, and would
    # compile the region again for the user's next call).
    storages: dict[int, Any] = {}
    given = [_copy(inputs[n], bool(getattr(a, "requires_grad", False)), storages) for n, a in zip(names, args)]
    try:
        run = function if function is not None else executable(trace)
        with torch.no_grad():
            return handed_to_caller(run(*given)), dict(zip(names, given))
    except Exception:  # noqa: BLE001 - a program that fails on these values, or a form Thunder cannot execute
        return None


def _copy(value: Any, requires_grad: bool, storages: dict[int, Any]) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    copy = exact_copy(value, storages)  # the very strides: a compiled region guards on them
    return copy.requires_grad_() if requires_grad and (copy.is_floating_point() or copy.is_complex()) else copy
