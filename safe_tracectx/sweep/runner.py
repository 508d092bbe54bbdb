"""Fault-injection sweep: fail the k-th trace-context operation of a run, for every k, and check what is left.

Like SQLite's test of failing the k-th allocation: a counting run numbers the
injection points (each ``set_tracectx``, proxy creation and pass entry), then
the program runs once per point (or a seeded sample) in a process of its own (a
forked child; pytest's sweep starts pytest again) that raises
:class:`~safe_tracectx.hooks.faults.InjectedFault` there. After each run: it
reached the counting run's points up to its fault, no trace is left active, no
raw set is left open, the exception that reached the top is the injected one, or
wraps it (``raise ... from``), not one raised while handling it, no thread died
of it unseen by the main program, and the passes it cut short did not change
their input traces::

    >>> import thunder.core.trace as trace
    >>> from safe_tracectx.sweep.runner import sweep
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
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Iterable

from safe_tracectx.hooks.faults import point_name
from safe_tracectx.policy import STRICT, Policy
from safe_tracectx.sweep.findings import (
    ChangedInput,
    Finding,
    LeakedSet,
    Point,
    Raised,
    RunResult,
    SweepResult,
    ThreadDeath,
    program_frames,
)
from safe_tracectx.sweep.run_outcome import ThreadDeaths, outcome_of, wait_for_threads

__all__ = [
    "SWEEP_POLICY", "Finding", "ProgramFails", "Runs", "SweepResult", "count_points", "forked_runs", "other_path", "result_json",
    "run_once", "run_point", "sweep", "sweep_runs",
]  # fmt: skip

#: Strict, except that an unbalanced reset is only recorded: the sweep reports leaks itself, and an
#: ``UnbalancedContextError`` raised while unwinding would replace the injected fault.
SWEEP_POLICY = dataclasses.replace(STRICT, unbalanced="ignore")


#: A run that takes longer than this is ended (a program that hangs at an injection point).
RUN_TIMEOUT_SECONDS = 600


def _die_with_parent() -> None:
    """Linux: the child is killed if the sweep is (SIGTERM from a CI runner, SIGKILL), never left behind."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def result_json(work: Callable[[], RunResult]) -> str:
    """``work()``'s result as JSON, or a ``sweep error`` result if the sweep's own code failed."""
    try:
        return work().to_json()
    except BaseException as error:  # noqa: BLE001 - anything the run did not handle is its outcome
        return RunResult.ended_without_result("sweep error", repr(error)).to_json()


def _single_threaded_torch() -> None:
    """A forked child runs torch on one thread: the parent's OpenMP pool is not in the child, and the
    child's first parallel op would wait for it forever (whenever the parent ran one before the fork)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _in_child(work: Callable[[], RunResult], timeout: int | None = None) -> RunResult:
    """``work()`` in a forked child (its result sent back as JSON); the parent is left as it was."""
    timeout = RUN_TIMEOUT_SECONDS if timeout is None else timeout
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        me = os.getpid()
        _die_with_parent()
        signal.alarm(timeout)
        _single_threaded_torch()
        os.close(read_end)
        payload = result_json(work).encode()
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
            return RunResult.ended_without_result("timed out", f"the run took longer than {timeout} s")
        return RunResult.ended_without_result("crashed", f"the run died (wait status {status})")
    return RunResult.from_json(data.decode())


def run_once(body: Callable[[], None], target: int | None, policy: Policy, join_threads: bool = True) -> RunResult:
    """One run of ``body`` in this process, under the hooks, failing point ``target`` (None: a counting run).

    Only in a process of its own: it leaves behind what the faulted program left. The faults' stacks
    start inside this frame (it arms the injector): the program's frames, not the sweep's.
    """
    from safe_tracectx.context.blocks import TRACE_VAR
    from safe_tracectx.hooks import begin, faults
    from safe_tracectx._support.labels import describe_trace

    injector = faults.arm(faults.Injector(target))
    installation = begin("safe-tracectx sweep", policy, audit=True)
    log = installation.audit_log
    assert log is not None
    top: BaseException | None = None
    with ThreadDeaths(lambda: injector.fired) as threads:
        try:
            body()
        except BaseException as error:  # noqa: BLE001 - the outcome of this run
            top = error
        try:
            if join_threads:
                wait_for_threads()
        except BaseException as error:  # noqa: BLE001 - Ctrl-C while waiting
            top = top or error
        finally:
            faults.disarm()
    if target is None:
        failed = None
        if top is not None and not (isinstance(top, SystemExit) and top.code in (0, None)):
            failed = Raised.of(top)
        return RunResult("counted", points=injector.points, failed=failed)
    fired = injector.fired
    active = TRACE_VAR.get(None)
    died = threads.of(fired) if fired is not None else None
    outcome = outcome_of(fired, top, died)
    death = None
    if died is not None:
        thread, ended_it = died
        death = ThreadDeath(thread, Raised.of(ended_it), of_the_fault=ended_it is fired)
    result = RunResult(
        outcome,
        points=injector.points,
        stack=program_frames(fired.stack) if fired is not None else [],
        left_active=None if active is None else describe_trace(active),
        leaked=[LeakedSet(event.trace, str(event.site)) for event in log.leaked_sets],
        changed_inputs=[ChangedInput(changed["label"], changed["trace"]) for changed in injector.changed_inputs],
        top=Raised.of(top) if top is not None and top is not fired else None,
        thread_death=death,
    )
    try:
        with log.stopped():
            installation.end()
    except BaseException:  # noqa: BLE001 - recorded above already
        pass
    return result


#: One run of a program, in a process of its own: ``run(None)`` counts, ``run(k)`` fails point k (``run_once``'s result).
Runs = Callable[[int | None], RunResult]


def forked_runs(body: Callable[[], None], *, policy: Policy = SWEEP_POLICY, join_threads: bool = True) -> Runs:
    """Each run of ``body`` in a child forked from this process (its imports reused)."""
    return lambda target: _in_child(lambda: run_once(body, target, policy, join_threads))


class ProgramFails(RuntimeError):
    """The counting run failed without any fault: there is no clean run to compare the faulted ones with."""

    def __init__(self, failed: Raised) -> None:
        super().__init__(
            f"the program fails without any fault ({failed}); make it run cleanly first: "
            "the sweep compares each faulted run with a clean one"
        )
        self.failed = failed


def _points(result: RunResult) -> list[Point]:
    """The counting run's points, or why there are none."""
    if result.points is None:
        raise RuntimeError(f"the counting run failed ({result.outcome}): {result.failure}")
    if result.failed is not None:
        raise ProgramFails(result.failed)
    return result.points


