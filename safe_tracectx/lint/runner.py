"""Read the files safely, check them, and apply ``# noqa``, code selection and per-file ignores.

No single file aborts a run: a file that cannot be decoded, parsed, read or checked is a
finding of its own (STC901, STC902, STC903) and the other files are still checked.

    >>> from safe_tracectx.lint.runner import lint_source
    >>> src = "tok = set_tracectx(t)  # noqa: STC001\\n"
    >>> lint_source(src, "example.py")
    []
"""

from __future__ import annotations

import ast
import dataclasses
import io
import re
import threading
import tokenize
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from safe_tracectx.lint.checker import Finding, check_tree
from safe_tracectx.lint.files import DEFAULT_EXCLUDE, Skip, discover, matches, relative_posix
from safe_tracectx.lint.rules import ALL_CODES, AUDIT_CODES, DEFAULT_CODES

__all__ = [
    "FileFinding",
    "LintResult",
    "PerFileIgnore",
    "iter_python_files",
    "lint_bytes",
    "lint_paths",
    "lint_source",
    "parse_codes",
    "parse_source",
    "select_codes",
]

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)

#: A glob and the codes it ignores in the files it matches, e.g. ``("tests/*", frozenset({"STC001"}))``.
PerFileIgnore = tuple[str, frozenset[str]]


@dataclasses.dataclass(frozen=True, order=True)
class FileFinding:
    """A finding in a file."""

    path: str
    finding: Finding


@dataclasses.dataclass
class LintResult:
    """All findings of one run, how many files were checked, and the paths skipped (not regular files)."""

    findings: list[FileFinding]
    files_checked: int
    skipped: list[Skip] = dataclasses.field(default_factory=list)

    @property
    def failures(self) -> list[FileFinding]:
        """The findings that fail a run: all but the informational ones (guarded STC100 sites)."""
        return [f for f in self.findings if not f.finding.informational]


def parse_codes(text: str, *, option: str = "--select") -> frozenset[str]:
    """``"STC001,STC002"`` or a prefix like ``"STC0"`` -> the matching codes.

    Unknown codes, and a list naming no code at all (``","``), raise ValueError:

        >>> sorted(parse_codes("STC00"))
        ['STC001', 'STC002', 'STC003']
        >>> parse_codes(",")
        Traceback (most recent call last):
        ...
        ValueError: --select ',' names no rule code; give codes or prefixes like STC001,STC002 or STC0
    """
    parts = [p.strip().upper() for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError(f"{option} {text!r} names no rule code; give codes or prefixes like STC001,STC002 or STC0")
    codes: set[str] = set()
    for part in parts:
        matching = {code for code in ALL_CODES if code.startswith(part)}
        if not matching:
            raise ValueError(f"{option}: unknown rule code {part!r}; the codes are: {', '.join(sorted(ALL_CODES))}")
        codes |= matching
    return frozenset(codes)


def select_codes(select: Iterable[str] | None = None, ignore: Iterable[str] = (), *, audit: bool = False) -> frozenset[str]:
    """The codes a run reports: ``select`` (default: all but STC100, plus it with ``audit``, i.e.
    ``--list-proxy-sites``) minus ``ignore``."""
    chosen = frozenset(select) if select is not None else DEFAULT_CODES | (AUDIT_CODES if audit else frozenset())
    return chosen - frozenset(ignore)


def _suppressed(line: str, code: str) -> bool:
    match = _NOQA.search(line)
    if match is None:
        return False
    codes = match.group("codes")
    return codes is None or code in {c.upper() for c in re.split(r"[\s,]+", codes)}


def _unchecked(reason: str, line: int = 1, col: int = 1) -> Finding:
    return Finding(line, col, "STC903", f"{reason}; the file was not checked")


def lint_source(source: str, path: str = "<source>", *, codes: frozenset[str] = DEFAULT_CODES) -> list[Finding]:
    """Check one module's text; a syntax error is one STC901 finding, a module too deeply nested
    for Python's parser (or a checker error) one STC903 finding."""
    found = _check(source, path, codes)
    if not found:
        return []
    comments = _comments(source)
    return [f for f in found if f.code in codes and not _suppressed(comments.get(f.line, ""), f.code)]


def _comments(source: str) -> dict[int, str]:
    """The comment of each line, numbered as Python numbers lines (``\\n``, ``\\r\\n`` or ``\\r`` end one;
    a form feed or U+2028 does not). A file that does not tokenize: the text of each line."""
    comments: dict[int, str] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source, newline=None).readline):
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = token.string
    except (tokenize.TokenError, SyntaxError, ValueError):
        return dict(enumerate(re.split(r"\r\n|\r|\n", source), start=1))
    return comments


_PARSING = threading.Lock()


def parse_source(source: str, path: str = "<source>") -> ast.Module:
    """``ast.parse`` without the parser's own warnings about the file (``1()``, ``"\\d"``).

    They are the file's business, not the linter's; under ``-W error`` they would
    turn a valid file into a SyntaxError that is "not checked"::

        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("error")
        ...     type(parse_source("x = 1()")).__name__
        'Module'
    """
    # catch_warnings swaps the process-wide filter list: two threads interleaving it would
    # leave one's "ignore" in place for good, so parses take turns.
    with _PARSING, warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(source, filename=path)


