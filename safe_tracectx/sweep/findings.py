"""What a run of the sweep found, in structured fields; the report's sentences are made from them.

    >>> finding = Finding(3, "set", None, run=1, result=RunResult("propagated", left_active="trace @0x1"))
    >>> finding.problems, finding.leaks, finding.masked
    (['a trace was left active: trace @0x1'], True, False)
"""

from __future__ import annotations

import dataclasses
import json
import traceback
from typing import Any

from safe_tracectx._support.callsite import is_own_file
from safe_tracectx.sweep.run_outcome import exception_site

__all__ = [
    "OTHER_PATH_FIX", "SWEEP_SCHEMA", "ChangedInput", "Finding", "LeakedSet", "Point", "Raised", "RunResult",
    "SweepResult", "ThreadDeath", "frame_text", "program_frames",
]  # fmt: skip

#: An injection point: its kind (``set``, ``proxy``, ``pass``) and the label of the pass it is in.
Point = tuple[str, str | None]

OTHER_PATH_FIX = (
    "the program takes another path from run to run (a warm on-disk cache, a file an earlier run wrote, "
    "data or randomness): make each run start from the same state (a fresh cache directory, fixed seeds), "
    "or these points are not checked"
)


def frame_text(frame: traceback.FrameSummary) -> str:
    """``file:line in name``, as the report and the JSON document show a frame."""
    return f"{frame.filename}:{frame.lineno} in {frame.name}"


def program_frames(stack: list[traceback.FrameSummary]) -> list[traceback.FrameSummary]:
    """``stack`` without this package's frames (the rule call sites follow): the program's and its libraries'."""
    return [frame for frame in stack if not is_own_file(frame.filename)]


@dataclasses.dataclass(frozen=True)
class Raised:
    """An exception as a report names it: its type, its message, the line that raised it."""

    type: str
    message: str
    site: str

    @classmethod
    def of(cls, error: BaseException) -> Raised:
        return cls(type(error).__name__, str(error), exception_site(error))

    def __str__(self) -> str:
        return f"{self.type}: {self.message}"


@dataclasses.dataclass(frozen=True)
class LeakedSet:
    """A ``set_tracectx`` of the run never reset: the trace, and the line of the set."""

    trace: str
    site: str


@dataclasses.dataclass(frozen=True)
class ChangedInput:
    """A pass the fault cut short had changed one of its input traces."""

    pass_label: str
    trace: str


@dataclasses.dataclass(frozen=True)
class ThreadDeath:
    """A thread ended by the fault (``of_the_fault``) or by an exception raised while handling it."""

    thread: str
    error: Raised
    of_the_fault: bool


@dataclasses.dataclass(frozen=True)
class RunResult:
    """How one run ended, made in the run's own process and sent back as JSON.

    A counting run has ``points`` and ``failed`` (the program failed without any fault); a faulted run
    its ``outcome``, the ``points`` reached up to the fault, the stack of the fault and what it left.
    """

    outcome: str
    points: list[Point] | None = None
    failed: Raised | None = None
    stack: list[traceback.FrameSummary] = dataclasses.field(default_factory=list)
    #: The trace left active at the end of the run.
    left_active: str | None = None
    leaked: list[LeakedSet] = dataclasses.field(default_factory=list)
    changed_inputs: list[ChangedInput] = dataclasses.field(default_factory=list)
    #: The exception that reached the top when it was not the fault (masked, replaced, or beside a thread's death).
    top: Raised | None = None
    thread_death: ThreadDeath | None = None
    #: Why the run ended without a result: it crashed, timed out, or the sweep's own code failed.
    failure: str | None = None

    @classmethod
    def ended_without_result(cls, outcome: str, why: str) -> RunResult:
        return cls(outcome, failure=why)

    def to_json(self) -> str:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields["stack"] = [[frame.filename, frame.lineno, frame.name] for frame in self.stack]
        return json.dumps(fields, default=lambda value: dataclasses.asdict(value))

    @classmethod
    def from_json(cls, text: str) -> RunResult:
        data: dict[str, Any] = json.loads(text)

        def raised(value: dict[str, str] | None) -> Raised | None:
            return None if value is None else Raised(**value)

        death = data["thread_death"]
        return cls(
            outcome=data["outcome"],
            points=None if data["points"] is None else [(kind, label) for kind, label in data["points"]],
            failed=raised(data["failed"]),
            stack=[traceback.FrameSummary(file, line, name, lookup_line=False) for file, line, name in data["stack"]],
            left_active=data["left_active"],
            leaked=[LeakedSet(**entry) for entry in data["leaked"]],
            changed_inputs=[ChangedInput(**entry) for entry in data["changed_inputs"]],
            top=raised(data["top"]),
            thread_death=None if death is None else ThreadDeath(death["thread"], Raised(**death["error"]), death["of_the_fault"]),
            failure=data["failure"],
        )


