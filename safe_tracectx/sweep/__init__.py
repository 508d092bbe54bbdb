"""``safe-tracectx sweep``: run a program once per injection point with a fault there, and report what leaked.

- ``runner``: the counting run, the faulted runs and their findings;
- ``run_outcome``: how one faulted run ended;
- ``pytest_runs``: the sweep of a pytest node id, each run a fresh pytest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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

if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        module = _MOVED.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib
        import warnings

        warnings.warn(
            f"{__name__}.{name} moved to {module}.{name}; import it from there (from {module} import {name})",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(module), name)
