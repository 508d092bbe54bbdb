"""The lint rules: one rule, one code, one message that says what is wrong and how to fix it.

Each rule carries a wrong and a right example; the tests lint both and
``docs/rules.md`` is generated from them by :func:`safe_tracectx.lint.docs.render`.
"""

from __future__ import annotations

import dataclasses
from typing import Final

__all__ = ["ALL_CODES", "AUDIT_CODES", "DEFAULT_CODES", "RULES", "Rule", "explain"]


@dataclasses.dataclass(frozen=True)
class Rule:
    """A lint rule: its code, short name, what it reports, why it matters, the fix, and two examples."""

    code: str
    name: str
    summary: str
    why: str
    fix: str
    wrong: str
    right: str
    audit_only: bool = False


RULES: Final[dict[str, Rule]] = {
    rule.code: rule
    for rule in (
        Rule(
            code="STC001",
            name="unguarded-set-tracectx",
            summary="set_tracectx() whose reset_tracectx() is not guaranteed by `finally`",
            why=(
                "Thunder keeps the active trace in a ContextVar; every proxy made while it is active is named "
                "and recorded by that trace. If anything between the set and the reset raises (or returns early), "
                "the trace stays active: later proxies land in the wrong trace and names clash far from the cause"
            ),
            fix=(
                "use `with tracectx(trace):`, or put `try:` right after `token = set_tracectx(trace)` "
                "and call `reset_tracectx(token)` in its `finally`"
            ),
            wrong='''\
from thunder.core.trace import reset_tracectx, set_tracectx

def grad_transform(trace):
    token = set_tracectx(trace)
    run_pass(trace)            # an exception here leaves `trace` active
    reset_tracectx(token)
''',
            right='''\
from thunder.core.trace import reset_tracectx, set_tracectx

def grad_transform(trace):
    token = set_tracectx(trace)
    try:
        run_pass(trace)
    finally:
        reset_tracectx(token)
''',
        ),
        Rule(
            code="STC002",
            name="set-tracectx-inside-try",
            summary="set_tracectx() inside the `try` whose `finally` resets its token",
            why=(
                "`finally` runs even when set_tracectx() itself raised, and then `token` was never bound: the "
                "UnboundLocalError raised in `finally` replaces the real error"
            ),
            fix=(
                "move `token = set_tracectx(trace)` to the line before `try:`; if set_tracectx raises, "
                "the token is unbound in `finally` and the NameError hides the real error"
            ),
            wrong='''\
from thunder.core.trace import reset_tracectx, set_tracectx

def insert_inplace(trace, fn):
    try:
        token = set_tracectx(trace)
        fn()
    finally:
        reset_tracectx(token)
''',
            right='''\
from thunder.core.trace import reset_tracectx, set_tracectx

def insert_inplace(trace, fn):
    token = set_tracectx(trace)
    try:
        fn()
    finally:
        reset_tracectx(token)
''',
        ),
        Rule(
            code="STC003",
            name="contextmanager-yield-without-finally",
            summary="@contextmanager sets a trace around `yield` without try/finally",
            why=(
                "an exception in the caller's with-block is thrown into the generator at `yield`; without "
                "try/finally the lines after `yield` never run, so the trace stays active after the with-block"
            ),
            fix=(
                "wrap the `yield` in `try:` / `finally: reset_tracectx(token)`: an exception in the "
                "with-block is raised at the `yield` and skips the reset; or yield from "
                "`with scratch_trace(...)` / `with tracectx(...)` instead"
            ),
            wrong='''\
from contextlib import contextmanager
from thunder.core.trace import TraceCtx, reset_tracectx, set_tracectx

@contextmanager
def detached_trace():
    token = set_tracectx(TraceCtx(None))
    yield
    reset_tracectx(token)
''',
            right='''\
from contextlib import contextmanager
from thunder.core.trace import TraceCtx, reset_tracectx, set_tracectx

@contextmanager
def detached_trace():
    token = set_tracectx(TraceCtx(None))
    try:
        yield
    finally:
        reset_tracectx(token)
''',
        ),
        Rule(
            code="STC100",
            name="proxy-creation-site",
            summary="a proxy-creating call, and whether a trace context guards it lexically (--list-proxy-sites)",
            why=(
                "a proxy takes its name from the active trace; a call with no trace context in sight is named by "
                "whatever trace its caller made active, which is how rematerialization and autodiff passes end up "
                "with clashing names. Listing the sites (--list-proxy-sites) shows which ones depend on the caller"
            ),
            fix=(
                "make the owning trace explicit: `with tracectx(trace):` around the call, "
                "`with scratch_trace(*traces_to_avoid):` to only borrow a namer, or pass the trace to "
                "safe_tracectx.proxies.new_tensor_proxy / rename"
            ),
            wrong='''\
from thunder.core.proxies import TensorProxy

def make_output(like):
    return TensorProxy(like=like)   # named by whatever trace the caller made active
''',
            right='''\
from thunder.core.proxies import TensorProxy
from safe_tracectx import tracectx

def make_output(trace, like):
    with tracectx(trace):
        return TensorProxy(like=like)   # listed with --list-proxy-sites, as guarded
''',
            audit_only=True,
        ),
        Rule(
            code="STC901",
            name="syntax-error",
            summary="the file does not parse, so it was not checked",
            why="a file that does not parse cannot be checked, and Python would reject it too",
            fix="fix the syntax error (the other files are still checked)",
            wrong="def broken(:\n",
            right="def fixed():\n    pass\n",
        ),
        Rule(
            code="STC902",
            name="undecodable-file",
            summary="the file is not valid in its declared encoding (UTF-8 by default), so it was not checked",
            why="a file that cannot be decoded cannot be checked, and Python would reject it too",
            fix="save the file as UTF-8, or declare its encoding with a `# -*- coding: ... -*-` line",
            wrong="# the bytes b'\\xff\\xfe' in a file with no coding declaration\n",
            right="# -*- coding: latin-1 -*-\n",
        ),
        Rule(
            code="STC903",
            name="unchecked-file",
            summary=(
                "the file could not be checked: nested too deeply for Python's parser, unreadable, "
                "or an internal error of the checker"
            ),
            why=(
                "one bad file must not stop the check of the others, and must not pass silently either; "
                "Python itself cannot compile an expression nested this deeply (RecursionError or MemoryError)"
            ),
            fix=(
                "split the deeply nested expression (e.g. build a long sum with `sum(...)` or `\"\".join(...)`); "
                "make the file readable; an internal error is a bug: report it with the file"
            ),
            wrong="s = 'a' + 'a' + 'a' + ...   # 5,000 terms: Python's parser gives up (RecursionError)\n",
            right="s = ''.join(['a'] * 5000)\n",
        ),
    )
}

ALL_CODES: Final = frozenset(RULES)
AUDIT_CODES: Final = frozenset(code for code, rule in RULES.items() if rule.audit_only)
DEFAULT_CODES: Final = ALL_CODES - AUDIT_CODES


def explain(code: str) -> str:
    """What ``safe-tracectx lint --explain CODE`` prints: what, why, wrong and right example, fix.

        >>> print(explain("STC901").splitlines()[0])
        STC901 syntax-error
    """
    rule = RULES[code]
    text = [f"{rule.code} {rule.name}", "", f"What: {rule.summary}.", "", f"Why: {rule.why}.", ""]
    for title, example in (("Wrong", rule.wrong), ("Right", rule.right)):
        text += [f"{title}:", "", *(f"    {line}".rstrip() for line in example.rstrip("\n").splitlines()), ""]
    text += [f"Fix: {rule.fix}.", "", f"Suppress one finding with `# noqa: {rule.code}` on its line."]
    return "\n".join(text)

