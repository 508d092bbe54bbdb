"""The program's in-place updates of its inputs and what it returns, in each form of its computation about to run.

The interpretation's trace is the program as written; a later form (the trace a step
makes of it, the split's forward) must still make each update of an input
(``update-dropped``), with the grad mode it was made in (``update-grad-mode``), and
leave the same values in the input (``update-wrong-value``, replayed by
``hooks.replay``); and it must return the same values (``output-wrong-value``,
replayed by ``hooks.output_replay``). Each is charged to the
first step whose form has it::

    >>> from safe_tracectx.hooks.program_updates import first_form
    >>> from safe_tracectx.hooks.compilation import Compilation
    >>> from safe_tracectx.traces.violations import Violation
    >>> first_form(Compilation(), Violation("update-dropped", "x", "", "")) is None
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from thunder.core.trace import TraceCtx

from safe_tracectx.hooks import compilation as compilations
from safe_tracectx.hooks.call_values import call_values
from safe_tracectx.hooks.output_replay import wrong_outputs
from safe_tracectx.hooks.replay import wrong_update_values
from safe_tracectx.hooks.reporting import switched_off
from safe_tracectx.traces.call_inputs import Region
from safe_tracectx.traces.updated_inputs import dropped_updates, wrong_update_modes
from safe_tracectx.traces.violations import Violation

__all__ = ["first_form", "forms_about_to_run", "side_of"]


def forms_about_to_run(
    compilation: compilations.Compilation, trace: Any, function: Callable[..., Any] | None
) -> list[Violation]:
    """What ``trace``, about to run (as ``function``, made by thunder.jit to run it), does otherwise than the
    program with the program's updates of its inputs, and, run, with what it returns."""
    found = _program_updates_dropped(compilation, trace, backward=compilation.backward)
    found += _program_update_modes(compilation, trace, backward=compilation.backward)
    if function is not None:
        dropped = {v.name for v in found if v.kind == "update-dropped"}
        found += [v for v in _program_update_values(compilation, trace, function) if v.name not in dropped]
        found += _program_output_values(compilation, trace, function)
    return found


def _program_updates_dropped(
    compilation: compilations.Compilation, trace: Any, backward: Any = None
) -> list[Violation]:
    """The program's updates of its inputs that ``trace`` drops, if it is a form of the program's computation (the
    interpretation's trace, or the forward of the split), not a backward, a prologue or a fusion region's; with its
    ``backward``, those neither writes (the split may move an update into the backward)."""
    if compilation.updates is None or not compilation.updates[1] or not _runs_the_program(compilation, trace):
        return []
    return dropped_updates(trace, compilation.updates[1], compilation.storages(), backward=backward)


def _runs_the_program(compilation: compilations.Compilation, trace: Any) -> bool:
    assert compilation.updates is not None
    return (compilations.checked_kind(trace) and not compilations.is_backward(trace)
            and (trace.names is compilation.updates[0] or side_of(compilation, trace) == "forward"))


def _program_update_modes(
    compilation: compilations.Compilation, trace: Any, backward: Any = None
) -> list[Violation]:
    """The program's updates of its inputs made with grad disabled that ``trace`` (a form of the program's
    computation), or its ``backward``, writes with grad enabled into an input that is a leaf requiring grad."""
    if not any(modes == {False} for modes in compilation.update_modes.values()) or compilation.updates is None:
        return []
    if not _runs_the_program(compilation, trace):
        return []
    return wrong_update_modes(trace, compilation.update_modes, compilation.leaf_inputs(), backward=backward)


def _program_update_values(
    compilation: compilations.Compilation, trace: Any, function: Callable[..., Any] | None = None
) -> list[Violation]:
    """The program's updated inputs that ``trace`` (a form of the program's computation, run as ``function`` or
    made executable) leaves with other values than the interpretation's trace, replayed on random inputs; not
    judged when inputs share storage at the call (the program was compiled for that)."""
    if compilation.program is None or compilation.updates is None or not compilation.updates[1] \
            or switched_off("update-wrong-value") or not _runs_the_program(compilation, trace):
        return []  # (switched off: the replay, which runs the program and its executors again, does not run)
    storages = compilation.storages() or {}
    arguments = {getattr(a, "name", None) for a in getattr(compilation.program, "args", None) or ()}
    shared = [key.storage for name, key in storages.items() if name in arguments and isinstance(key, Region)]
    if len(shared) != len(set(shared)) or trace is compilation.program:
        return []
    return wrong_update_values(compilation.program, trace, function, compilation.updates[1])


def _program_output_values(
    compilation: compilations.Compilation, trace: Any, function: Callable[..., Any] | None = None
) -> list[Violation]:
    """The tensors the program returns that ``trace`` (a form of the program's computation, run as ``function`` or
    made executable) returns otherwise than the interpretation's trace, both run on copies of the call's own inputs
    (else random ones)."""
    if compilation.program is None or compilation.updates is None \
            or trace is compilation.program or all(map(switched_off, _REPLAYED)) or not _runs_the_program(compilation, trace):
        return []
    return wrong_outputs(compilation.program, trace, function, call_values(compilation))


#: The kinds the replay of what the program returns reports.
_REPLAYED: Final = ("output-wrong-value", "output-aliases-input", "metadata-mismatch")
#: For the checks of forms of the program, the check of one form (no backward): its culprit is the first form
#: that has the violation.
_forms_check: Final = {
    "update-dropped": _program_updates_dropped,
    "update-grad-mode": _program_update_modes,
    "update-wrong-value": _program_update_values,
    "output-wrong-value": _program_output_values,
}


def first_form(compilation: compilations.Compilation, violation: Violation) -> compilations.Step | None:
    """The first step whose form of the program has ``violation`` (violation path only), for the checks here."""
    check = _forms_check.get(violation.kind)
    if check is None:
        return None
    for step in compilation.steps:
        trace = step.ref()
        if trace is not None and any(v.name == violation.name for v in check(compilation, trace)):
            return step
    return None


def side_of(compilation: compilations.Compilation, trace: TraceCtx) -> str | None:
    """Which side of the compilation's forward/backward pair ``trace`` is a later form of (sharing its names set),
    if any: a fusion region's trace or another compilation's is neither."""
    fw, bw = compilation.forward, compilation.backward
    if fw is None:  # (a split with no backward, under no_grad, still makes the forward)
        return None
    if trace.names is not fw.names and (bw is None or trace.names is not bw.names) and trace is not fw and trace is not bw:
        return None
    return "backward" if compilations.is_backward(trace) else "forward"
