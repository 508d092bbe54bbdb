"""What the checker collects from one function: its sets, resets, exits and proxy-creating calls.

    >>> token_key(ast.parse("self.state.tok", mode="eval").body)
    'self.state.tok'
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Final

from safe_tracectx.lint.rules import RULES

__all__ = ["Exit", "Finding", "ProxySite", "ResetSite", "Scope", "SetSite", "TryNode", "token_key"]

TryNode = ast.Try | ast.TryStar
#: The exits that can leave a span of statements early, as a message names them.
EXIT_NAMES: Final = {ast.Return: "an early return", ast.Raise: "a raise", ast.Break: "a break", ast.Continue: "a continue"}


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
class SetSite:
    """A ``set_tracectx(...)`` call, the statement and block holding it, and the token it is bound to."""

    call: ast.Call
    stmt: ast.stmt
    block: list[ast.stmt]
    index: int
    try_bodies: tuple[TryNode, ...]  # enclosing try statements whose body holds the set
    token: str | None  # `tok` or `self.tok`; None when discarded, returned or passed on


@dataclasses.dataclass
class ResetSite:
    """A ``reset_tracectx(token)`` call, or an ``ExitStack.callback(reset_tracectx, token)``."""

    token: str | None
    line: int
    stmt: ast.stmt
    finally_of: tuple[TryNode, ...]  # enclosing try statements whose finalbody holds the reset
    handlers: tuple[ast.ExceptHandler, ...]  # enclosing except clauses
    callback: bool = False  # registered with ExitStack.callback: it runs however the block ends
    bare: bool = False  # the whole statement is this reset call


@dataclasses.dataclass
class ProxySite:
    """A proxy-creating call and the lexical guard around it, if any."""

    call: ast.Call
    label: str
    guard: str | None


@dataclasses.dataclass
class Exit:
    """A return, raise, break or continue; ``loop`` is the loop a break or continue leaves."""

    stmt: ast.stmt
    loop: ast.stmt | None = None

    @property
    def kind(self) -> str:
        return EXIT_NAMES[type(self.stmt)]


@dataclasses.dataclass
class Scope:
    """What one function (or the module, or a class body) contains, for the analysis at its end."""

    is_contextmanager: bool = False
    #: In ``__enter__``/``__aenter__``: the tokens (``self.tok``) the class's ``__exit__`` resets.
    exit_resets: frozenset[str] = frozenset()
    sets: list[SetSite] = dataclasses.field(default_factory=list)
    resets: list[ResetSite] = dataclasses.field(default_factory=list)
    proxies: list[ProxySite] = dataclasses.field(default_factory=list)
    exits: list[Exit] = dataclasses.field(default_factory=list)
    bindings: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    yields: bool = False


def token_key(node: ast.expr | None) -> str | None:
    """``tok`` -> ``"tok"``, ``self.tok`` -> ``"self.tok"``; anything else -> None."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(attrs)])
