"""``safe-tracectx sweep``: run a program once per injection point with a fault there, and report what leaked.

- ``runner``: the counting run, the faulted runs and their findings;
- ``findings``: what one run found, in fields (leaked, left active, masked ...), and the sentences made from them;
- ``run_outcome``: how one faulted run ended;
- ``text``: the sweep's text report;
- ``pytest_runs``: the sweep of a pytest node id, each run a fresh pytest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from safe_tracectx._support.moved import moved_names

#: What the module ``safe_tracectx.sweep`` held before it became this package, and each name's module now:
#: re-exported for the 0.2 release (with a DeprecationWarning), then removed.
_MOVED: dict[str, str] = {
    **dict.fromkeys(
        [
            "SWEEP_POLICY", "Runs", "count_points", "forked_runs", "other_path", "result_json", "run_once", "run_point",
            "sweep", "sweep_runs",
        ],
        "safe_tracectx.sweep.runner",
    ),
    **dict.fromkeys(["Finding", "SweepResult"], "safe_tracectx.sweep.findings"),
}

#: The old module's ``__all__``: ``from ... import *`` still brings them (each with its warning).
__all__ = list(_MOVED)

if not TYPE_CHECKING:
    __getattr__ = moved_names(__name__, _MOVED)