def _check(source: str, path: str, codes: frozenset[str]) -> list[Finding]:
    try:
        tree = parse_source(source, path)
    except SyntaxError as error:
        return [Finding(error.lineno or 1, error.offset or 1, "STC901", f"syntax error: {error.msg}; the file was not checked")]
    except (RecursionError, MemoryError) as error:
        kind = type(error).__name__
        return [_unchecked(f"nested too deeply for Python's parser ({kind}); split the deep expression")]
    except ValueError as error:  # null bytes, on Pythons that raise ValueError for them
        return [Finding(1, 1, "STC901", f"syntax error: {error}; the file was not checked")]
    audit = bool(codes & AUDIT_CODES)
    # Every set/reset rule needs the text "set_tracectx" (an alias is imported under that name);
    # every proxy-creating call needs "roxy" or "replace". Files without them cannot have findings.
    if "set_tracectx" not in source and not (audit and ("roxy" in source or "replace" in source)):
        return []
    try:
        return check_tree(tree, audit=audit)
    except RecursionError:
        return [_unchecked("nested too deeply for the checker (RecursionError); split the deep expression")]
    except Exception as error:  # a checker bug must not stop the other files
        return [_unchecked(f"internal error {type(error).__name__}: {error}; please report it with this file")]


def decode_source(data: bytes) -> str:
    """The text of a module's bytes, in the encoding its coding line declares (UTF-8 by default).

    Raises UnicodeError (bad bytes, or a codec like ``undefined`` that refuses all), SyntaxError
    (an unknown encoding name or a BOM that contradicts the coding line) or LookupError.
    """
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding)


def lint_bytes(data: bytes, path: str = "<source>", *, codes: frozenset[str] = DEFAULT_CODES) -> list[Finding]:
    """Check one module's bytes; undecodable bytes are one STC902 finding at the bad byte's line.

        >>> [(f.code, f.message) for f in lint_bytes(b"x = '\\xff'\\n")]
        [('STC902', 'not valid utf-8: byte 0xff at line 1 (invalid start byte); it was not checked')]
    """
    try:
        source = decode_source(data)
    except (UnicodeError, SyntaxError, LookupError) as error:
        line, reason = _decode_problem(data, error)
        return [Finding(line, 1, "STC902", f"{reason}; it was not checked")] if "STC902" in codes else []
    return lint_source(source, path, codes=codes)


def _decode_problem(data: bytes, error: Exception) -> tuple[int, str]:
    if isinstance(error, SyntaxError) and "encoding declaration" in str(error.msg):
        try:  # tokenize says "invalid or missing encoding declaration" for bad UTF-8: find the byte
            data.decode("utf-8")
        except UnicodeDecodeError as precise:
            error = precise
    if isinstance(error, UnicodeDecodeError):
        line = data.count(b"\n", 0, error.start) + 1
        return line, f"not valid {error.encoding}: byte 0x{data[error.start]:02x} at line {line} ({error.reason})"
    if isinstance(error, SyntaxError):
        return error.lineno or 1, f"cannot decode the file: {error.msg}"
    return 1, f"cannot decode the file: {error}"


def codes_for(path: str, codes: frozenset[str], per_file_ignores: Sequence[PerFileIgnore], root: Path | None = None) -> frozenset[str]:
    """``codes`` less those a per-file ignore pattern matching ``path`` names."""
    relative = relative_posix(path, root)
    for pattern, ignored in per_file_ignores:
        if matches(relative, (pattern,)):
            codes -= ignored
    return codes


def iter_python_files(paths: Sequence[str]) -> Iterator[Path]:
    """Each regular ``.py`` file a run with the default excludes reads under ``paths``."""
    yield from discover(paths).files


def lint_paths(
    paths: Sequence[str],
    *,
    codes: frozenset[str] = DEFAULT_CODES,
    exclude: Sequence[str] = DEFAULT_EXCLUDE,
    per_file_ignores: Sequence[PerFileIgnore] = (),
    root: Path | None = None,
) -> LintResult:
    """Check every Python file under ``paths`` (relative globs are taken from ``root``, default: the
    current folder). A path that does not exist raises FileNotFoundError; every other problem is a
    finding or a skip of that one file."""
    found = discover(paths, exclude=exclude, root=root)
    findings: list[FileFinding] = []
    for path in found.files:
        name = str(path)
        file_codes = codes_for(name, codes, per_file_ignores, root)
        try:
            data = path.read_bytes()
        except OSError as error:
            if "STC903" in file_codes:
                findings.append(FileFinding(name, _unchecked(f"cannot read the file ({error.strerror or error})")))
            continue
        findings.extend(FileFinding(name, f) for f in lint_bytes(data, name, codes=file_codes))
    return LintResult(findings, len(found.files), found.skipped)
