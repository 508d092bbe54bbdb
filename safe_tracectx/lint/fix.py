"""``safe-tracectx lint --fix``: carry out the edits of :mod:`safe_tracectx.lint.fixplan` with libcst.

libcst keeps every comment and blank line; the fix repeats until nothing more can be fixed, so
fixing twice gives the same text, and each fixed finding is gone from the fixed text:

    >>> src = "def f(t):\\n    tok = set_tracectx(t)\\n    g()\\n    reset_tracectx(tok)\\n"
    >>> print(fix_source(src).source, end="")
    def f(t):
        tok = set_tracectx(t)
        try:
            g()
        finally:
            reset_tracectx(tok)

libcst is imported only here, when ``--fix`` or ``--diff`` asks for it.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from safe_tracectx.lint.fixplan import Edit, Unfixed, plan
from safe_tracectx.lint.rules import DEFAULT_CODES
from safe_tracectx.lint.runner import lint_source, parse_source

if TYPE_CHECKING:
    import libcst as cst

__all__ = ["FIXABLE", "FixResult", "diff", "fix_source", "line_before"]

FIXABLE = frozenset({"STC001", "STC002", "STC003"})
_MAX_PASSES = 8


class _CannotFix(Exception):
    """An edit the source's shape does not allow after all: its findings are left with this reason."""


@dataclasses.dataclass
class FixResult:
    """The fixed text, how many findings the fix removed, and those it left with the reason."""

    source: str
    fixed: int
    unfixed: list[Unfixed]


