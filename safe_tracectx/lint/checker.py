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

from safe_tracectx.lint.flow import analyze_proxy, analyze_set
from safe_tracectx.lint.scopes import Exit, Finding, ProxySite, ResetSite, Scope, SetSite, TryNode, token_key

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
_ENTER: Final = frozenset({"__enter__", "__aenter__"})
_EXIT: Final = frozenset({"__exit__", "__aexit__"})


@dataclasses.dataclass(frozen=True)
class _At:
    """Where the traversal is: the scope, the enclosing try parts and loop, and the guard."""

    scope: Scope
    try_bodies: tuple[TryNode, ...] = ()  # enclosing try statements whose body we are in
    finals: tuple[TryNode, ...] = ()  # enclosing try statements whose finalbody we are in
    handlers: tuple[ast.ExceptHandler, ...] = ()  # enclosing except clauses
    loop: ast.stmt | None = None  # the innermost enclosing loop (what break/continue leave)
    guard: str | None = None  # the `with tracectx(...)`-like block we are in


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

    def _is_reset(self, node: ast.expr) -> bool:
        """Does ``node`` name reset_tracectx (as passed to ``ExitStack.callback``)?"""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id) == RESET
        return isinstance(node, ast.Attribute) and node.attr == RESET

    def _record_import(self, stmt: ast.Import | ast.ImportFrom) -> None:
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if alias.name in _TRACKED and alias.asname:
                    self.aliases[alias.asname] = alias.name

    def _exit_resets(self, cls: ast.ClassDef) -> frozenset[str]:
        """The tokens (``self.tok``) that the class's ``__exit__``/``__aexit__`` reset."""
        tokens: set[str] = set()
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in _EXIT:
                for node in ast.walk(stmt):
                    if isinstance(node, ast.Call) and self._callee(node)[0] == RESET:
                        token = token_key(_token_argument(node, 0))
                        if token is not None and "." in token:
                            tokens.add(token)
        return frozenset(tokens)

    # ---- traversal ---------------------------------------------------------------------

    def module(self, tree: ast.Module) -> list[Finding]:
        scope = Scope()
        self._block(tree.body, _At(scope))
        self._analyze(scope)
        return sorted(self.findings)

    def _block(self, stmts: list[ast.stmt], at: _At) -> None:
        for index, stmt in enumerate(stmts):
            self._stmt(stmt, stmts, index, at)

    def _function(self, stmt: ast.FunctionDef | ast.AsyncFunctionDef, exit_resets: frozenset[str]) -> None:
        decorators = {_decorator_name(d) for d in stmt.decorator_list}
        inner = Scope(
            is_contextmanager=bool(decorators & CONTEXTMANAGER_DECORATORS),
            exit_resets=exit_resets if stmt.name in _ENTER else frozenset(),
        )
        self._block(stmt.body, _At(inner))
        self._analyze(inner)

    def _stmt(self, stmt: ast.stmt, block: list[ast.stmt], index: int, at: _At) -> None:
        def exprs(*nodes: ast.expr | None) -> None:
            for node in nodes:
                if node is not None:
                    self._expr(node, stmt, block, index, at)

        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            exprs(*stmt.decorator_list, *stmt.args.defaults, *stmt.args.kw_defaults)
            self._function(stmt, frozenset())
            return
        if isinstance(stmt, ast.ClassDef):
            exprs(*stmt.decorator_list, *stmt.bases)
            exit_resets = self._exit_resets(stmt)
            inner = Scope()
            for member_index, member in enumerate(stmt.body):
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self._function(member, exit_resets)
                else:
                    self._stmt(member, stmt.body, member_index, _At(inner))
            self._analyze(inner)
            return
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self._record_import(stmt)
            return
        if isinstance(stmt, (ast.Return, ast.Raise)):
            at.scope.exits.append(Exit(stmt))
        elif isinstance(stmt, (ast.Break, ast.Continue)):
            at.scope.exits.append(Exit(stmt, at.loop))
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) and stmt.value else []
        for target in targets:
            if isinstance(target, ast.Name):
                at.scope.bindings.setdefault(target.id, []).append(stmt.lineno)
        if isinstance(stmt, (ast.Try, ast.TryStar)):
            self._block(stmt.body, dataclasses.replace(at, try_bodies=(*at.try_bodies, stmt)))
            for handler in stmt.handlers:
                exprs(handler.type)
                self._block(handler.body, dataclasses.replace(at, handlers=(*at.handlers, handler)))
            self._block(stmt.orelse, at)
            self._block(stmt.finalbody, dataclasses.replace(at, finals=(*at.finals, stmt)))
            return
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            exprs(*(stmt.iter, stmt.target) if not isinstance(stmt, ast.While) else (stmt.test,))
            self._block(stmt.body, dataclasses.replace(at, loop=stmt))
            self._block(stmt.orelse, at)
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
                    if isinstance(node.func, ast.Attribute) and node.func.attr == "callback" and node.args:
                        if self._is_reset(node.args[0]):  # ExitStack.callback(reset_tracectx, tok)
                            token = token_key(_token_argument(node, 1))
                            scope.resets.append(ResetSite(token, node.lineno, stmt, at.finals, at.handlers, callback=True))
                    continue
                if name == SET:
                    scope.sets.append(SetSite(node, stmt, block, index, at.try_bodies, _bound_token(stmt, node)))
                elif name == RESET:
                    bare = isinstance(stmt, ast.Expr) and stmt.value is node
                    token = token_key(_token_argument(node, 0))
                    scope.resets.append(ResetSite(token, node.lineno, stmt, at.finals, at.handlers, bare=bare))
                elif name in PROXY_CLASSES or name in PROXY_FUNCTIONS or name in PROXY_METHODS or name == "replace":
                    label = f".{name}(...)" if is_method else f"{name}(...)"
                    scope.proxies.append(ProxySite(node, label, at.guard))
            elif isinstance(node, (ast.Yield, ast.YieldFrom)):
                scope.yields = True

    # ---- analysis ----------------------------------------------------------------------

    def _add(self, node: ast.expr, code: str, message: str) -> None:
        self.findings.append(Finding(node.lineno, node.col_offset + 1, code, message))

    def _add_proxy(self, node: ast.expr, message: str, guarded: bool) -> None:
        self.findings.append(Finding(node.lineno, node.col_offset + 1, "STC100", message, guarded))

    def _analyze(self, scope: Scope) -> None:
        for site in scope.sets:
            analyze_set(site, scope, self._add)
        if self.audit:
            for proxy in scope.proxies:
                analyze_proxy(proxy, scope, self._add_proxy)


def _token_argument(call: ast.Call, position: int) -> ast.expr | None:
    """The token argument of ``reset_tracectx(tok)`` (position 0) or ``callback(reset_tracectx, tok)`` (1)."""
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == "token"), None)


def _bound_token(stmt: ast.stmt, call: ast.Call) -> str | None:
    """``tok`` for ``tok = set_tracectx(t)`` or ``tok: Token = set_tracectx(t)``, else None."""
    if isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1:
        return token_key(stmt.targets[0])
    if isinstance(stmt, ast.AnnAssign) and stmt.value is call:
        return token_key(stmt.target)
    return None


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
