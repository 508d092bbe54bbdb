"""``safe-tracectx lint --fix`` and ``--diff``: fix each file (or show the diff), say what was left and why.

    >>> from safe_tracectx.lint.command import main
    >>> main(["--diff", "--select", ",", "."]) == 2  # options are checked before anything is read
    True
"""

from __future__ import annotations

import argparse
import io
import sys
import tokenize
from collections.abc import Sequence
from pathlib import Path

from safe_tracectx.exitcodes import ExitStatus
from safe_tracectx.lint.files import discover
from safe_tracectx.lint.runner import PerFileIgnore, codes_for

__all__ = ["run_fix"]

PROG = "safe-tracectx lint"


def _fix_one(name: str, data: bytes, codes: frozenset[str], args: argparse.Namespace, out: list[str]) -> tuple[int, bool, bytes | None]:
    """(findings fixed, anything left unfixed, the new bytes or None when unchanged)."""
    from safe_tracectx.lint.fix import diff, fix_source

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        source = data.decode(encoding)
    except (UnicodeError, SyntaxError, LookupError):
        return 0, False, None  # STC902: the report of the lint that follows names it
    result = fix_source(source, name, codes=codes)
    for left in result.unfixed:
        print(f"{name}:{left.line}: {left.code} not fixed: {left.reason}", file=sys.stderr)
    if result.source == source:
        return 0, bool(result.unfixed), None
    if args.diff:
        out.append(diff(name, source, result.source))
    return result.fixed, bool(result.unfixed), result.source.encode(encoding)


def run_fix(
    args: argparse.Namespace,
    paths: Sequence[str],
    codes: frozenset[str],
    exclude: Sequence[str],
    per_file: Sequence[PerFileIgnore],
    root: Path | None,
) -> int | None:
    """Fix (or diff) every file; returns the exit status when nothing more is to be reported, else
    None, and the lint of the fixed files follows."""
    try:
        import libcst  # noqa: F401
    except ImportError:
        print(f"{PROG}: error: --fix and --diff need libcst: pip install 'safe-tracectx[fix]'", file=sys.stderr)
        return ExitStatus.USAGE_ERROR
    try:
        files = discover([p for p in paths if p != "-"], exclude=exclude, root=root).files
    except OSError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return ExitStatus.USAGE_ERROR
    diffs: list[str] = []
    fixed = changed = 0
    unfixed = False
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            continue  # STC903 in the lint that follows
        count, left, new = _fix_one(str(path), data, codes_for(str(path), codes, per_file, root), args, diffs)
        fixed, unfixed = fixed + count, unfixed or left
        if new is not None:
            changed += 1
            if not args.diff:
                path.write_bytes(new)
    if "-" in paths:
        name = args.stdin_filename or "-"
        data = sys.stdin.buffer.read() if sys.stdin is not None else b""
        count, left, new = _fix_one(name, data, codes_for(name, codes, per_file, root), args, diffs)
        fixed, unfixed = fixed + count, unfixed or left
        if not args.diff:
            sys.stdout.buffer.write(new if new is not None else data)
            sys.stdout.flush()
            return ExitStatus.FINDINGS if left else ExitStatus.OK
        changed += new is not None
    verb = "would fix" if args.diff else "fixed"
    print(f"{PROG}: {verb} {fixed} finding(s) in {changed} file(s)", file=sys.stderr)
    if args.diff:
        print("".join(diffs), end="")
        return ExitStatus.FINDINGS if (diffs or unfixed) and not args.exit_zero else ExitStatus.OK
    return None