def _rewrite(source: str, edits: Sequence[Edit]) -> str:
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    by_first: dict[int, list[Edit]] = {}
    for edit in edits:
        by_first.setdefault(edit.first, []).append(edit)

    class Rewriter(cst.CSTTransformer):
        METADATA_DEPENDENCIES = (PositionProvider,)

        def _line(self, node: cst.CSTNode) -> int:
            return self.get_metadata(PositionProvider, node).start.line

        def _body(self, original: Sequence[cst.BaseStatement], updated: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
            index = {self._line(stmt): i for i, stmt in enumerate(original)}
            spans: list[tuple[int, int, Edit]] = []
            for edit in (e for line in index for e in by_first.get(line, ())):
                if edit.kind == "wrap" and edit.first in index and edit.last in index:
                    spans.append((index[edit.first], index[edit.last], edit))
                elif edit.kind == "hoist" and edit.first in index:
                    spans.append((index[edit.first], index[edit.first], edit))
            chosen: list[tuple[int, int, Edit]] = []
            for span in sorted(spans, key=lambda s: s[0]):  # nested or crossing spans wait for the next pass
                if not chosen or span[0] > chosen[-1][1]:
                    chosen.append(span)
            body = list(updated)
            for start, end, edit in reversed(chosen):
                body[start : end + 1] = _wrap(body[start : end + 1]) if edit.kind == "wrap" else _hoist(body[start])
            return body

        def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
            return updated_node.with_changes(body=self._body(original_node.body, updated_node.body))

        def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
            return updated_node.with_changes(body=self._body(original_node.body, updated_node.body))

    code = MetadataWrapper(cst.parse_module(source)).visit(Rewriter()).code
    if source.endswith("\r") and not code.endswith(("\r", "\n")):
        code += "\r"  # libcst drops the last line break of a file with CR-only line endings
    return code


def _wrap(span: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``set; a; b; reset`` -> ``set; try: a; b finally: reset``."""
    import libcst as cst

    first, *between, reset = span
    final = cst.Finally(body=cst.IndentedBlock(body=[_no_leading_blank(reset)]))
    body = [_no_leading_blank(between[0]), *between[1:]] if between else [cst.SimpleStatementLine(body=[cst.Pass()])]
    return [first, cst.Try(body=cst.IndentedBlock(body=body), finalbody=final)]


def _no_leading_blank(statement: cst.BaseStatement) -> cst.BaseStatement:
    """The statement without the blank lines above it (its comments stay): the first one of a new block."""
    import libcst as cst

    if not isinstance(statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        return statement
    lines = list(statement.leading_lines)
    while lines and lines[0].comment is None:
        lines.pop(0)
    return statement.with_changes(leading_lines=lines)


def _hoist(statement: cst.BaseStatement) -> list[cst.BaseStatement]:
    """``try: set; a finally: ...`` -> ``set; try: a finally: ...`` (comments above ``try`` stay above)."""
    import libcst as cst

    if not isinstance(statement, (cst.Try, cst.TryStar)) or not isinstance(statement.body, cst.IndentedBlock):
        raise _CannotFix("the `try` body is on the line of `try:`: give it lines of its own")
    first, *rest = statement.body.body
    if not isinstance(first, cst.SimpleStatementLine):
        raise _CannotFix("the set is not a statement of its own line")
    moved = first.with_changes(leading_lines=[*statement.leading_lines, *first.leading_lines])
    body = [_no_leading_blank(rest[0]), *rest[1:]] if rest else [cst.SimpleStatementLine(body=[cst.Pass()])]
    return [moved, statement.with_changes(leading_lines=[], body=statement.body.with_changes(body=body))]


def _findings(source: str, path: str, codes: frozenset[str]) -> list[tuple[int, str]]:
    return [(f.line, f.code) for f in lint_source(source, path, codes=codes & FIXABLE)]


def fix_source(source: str, path: str = "<source>", *, codes: frozenset[str] = DEFAULT_CODES) -> FixResult:
    """Fix what can be fixed with certainty; a source that does not parse is returned as it is."""
    try:
        tree = parse_source(source, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return FixResult(source, 0, [])
    findings = _findings(source, path, codes)
    before, text = len(findings), source
    edits, unfixed = plan(tree, findings)
    for _ in range(_MAX_PASSES):
        if not edits:
            break
        try:
            rewritten = _rewrite(text, edits)
        except _CannotFix as error:
            return _left(text, before, findings, unfixed, edits, str(error))
        except Exception as error:  # libcst cannot take this file (too deep, a syntax it lacks): left as it is
            return _left(text, before, findings, unfixed, edits, f"libcst cannot rewrite this file ({type(error).__name__})")
        if rewritten == text:
            break
        text = rewritten
        findings = _findings(text, path, codes)
        edits, unfixed = plan(parse_source(text, path), findings)
    unfixed += [Unfixed(e.line, e.code, "its block is on the line of its header (`if x: ...`): give it lines of its own") for e in edits]
    return FixResult(text, before - len(findings), sorted(unfixed, key=lambda u: u.line))


def _left(text: str, before: int, findings: list[tuple[int, str]], unfixed: list[Unfixed], edits: list[Edit], reason: str) -> FixResult:
    """The text of the passes so far, the edits of the pass that failed left with ``reason``."""
    left = unfixed + [Unfixed(e.line, e.code, reason) for e in edits]
    return FixResult(text, before - len(findings), sorted(left, key=lambda u: u.line))


def diff(path: str, before: str, after: str) -> str:
    """A unified diff of one file's fix (empty when nothing changed)."""
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}")
    return "".join(lines)


def line_before(before: str, after: str, line: int) -> int:
    """The line of ``before`` that line ``line`` of the fixed ``after`` was (a fix re-indents and inserts lines).

    Lines are matched ignoring their indentation; a line the fix added maps to the line before it.
    """
    old = [text.strip() for text in before.splitlines()]
    new = [text.strip() for text in after.splitlines()]
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    found = 0
    for old_start, new_start, size in matcher.get_matching_blocks():
        if new_start + size < line:
            found = old_start + size  # the last line of before matched above ``line``
        elif new_start < line:
            return old_start + (line - 1 - new_start) + 1
    return max(found, 1)
