"""The text sections several reports share: a pass's line, the set/reset balance, violations, child processes.

    >>> from safe_tracectx.report.sections import plural
    >>> plural(1, "test"), plural(2, "proxy")
    ('1 test', '2 proxies')
"""

from __future__ import annotations

from collections.abc import Mapping

from safe_tracectx.auditlog.document_types import ChildProcesses, LeakedSet, PassStats, Violation
from safe_tracectx.auditlog.documents import site_text

__all__ = ["balance_lines", "child_lines", "not_audited", "pass_lines", "plural", "violation_lines"]


def plural(count: int, noun: str) -> str:
    """``1 test``, ``2 tests``, ``2 proxies``."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {noun[:-1]}ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else f"{count} {noun}s"


def not_audited(count: int) -> str:
    """``1 child process was not audited``, ``2 child processes were ...``."""
    return f"{count} child process{' was' if count == 1 else 'es were'} not audited"


def child_lines(children: ChildProcesses, of: str = "") -> list[str]:
    """Each child process's counts, sets never reset and violations; and how many were not audited (``of``: whose
    children, in a combined report)."""
    audited = children["audited"]
    out = ["", f"Child processes{of} ({len(audited)} audited, {children['not_audited']} not audited)"]
    for member in audited:
        audit = member["audit"]
        counts = audit["counts"]
        out.append(
            f"  {member['name']}: proxies {counts.get('proxy_created', 0)}, sets {counts.get('trace_set', 0)}, "
            f"never reset {len(audit['leaked_sets'])}, violations {len(audit['violations'])}"
        )
        out += ["  " + line for line in balance_lines({}, audit["leaked_sets"])[1:]]
        for violation in audit["violations"]:
            out.append(f"    [{violation['error']}, {violation['action']}] {violation['message']}")
    if children["not_audited"]:
        out.append(
            f"  {not_audited(children['not_audited'])}: each ended without writing its data (killed, os._exit "
            "in its own code, or still running when the program ended); their leaks are not in this report"
        )
    return out


def pass_lines(passes: Mapping[str, PassStats]) -> list[str]:
    """A line per audited pass: runs, runs that changed its trace, seconds, proxies, violations."""
    width = min(60, max([28, *map(len, passes)]))
    return [
        f"  {name:<{width}} runs {stats['runs']:>3}  changed its trace {stats['changed']:>3}  "
        f"{stats['seconds']:6.2f}s  proxies {stats.get('proxies', 0):>5}  violations {len(stats['violations']):>3}"
        for name, stats in sorted(passes.items())
    ]


def balance_lines(counts: Mapping[str, int], leaked: list[LeakedSet]) -> list[str]:
    """Sets, resets and sets never reset, with the line of each of those."""
    out = [f"  sets {counts.get('trace_set', 0)}, resets {counts.get('trace_reset', 0)}, never reset {len(leaked)}"]
    for entry in leaked:
        out.append(f"  never reset: set_tracectx({entry['trace']}) at {site_text(entry['site'])} [{entry['thread']}]")
    return out


def violation_lines(violations: list[Violation]) -> list[str]:
    """Each violation: ``[error, action] message``, where, and its fix."""
    out = []
    for violation in violations:
        out.append(f"  [{violation['error']}, {violation['action']}] {violation['message']}")
        out.append(f"      at {site_text(violation['site'])}")
        out.append(f"      fix: {violation['fix']}")
    return out
