"""The shapes of the saved documents (docs/audit-schema.md, docs/multi-rank.md), as ``TypedDict``s.

``safe_tracectx.auditlog.documents`` is their one reader: ``validate`` and
``read_document`` return these types, and every report reads them.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict


__all__ = [
    "AuditDocument",
    "CallSiteCount",
    "ChildProcesses",
    "CombinedDocument",
    "Divergence",
    "Event",
    "Fingerprint",
    "Launch",
    "LeakedSet",
    "Member",
    "PassRun",
    "PassStats",
    "Phase",
    "ProcessInfo",
    "PytestDocument",
    "PytorchModule",
    "Rank",
    "RoleCounts",
    "RunKey",
    "Site",
    "SplitReason",
    "TestSummary",
    "ThunderFXSplit",
    "TracelessSite",
    "Violation",
]

#: One top-level bound symbol: ``[symbol name, [output names], [shapes or None], [dtypes or None]]``.
FingerprintRow = list[Any]
#: One trace's bound symbols, in order (``safe_tracectx.traces.fingerprint``).
Fingerprint = list[FingerprintRow]
#: A pass run's place among the runs of a document: (its label, how many runs of that label came before it).
RunKey = tuple[str, int]


class Site(TypedDict):
    """Where something happened: ``file`` relative to the current folder when inside it."""

    file: str
    line: int
    function: str


CallSiteCount = TypedDict("CallSiteCount", {"site": Site | None, "pass": str, "count": int})


class LeakedSet(TypedDict):
    """A ``set_tracectx`` call never reset."""

    trace: str
    site: Site | None
    thread: str


class TracelessSite(TypedDict):
    """Proxies made traceless at one call site."""

    site: Site | None
    count: int


Violation = TypedDict("Violation", {
    "error": str, "check": str, "action": str, "message": str, "fix": str, "kind": "str | None",
    "names": list[str], "culprit": "str | None", "site": "Site | None", "pass": "str | None", "thread": str,
})


class PassStats(TypedDict):
    """An audited pass's totals over its runs."""

    qualname: str | None
    runs: int
    changed: int
    seconds: float
    traces: int
    violations: list[str]
    proxies: int


class RoleCounts(TypedDict):
    """Proxies per role of the pair."""

    forward: int
    backward: int
    none: int


class Phase(TypedDict):
    """The work of one pass label or sub-phase."""

    label: str
    kind: str
    runs: int
    seconds: float
    proxies: int
    by_role: RoleCounts


class SplitReason(TypedDict):
    """Why the ThunderFX splitter split a graph (a Thunder ``SplitReason``)."""

    type: str
    info: str | None
    exception: str | None


class PytorchModule(TypedDict):
    """A split module the splitter left to PyTorch."""

    module: str
    by: str
    ops: list[str]


class ThunderFXSplit(TypedDict):
    """Which FX graph and split module a compilation compiles (or, ``split`` None, the split the splitter made)."""

    backend: int | None
    graph: int | None
    split: str | None
    modules: list[str]
    reasons: list[SplitReason]
    pytorch: list[PytorchModule]


class PassRun(TypedDict):
    """One run of a pass (``pass_runs``), or one trace Thunder kept (``jit_traces``, which adds ``function``)."""

    label: str
    kind: str
    role: str | None
    seconds: float
    changed: bool
    proxies: int
    violations: list[str]
    fingerprints: list[Fingerprint]
    thunderfx: NotRequired[ThunderFXSplit | None]
    output_ids: NotRequired[list[int]]
    #: Absent in data files of older versions: their runs' inputs are not recorded (None: a trace Thunder did not keep).
    input_ids: NotRequired[list[int | None]]
    input_fingerprints: NotRequired[dict[str, Fingerprint]]
    function: NotRequired[str]


Event = TypedDict("Event", {
    "kind": str, "site": "Site | None", "thread": str, "trace_id": "int | None", "trace": str, "pass": "str | None",
    "detail": dict[str, Any],
})


class Launch(TypedDict):
    """What tells one launch from another (``auditlog.ranks.Launch``)."""

    run_id: str | None
    master: str | None
    restart: int | None
    started: float | None


class Rank(TypedDict):
    """A rank's place in its launch (``auditlog.ranks.RankInfo``)."""

    rank: int
    world_size: int
    local_rank: int
    host: str
    launch: NotRequired[Launch]


class ProcessInfo(TypedDict):
    """A child process's own data file says which process it was."""

    pid: int
    name: str
    start_method: str


class ChildProcesses(TypedDict):
    """The child processes a run started: those that wrote their data, and how many did not."""

    audited: list[Member]
    not_audited: int


class AuditDocument(TypedDict):
    """Schema ``safe-tracectx/audit`` version 2: one run's audit (``AuditLog.to_dict()``).

    A pytest report's test, read as an audit, has only the keys marked required here and ``test``.
    """

    schema: Literal["safe-tracectx/audit"]
    version: int
    counts: dict[str, int]
    passes: dict[str, PassStats]
    violations: list[Violation]
    leaked_sets: list[LeakedSet]
    traceless: NotRequired[list[TracelessSite]]
    kept: NotRequired[int]
    dropped: NotRequired[int]
    proxies_by_pass: NotRequired[dict[str, int]]
    pass_runs: NotRequired[list[PassRun]]
    phases: NotRequired[list[Phase]]
    call_sites: NotRequired[list[CallSiteCount]]
    events: NotRequired[list[Event]]
    child_processes: NotRequired[ChildProcesses]
    rank: NotRequired[Rank]
    process: NotRequired[ProcessInfo]
    jit_traces: NotRequired[list[PassRun]]
    test: NotRequired[str]


class Member(TypedDict):
    """One member of a combined document: an audit and where it came from."""

    name: str
    source: str
    audit: AuditDocument


Divergence = TypedDict("Divergence", {
    "error": str, "check": str, "action": str, "pass": str, "occurrence": int, "site": None, "thread": None,
    "carried": bool, "trace": "int | None", "index": "int | None", "had": "dict[str, FingerprintRow | None]",
    "message": str, "fix": str, "differs": NotRequired[list[str]],
})


class CombinedDocument(TypedDict):
    """Schema ``safe-tracectx/combined`` version 1: members sorted by rank, and where they diverge."""

    schema: Literal["safe-tracectx/combined"]
    version: int
    world_size: int | None
    events: str
    members: list[Member]
    divergences: list[Divergence]


class TestSummary(TypedDict):
    """What the pytest plugin keeps of one test."""

    counts: dict[str, int]
    passes: dict[str, PassStats]
    violations: list[Violation]
    leaked_sets: list[LeakedSet]
    traceless: list[TracelessSite]


class PytestDocument(TypedDict):
    """Schema ``safe-tracectx/pytest`` version 2: the pytest plugin's report, a summary per test node id."""

    schema: Literal["safe-tracectx/pytest"]
    version: int
    mode: str
    tests: dict[str, TestSummary]
