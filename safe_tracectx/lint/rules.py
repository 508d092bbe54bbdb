"""The lint rules: one rule, one code, one message that says what is wrong and how to fix it.

Each rule carries a wrong and a right example; the tests lint both and
``docs/rules.md`` is generated from them by :func:`render_docs`.
"""

from __future__ import annotations

import dataclasses
from typing import Final

__all__ = ["ALL_CODES", "AUDIT_CODES", "DEFAULT_CODES", "RULES", "Rule", "render_docs"]


@dataclasses.dataclass(frozen=True)
class Rule:
    """A lint rule: its code, short name, what it reports, the fix, and two examples."""

    code: str
    name: str
    summary: str
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
            summary="a proxy-creating call, and whether a trace context guards it lexically (audit)",
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
        return TensorProxy(like=like)   # still listed with --audit, as guarded
''',
            audit_only=True,
        ),
        Rule(
            code="STC901",
            name="syntax-error",
            summary="the file does not parse, so it was not checked",
            fix="fix the syntax error (the other files are still checked)",
            wrong="def broken(:\n",
            right="def fixed():\n    pass\n",
        ),
        Rule(
            code="STC902",
            name="undecodable-file",
            summary="the file is not valid in its declared encoding (UTF-8 by default), so it was not checked",
            fix="save the file as UTF-8, or declare its encoding with a `# -*- coding: ... -*-` line",
            wrong="# the bytes b'\\xff\\xfe' in a file with no coding declaration\n",
            right="# -*- coding: latin-1 -*-\n",
        ),
    )
}

ALL_CODES: Final = frozenset(RULES)
AUDIT_CODES: Final = frozenset(code for code, rule in RULES.items() if rule.audit_only)
DEFAULT_CODES: Final = ALL_CODES - AUDIT_CODES


def render_docs() -> str:
    """``docs/rules.md``: each rule with its wrong and right example."""
    out = [
        "# safe-tracectx lint rules",
        "",
        "Generated from `safe_tracectx/lint/rules.py` (`render_docs()`); the tests check both examples of each rule.",
        "Suppress one finding with `# noqa: STC001` on its line (a bare `# noqa` suppresses all).",
        "`STC100` runs only with `safe-tracectx lint --audit`.",
        "",
    ]
    for rule in RULES.values():
        out += [
            f"## {rule.code} `{rule.name}`",
            "",
            f"{rule.summary[0].upper()}{rule.summary[1:]}.",
            "",
            f"**Fix:** {rule.fix}.",
            "",
        ]
        for title, example in (("Wrong", rule.wrong), ("Right", rule.right)):
            out += [f"{title}:", "", "```python", example.rstrip("\n"), "```", ""]
    return "\n".join(out)


if __name__ == "__main__":
    print(render_docs(), end="")
