"""Where the time of ``with tracectx(trace):`` goes, against the floors below it.

Each step adds one thing to the one before it, all timed the same way as the
enter/exit benchmark (``timeit``, the statement in its loop, CPU time, best of
3 loops of 10,000, interleaved rounds); run ``python benchmarks/enter_exit_floor.py``::

    bare set/reset            Thunder's set_tracectx + reset_tracectx
    class, one variable       a class-based manager with __slots__ that sets and resets Thunder's variable
    class, owner tracked      ... and records which block set it (a second ContextVar), checked at exit
    safe tracectx             the real one: its type check, re-entry guard, read-only option, fallbacks
    thunder tracectx          Thunder's @contextmanager
"""

from __future__ import annotations

import os
import warnings
from contextvars import ContextVar
from typing import Any

os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from thunder.core.trace import TraceCtx, _tracectx, reset_tracectx, set_tracectx
    from thunder.core.trace import tracectx as thunder_tracectx

from bench_stats import bootstrap_mean, cpu_timeit, ratios, run_rounds

from safe_tracectx import tracectx

_set, _reset, _get = _tracectx.set, _tracectx.reset, _tracectx.get
_OWNER: ContextVar[Any] = ContextVar("floor.owner", default=None)
_owner_set, _owner_reset, _owner_get = _OWNER.set, _OWNER.reset, _OWNER.get


class OneVariable:
    """The least a class-based manager can do: set Thunder's variable, reset it."""

    __slots__ = ("_trace", "_token")

    def __init__(self, trace: TraceCtx) -> None:
        self._trace = trace

    def __enter__(self) -> TraceCtx:
        self._token = _set(self._trace)
        return self._trace

    def __exit__(self, *exc: object) -> None:
        _reset(self._token)


class OwnerTracked:
    """... and know at exit whether this block is on top in this Context (what nesting checks need)."""

    __slots__ = ("_trace", "_token", "_owner_token")

    def __init__(self, trace: TraceCtx) -> None:
        self._trace = trace

    def __enter__(self) -> TraceCtx:
        self._token = _set(self._trace)
        self._owner_token = _owner_set(self)
        return self._trace

    def __exit__(self, *exc: object) -> None:
        if _owner_get() is self and _get(None) is self._trace:
            _reset(self._token)
            _owner_reset(self._owner_token)
            return
        raise RuntimeError("not on top")


TRACE = TraceCtx()
NAMESPACE: dict[str, Any] = {
    "TRACE": TRACE, "set_tracectx": set_tracectx, "reset_tracectx": reset_tracectx, "OneVariable": OneVariable,
    "OwnerTracked": OwnerTracked, "tracectx": tracectx, "thunder_tracectx": thunder_tracectx,
}
STATEMENTS = {
    "bare set/reset": "token = set_tracectx(TRACE); reset_tracectx(token)",
    "class, one variable": "with OneVariable(TRACE): pass",
    "class, owner tracked": "with OwnerTracked(TRACE): pass",
    "safe tracectx": "with tracectx(TRACE): pass",
    "thunder tracectx": "with thunder_tracectx(TRACE): pass",
}


def main(rounds: int = 30) -> None:
    measure = {name: (lambda s=stmt: cpu_timeit(s, NAMESPACE, number=10_000)) for name, stmt in STATEMENTS.items()}
    samples, _ = run_rounds(measure, rounds=rounds)
    print(f"| step | µs per enter/exit (median) | × bare set/reset [95%] | × Thunder's tracectx [95%] |  ({rounds} rounds)")
    print("|---|---|---|---|")
    for name in STATEMENTS:
        times = sorted(samples[name])
        bare = bootstrap_mean(ratios(samples, name, "bare set/reset"))
        thunder = bootstrap_mean(ratios(samples, name, "thunder tracectx"))
        print(
            f"| {name} | {times[len(times) // 2] * 1e6:.3f} | {bare.value:.2f} [{bare.low:.2f}–{bare.high:.2f}] "
            f"| {thunder.value:.3f} [{thunder.low:.3f}–{thunder.high:.3f}] |"
        )


if __name__ == "__main__":
    main()
