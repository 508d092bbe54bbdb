"""Fault-injection sweep: fail the k-th trace-context operation of a run, for every k, and check what is left.

Like SQLite's test of failing the k-th allocation: a counting run numbers the
injection points (each ``set_tracectx``, proxy creation and pass entry), then
the program runs once per point (or a seeded sample) in a forked child that
raises :class:`~safe_tracectx.hooks.faults.InjectedFault` there. After each
run: no trace is left active, no raw set is left open, the exception that
reached the top is the injected one, or wraps it (``raise ... from``), not one
raised while handling it, no thread died of it unseen by the main program, and
the passes it cut short did not change their input traces::

    >>> import thunder.core.trace as trace
    >>> from safe_tracectx.sweep import sweep
    >>> def leaky() -> None:
    ...     token = trace.set_tracectx(trace.TraceCtx())
    ...     trace.set_tracectx(trace.TraceCtx())  # a second point: the fault lands here, the reset never runs
    ...     trace.reset_tracectx(token)
    >>> result = sweep(leaky)
    >>> result.points, result.runs, [f.index for f in result.findings]
    (2, 2, [1])
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import random
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from safe_tracectx.policy import STRICT, Policy

__all__ = ["SWEEP_POLICY", "Finding", "SweepResult", "count_points", "run_point", "sweep"]

#: Strict, except that an unbalanced reset is only recorded: the sweep reports leaks itself, and an
#: ``UnbalancedContextError`` raised while unwinding would replace the injected fault.
SWEEP_POLICY = dataclasses.replace(STRICT, unbalanced="ignore")


@dataclasses.dataclass
class Finding:
    """An injection point after which something was wrong."""

    index: int
    kind: str
    pass_label: str | None
    outcome: str
    problems: list[str]
    stack: list[str]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class SweepResult:
    """Totals of a sweep and its findings."""

    points: int
    by_kind: dict[str, int]
    runs: int
    outcomes: dict[str, int]
    findings: list[Finding]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "findings": [f.to_dict() for f in self.findings]}


#: A run that takes longer than this is ended (a program that hangs at an injection point).
RUN_TIMEOUT_SECONDS = 600


def _die_with_parent() -> None:
    """Linux: the child is killed if the sweep is (SIGTERM from a CI runner, SIGKILL), never left behind."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _in_child(work: Callable[[], dict[str, Any]], timeout: int | None = None) -> dict[str, Any]:
    """``work()`` in a forked child (its result sent back as JSON); the parent is left as it was."""
    timeout = RUN_TIMEOUT_SECONDS if timeout is None else timeout
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        me = os.getpid()
        _die_with_parent()
        signal.alarm(timeout)
        os.close(read_end)
        try:
            payload = json.dumps(work(), default=str).encode()
        except BaseException as error:  # noqa: BLE001 - anything the run did not handle is its outcome
            payload = json.dumps({"outcome": "sweep error", "problems": [repr(error)], "stack": []}).encode()
        if os.getpid() == me:  # a process the program forked returns here too: only the run itself reports
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(payload)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM:
            return {"outcome": "timed out", "problems": [f"the run took longer than {timeout} s"], "stack": []}
        return {"outcome": "crashed", "problems": [f"the run died (wait status {status})"], "stack": []}
    result: dict[str, Any] = json.loads(data)
    return result


