"""Find the files, read them safely, check them, and apply ``# noqa`` and code selection.

    >>> from safe_tracectx.lint.runner import lint_source
    >>> src = "tok = set_tracectx(t)  # noqa: STC001\\n"
    >>> lint_source(src, "example.py")
    []
"""

from __future__ import annotations

import ast
import dataclasses
import io
import os
import re
import tokenize
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from safe_tracectx.lint.checker import Finding, check_tree
from safe_tracectx.lint.rules import ALL_CODES, AUDIT_CODES, DEFAULT_CODES

__all__ = ["FileFinding", "LintResult", "lint_paths", "lint_source", "parse_codes", "select_codes"]

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)


@dataclasses.dataclass(frozen=True, order=True)
class FileFinding:
    """A finding in a file."""

    path: str
    finding: Finding


@dataclasses.dataclass
class LintResult:
    """All findings of one run and how many files were checked."""

    findings: list[FileFinding]
    files_checked: int


def parse_codes(text: str) -> frozenset[str]:
    """``"STC001,STC002"`` or a prefix like ``"STC0"`` -> the matching codes; unknown ones raise ValueError."""
    codes: set[str] = set()
    for part in filter(None, (p.strip().upper() for p in text.split(","))):
        matching = {code for code in ALL_CODES if code.startswith(part)}
        if not matching:
            raise ValueError(f"unknown rule code {part!r}; the codes are: {', '.join(sorted(ALL_CODES))}")
        codes |= matching
    return frozenset(codes)


def select_codes(select: Iterable[str] | None = None, ignore: Iterable[str] = (), *, audit: bool = False) -> frozenset[str]:
    """The codes a run reports: ``select`` (default: all but the audit ones, plus them with ``audit``) minus ``ignore``."""
    chosen = frozenset(select) if select is not None else DEFAULT_CODES | (AUDIT_CODES if audit else frozenset())
    return chosen - frozenset(ignore)


def _suppressed(line: str, code: str) -> bool:
    match = _NOQA.search(line)
    if match is None:
        return False
    codes = match.group("codes")
    return codes is None or code in {c.upper() for c in re.split(r"[\s,]+", codes)}


def lint_source(source: str, path: str = "<source>", *, codes: frozenset[str] = DEFAULT_CODES) -> list[Finding]:
    """Check one module's text; a syntax error is one STC901 finding at its line."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as error:
        finding = Finding(error.lineno or 1, error.offset or 1, "STC901", f"syntax error: {error.msg}; the file was not checked")
        return [finding] if "STC901" in codes else []
    audit = bool(codes & AUDIT_CODES)
    # Every set/reset rule needs the text "set_tracectx" (an alias is imported under that name);
    # every proxy-creating call needs "roxy" or "replace". Files without them cannot have findings.
    if "set_tracectx" not in source and not (audit and ("roxy" in source or "replace" in source)):
        return []
    lines = source.splitlines()
    return [
        f
        for f in check_tree(tree, audit=audit)
        if f.code in codes and not (0 < f.line <= len(lines) and _suppressed(lines[f.line - 1], f.code))
    ]


def _decode(data: bytes) -> str:
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding)


def iter_python_files(paths: Sequence[str]) -> Iterator[Path]:
    """Each ``.py`` file under ``paths``; hidden folders and ``__pycache__`` below a given folder are skipped.

    A path that does not exist raises FileNotFoundError.
    """
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            yield path
        elif path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
                for name in sorted(files):
                    if name.endswith(".py"):
                        yield Path(root, name)
        else:
            raise FileNotFoundError(f"no such file or directory: {raw}")


def lint_paths(paths: Sequence[str], *, codes: frozenset[str] = DEFAULT_CODES) -> LintResult:
    """Check every Python file under ``paths``. Unreadable or undecodable files are findings, not crashes."""
    findings: list[FileFinding] = []
    checked = 0
    for path in iter_python_files(paths):
        checked += 1
        name = str(path)
        try:
            source = _decode(path.read_bytes())
        except (UnicodeDecodeError, SyntaxError, LookupError) as error:
            if "STC902" in codes:
                reason = getattr(error, "reason", None) or str(error)
                findings.append(FileFinding(name, Finding(1, 1, "STC902", f"cannot decode the file: {reason}; it was not checked")))
            continue
        findings.extend(FileFinding(name, f) for f in lint_source(source, name, codes=codes))
    return LintResult(findings, checked)
