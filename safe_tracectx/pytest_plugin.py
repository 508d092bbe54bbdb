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
test's :class:`~safe_tracectx.auditlog.AuditLog`. Works with pytest-xdist.
Importing this module imports neither torch nor Thunder.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

if TYPE_CHECKING:
    from safe_tracectx.auditlog import AuditLog
    from safe_tracectx.errors import TraceContextError
    from safe_tracectx.hooks import Installation
    from safe_tracectx.policy import Policy

MODES: Final = ("strict", "lenient", "audit")
REPORT_SCHEMA: Final = "safe-tracectx/pytest"
REPORT_VERSION: Final = 2
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
    parser.addini("safe_tracectx", "the safe-tracectx mode (strict, lenient or audit) when no flag is given")
    from safe_tracectx import pytest_sweep

    pytest_sweep.add_options(group)


class _PluginState:
    """Per-session state: the mode, the session's installation, the running test's log, finished tests."""

    def __init__(self, mode: str, report_path: str | None) -> None:
        self.mode = mode
        self.report_path = report_path
        self.installation: Installation | None = None
        self.current: AuditLog | None = None
        self.depth = 0
        self.tests: dict[str, dict[str, Any]] = {}

    def policy(self) -> Policy:
        from safe_tracectx.policy import LENIENT, STRICT, Policy

        if self.mode == "strict":
            return STRICT
        if self.mode == "lenient":
            return LENIENT
        # audit: every violation is recorded (act() records before acting) and nothing changes outcomes
        return Policy(missing_trace="ignore", unbalanced="ignore", name_clash="ignore", leaked_proxy="ignore", read_only="ignore")


def _mode(config: pytest.Config) -> str | None:
    mode: str | None = config.getoption("--safe-tracectx")
    if mode is None:
        mode = str(config.getini("safe_tracectx") or "").strip().lower() or None
        if mode is not None and mode not in MODES:
            raise pytest.UsageError(f"ini option safe_tracectx = {mode!r}: use one of {', '.join(MODES)}")
    return mode


def _summary(log: AuditLog) -> dict[str, Any]:
    document = log.to_dict(events=False)
    return {key: document[key] for key in ("counts", "passes", "violations", "leaked_sets", "traceless")}


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--safe-tracectx-sweep", False):
        from safe_tracectx import pytest_sweep

        config.pluginmanager.register(pytest_sweep, "safe-tracectx-sweep")
    mode = _mode(config)
    if mode is None:
        return
    state = _PluginState(mode, config.getoption("--safe-tracectx-report"))
    config.stash[_STATE] = state
    if not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None):
        return  # the xdist controller runs no test
    from safe_tracectx.hooks import begin, running_installations

    state.installation = begin(_OWNER, state.policy())
    state.depth = len(running_installations())


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None and state.installation is not None and state.installation.active:
        state.installation.end()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    state = item.config.stash.get(_STATE, None)
    if state is None or state.installation is None:
        return (yield)
    from safe_tracectx.auditlog import AuditLog

    state.current = AuditLog(max_events=0)  # counters only: bounded memory over a whole suite
    try:
        with state.current:
            return (yield)
    finally:
        state.tests[item.nodeid] = _summary(state.current)
        state.current = None


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
    """Charge the test with what it left behind (raw sets never reset, installations still running); clean up."""
    __tracebackhide__ = True
    from safe_tracectx.actions import act

    errors = _ended_installations(state) + _leaked_sets(state)
    for error in errors:
        act(error, policy=state.policy())  # recorded as the test's violation; strict raises: an error at teardown


def _ended_installations(state: _PluginState) -> list[TraceContextError]:
    from safe_tracectx.errors import FIXES, UnbalancedContextError
    from safe_tracectx.hooks import running_installations


    running = running_installations()
    if len(running) <= state.depth:
        return []
    left = running[state.depth]
    inner = running[state.depth :]
    assert state.current is not None
    with state.current.stopped():
        try:
            left.end()  # ends the ones inside it too
        except Exception:  # noqa: BLE001 - what it found is reported below as one violation
            pass
    return [
        UnbalancedContextError(
            f"the test left {len(inner)} installation(s) running: {', '.join(map(repr, inner))}; they were ended",
            fix=FIXES["install"],
            site=left.site,
        )
    ]


def _leaked_sets(state: _PluginState) -> list[TraceContextError]:
    from safe_tracectx.errors import FIXES, UnbalancedContextError
    from safe_tracectx.hooks import close_leaked

    log = state.current
    assert log is not None
    here = threading.current_thread().name
    alive = {thread.name for thread in threading.enumerate()}
    leaked_here = [e for e in log.leaked_sets if e.thread == here]
    # Another thread's set is charged once that thread has ended (a running one may still reset it).
    leaked_elsewhere = [e for e in log.leaked_sets if e.thread != here and e.thread not in alive]
    errors: list[TraceContextError] = []
    if leaked_here:
        with log.stopped():  # the log keeps showing the leak; closing it is the plugin's clean-up
            closed = close_leaked(block_ids={event.detail["block"] for event in leaked_here})
        sites = "; ".join(block._label() for block in closed) or "; ".join(
            f"set_tracectx({e.trace}) at {e.site}" for e in leaked_here
        )
        errors.append(
            UnbalancedContextError(
                f"the test ended with {len(leaked_here)} set_tracectx() never reset (closed now): {sites}",
                fix=FIXES["raw_set"],
                site=leaked_here[0].site,
            )
        )
    for event in leaked_elsewhere:
        errors.append(
            UnbalancedContextError(
                f"thread {event.thread!r} ended with set_tracectx({event.trace}) never reset",
                fix=FIXES["raw_set"],
                site=event.site,
            )
        )
    return errors


@pytest.fixture
def trace_audit(request: pytest.FixtureRequest) -> Iterator[AuditLog]:
    """The AuditLog of this test (installs the hooks for the test if the plugin is inactive)."""
    state = request.config.stash.get(_STATE, None)
    if state is not None and state.current is not None:
        from safe_tracectx.auditlog import AuditLog

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
        "schema": REPORT_SCHEMA,
        "version": REPORT_VERSION,
        "mode": state.mode,
        "tests": dict(sorted(state.tests.items())),
    }
    Path(state.report_path).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or hasattr(config, "workerinput"):
        return
    _write_report(state)
    write = terminalreporter.write_line
    terminalreporter.section("safe-tracectx")
    flagged = {nodeid: t for nodeid, t in sorted(state.tests.items()) if t["violations"] or t["leaked_sets"]}
    proxies = sum(t["counts"].get("proxy_created", 0) for t in state.tests.values())
    sets = sum(t["counts"].get("trace_set", 0) for t in state.tests.values())
    write(
        f"mode {state.mode}: {_plural(len(state.tests), 'test')} audited, {proxies} proxies created, "
        f"{_plural(sets, 'trace set')}; "
        f"{_plural(len(flagged), 'test')} with violations"
    )
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
    if state.report_path:
        write(f"report written to {state.report_path}")
