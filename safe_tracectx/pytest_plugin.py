"""pytest plugin: audit every test's trace contexts (inactive unless asked).

    pytest --safe-tracectx=strict      # a violation fails the test that caused it
    pytest --safe-tracectx=lenient     # the lenient policy (warnings)
    pytest --safe-tracectx=audit       # nothing fails; everything is reported
    pytest --safe-tracectx=audit --safe-tracectx-report=audit.json

The ``trace_audit`` fixture yields the test's :class:`~safe_tracectx.audit.AuditLog`
(it installs the hooks for the test when the plugin is inactive). Works with
pytest-xdist: each worker audits its tests and the controller merges the reports.
Importing this module imports neither torch nor Thunder.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

if TYPE_CHECKING:
    from safe_tracectx.audit import AuditLog

MODES: Final = ("strict", "lenient", "audit")
REPORT_SCHEMA: Final = "safe-tracectx/pytest"
REPORT_VERSION: Final = 1
_STATE: Final = pytest.StashKey["_PluginState"]()
_WORKER_KEY: Final = "safe_tracectx"


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


class _PluginState:
    """Per-session state: the mode, the running test's log, and the summaries of finished tests."""

    def __init__(self, mode: str, report_path: str | None) -> None:
        self.mode = mode
        self.report_path = report_path
        self.current: AuditLog | None = None
        self.tests: dict[str, dict[str, Any]] = {}

    def policy(self) -> Any:
        from safe_tracectx.policy import LENIENT, STRICT, Policy

        if self.mode == "strict":
            return STRICT
        if self.mode == "lenient":
            return LENIENT
        # audit: every violation is recorded (act() emits before acting) and nothing changes outcomes
        return Policy(missing_trace="ignore", unbalanced="ignore", name_clash="ignore", leaked_proxy="ignore", read_only="ignore")


def _summary(log: AuditLog) -> dict[str, Any]:
    document = log.to_dict()
    return {key: document[key] for key in ("counts", "passes", "violations", "leaked_sets")}


def pytest_configure(config: pytest.Config) -> None:
    mode = config.getoption("--safe-tracectx")
    if mode is None:
        return
    state = _PluginState(mode, config.getoption("--safe-tracectx-report"))
    config.stash[_STATE] = state
    if not hasattr(config, "workerinput"):  # the xdist controller runs no test
        if getattr(config.option, "numprocesses", None):
            return
    from safe_tracectx.hooks import install

    install(state.policy())


def pytest_unconfigure(config: pytest.Config) -> None:
    if _STATE in config.stash:
        from safe_tracectx.hooks import uninstall

        uninstall()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    state = item.config.stash.get(_STATE, None)
    if state is None:
        return (yield)
    from safe_tracectx.audit import AuditLog

    state.current = AuditLog(max_events=0)  # counters only: bounded memory over a whole suite
    state.current.start()
    try:
        return (yield)
    finally:
        state.current.stop()
        state.tests[item.nodeid] = _summary(state.current)
        state.current = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    state = item.config.stash.get(_STATE, None)
    result = yield
    if state is not None:
        _close_leaked_sets(item, state)
    return result


def _close_leaked_sets(item: pytest.Item, state: _PluginState) -> None:
    """A set_tracectx made by this test and still open after its body leaked.

    In strict mode the test fails with the violation and the leaked sets are closed,
    so the next test starts clean; the other modes only report (outcomes unchanged).
    """
    log = state.current
    if log is None or not log.leaked_sets:
        return
    if state.mode != "strict":
        return
    from safe_tracectx.errors import UnbalancedContextError
    from safe_tracectx.hooks import close_raw_blocks
    from safe_tracectx.policy import act

    log.stop()  # the log keeps showing the leak; closing it here is the plugin's clean-up
    try:
        leaked = close_raw_blocks({event.detail["block"] for event in log.leaked_sets})
    finally:
        log.start()
    error = UnbalancedContextError(
        f"the test ended with {len(leaked)} set_tracectx() never reset: {'; '.join(b._label() for b in leaked)}",
        fix="reset every set_tracectx() in a `finally` (or use `with tracectx(trace):`)",
        site=leaked[0].site if leaked else None,
    )
    act(error)  # recorded as the test's violation, then raised: the test fails with this message


@pytest.fixture
def trace_audit(request: pytest.FixtureRequest) -> Iterator[AuditLog]:
    """The AuditLog of this test (installs the hooks for the test if the plugin is inactive)."""
    state = request.config.stash.get(_STATE, None)
    if state is not None and state.current is not None:
        from safe_tracectx.audit import AuditLog

        log = AuditLog()  # the fixture's own log keeps events; the plugin's keeps counters
        log.start()
        try:
            yield log
        finally:
            log.stop()
        return
    from safe_tracectx.audit import audit

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


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None:
        return
    if hasattr(config, "workerinput"):
        return
    _write_report(state)
    write = terminalreporter.write_line
    terminalreporter.section("safe-tracectx")
    flagged = {nodeid: t for nodeid, t in sorted(state.tests.items()) if t["violations"] or t["leaked_sets"]}
    proxies = sum(t["counts"].get("proxy_created", 0) for t in state.tests.values())
    sets = sum(t["counts"].get("trace_set", 0) for t in state.tests.values())
    write(
        f"mode {state.mode}: {len(state.tests)} tests audited, {proxies} proxies created, {sets} trace sets; "
        f"{len(flagged)} tests with violations"
    )
    for nodeid, test in flagged.items():
        write(nodeid)
        for violation in test["violations"]:
            site = violation["site"]
            where = f" at {site['file']}:{site['line']}" if site else ""
            first_line = violation["message"].splitlines()[0]
            write(f"    {violation['error']} [{violation['action']}] {first_line}{where}")
        for leaked in test["leaked_sets"]:
            site = leaked["site"]
            where = f" at {site['file']}:{site['line']}" if site else ""
            write(f"    never reset: set_tracectx({leaked['trace']}){where}")
    if state.report_path:
        write(f"report written to {state.report_path}")
