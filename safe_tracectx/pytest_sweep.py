"""pytest's face of ``safe-tracectx sweep``: ``--safe-tracectx-sweep`` sweeps each selected test's call.

    pytest tests/test_model.py::test_step --safe-tracectx-sweep
    pytest tests/test_model.py::test_step --safe-tracectx-sweep --safe-tracectx-sweep-max 50

The test runs once as usual; then its call (fixtures set up once, reused) is
re-run in a forked child per injection point. A point that leaves a trace
active, a set open (named by its line), a masked exception, a thread dead of the
fault or a changed input trace fails the test with the sweep's report. Importing this module imports neither torch nor Thunder.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

__all__ = ["SweepFailed", "add_options", "pytest_runtest_call"]


class SweepFailed(AssertionError):
    """A fault injected into the test's call broke a trace-context invariant."""


def add_options(group: pytest.OptionGroup) -> None:
    """The sweep's options, in the plugin's group."""
    group.addoption(
        "--safe-tracectx-sweep",
        action="store_true",
        default=False,
        help="re-run each test's call failing each set_tracectx, proxy creation and pass entry in turn",
    )
    group.addoption("--safe-tracectx-sweep-max", type=int, default=None, metavar="N", help="a seeded sample of N points")
    group.addoption("--safe-tracectx-sweep-seed", type=int, default=0, metavar="SEED", help="the sample's seed")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    __tracebackhide__ = True
    result = yield
    if item.config.getoption("--safe-tracectx-sweep"):
        from safe_tracectx.cli.sweep import render
        from safe_tracectx.sweep import sweep

        found = sweep(
            item.runtest,
            max_runs=item.config.getoption("--safe-tracectx-sweep-max"),
            seed=item.config.getoption("--safe-tracectx-sweep-seed"),
            join_threads=False,  # the call is not the program: a fixture's teardown may stop the threads it started
        )
        item.user_properties.append(("safe_tracectx_sweep", found.to_dict()))
        if found.findings:
            raise SweepFailed(render(found, item.nodeid))
    return result