@dataclasses.dataclass(frozen=True)
class Finding:
    """An injection point after which something was wrong: the point, the sweep's run of it, what it found."""

    index: int
    kind: str
    pass_label: str | None
    #: The run's number in this sweep (1 is the first faulted run).
    run: int
    result: RunResult
    #: How the run left the counting run's path before its fault (None: it did not; else the point went unchecked).
    path_difference: str | None = None

    @property
    def outcome(self) -> str:
        return self.result.outcome

    @property
    def stack(self) -> list[traceback.FrameSummary]:
        """Where the fault was raised, innermost last: the program's frames."""
        return self.result.stack

    @property
    def other_path(self) -> bool:
        return self.path_difference is not None

    @property
    def leaks(self) -> bool:
        """A trace was left active or a set never reset."""
        return self.result.left_active is not None or bool(self.result.leaked)

    @property
    def masked(self) -> bool:
        """An exception other than the fault reached the top: raised while handling it, or instead of it."""
        return self.outcome in ("masked", "replaced")

    @property
    def died_in_thread(self) -> bool:
        return self.outcome == "died in thread"

    @property
    def problems(self) -> list[str]:
        """The report's sentences, one per thing found."""
        result, out = self.result, []
        if self.path_difference is not None:
            out.append(
                f"run {self.run}: the injection points differ from the counting run's: {self.path_difference}; "
                + OTHER_PATH_FIX
            )
        if result.failure is not None:
            out.append(result.failure)
        if result.left_active is not None:
            out.append(f"a trace was left active: {result.left_active}")
        out += [f"set_tracectx({leak.trace}) at {leak.site} was never reset" for leak in result.leaked]
        out += [f"{c.pass_label} changed its input ({c.trace}) before it failed" for c in result.changed_inputs]
        if self.masked and result.top is not None:
            out.append(
                f"{self.outcome}: {result.top} (raised at {result.top.site}) reached the top "
                + ("while the injected fault was being handled" if self.outcome == "masked" else "instead of the injected fault")
            )
        if self.died_in_thread and (death := result.thread_death) is not None:
            raised = "" if death.of_the_fault else f", raised at {death.error.site} while handling it"
            out.append(
                f"died in thread: the fault ended thread {death.thread!r} ({death.error}{raised}); "
                "the main program never saw it"
                + (f", and {result.top} reached its top" if result.top is not None else " and went on")
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        """The finding in the sweep's JSON document: its sentences, and its frames as ``file:line in name``."""
        return {
            "index": self.index,
            "kind": self.kind,
            "pass_label": self.pass_label,
            "outcome": self.outcome,
            "problems": self.problems,
            "stack": [frame_text(frame) for frame in self.stack],
            "other_path": self.other_path,
        }


#: The sweep's JSON document (``safe-tracectx sweep --json FILE``).
SWEEP_SCHEMA = "safe-tracectx/sweep"


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
        totals = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {**totals, "findings": [finding.to_dict() for finding in self.findings]}

    def to_document(self, program: str) -> dict[str, Any]:
        """The JSON document of the sweep of ``program``: schema, version, the program, then :meth:`to_dict`."""
        return {"schema": SWEEP_SCHEMA, "version": 1, "program": program, **self.to_dict()}
