"""pytest plugin: audit every test's trace contexts (inactive unless asked).

    pytest --safe-tracectx=strict      # a violation fails the test that caused it
    pytest --safe-tracectx=lenient     # the lenient policy: violations warn
    pytest --safe-tracectx=audit       # nothing fails; everything is reported
    pytest --safe-tracectx=audit --safe-tracectx-report=audit.json

or ``safe_tracectx = strict`` in ``[tool.pytest.ini_options]`` (the command line
wins). After each test's teardown (so a balanced fixture is clean), a
``set_tracectx`` the test made and never reset is charged to that test per the
mode (strict: an error at teardown; lenient: a warning; audit: reported) and
closed, whatever the test's outcome. The ``trace_audit`` fixture yields the
test's :class:`~safe_tracectx.auditlog.log.AuditLog`. Works with pytest-xdist.
Importing this module imports neither torch nor Thunder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from safe_tracectx.auditlog.documents import PYTEST_SCHEMA, PYTEST_VERSION
from safe_tracectx.policy import PRESETS

if TYPE_CHECKING:
    from safe_tracectx.auditlog.log import AuditLog
    from safe_tracectx.hooks import Installation
    from safe_tracectx.hooks.leftovers import Leftovers
    from safe_tracectx.policy import Policy

MODES: Final = tuple(PRESETS)  # strict, lenient, audit
_STATE: Final = pytest.StashKey["_PluginState"]()
_WORKER_KEY: Final = "safe_tracectx"
_OWNER: Final = "the pytest plugin"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("safe-tracectx", "Thunder trace-context safety")
    group.addoption(
        "--safe-tracectx",
        choices=MODES,
        default=None,
        help="audit trace contexts: strict fails the test on a violation, lenient warns, audit only reports",
    )
    group.addoption(
        "--safe-tracectx-report", metavar="FILE", default=None, help="write the per-test audit summary as JSON"
    )
    group.addoption(
        "--safe-tracectx-check",
        action="append",
        default=[],
        metavar="CHECK=ACTION",
        help="one trace check's own action, e.g. use-before-definition=warn (repeatable)",
    )
    parser.addini("safe_tracectx", "the safe-tracectx mode (strict, lenient or audit) when no flag is given")
    from safe_tracectx.sweep import pytest_runs as pytest_sweep

    pytest_sweep.add_options(group)


class _PluginState:
    """Per-session state: the mode, the session's installation, the running test's log, finished tests."""

    def __init__(self, mode: str, report_path: str | None, policy: Policy) -> None:
        self.mode = mode
        self._policy = policy
        self.report_path = report_path
        self.installation: Installation | None = None
        self.current: AuditLog | None = None
        self.leftovers: Leftovers | None = None
        self.tests: dict[str, dict[str, Any]] = {}

    def policy(self) -> Policy:
        return self._policy


def _mode(config: pytest.Config) -> str | None:
    mode: str | None = config.getoption("--safe-tracectx")
    if mode is None:
        mode = str(config.getini("safe_tracectx") or "").strip().lower() or None
        if mode is not None and mode not in MODES:
            raise pytest.UsageError(f"ini option safe_tracectx = {mode!r}: use one of {', '.join(MODES)}")
    return mode


def _summary(log: AuditLog, leftovers: Leftovers | None) -> dict[str, Any]:
    document = log.to_dict(events=False)
    summary = {key: document[key] for key in ("counts", "passes", "violations", "leaked_sets", "traceless")}
    if leftovers is not None:  # a wider-scoped fixture's open set is not the test's
        owned = {id(event) for event in log.leaked_sets if event.detail["block"] in leftovers.known}
        summary["leaked_sets"] = [
            entry for entry, event in zip(document["leaked_sets"], log.leaked_sets) if id(event) not in owned
        ]
    return summary


@pytest.hookimpl(tryfirst=True)  # outermost: a conftest's own install()/uninstall() nests inside
def pytest_configure(config: pytest.Config) -> None:
    from safe_tracectx.sweep import pytest_runs as pytest_sweep
    from safe_tracectx._support.extras import MissingExtraError, require_thunder

    if config.getoption("--safe-tracectx-sweep", False) or pytest_sweep.is_a_run(config):
        try:
            require_thunder("--safe-tracectx-sweep")
        except MissingExtraError as error:
            raise pytest.UsageError(str(error)) from None
        config.pluginmanager.register(pytest_sweep, "safe-tracectx-sweep")
    mode = _mode(config)
    if mode is None:
        if config.getoption("--safe-tracectx-check", None):
            raise pytest.UsageError(
                "--safe-tracectx-check sets a check's action within a mode: give --safe-tracectx=strict|lenient|audit "
                "too (or safe_tracectx = \"strict\" in the ini file)"
            )
        return
    try:
        require_thunder(f"--safe-tracectx={mode}")
    except MissingExtraError as error:
        raise pytest.UsageError(str(error)) from None
    report_path = config.getoption("--safe-tracectx-report")
    if report_path is not None and not hasattr(config, "workerinput"):
        from safe_tracectx._support.writable import check_writable

        problem = check_writable(report_path)
        if problem is not None:
            raise pytest.UsageError(f"--safe-tracectx-report: {problem}")
    from safe_tracectx.policy import check_overrides

    try:
        overrides = check_overrides(config.getoption("--safe-tracectx-check") or (), option="--safe-tracectx-check")
        policy = PRESETS[mode].replace(**overrides)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    state = _PluginState(mode, report_path, policy)
    config.stash[_STATE] = state
    if not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None):
        return  # the xdist controller runs no test
    from safe_tracectx.hooks import begin

    state.installation = begin(_OWNER, state.policy())


@pytest.hookimpl(trylast=True)
def _left_running(state: _PluginState) -> list[Installation]:
    """Installations begun inside the session's and never ended outside any test (an ``install()`` at collection)."""
    from safe_tracectx.hooks.installer import running_installations

    running = list(running_installations())
    if state.installation is None or state.installation not in running:
        return []
    return running[running.index(state.installation) + 1:]


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None and state.installation is not None and state.installation.active:
        for leftover in reversed(_left_running(state)):  # said in the summary; ended so that the session's can end
            leftover.end()
        state.installation.end()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    state = item.config.stash.get(_STATE, None)
    if state is None or state.installation is None:
        return (yield)
    from safe_tracectx.auditlog.log import AuditLog

    from safe_tracectx.hooks.leftovers import Leftovers

    state.current = AuditLog(max_events=0)  # counters only: bounded memory over a whole suite
    try:
        with state.current:
            state.leftovers = Leftovers(state.current)
            return (yield)
    finally:
        state.tests[item.nodeid] = _summary(state.current, state.leftovers)
        state.current = None
        state.leftovers = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    __tracebackhide__ = True
    state = item.config.stash.get(_STATE, None)
    try:
        return (yield)  # the fixtures' teardown first: a fixture that holds a trace context is balanced by then
    finally:
        if state is not None and state.current is not None:
            _check_after_teardown(state)


