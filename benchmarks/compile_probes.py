"""Two cheap probes kept running during the compile benchmark: the garbage collector's time and the pass hooks' own time.

- ``gc_seconds()``: process CPU seconds spent in collections so far (a
  ``gc.callbacks`` entry, about a microsecond per collection);
- ``pass_timer()``: while installed, times each hooked pass's wrapper minus
  the pass itself (its checks, and with the audit its fingerprints), the
  collector's time inside it left out; 4 clock reads per pass run::

    >>> with pass_timer() as own:
    ...     pass
    >>> own
    {'calls': 0, 'seconds': 0.0}
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

from safe_tracectx.hooks import passes, runs

__all__ = ["gc_seconds", "pass_timer"]

_gc: Final = {"total": 0.0, "started": 0.0}


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _gc["started"] = time.process_time()
    else:
        _gc["total"] += time.process_time() - _gc["started"]


gc.callbacks.append(_on_gc)


def gc_seconds() -> float:
    """CPU seconds the garbage collector has run since this module was imported."""
    return _gc["total"]


def _timed_run_pass(own: dict[str, Any]) -> Callable[..., Any]:
    run_pass = runs.run_pass
    clock = time.process_time

    def timed(label: str, qualname: str, kind: str, original: Callable[..., Any], *rest: Any, **options: Any) -> Any:
        inside = 0.0

        def timed_original(*args: Any, **kwargs: Any) -> Any:
            nonlocal inside
            started, collected = clock(), _gc["total"]
            try:
                return original(*args, **kwargs)
            finally:
                inside += clock() - started - (_gc["total"] - collected)

        started, collected = clock(), _gc["total"]
        try:
            return run_pass(label, qualname, kind, timed_original, *rest, **options)
        finally:
            own["calls"] += 1
            own["seconds"] += clock() - started - (_gc["total"] - collected) - inside

    return timed


@contextlib.contextmanager
def pass_timer() -> Iterator[dict[str, Any]]:
    """Time the pass hooks' own work (``calls``, ``seconds``) in the block; put ``run_pass`` back after."""
    own: dict[str, Any] = {"calls": 0, "seconds": 0.0}
    original = getattr(passes, "run_pass")
    setattr(passes, "run_pass", _timed_run_pass(own))  # what every pass wrapper calls
    try:
        yield own
    finally:
        setattr(passes, "run_pass", original)
