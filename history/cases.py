"""The corpus: one file per real Thunder bug, ``history/cases/<id>.toml``; this module is their only reader.

    >>> from history.cases import load_cases
    >>> cases = load_cases()
    >>> all(case.fix != case.parent for case in cases)
    True
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any, Final

__all__ = ["CASES_DIR", "EXPECTATIONS", "Case", "ORDINARY", "load_case", "load_cases"]

HERE: Final = Path(__file__).resolve().parent
CASES_DIR: Final = HERE / "cases"
PROGRAMS: Final = HERE / "programs"

_REQUIRED: Final = ("pr", "summary", "parent", "fix", "names", "culprit")
_OPTIONAL: Final = (
    "program", "test", "fast", "needs", "cpu_adapted", "note", "kind", "args", "expect", "missed_because", "held_out",
    "held_out_note", "other_bug_at_fix",
)
#: The keys of ``other_bug_at_fix``: the kind of our report it gives, the commit (and PR) that fixed it, and why the
#: report is that bug's and right.
_OTHER_BUG: Final = ("kind", "fixed_by", "why")
#: What a case expects of safe-tracectx: caught at the parent (names and culprit, before Thunder's failure), or
#: missed, for the reason given; silent at the fix either way.
EXPECTATIONS: Final = ("caught", "missed")


@dataclasses.dataclass(frozen=True)
class Case:
    """A fix commit of Thunder, its parent (with the bug), what to run, and what we must report at the parent."""

    id: str
    pr: int
    summary: str
    parent: str
    fix: str
    #: The bug's own names: each must appear in what we report at the parent.
    names: tuple[str, ...]
    #: The pass (or step) that made the bug: our report must name it (a substring of its label).
    culprit: str
    #: A repro of our own (a file in history/programs/): exits 0 where Thunder is right, else fails.
    program: str | None = None
    #: Thunder's own regression test, as the node id at the fix commit (run against the parent's package).
    test: str | None = None
    #: Also run by ``make test``.
    fast: bool = False
    #: Extra PyPI packages the commits need (installed into a --target folder).
    needs: tuple[str, ...] = ()
    #: How a CUDA-only bug was brought to the CPU (its mechanism does not need CUDA).
    cpu_adapted: str | None = None
    #: The violation kind we expect (informative).
    kind: str | None = None
    note: str | None = None
    #: Arguments for the program.
    args: tuple[str, ...] = ()
    #: ``caught`` (the default) or ``missed``; a miss says why, and what catching it would need.
    expect: str = "caught"
    missed_because: str | None = None
    #: A case found after the checks were written, by a search for fixes of the class, not one they were written
    #: against: ``caught`` or ``missed``, what they gave it when it was found (before any change made for it).
    held_out: str | None = None
    #: The commit it was found at, and what changed since.
    held_out_note: str | None = None
    #: Another real bug the fix commit still has, which the case's program runs into and a later commit fixed:
    #: ``{kind, fixed_by, why}``. Our reports of that kind at the fix are that bug's (counted apart, not as noise).
    other_bug_at_fix: dict[str, str] | None = None

    def excused_at_fix(self, violation: dict[str, Any]) -> bool:
        """Whether a violation at the fix commit is the other bug the fix still has."""
        return self.other_bug_at_fix is not None and violation.get("kind") == self.other_bug_at_fix["kind"]

    @property
    def runs_test(self) -> bool:
        return self.test is not None

    @property
    def program_path(self) -> Path:
        assert self.program is not None
        return PROGRAMS / self.program


def load_case(path: Path) -> Case:
    """The case in ``path`` (its id is the file's name); a ValueError naming the file for a malformed one."""
    with path.open("rb") as file:
        entry = tomllib.load(file)
    where = path.name
    missing = [key for key in _REQUIRED if key not in entry]
    unknown = sorted(set(entry) - set(_REQUIRED) - set(_OPTIONAL))
    if missing or unknown:
        raise ValueError(f"{where}: missing {missing}, unknown {unknown}")
    if ("program" in entry) == ("test" in entry):
        raise ValueError(f"{where}: give exactly one of program= and test=")
    values = dict(entry)
    for key in ("names", "needs", "args"):
        if key in values:
            values[key] = tuple(values[key])
    case = Case(id=path.stem, **values)
    if case.program is not None and not case.program_path.is_file():
        raise ValueError(f"{where}: no program {case.program_path}")
    if case.expect not in EXPECTATIONS:
        raise ValueError(f"{where}: expect = {case.expect!r}; use one of {', '.join(EXPECTATIONS)}")
    if case.held_out is not None and case.held_out not in EXPECTATIONS:
        raise ValueError(f"{where}: held_out = {case.held_out!r}; use one of {', '.join(EXPECTATIONS)}")
    other = case.other_bug_at_fix
    if other is not None and (not isinstance(other, dict) or sorted(other) != sorted(_OTHER_BUG)):
        raise ValueError(f"{where}: other_bug_at_fix is a table of {', '.join(_OTHER_BUG)}")
    if (case.expect == "missed") != (case.missed_because is not None):
        raise ValueError(f"{where}: a case expected to be missed says why in missed_because (and only such a case)")
    return case


def load_cases(folder: Path = CASES_DIR) -> list[Case]:
    """Every case, by id."""
    return [load_case(path) for path in sorted(folder.glob("*.toml"))]


#: The ordinary programs (history/programs/ordinary_*.py) and the Thunder versions they are run at.
ORDINARY: Final = {
    "programs": ("ordinary_mlp.py", "ordinary_block.py"),
    "executors": ("default", "torch_compile", "torch_compile_first"),
    "versions": ("0.2.1", "0.2.2", "0.2.3", "0.2.4", "0.2.5", "0.2.6", "main"),
}
