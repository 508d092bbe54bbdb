"""Per-trace fingerprints of what ``thunder.jit`` built, for comparing ranks.

Until the audit records every pass run (``pass_runs``), ``safe-tracectx run``
remembers the functions the program jitted (``JitRecorder`` wraps ``thunder.jit``
while the program runs) and, at the end, fingerprints the traces Thunder keeps
(``thunder.last_traces``, ``thunder.last_backward_traces``): one entry per trace,
shaped like a pass run, under the data file's ``"jit_traces"`` key.

A fingerprint lists, per top-level bound symbol, ``[symbol name, [output proxy
names], [shapes or None], [dtypes or None]]``.
"""

from __future__ import annotations

import re
from types import TracebackType
from typing import Any

__all__ = ["JitRecorder", "jit_trace_runs", "trace_fingerprint"]

_TOOK = re.compile(r"\s*\(took (\d+) milliseconds\)\s*$")
_MAX_FUNCTIONS = 64


def _shape(proxy: Any) -> list[Any] | None:
    shape = getattr(proxy, "shape", None)
    if shape is None:
        return None
    return [dim if isinstance(dim, int) else str(dim) for dim in shape]


def _dtype(proxy: Any) -> str | None:
    dtype = getattr(proxy, "dtype", None)
    return None if dtype is None else str(dtype)


def trace_fingerprint(trace: Any) -> list[list[Any]]:
    """``[name, [outputs], [shapes], [dtypes]]`` per top-level bound symbol of ``trace``, in order."""
    rows: list[list[Any]] = []
    for bsym in trace.bound_symbols:
        outs = list(bsym.flat_proxy_outs)
        rows.append([bsym.sym.name, [p.name for p in outs], [_shape(p) for p in outs], [_dtype(p) for p in outs]])
    return rows


def _provenance(trace: Any) -> tuple[str, float]:
    provenance = trace.get_provenance() if hasattr(trace, "get_provenance") else None
    text = "initial trace" if provenance is None else str(getattr(provenance, "pss", provenance))
    took = _TOOK.search(text)
    return _TOOK.sub("", text).strip() or "(unnamed pass)", (int(took.group(1)) / 1000 if took else 0.0)


def _runs_of(traces: list[Any], role: str, function: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    previous: set[str] = set()
    previous_print: list[list[Any]] | None = None
    for trace in traces:
        label, seconds = _provenance(trace)
        fingerprint = trace_fingerprint(trace)
        names = {name for row in fingerprint for name in row[1]}
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
            }
        )
        previous, previous_print = names, fingerprint
    return runs


def jit_trace_runs(functions: list[Any]) -> list[dict[str, Any]]:
    """Pass-run-shaped entries for the traces Thunder kept of each jitted function (forward, then backward)."""
    import thunder

    runs: list[dict[str, Any]] = []
    for function in functions:
        name = getattr(function, "__qualname__", None) or type(function).__qualname__
        for role, getter in (("forward", thunder.last_traces), ("backward", thunder.last_backward_traces)):
            try:
                traces = list(getter(function) or [])
                runs += _runs_of([t for t in traces if hasattr(t, "bound_symbols")], role, name)
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

    def runs(self) -> list[dict[str, Any]]:
        """``jit_trace_runs`` of the recorded functions."""
        return jit_trace_runs(self.functions)
