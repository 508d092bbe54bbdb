"""What a case's runs mean: caught, with the bug's names and its pass, before Thunder's failure; silent at the fix.

A report is a violation (or a note on an exception we did not replace) that
names every one of the case's names and its culprit. The judgement reads the
structured fields of the audit document (``names``, ``culprit``) and falls back
to the message for documents without them.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Final

from history.cases import Case
from history.runs import Mode, RunResult

__all__ = ["Verdict", "judge", "other_bug_stops_strict"]

_MISSING: Final = "-"


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text) is not None


def _names_of(violation: dict[str, Any]) -> list[str]:
    names = violation.get("names")
    return list(names) if isinstance(names, list) else []


def _reports(run: RunResult, case: Case | None = None) -> list[tuple[str, list[str], str]]:
    """(text, names, culprit) of each report in ``run``: its violations, then its notes; given the ``case`` of a run
    at its fix, without the reports of the other bug the fix still has (``Case.other_bug_at_fix``)."""
    found = [(str(v.get("message", "")), _names_of(v), str(v.get("culprit") or "")) for v in run.violations
             if case is None or not case.excused_at_fix(v)]
    found += [(note, [], "") for note in run.notes]
    return found


def _matches(case: Case, report: tuple[str, list[str], str]) -> tuple[set[str], bool]:
    """(the case's names this report names, whether it names the culprit)."""
    text, names, culprit = report
    found = {name for name in case.names if name in names or _mentions(text, name)}
    has_culprit = case.culprit.lower() in (culprit or text).lower()
    return found, has_culprit


def _covers(case: Case, reports: list[tuple[str, list[str], str]], *, with_culprit: bool) -> bool:
    """Every one of the case's names is in some report (that also names the culprit, ``with_culprit``)."""
    named: set[str] = set()
    for report in reports:
        found, has_culprit = _matches(case, report)
        if has_culprit or not with_culprit:
            named |= found
    return bool(reports) and named >= set(case.names)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One row of the corpus table."""

    case: Case
    plain_parent: str
    reported: str
    timing: str
    fix_silent: str
    strict_fix: str
    caught: bool
    culprits_seen: tuple[str, ...]

    @property
    def as_expected(self) -> bool:
        """Caught if the case expects it; silent at the fix, and strict as plain there, either way."""
        silent = self.fix_silent == "yes" and self.strict_fix.startswith("as plain")
        return silent and (self.caught or self.case.expect == "missed")

    def row(self) -> list[str]:
        return [
            f"#{self.case.pr}",
            self.case.id,
            self.case.expect,
            self.plain_parent,
            self.reported,
            self.timing,
            self.fix_silent,
            self.strict_fix,
            "yes" if self.caught else "no",
        ]


HEADER: Final = ["PR", "case", "expected", "plain at parent", "reported at parent", "when", "silent at fix", "strict at fix",
                 "caught"]


def _outcome(run: RunResult) -> str:
    if not run.failed:
        return "passes"
    return f"fails ({run.other_raised or run.ours_raised or f'exit {run.returncode}'})"


def other_bug_stops_strict(case: Case, plain: RunResult, strict: RunResult) -> bool:
    """Whether strict fails at the fix, where plain passes, only by raising on the other bug the fix still has."""
    return (not plain.failed and strict.ours_raised is not None and bool(strict.violations)
            and all(case.excused_at_fix(v) for v in strict.violations))


def judge(case: Case, runs: dict[str, dict[Mode, RunResult]]) -> Verdict:
    """The verdict of one case from its six runs."""
    parent, fix = runs["parent"], runs["fix"]
    plain = parent["plain"]
    broken = [f"{side} {mode}: {run.harness_error}" for side, by_mode in runs.items()
              for mode, run in by_mode.items() if run.harness_error is not None]
    if broken:
        return Verdict(case, "harness error", "; ".join(broken), _MISSING, _MISSING, _MISSING, False, ())
    reports = _reports(parent["audit"]) + _reports(parent["strict"])
    culprits = tuple(sorted({r[2] for r in reports if r[2]}))
    if _covers(case, reports, with_culprit=True):
        reported = "yes: names and pass"
    elif _covers(case, reports, with_culprit=False):
        reported = "names, another pass"
    elif reports:
        reported = f"other ({len(reports)})"
    else:
        reported = "no"
    strict = parent["strict"]
    ours_first = strict.stopped_by_ours
    strict_names = _covers(case, _reports(strict), with_culprit=True)
    if not reports:
        timing = _MISSING
    elif ours_first and plain.failed:
        timing = "before Thunder's failure"
    elif not plain.failed and (ours_first or strict_names):
        timing = "instead (Thunder does not fail)"
    elif strict.notes and plain.failed:
        timing = "with Thunder's failure (note)"
    elif plain.failed:
        timing = "after Thunder's failure"
    else:
        timing = "reported, not raised"
    fix_reports = _reports(fix["audit"], case) + _reports(fix["strict"], case)
    fix_silent = "yes" if not fix_reports else f"no ({len(fix_reports)})"
    if fix["strict"].failed == fix["plain"].failed:
        strict_fix = "as plain" + (" (passes)" if not fix["plain"].failed else " (fails)")
    elif other_bug_stops_strict(case, fix["plain"], fix["strict"]):
        assert case.other_bug_at_fix is not None
        strict_fix = f"as plain but for {case.other_bug_at_fix['kind']} (fixed by {case.other_bug_at_fix['fixed_by']})"
    else:
        strict_fix = f"differs: plain {_outcome(fix['plain'])}, strict {_outcome(fix['strict'])}"
    caught = (
        reported == "yes: names and pass"
        and timing in ("before Thunder's failure", "instead (Thunder does not fail)")
        and fix_silent == "yes"
        and strict_fix.startswith("as plain")
    )
    return Verdict(case, _outcome(plain), reported, timing, fix_silent, strict_fix, caught, culprits)


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)