def count_points(
    body: Callable[[], None], *, policy: Policy = SWEEP_POLICY, join_threads: bool = True
) -> list[Point]:
    """(kind, pass label) of each injection point of one run of ``body`` (run in a forked child)."""
    return _points(forked_runs(body, policy=policy, join_threads=join_threads)(None))


def run_point(
    body: Callable[[], None], index: int, *, policy: Policy = SWEEP_POLICY, join_threads: bool = True
) -> RunResult:
    """Run ``body`` in a forked child with the fault at point ``index``."""
    return forked_runs(body, policy=policy, join_threads=join_threads)(index)


def other_path(expected: list[Point], reached: list[Point], index: int) -> str | None:
    """How a run faulted at ``index`` left the counting run's path before the fault (None: it did not)."""
    for k, (want, (kind, label)) in enumerate(zip(expected[: index + 1], reached)):
        if (kind, label) != want:
            return f"point {k} is a {point_name(kind, label)} here, a {point_name(*want)} in the counting run"
    if len(reached) <= index:
        return (
            f"the run reached {len(reached)} point(s), so the fault at point {index} never fired "
            f"(the counting run reached {len(expected)})"
        )
    return None




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
    """Count the injection points of ``body``, then inject at each, each run in a forked child.

    ``join_threads``: wait for the run's threads as Python does at exit; False when ``body`` is
    not a whole program (a test's call, whose threads its fixtures' teardown may stop): a thread
    that died of the fault during the run is reported either way. The rest as :func:`sweep_runs`.
    Call it before this process runs a multi-threaded torch op: OpenMP's pool does not survive a
    fork, and a child would hang at its first parallel op (pytest's sweep starts fresh processes).
    """
    return sweep_runs(
        forked_runs(body, policy=policy, join_threads=join_threads),
        max_runs=max_runs,
        seed=seed,
        kinds=kinds,
        in_pass=in_pass,
        progress=progress,
    )


def sweep_runs(
    run: Runs,
    *,
    max_runs: int | None = None,
    seed: int = 0,
    kinds: Iterable[str] | None = None,
    in_pass: str | None = None,
    progress: Callable[[int, int, int], None] | None = None,
) -> SweepResult:
    """Count the injection points with ``run(None)``, then ``run(k)`` for each point k.

    Only points of ``kinds`` (``set``, ``proxy``, ``pass``), inside a pass whose label contains
    ``in_pass``; a seeded sample of ``max_runs`` of them. A run that reached other points than the
    counting run before its fault is a finding: its point was not checked.
    """
    started = time.perf_counter()
    points = _points(run(None))
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
        result = run(index)
        outcomes[result.outcome] += 1
        elsewhere = other_path(points, result.points, index) if result.points is not None else None
        kind, label = points[index]
        finding = Finding(index, kind, label, run=done, result=result, path_difference=elsewhere)
        if finding.problems:
            findings.append(finding)
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
