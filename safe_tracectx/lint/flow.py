"""Is a ``set_tracectx()`` certainly undone? The analysis of one set site against its scope.

A set is safe when, with nothing in between that can raise or leave:

* the next statement is a ``try`` whose ``finally`` resets the token (or ``except*``'s ``finally``);
* the next statement is a ``try`` whose catch-all ``except BaseException:`` resets it and the
  normal path resets it too;
* the next statement registers ``stack.callback(reset_tracectx, token)`` on an ``ExitStack``;
* the next statement is the reset itself;
* it is ``self.tok = set_tracectx(...)`` in ``__enter__`` and the class's ``__exit__`` resets ``self.tok``.

    >>> import ast
    >>> from safe_tracectx.lint.checker import check_tree
    >>> src = "def f(t):\\n    tok = set_tracectx(t)\\n    if t:\\n        return\\n    reset_tracectx(tok)\\n"
    >>> print(check_tree(ast.parse(src))[0].message)
    set_tracectx() not guaranteed to be reset: an early return at line 4 skips reset_tracectx(tok) (line 5)
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from safe_tracectx.lint.scopes import Finding, ProxySite, ResetSite, Scope, SetSite

__all__ = ["analyze_proxy", "analyze_set"]

SET = "set_tracectx"
RESET = "reset_tracectx"

Add = Callable[[ast.expr, str, str], None]


def _catch_all(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(kind is None or (isinstance(kind, ast.Name) and kind.id == "BaseException") for kind in kinds)


def _guarded_next(site: SetSite, resets: list[ResetSite]) -> bool:
    """Does the statement right after the set guarantee the reset?"""
    if site.index + 1 >= len(site.block):
        return False
    following = site.block[site.index + 1]
    if any(r.stmt is following and (r.callback or r.bare) for r in resets):
        return True  # ExitStack.callback(reset_tracectx, tok), or the reset itself
    if not isinstance(following, (ast.Try, ast.TryStar)):
        return False
    if any(following in r.finally_of for r in resets):
        return True
    for handler in following.handlers:
        if _catch_all(handler) and any(handler in r.handlers for r in resets):
            normal = [r for r in resets if handler not in r.handlers and r.line > site.call.lineno]
            if normal:
                return True
    return False


def analyze_set(site: SetSite, scope: Scope, add: Add) -> None:
    """Report the set at ``site`` (STC001, STC002, STC003) unless its reset is guaranteed."""
    call, token = site.call, site.token
    if token is None:
        how = "discarded" if isinstance(site.stmt, ast.Expr) and site.stmt.value is call else "stored or returned"
        add(call, "STC001", f"{SET}() token is {how} where no {RESET}() can be seen")
        return
    if token in scope.exit_resets:
        return  # __enter__ sets self.tok, __exit__ resets it
    resets = [r for r in scope.resets if r.token == token]
    for try_node in site.try_bodies:
        if any(try_node in r.finally_of for r in resets):
            bound_before = any(line < call.lineno for line in scope.bindings.get(token, ()))
            if not bound_before:
                add(
                    call,
                    "STC002",
                    f"{SET}() inside the `try` whose `finally` resets `{token}`: if it raises, "
                    f"`{token}` is unbound there",
                )
            return
    if _guarded_next(site, resets):
        return
    if scope.is_contextmanager and scope.yields:
        add(
            call,
            "STC003",
            f"@contextmanager sets a trace with {SET}() around `yield` without try/finally: "
            "an exception in the with-block skips the reset",
        )
        return
    if not resets and "." in token:
        add(call, "STC001", f"{SET}() token is stored in `{token}` where no {RESET}() can be seen")
        return
    add(call, "STC001", f"{SET}() not guaranteed to be reset: {_why_unguarded(site, scope, resets)}")


def _why_unguarded(site: SetSite, scope: Scope, resets: list[ResetSite]) -> str:
    token, line = site.token, site.call.lineno
    if resets and all(r.handlers for r in resets):
        where = ", ".join(str(r.line) for r in resets)
        return f"its {RESET}({token}) (line {where}) runs only in `except`; the normal path never resets"
    later = sorted(r.line for r in resets if r.line > line)
    if not later:
        if resets:
            where = ", ".join(str(r.line) for r in resets)
            return f"its {RESET}({token}) (line {where}) is skipped if anything in between raises"
        returned = [
            e.stmt.lineno
            for e in scope.exits
            if isinstance(e.stmt, ast.Return)
            and e.stmt.value is not None
            and any(isinstance(n, ast.Name) and n.id == token for n in ast.walk(e.stmt.value))
        ]
        if returned:
            return f"no {RESET}({token}) in this function; the token is returned (line {returned[0]}) for a caller to reset"
        return f"no {RESET}({token}) in this function"
    end = later[0]
    exits = [
        e
        for e in scope.exits
        if line < e.stmt.lineno < end
        and (e.loop is None or e.loop.lineno <= line <= (e.loop.end_lineno or e.loop.lineno))
    ]
    if exits:
        first, *more = sorted(exits, key=lambda e: e.stmt.lineno)
        extra = f" (and {len(more)} more: line {', '.join(str(e.stmt.lineno) for e in more)})" if more else ""
        return f"{first.kind} at line {first.stmt.lineno}{extra} skips {RESET}({token}) (line {end})"
    where = ", ".join(str(r.line) for r in resets)
    return f"its {RESET}({token}) (line {where}) is skipped if anything in between raises"


def analyze_proxy(proxy: ProxySite, scope: Scope, add_guarded: Callable[[ast.expr, str, bool], None]) -> None:
    """List a proxy-creating call (STC100) with the guard that makes a trace active around it, if any."""
    line = proxy.call.lineno
    guard = proxy.guard
    if guard is None:
        for site in scope.sets:
            if site.call.lineno < line and not any(r.token == site.token and r.line < line for r in scope.resets):
                guard = f"{SET}() at line {site.call.lineno}"
    if guard is not None:
        message = f"proxy-creating call {proxy.label}: guarded by {guard}"
    else:
        message = (
            f"proxy-creating call {proxy.label}: not guarded by a trace context in this function; "
            "its name comes from whatever trace the caller made active"
        )
    add_guarded(proxy.call, message, guard is not None)
