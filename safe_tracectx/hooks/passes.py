"""The rematerialization passes that create or rename proxies, run under audit.

Each pass that exists in the installed Thunder version is wrapped: its proxy
creations are tagged with the pass, and each trace it returns is validated
with :func:`safe_tracectx.checks.check_trace` (a (forward, backward) pair also
with :func:`~safe_tracectx.checks.check_forward_backward`), per ``Policy.name_clash``
(``Policy.leaked_proxy`` for traceless proxies).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from thunder.core.trace import TraceCtx

from safe_tracectx import events
from safe_tracectx.actions import act
from safe_tracectx.callsite import find_call_site
from safe_tracectx.checks import Violation, check_forward_backward, check_trace
from safe_tracectx.pass_catalog import PASSES, PassSpec, phase_label

__all__ = ["PASSES", "PassSpec", "phase_label", "wrap_pass"]


def _violations(spec: PassSpec, result: Any) -> tuple[list[TraceCtx], list[Violation]]:
    traces = [t for t in (result if isinstance(result, tuple) else (result,)) if isinstance(t, TraceCtx)]
    violations: list[Violation] = []
    for trace in traces:
        violations.extend(check_trace(trace))
    if spec.returns_pair and len(traces) == 2:
        violations.extend(check_forward_backward(traces[0], traces[1]))
    return traces, violations


def wrap_pass(spec: PassSpec, original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` run with the pass recorded as the current pass, then its output validated."""

    @functools.wraps(original)
    def audited_pass(*args: Any, **kwargs: Any) -> Any:
        token = events.current_pass.set(spec.label)
        try:
            before = [tuple(map(id, a.bound_symbols)) for a in args if isinstance(a, TraceCtx)]
            started = time.perf_counter()
            result = original(*args, **kwargs)
            elapsed = time.perf_counter() - started
            traces, violations = _violations(spec, result)
            site = find_call_site()
            if events.sinks:
                events.emit(
                    "pass_run",
                    trace=traces[-1] if traces else None,
                    site=site,
                    qualname=spec.qualname,
                    seconds=elapsed,
                    traces=len(traces),
                    changed=[tuple(map(id, t.bound_symbols)) for t in traces] != before,
                    violations=[str(v) for v in violations],
                )
            for violation in violations:
                act(violation.to_error(site, context=f"{spec.label} ({spec.qualname}) produced a trace where "))
        finally:
            events.current_pass.reset(token)
        return result

    audited_pass.__safe_tracectx_pass__ = spec  # type: ignore[attr-defined]
    return audited_pass
