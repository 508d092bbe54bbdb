"""Per-trace fingerprints of what ``thunder.jit`` built, for comparing ranks.

Beside the audit's own ``pass_runs``, ``safe-tracectx run`` remembers the functions the program jitted (``JitRecorder`` wraps ``thunder.jit``
while the program runs) and, at the end, fingerprints the traces Thunder keeps
(``thunder.last_traces``, ``thunder.last_backward_traces``): one entry per trace,
shaped like a pass run, under the data file's ``"jit_traces"`` key.

A fingerprint is :func:`safe_tracectx.traces.fingerprint.fingerprint`'s: per top-level
bound symbol, ``[symbol name, [output proxy names], [shapes or None], [dtypes or None]]``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from safe_tracectx.auditlog.document_types import Fingerprint, PassRun
from safe_tracectx.traces.fingerprint import fingerprint as trace_fingerprint

__all__ = ["JitRecorder", "jit_trace_runs", "trace_fingerprint"]

_TOOK = re.compile(r"\s*\(took (\d+) milliseconds\)\s*$")
_MAX_FUNCTIONS = 64


def _provenance(trace: Any) -> tuple[str, float]:
    provenance = trace.get_provenance() if hasattr(trace, "get_provenance") else None
    text = "initial trace" if provenance is None else str(getattr(provenance, "pss", provenance))
    took = _TOOK.search(text)
    return _TOOK.sub("", text).strip() or "(unnamed pass)", (int(took.group(1)) / 1000 if took else 0.0)


def _runs_of(traces: list[Any], role: str, function: str, numbers: Iterator[int]) -> list[PassRun]:
    """Thunder keeps each trace made from the one before it: that one is its input (the first forward trace is
    made from the Python function; the first backward's input, the joint trace, is not kept)."""
    runs: list[PassRun] = []
    previous_id: int | None = None
    previous: set[str] = set()
    previous_print: Fingerprint | None = None
    for trace in traces:
        label, seconds = _provenance(trace)
        fingerprint = trace_fingerprint(trace)
        names = {name for row in fingerprint for name in row[1]}
        number = next(numbers)
        if previous_id is not None:
            given: list[int | None] = [previous_id]
        else:
            given = [] if role == "forward" else [None]
        runs.append(
            {
                "label": f"{role}: {label}",
                "kind": "thunder-trace",
                "role": role,
                "function": function,
                "seconds": seconds,
                "changed": previous_print is not None and fingerprint != previous_print,
                "proxies": len(names - previous),
                "violations": [],
                "fingerprints": [fingerprint],
                "output_ids": [number],
                "input_ids": given,
                "input_fingerprints": {},
            }
        )
        previous, previous_print, previous_id = names, fingerprint, number
    return runs


def jit_trace_runs(functions: list[Any]) -> list[PassRun]:
    """Pass-run-shaped entries for the traces Thunder kept of each jitted function (forward, then backward)."""
    import thunder

    runs: list[PassRun] = []
    numbers = itertools.count(1)
    for function in functions:
        name = getattr(function, "__qualname__", None) or type(function).__qualname__
        for role, getter in (("forward", thunder.last_traces), ("backward", thunder.last_backward_traces)):
            try:
                traces = list(getter(function) or [])
                runs += _runs_of([t for t in traces if hasattr(t, "bound_symbols")], role, name, numbers)
            except Exception:  # noqa: BLE001 - never called, not a Thunder function any more, or a trace we cannot read
                continue
    return runs


class JitRecorder:
    """``with JitRecorder() as recorder:`` ``thunder.jit`` remembers what it returns (up to 64 functions)."""

    def __init__(self) -> None:
        self.functions: list[Any] = []
        self._original: Any = None

    def __enter__(self) -> JitRecorder:
        import thunder

        original = self._original = thunder.jit
        functions = self.functions

        def jit(*args: Any, **kwargs: Any) -> Any:
            jitted = original(*args, **kwargs)
            if len(functions) < _MAX_FUNCTIONS:
                functions.append(jitted)
            return jitted

        jit.__wrapped__ = original  # type: ignore[attr-defined]
        jit.__doc__ = original.__doc__
        thunder.jit = jit
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        import thunder

        thunder.jit = self._original

    def runs(self) -> list[PassRun]:
        """``jit_trace_runs`` of the recorded functions."""
        return jit_trace_runs(self.functions)