def _exception_site(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "(unknown)"


def _chain(error: BaseException | None) -> Iterable[tuple[BaseException, bool]]:
    """Each exception of ``error``'s chain, with whether every link to it was ``raise ... from`` (a wrap)."""
    seen: set[int] = set()
    wrapped = True
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error, wrapped
        wrapped = wrapped and error.__cause__ is not None
        error = error.__cause__ or error.__context__


class _ThreadDeaths:
    """While entered, ``threading.excepthook`` records each exception that ends a thread (name, exception)."""

    def __init__(self, fired: Callable[[], BaseException | None]) -> None:
        self.deaths: list[tuple[str, BaseException]] = []
        self._previous = threading.excepthook
        self._fired = fired

    def _hook(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_value is not None:
            self.deaths.append((args.thread.name if args.thread is not None else "?", args.exc_value))
            fired = self._fired()
            if fired is not None and any(e is fired for e, _ in _chain(args.exc_value)):
                return  # the sweep reports it: no traceback on stderr per run
        self._previous(args)

    def __enter__(self) -> _ThreadDeaths:
        threading.excepthook = self._hook
        return self

    def __exit__(self, *exc: object) -> None:
        threading.excepthook = self._previous

    def of(self, fired: BaseException) -> tuple[str, BaseException] | None:
        """The first thread that died of ``fired`` (it, or an exception raised from or while handling it)."""
        return next(((name, e) for name, e in self.deaths if any(link is fired for link, _ in _chain(e))), None)


def _join_threads() -> None:
    """Wait for the run's non-daemon threads, as Python does at exit (the run's alarm ends a hang).

    First, as Python's ``threading._shutdown`` does, the callbacks registered with
    ``threading._register_atexit``: a thread pool never shut down (its workers are
    not daemons) is told to stop there, so a join would otherwise wait forever.
    (The run is a forked child that ends right after: the callbacks never run twice.)
    """
    for call in reversed(list(getattr(threading, "_threading_atexits", ()))):
        call()
    joined: set[threading.Thread] = set()
    while pending := [
        t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon and t not in joined
    ]:
        for thread in pending:  # a thread may start others while it ends: look again until none is left
            thread.join()
            joined.add(thread)


def _outcome(fired: BaseException | None, top: BaseException | None, died: tuple[str, BaseException] | None) -> str:
    if fired is None:
        return "not reached"
    if top is fired:
        return "propagated"
    links = [wrapped for error, wrapped in _chain(top) if error is fired] if top is not None else []
    if links and not isinstance(top, SystemExit):
        return "wrapped" if links[0] else "masked"
    if died is not None:
        return "died in thread"
    if top is None or isinstance(top, SystemExit):  # sys.exit(1) in a handler: the program's own status
        return "handled"
    return "replaced"


def _run_once(body: Callable[[], None], target: int | None, policy: Policy, join_threads: bool = True) -> dict[str, Any]:
    """One run under the hooks with an injector armed (in the child)."""
    from safe_tracectx.context.blocks import TRACE_VAR
    from safe_tracectx.hooks import begin, faults
    from safe_tracectx.labels import describe_trace

    injector = faults.arm(faults.Injector(target))
    installation = begin("safe-tracectx sweep", policy, audit=True)
    log = installation.audit_log
    assert log is not None
    top: BaseException | None = None
    with _ThreadDeaths(lambda: injector.fired) as threads:
        try:
            body()
        except BaseException as error:  # noqa: BLE001 - the outcome of this run
            top = error
        try:
            if join_threads:
                _join_threads()
        except BaseException as error:  # noqa: BLE001 - Ctrl-C while waiting
            top = top or error
        finally:
            faults.disarm()
    if target is None:
        failed = None
        if top is not None and not (isinstance(top, SystemExit) and top.code in (0, None)):
            failed = f"{type(top).__name__}: {top}"
        return {"points": injector.points, "failed": failed}
    fired, problems = injector.fired, []
    active = TRACE_VAR.get(None)
    if active is not None:
        problems.append(f"a trace was left active: {describe_trace(active)}")
    for event in log.leaked_sets:
        problems.append(f"set_tracectx({event.trace}) at {event.site} was never reset")
    for changed in injector.changed_inputs:
        problems.append(f"{changed['label']} changed its input ({changed['trace']}) before it failed")
    died = threads.of(fired) if fired is not None else None
    outcome = _outcome(fired, top, died)
    if outcome in ("masked", "replaced") and top is not None:
        problems.append(
            f"{outcome}: {type(top).__name__}: {top} (raised at {_exception_site(top)}) reached the top "
            + ("while the injected fault was being handled" if outcome == "masked" else "instead of the injected fault")
        )
    if outcome == "died in thread" and died is not None:
        name, death = died
        raised = "" if death is fired else f", raised at {_exception_site(death)} while handling it"
        problems.append(
            f"died in thread: the fault ended thread {name!r} ({type(death).__name__}: {death}{raised}); "
            "the main program never saw it"
            + (f", and {type(top).__name__}: {top} reached its top" if top is not None else " and went on")
        )
    try:
        with log.stopped():
            installation.end()
    except BaseException:  # noqa: BLE001 - recorded above already
        pass
    stack = fired.stack if fired is not None else []
    starts = [i for i, frame in enumerate(stack) if frame.endswith(" in _run_once")]
    return {"outcome": outcome, "problems": problems, "stack": stack[starts[-1] + 1 :] if starts else stack}


def count_points(
    body: Callable[[], None], *, policy: Policy = SWEEP_POLICY, join_threads: bool = True
) -> list[tuple[str, str | None]]:
    """(kind, pass label) of each injection point of one run of ``body`` (run in a forked child)."""
    result = _in_child(lambda: _run_once(body, None, policy, join_threads))
    if "points" not in result:
        raise RuntimeError(f"the counting run failed: {result.get('problems')}")
    if result.get("failed"):
        raise RuntimeError(
            f"the program fails without any fault ({result['failed']}); make it run cleanly first: "
            "the sweep compares each faulted run with a clean one"
        )
    return [(kind, label) for kind, label in result["points"]]


def run_point(
    body: Callable[[], None], index: int, *, policy: Policy = SWEEP_POLICY, join_threads: bool = True
) -> dict[str, Any]:
    """Run ``body`` in a forked child with the fault at point ``index``: ``outcome``, ``problems``, ``stack``."""
    return _in_child(lambda: _run_once(body, index, policy, join_threads))


def sweep(
    body: Callable[[], None],
    *,
    max_runs: int | None = None,
    seed: int = 0,
    kinds: Iterable[str] | None = None,
    in_pass: str | None = None,
    policy: Policy = SWEEP_POLICY,
    join_threads: bool = True,
    progress: Callable[[int, int, int], None] | None = None,
) -> SweepResult:
    """Count the injection points of ``body``, then inject at each.

    Only points of ``kinds`` (``set``, ``proxy``, ``pass``), inside a pass whose label contains
    ``in_pass``; a seeded sample of ``max_runs`` of them. ``join_threads``: wait for the run's
    threads as Python does at exit; False when ``body`` is not a whole program (a test's call,
    whose threads its fixtures' teardown may stop): a thread that died of the fault during
    the run is reported either way.
    """
    started = time.perf_counter()
    points = count_points(body, policy=policy, join_threads=join_threads)
    wanted = set(kinds) if kinds is not None else None
    indices = [
        i
        for i, (kind, label) in enumerate(points)
        if (wanted is None or kind in wanted) and (in_pass is None or in_pass in (label or ""))
    ]
    if max_runs is not None and len(indices) > max_runs:
        indices = sorted(random.Random(seed).sample(indices, max_runs))
    outcomes: collections.Counter[str] = collections.Counter()
    findings: list[Finding] = []
    for done, index in enumerate(indices, 1):
        result = run_point(body, index, policy=policy, join_threads=join_threads)
        outcomes[result["outcome"]] += 1
        if result["problems"]:
            kind, label = points[index]
            findings.append(Finding(index, kind, label, result["outcome"], result["problems"], result["stack"]))
        if progress is not None:
            progress(done, len(indices), len(findings))
    return SweepResult(
        points=len(points),
        by_kind=dict(collections.Counter(kind for kind, _ in points)),
        runs=len(indices),
        outcomes=dict(outcomes),
        findings=findings,
        seconds=time.perf_counter() - started,
    )
