"""The AST checker: one pass over a module, one analysis per function scope.

    >>> from safe_tracectx.lint.checker import check_tree
    >>> import ast
    >>> src = "def f(t):\\n    tok = set_tracectx(t)\\n    g()\\n    reset_tracectx(tok)\\n"
    >>> [(f.code, f.line) for f in check_tree(ast.parse(src))]
    [('STC001', 2)]
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Final

from safe_tracectx.lint.rules import RULES

__all__ = ["Finding", "check_tree"]

SET: Final = "set_tracectx"
RESET: Final = "reset_tracectx"
#: Context managers that make a trace active for their block.
GUARDS: Final = frozenset({"tracectx", "scratch_trace", "traceless", "detached_trace", "installed"})
PROXY_CLASSES: Final = frozenset(
    {
        "Proxy",
        "TensorProxy",
        "FutureTensorProxy",
        "NumberProxy",
        "IntegerProxy",
        "FloatProxy",
        "ComplexProxy",
        "StringProxy",
        "TupleProxy",
        "ListProxy",
        "DictProxy",
        "AnyProxy",
        "CollectionProxy",
        "TorchAutogradFunctionCtxProxy",
    }
)
PROXY_FUNCTIONS: Final = frozenset({"tensorproxy", "futuretensorproxy", "numberproxy", "proxy", "make_proxy_name"})
PROXY_METHODS: Final = frozenset({"replace_name"})
CONTEXTMANAGER_DECORATORS: Final = frozenset({"contextmanager", "asynccontextmanager"})
_TRACKED: Final = frozenset({SET, RESET}) | GUARDS | PROXY_CLASSES | PROXY_FUNCTIONS


@dataclasses.dataclass(frozen=True, order=True)
class Finding:
    """One finding: where, which rule, and the message (the rule's fix is in ``RULES``)."""

    line: int
    col: int
    code: str
    message: str
    guarded: bool | None = None  # STC100 only: does a trace context guard the call lexically?

    @property
    def fix(self) -> str:
        return RULES[self.code].fix

    @property
    def informational(self) -> bool:
        """A guarded STC100 site: listed, but it does not fail the run."""
        return self.code == "STC100" and bool(self.guarded)


@dataclasses.dataclass
class _SetSite:
    call: ast.Call
    stmt: ast.stmt
    block: list[ast.stmt]
    index: int
    try_bodies: tuple[ast.Try, ...]  # enclosing try statements whose body holds the set


@dataclasses.dataclass
class _ResetSite:
    token: str | None
    line: int
    finally_of: tuple[ast.Try, ...]  # enclosing try statements whose finalbody holds the reset


@dataclasses.dataclass
class _ProxySite:
    call: ast.Call
    label: str
    guard: str | None


@dataclasses.dataclass(frozen=True)
class _At:
    """Where the traversal is: the scope, the enclosing try bodies and finally blocks, and the guard."""

    scope: _Scope
    try_bodies: tuple[ast.Try, ...] = ()  # enclosing try statements whose body we are in
    finals: tuple[ast.Try, ...] = ()  # enclosing try statements whose finalbody we are in
    guard: str | None = None  # the `with tracectx(...)`-like block we are in


@dataclasses.dataclass
class _Scope:
    """What one function (or the module) contains, collected for the analysis at its end."""

    is_contextmanager: bool = False
    sets: list[_SetSite] = dataclasses.field(default_factory=list)
    resets: list[_ResetSite] = dataclasses.field(default_factory=list)
    proxies: list[_ProxySite] = dataclasses.field(default_factory=list)
    bindings: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    yields: bool = False


class _Checker:
    def __init__(self, *, audit: bool) -> None:
        self.audit = audit
        self.aliases: dict[str, str] = {}  # local name -> the tracked name it stands for
        self.findings: list[Finding] = []

    # ---- name resolution -------------------------------------------------------------

    def _callee(self, call: ast.Call) -> tuple[str | None, bool]:
        """(tracked name the call stands for, whether it is a method/attribute call)."""
        func = call.func
        if isinstance(func, ast.Name):
            name = self.aliases.get(func.id, func.id)
            return (name if name in _TRACKED else None), False
        if isinstance(func, ast.Attribute):
            attr = func.attr
            if attr in _TRACKED or attr in PROXY_METHODS:
                return attr, True
            if attr == "replace" and call.keywords and not call.args:
                return "replace", True
        return None, False

    def _record_import(self, stmt: ast.Import | ast.ImportFrom) -> None:
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if alias.name in _TRACKED and alias.asname:
                    self.aliases[alias.asname] = alias.name

    # ---- traversal ---------------------------------------------------------------------

    def module(self, tree: ast.Module) -> list[Finding]:
        scope = _Scope()
        self._block(tree.body, _At(scope))
        self._analyze(scope)
        return sorted(self.findings)

    def _block(self, stmts: list[ast.stmt], at: _At) -> None:
        for index, stmt in enumerate(stmts):
            self._stmt(stmt, stmts, index, at)

    def _stmt(self, stmt: ast.stmt, block: list[ast.stmt], index: int, at: _At) -> None:
        def exprs(*nodes: ast.expr | None) -> None:
            for node in nodes:
                if node is not None:
                    self._expr(node, stmt, block, index, at)

        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            decorators = {_decorator_name(d) for d in stmt.decorator_list}
            inner = _Scope(is_contextmanager=bool(decorators & CONTEXTMANAGER_DECORATORS))
            exprs(*stmt.decorator_list, *stmt.args.defaults, *stmt.args.kw_defaults)
            self._block(stmt.body, _At(inner))
            self._analyze(inner)
            return
        if isinstance(stmt, ast.ClassDef):
            inner = _Scope()
            self._block(stmt.body, _At(inner))
            self._analyze(inner)
            return
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self._record_import(stmt)
            return
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    at.scope.bindings.setdefault(target.id, []).append(stmt.lineno)
        if isinstance(stmt, (ast.Try, ast.TryStar)):
            here = (stmt,) if isinstance(stmt, ast.Try) else ()
            self._block(stmt.body, dataclasses.replace(at, try_bodies=at.try_bodies + here))
            for handler in stmt.handlers:
                exprs(handler.type)
                self._block(handler.body, at)
            self._block(stmt.orelse, at)
            self._block(stmt.finalbody, dataclasses.replace(at, finals=at.finals + here))
            return
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            inner_at = at
            for item in stmt.items:
                exprs(item.context_expr)
                call = item.context_expr
                if isinstance(call, ast.Call) and self._callee(call)[0] in GUARDS:
                    inner_at = dataclasses.replace(at, guard=f"`with {self._callee(call)[0]}(...)` at line {stmt.lineno}")
            self._block(stmt.body, inner_at)
            return
        for _, value in ast.iter_fields(stmt):
            if isinstance(value, list):
                if value and isinstance(value[0], ast.stmt):
                    self._block(value, at)
                elif value and isinstance(value[0], ast.match_case):
                    for case in value:
                        exprs(case.guard)
                        self._block(case.body, at)
                else:
                    exprs(*(item for item in value if isinstance(item, ast.expr)))
            elif isinstance(value, ast.expr):
                exprs(value)

    def _expr(self, expr: ast.expr, stmt: ast.stmt, block: list[ast.stmt], index: int, at: _At) -> None:
        scope = at.scope
        for node in ast.walk(expr):
            if isinstance(node, ast.Call):
                name, is_method = self._callee(node)
                if name is None:
                    continue
                if name == SET:
                    scope.sets.append(_SetSite(node, stmt, block, index, at.try_bodies))
                elif name == RESET:
                    arg = node.args[0] if node.args else None
                    token = arg.id if isinstance(arg, ast.Name) else None
                    scope.resets.append(_ResetSite(token, node.lineno, at.finals))
                elif name in PROXY_CLASSES or name in PROXY_FUNCTIONS or name in PROXY_METHODS or name == "replace":
                    label = f".{name}(...)" if is_method else f"{name}(...)"
                    scope.proxies.append(_ProxySite(node, label, at.guard))
            elif isinstance(node, (ast.Yield, ast.YieldFrom)):
                scope.yields = True

    # ---- analysis ----------------------------------------------------------------------

    def _add(self, node: ast.expr, code: str, message: str, guarded: bool | None = None) -> None:
        self.findings.append(Finding(node.lineno, node.col_offset + 1, code, message, guarded))

    def _analyze(self, scope: _Scope) -> None:
        for site in scope.sets:
            self._analyze_set(site, scope)
        if self.audit:
            for proxy in scope.proxies:
                self._analyze_proxy(proxy, scope)

    def _analyze_set(self, site: _SetSite, scope: _Scope) -> None:
        stmt, call = site.stmt, site.call
        token: str | None = None
        if isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                token = target.id
        if token is None:
            how = "discarded" if isinstance(stmt, ast.Expr) and stmt.value is call else "stored or returned"
            self._add(call, "STC001", f"{SET}() token is {how} where no {RESET}() can be seen")
            return
        resets = [r for r in scope.resets if r.token == token]
        for try_node in site.try_bodies:
            if any(try_node in r.finally_of for r in resets):
                bound_before = any(line < call.lineno for line in scope.bindings.get(token, ()))
                if not bound_before:
                    self._add(
                        call,
                        "STC002",
                        f"{SET}() inside the `try` whose `finally` resets `{token}`: if it raises, "
                        f"`{token}` is unbound there",
                    )
                return
        following = site.block[site.index + 1] if site.index + 1 < len(site.block) else None
        if isinstance(following, ast.Try) and any(following in r.finally_of for r in resets):
            return
        if scope.is_contextmanager and scope.yields:
            self._add(
                call,
                "STC003",
                f"@contextmanager sets a trace with {SET}() around `yield` without try/finally: "
                "an exception in the with-block skips the reset",
            )
            return
        if resets:
            where = ", ".join(str(r.line) for r in resets)
            detail = f"its {RESET}({token}) (line {where}) is skipped if anything in between raises"
        else:
            detail = f"no {RESET}({token}) in this function"
        self._add(call, "STC001", f"{SET}() not guaranteed to be reset: {detail}")

    def _analyze_proxy(self, proxy: _ProxySite, scope: _Scope) -> None:
        line = proxy.call.lineno
        guard = proxy.guard
        if guard is None:
            for site in scope.sets:
                if site.call.lineno < line:
                    token = site.stmt.targets[0] if isinstance(site.stmt, ast.Assign) else None
                    name = token.id if isinstance(token, ast.Name) else None
                    if not any(r.token == name and r.line < line for r in scope.resets):
                        guard = f"{SET}() at line {site.call.lineno}"
        if guard is not None:
            message = f"proxy-creating call {proxy.label}: guarded by {guard}"
        else:
            message = (
                f"proxy-creating call {proxy.label}: not guarded by a trace context in this function; "
                "its name comes from whatever trace the caller made active"
            )
        self._add(proxy.call, "STC100", message, guarded=guard is not None)


def _decorator_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def check_tree(tree: ast.Module, *, audit: bool = False) -> list[Finding]:
    """Every finding in a parsed module (STC100 only with ``audit=True``), sorted by position."""
    return _Checker(audit=audit).module(tree)