def _check_after_teardown(state: _PluginState) -> None:
    """Charge the test with what it left behind, and clean it up whatever the test's outcome."""
    __tracebackhide__ = True
    from safe_tracectx.policy.actions import act

    assert state.leftovers is not None
    for error in state.leftovers.check():
        act(error, policy=state.policy())  # recorded as the test's violation; strict raises: an error at teardown


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A leak charged at teardown is a failure even in a test marked xfail (the leak is not what was expected)."""
    report = yield
    if call.when == "teardown" and call.excinfo is not None and getattr(report, "wasxfail", None) is not None:
        from safe_tracectx.errors import TraceContextError

        if call.excinfo.errisinstance(TraceContextError):
            report.outcome = "failed"
            del report.wasxfail
    return report


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest) -> Generator[None, object, object]:
    """A fixture of a wider scope than the test may hold a trace context across tests: it is not the test's."""
    state = request.config.stash.get(_STATE, None)
    if state is None or state.leftovers is None or fixturedef.scope == "function":
        return (yield)
    with state.leftovers.exempting():
        return (yield)


@pytest.fixture
def trace_audit(request: pytest.FixtureRequest) -> Iterator[AuditLog]:
    """The AuditLog of this test (installs the hooks for the test if the plugin is inactive)."""
    state = request.config.stash.get(_STATE, None)
    if state is not None and state.current is not None:
        from safe_tracectx.auditlog.log import AuditLog

        with AuditLog() as log:  # the fixture's own log keeps events; the plugin's keeps counters
            yield log
        return
    from safe_tracectx.hooks import audit

    with audit() as log:
        yield log


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(_STATE, None)
    workeroutput = getattr(session.config, "workeroutput", None)
    if state is not None and workeroutput is not None:
        workeroutput[_WORKER_KEY] = json.dumps(state.tests)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: without xdist, pytest must not refuse the plugin
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist controller: merge a worker's per-test summaries."""
    state = node.config.stash.get(_STATE, None)
    output = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if state is not None and output:
        state.tests.update(json.loads(output))


def _write_report(state: _PluginState) -> None:
    if state.report_path is None:
        return
    document = {
        "schema": PYTEST_SCHEMA,
        "version": PYTEST_VERSION,
        "mode": state.mode,
        "tests": dict(sorted(state.tests.items())),
    }
    Path(state.report_path).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or hasattr(config, "workerinput"):
        return
    _write_report(state)
    write = terminalreporter.write_line
    terminalreporter.section("safe-tracectx")
    from safe_tracectx.report.pytest_document import totals_line

    flagged = {nodeid: t for nodeid, t in sorted(state.tests.items()) if t["violations"] or t["leaked_sets"]}
    write(totals_line(state.mode, state.tests.values()))
    for nodeid, test in flagged.items():
        write(nodeid)
        for violation in test["violations"]:
            site = violation["site"]
            location = f"{site['file']}:{site['line']}" if site else ""
            shown = site and f"{os.path.basename(site['file'])}:{site['line']}" in violation["message"]
            where = f" (at {location})" if location and not shown else ""
            first_line = violation["message"].splitlines()[0]
            write(f"    {violation['error']} [{violation['action']}] {first_line}{where}")
        for leaked in test["leaked_sets"]:
            site = leaked["site"]
            where = f" at {site['file']}:{site['line']}" if site else ""
            thread = "" if leaked["thread"] == "MainThread" else f"[thread {leaked['thread']}] "
            write(f"    {thread}never reset: set_tracectx({leaked['trace']}){where}")
    for leftover in _left_running(state):
        write(f"left running outside any test: {leftover!r}; end it where it begins (uninstall(), or `with "
              "installed():`); ended at the end of the session")
    if state.report_path:
        write(f"report written to {state.report_path}")
