"""Which findings ``--fix`` can fix with certainty, and how; the others with the reason they are left.

Two edits, decided on the ``ast`` and carried out by :mod:`safe_tracectx.lint.fix` with libcst:

* ``wrap`` (STC001, STC003): the statements after ``tok = set_tracectx(...)`` up to its one reset
  ``reset_tracectx(tok)`` in the same block go into ``try:``, the reset into its ``finally:``;
* ``hoist`` (STC002): ``tok = set_tracectx(...)``, the first statement of a ``try`` whose ``finally``
  resets ``tok``, moves to the line before ``try:``.

    >>> import ast
    >>> src = "def f(t):\\n    tok = set_tracectx(t)\\n    g()\\n    reset_tracectx(tok)\\n"
    >>> plan(ast.parse(src), [(2, "STC001")])
    ([Edit(kind='wrap', first=2, last=4, code='STC001', line=2)], [])
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator, Sequence

__all__ = ["Edit", "Unfixed", "plan"]

_SET, _RESET = "set_tracectx", "reset_tracectx"
_EXITS = {ast.Return: "an early return", ast.Break: "a break", ast.Continue: "a continue"}


@dataclasses.dataclass(frozen=True)
class Edit:
    """``wrap``: set at line ``first``, its reset at ``last``. ``hoist``: ``try`` at ``first``, set at ``last``."""

    kind: str
    first: int
    last: int
    code: str
    line: int  # the finding's line


@dataclasses.dataclass(frozen=True)
class Unfixed:
    """A finding left as it is, and why no fix is certainly right."""

    line: int
    code: str
    reason: str


def _name(func: ast.expr) -> str | None:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _is_call(node: ast.AST | None, name: str) -> bool:
    return isinstance(node, ast.Call) and _name(node.func) == name


def _blocks(node: ast.AST) -> Iterator[tuple[list[ast.stmt], ast.AST, str]]:
    """Every statement list in the module: (block, its owner, the owner's field)."""
    for child in ast.walk(node):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(child, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block, child, field
        if isinstance(child, ast.Match):
            for case in child.cases:
                yield case.body, case, "body"


def _own_nodes(stmts: Sequence[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of ``stmts``, not entering nested functions, classes or lambdas."""
    stack: list[ast.AST] = list(reversed(stmts))
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                stack.append(child)


def _calls_set(stmt: ast.stmt) -> bool:
    return any(_is_call(node, _SET) for node in ast.walk(stmt))


def _alias(stmt: ast.stmt) -> str | None:
    """``st`` for ``tok = st(t)`` when ``st`` is not ``set_tracectx`` (an alias the checker resolved)."""
    value = getattr(stmt, "value", None)
    if isinstance(value, ast.Call) and not _calls_set(stmt):
        return _name(value.func)
    return None


def _token(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _is_call(stmt.value, _SET):
        target: ast.expr = stmt.targets[0]
    elif isinstance(stmt, ast.AnnAssign) and _is_call(stmt.value, _SET):
        target = stmt.target
    else:
        return None
    return target.id if isinstance(target, ast.Name) else None


def _resets(nodes: Iterator[ast.AST], token: str) -> list[ast.Call]:
    found = []
    for node in nodes:
        if _is_call(node, _RESET):
            assert isinstance(node, ast.Call)
            arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "token"), None)
            if isinstance(arg, ast.Name) and arg.id == token:
                found.append(node)
    return found


def _early_exit(span: Sequence[ast.stmt], token: str) -> str | None:
    """Why the statements between set and reset cannot go into ``try`` as they are, or None."""
    inner: set[int] = set()  # nodes inside a loop of the span: their break/continue stay in the span
    for node in _own_nodes(span):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            inner |= {id(n) for n in _own_nodes(node.body)}
    for node in _own_nodes(span):
        if isinstance(node, ast.Return):
            return f"an early return at line {node.lineno} between the set and the reset: should it reset too?"
        if isinstance(node, (ast.Break, ast.Continue)) and id(node) not in inner:
            return f"{_EXITS[type(node)]} at line {node.lineno} between the set and the reset: should it reset too?"
        if isinstance(node, ast.Name) and node.id == token and isinstance(node.ctx, (ast.Store, ast.Del)):
            return f"`{token}` is rebound at line {node.lineno} between the set and the reset"
    return None


def _scopes(tree: ast.Module) -> dict[int, list[ast.stmt]]:
    """``id(node)`` -> the body of the innermost function (or the module) holding it, for every node: one walk."""
    scopes = {id(node): tree.body for node in _own_nodes(tree.body)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scopes.update((id(inner), node.body) for inner in _own_nodes(node.body))
    return scopes


def _plan_wrap(scopes: dict[int, list[ast.stmt]], block: list[ast.stmt], index: int, code: str, line: int) -> Edit | str:
    stmt = block[index]
    token = _token(stmt)
    if token is None and _alias(stmt):
        return f"`{_alias(stmt)}` (set_tracectx imported under another name): fix it by hand"
    if token is None:
        return "the token is not bound to a plain name (discarded, stored or passed on): only its owner can reset it"
    resets = _resets(_own_nodes(scopes[id(stmt)]), token)
    if not resets:
        return f"no reset_tracectx({token}) in this function: the token is returned or passed on"
    if len(resets) > 1:
        lines = ", ".join(str(line) for line in sorted(r.lineno for r in resets))
        return f"resets on several paths (lines {lines}): decide by hand which to keep"
    (reset,) = resets
    after = [i for i, s in enumerate(block) if i > index and isinstance(s, ast.Expr) and s.value is reset]
    if not after:
        return f"its reset (line {reset.lineno}) is not a statement of the same block as the set"
    end = after[0]
    if any(s.lineno == block[j].lineno for j in (index, end) for s in block if s is not block[j]):
        return "the set or the reset shares its line with another statement"
    reason = _early_exit(block[index + 1 : end], token)
    if reason:
        return reason
    return Edit("wrap", stmt.lineno, block[end].lineno, code, line)


def _plan_hoist(block: list[ast.stmt], index: int, owner: ast.AST, field: str, code: str, line: int) -> Edit | str:
    stmt = block[index]
    token = _token(stmt)
    if token is None and _alias(stmt):
        return f"`{_alias(stmt)}` (set_tracectx imported under another name): fix it by hand"
    if not isinstance(owner, (ast.Try, ast.TryStar)) or field != "body" or token is None:
        return "the set is nested inside the `try` body: move it before the `try` by hand"
    if index != 0:
        return f"statements before the set inside the `try` (from line {block[0].lineno}) would then run after it"
    if not _resets(_own_nodes(owner.finalbody), token):
        return "the `finally` does not reset the token"
    if stmt.lineno == owner.lineno:
        return "the set is on the line of `try:`: give the `try` body lines of its own"
    if any(s.lineno == stmt.lineno for s in block[1:]):
        return "the set shares its line with another statement"
    return Edit("hoist", owner.lineno, stmt.lineno, code, line)


def plan(tree: ast.Module, findings: Sequence[tuple[int, str]]) -> tuple[list[Edit], list[Unfixed]]:
    """The edits for the STC001/STC002/STC003 findings at ``(line, code)``, and the ones left."""
    where: dict[int, tuple[list[ast.stmt], int, ast.AST, str]] = {}
    for block, owner, field in _blocks(tree):
        for index, stmt in enumerate(block):
            if not isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr)):
                continue
            # every line of the statement: a set continued with a backslash is found on a later line
            for number in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1):
                if number not in where or _calls_set(stmt):
                    where[number] = (block, index, owner, field)  # on a line of several, the set's statement
    edits: list[Edit] = []
    unfixed: list[Unfixed] = []
    scopes = _scopes(tree) if findings else {}
    for line, code in findings:
        if code not in {"STC001", "STC002", "STC003"}:
            continue
        if line not in where:
            unfixed.append(Unfixed(line, code, "the set is not a statement of its own (inside an expression)"))
            continue
        block, index, owner, field = where[line]
        result = _plan_hoist(block, index, owner, field, code, line) if code == "STC002" else _plan_wrap(scopes, block, index, code, line)
        if isinstance(result, Edit):
            edits.append(result)
        else:
            unfixed.append(Unfixed(line, code, result))
    return edits, unfixed
