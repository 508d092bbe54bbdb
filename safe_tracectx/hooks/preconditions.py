"""What a pass needs of the traces it is given, checked when it starts (``PassSpec.preconditions``).

Rematerialization takes a name to mean one value across fusion regions
(``unique-region-names``); the passes that differentiate a trace must take every
backward of the program's own, a custom ``torch.autograd.Function``'s
(``custom-backwards``), and no alias whose gradient would skip an in-place update
(``updates-differentiated``). A broken precondition is reported before the pass runs,
charged to what made its input or to what the violation names::

    >>> from thunder.core.trace import TraceCtx
    >>> sorted(PRECONDITIONS)
    ['custom-backwards', 'unique-region-names', 'updates-differentiated']
    >>> PRECONDITIONS["custom-backwards"](TraceCtx())  # outside a compilation: no executors to ask
    []
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

from thunder.core.trace import TraceCtx

from safe_tracectx._support.callsite import CallSite, find_call_site
from safe_tracectx.hooks import compilation as compilations
from safe_tracectx.hooks import reporting
from safe_tracectx.hooks.reporting import internal_error, report_all, run_error
from safe_tracectx.traces.checks import Violation, region_name_clashes
from safe_tracectx.traces.grad_rules import ignored_custom_backwards
from safe_tracectx.traces.skipped_updates import skipped_updates

__all__ = ["PRECONDITIONS", "check_preconditions"]


class PassRun(reporting.PassRun, Protocol):
    """What this reads of a pass run (``safe_tracectx.hooks.runs.PassRun``, which imports this module)."""

    @property
    def preconditions(self) -> tuple[str, ...]: ...

    @property
    def defined_at(self) -> CallSite | None: ...


def _custom_backwards(trace: TraceCtx) -> list[Violation]:
    """The custom backwards the grad rule lookup would not take, with the executors of this compilation."""
    try:
        from thunder.core.compile_data import get_compile_data
    except ImportError:
        return []
    executors = getattr(get_compile_data(), "executors_list", None)
    return ignored_custom_backwards(trace, executors=tuple(executors)) if executors else []


def _updates_differentiated(trace: TraceCtx) -> list[Violation]:
    """The aliases whose gradient would skip an in-place update, in the grad mode of the jit call being compiled."""
    compilation = compilations.current()
    if compilation is None or compilation.differentiates is not trace or not compilation.judges_gradients():
        return []  # only the program the split differentiates (a pass's own traces are not the user's), if eager takes it
    return skipped_updates(trace, grad_enabled=compilation.grad_enabled)


#: Each precondition a pass can have (``pass_catalog.Precondition``) and the check that finds it broken.
PRECONDITIONS: Final[dict[str, Callable[[TraceCtx], list[Violation]]]] = {
    "unique-region-names": region_name_clashes,
    "custom-backwards": _custom_backwards,
    "updates-differentiated": _updates_differentiated,
}


def check_preconditions(run: PassRun) -> None:
    """Check what ``run``'s pass needs of its inputs, before it runs; report each violation once per compilation."""
    try:
        found = [(v, t) for t in run.inputs for check in run.preconditions for v in PRECONDITIONS[check](t)]
    except Exception as error:  # noqa: BLE001 - a bug of ours never stops the user's program
        internal_error(f"the input of {run.label}", error)
        return
    if not found:
        return
    site = run.defined_at or find_call_site()
    errors = []
    for violation, trace in found:
        if run.compilation is not None:
            if (violation.kind, violation.name) in run.compilation.reported:
                continue
            run.compilation.reported.add((violation.kind, violation.name))
        errors.append(run_error(run, violation, trace, site, verb="is given"))
    report_all(errors)
