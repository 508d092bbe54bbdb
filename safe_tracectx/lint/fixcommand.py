"""``safe-tracectx lint --fix`` and ``--diff``: fix each file (or show the diff), say what was left and why.

No file stops the others: a file that cannot be decoded, parsed, rewritten or written is reported
and the run goes on.

    >>> from safe_tracectx.lint.command import main
    >>> main(["--diff", "--select", ",", "."]) == 2  # options are checked before anything is read
    True
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import sys
import tokenize
from collections.abc import Sequence
from pathlib import Path

from safe_tracectx.exitcodes import ExitStatus
from safe_tracectx.lint.files import discover
from safe_tracectx.lint.formatters import format_text, write_report
from safe_tracectx.lint.runner import PerFileIgnore, codes_for, lint_bytes, lint_paths

__all__ = ["FixOutcome", "run_fix"]

PROG = "safe-tracectx lint"
_PROBLEMS = frozenset({"STC901", "STC902", "STC903"})


@dataclasses.dataclass
class FixOutcome:
    """What ``--fix``/``--diff`` did: ``status`` is the exit status when nothing more is to be
    reported (else None: the lint of the fixed files follows); ``unwritable``: a file could not be
    written (exit status ``USAGE_ERROR`` after the lint)."""

    status: int | None
    unwritable: bool = False


@dataclasses.dataclass
class _Tally:
    fixed: int = 0
    changed: int = 0
    left: bool = False  # findings left unfixed, or files that could not be checked
    unwritable: bool = False
    diffs: list[str] = dataclasses.field(default_factory=list)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _fix_one(name: str, data: bytes, codes: frozenset[str], args: argparse.Namespace, tally: _Tally) -> bytes | None:
    """Fix one file's bytes; the new bytes, or None when unchanged. Syntax and decoding errors
    (STC901-STC903) are printed for ``--diff`` and standard input (a lint of the file follows otherwise)."""
    from safe_tracectx.lint.fix import diff, fix_source, line_before

    problems = lint_bytes(data, name, codes=codes & _PROBLEMS)
    if problems:
        tally.left = True
        if args.diff or name == (args.stdin_filename or "-"):
            for f in problems:
                _say(f"{name}:{f.line}:{f.col}: {f.code} {f.message}")
        return None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        source = data.decode(encoding)
    except (UnicodeError, SyntaxError, LookupError):
        return None  # STC902, not selected
    try:
        result = fix_source(source, name, codes=codes)
        new = result.source.encode(encoding) if result.source != source else None
    except Exception as error:  # a bug must not stop the other files; the finding stays
        _say(f"{name}: not fixed: internal error {type(error).__name__}: {error}")
        tally.left = True
        return None
    for left in result.unfixed:  # --diff leaves the file as it was: name its lines, not the fixed text's
        line = line_before(source, result.source, left.line) if args.diff else left.line
        _say(f"{name}:{line}: {left.code} not fixed: {left.reason}")
    tally.left = tally.left or bool(result.unfixed)
    if new is not None:
        tally.fixed += result.fixed
        tally.changed += 1
        if args.diff:
            tally.diffs.append(diff(name, source, result.source))
    return new


def run_fix(
    args: argparse.Namespace,
    paths: Sequence[str],
    codes: frozenset[str],
    exclude: Sequence[str],
    per_file: Sequence[PerFileIgnore],
    root: Path | None,
) -> FixOutcome:
    """Fix (or diff) every file, then standard input."""
    try:
        import libcst  # noqa: F401
    except ImportError:
        _say(f"{PROG}: error: --fix and --diff need libcst: pip install 'libcst>=1.1'")
        return FixOutcome(ExitStatus.USAGE_ERROR)
    files_given = [p for p in paths if p != "-"]
    try:
        files = discover(files_given, exclude=exclude, root=root).files
    except OSError as error:
        _say(f"{PROG}: error: {error}")
        return FixOutcome(ExitStatus.USAGE_ERROR)
    tally = _Tally()
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            continue  # STC903 in the lint that follows
        new = _fix_one(str(path), data, codes_for(str(path), codes, per_file, root), args, tally)
        if new is not None and not args.diff:
            try:
                path.write_bytes(new)
            except OSError as error:
                _say(f"{PROG}: error: cannot write {path}: {error.strerror or error}")
                tally.unwritable = True
    if "-" in paths:
        name = args.stdin_filename or "-"
        data = sys.stdin.buffer.read() if sys.stdin is not None else b""
        new = _fix_one(name, data, codes_for(name, codes, per_file, root), args, tally)
        if not args.diff:
            sys.stdout.buffer.write(new if new is not None else data)
            sys.stdout.flush()
            return FixOutcome(_after_stdin(args, files_given, codes, exclude, per_file, root, tally))
    _say(f"{PROG}: {'would fix' if args.diff else 'fixed'} {tally.fixed} finding(s) in {tally.changed} file(s)")
    if args.diff:
        problem = write_report("".join(tally.diffs), args.output)
        if problem:
            _say(f"{PROG}: error: {problem}")
        if problem or tally.unwritable:
            return FixOutcome(ExitStatus.USAGE_ERROR)
        return FixOutcome(ExitStatus.FINDINGS if (tally.diffs or tally.left) and not args.exit_zero else ExitStatus.OK)
    return FixOutcome(None, tally.unwritable)


def _after_stdin(
    args: argparse.Namespace,
    files: Sequence[str],
    codes: frozenset[str],
    exclude: Sequence[str],
    per_file: Sequence[PerFileIgnore],
    root: Path | None,
    tally: _Tally,
) -> int:
    """``--fix -``: standard output holds the fixed source, so the lint of the other files goes to standard error."""
    failures = False
    if files:
        result = lint_paths(files, codes=codes, exclude=exclude, per_file_ignores=per_file, root=root)
        if result.findings:
            _say(format_text(result))
        failures = bool(result.failures)
    if tally.unwritable:
        return ExitStatus.USAGE_ERROR
    return ExitStatus.FINDINGS if (tally.left or failures) and not args.exit_zero else ExitStatus.OK
