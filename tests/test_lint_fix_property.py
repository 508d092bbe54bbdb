"""A property of ``--fix``: for generated set/reset functions, with an exception injected at each
statement (the set included), the fixed function always restores the active trace and re-raises
exactly the injected exception, and runs the same statements in the same order as the original.

The trace context is a plain ``contextvars.ContextVar`` behind stand-ins named like Thunder's
``set_tracectx``/``reset_tracectx``.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
from collections.abc import Iterator
from typing import Any, Union

from hypothesis import given, settings
from hypothesis import strategies as st

from safe_tracectx.lint import lint_source
from safe_tracectx.lint.fix import FIXABLE, fix_source

_active: contextvars.ContextVar[str | None] = contextvars.ContextVar("active_trace", default=None)


class Injected(Exception):
    """The exception injected at one statement."""


# A statement tree: "step", "assign", or (kind, children, flag) for if/for/with blocks.
Node = Union[str, tuple[str, list[Any], bool]]

leaves = st.sampled_from(["step", "assign"])
nodes: st.SearchStrategy[Node] = st.recursive(
    leaves,
    lambda inner: st.tuples(st.sampled_from(["if", "for", "with"]), st.lists(inner, min_size=1, max_size=3), st.booleans()),
    max_leaves=8,
)
blocks = st.lists(nodes, min_size=1, max_size=4)


def render(block: list[Node], indent: str, ids: Iterator[int]) -> list[str]:
    lines: list[str] = []
    for node in block:
        if node == "step":
            lines.append(f"{indent}step({next(ids)})")
        elif node == "assign":
            number = next(ids)
            lines.append(f"{indent}x{number} = step({number})")
        else:
            assert isinstance(node, tuple)
            kind, children, flag = node
            header = {"if": f"if {flag}:", "for": "for _ in range(2):", "with": "with nullcontext():"}[kind]
            lines.append(indent + header)
            lines += render(children, indent + "    ", ids)
            if kind == "for" and flag:
                lines.append(indent + "    break")  # leaves this loop only: it stays between set and reset
    return lines


def function(pre: list[Node], mid: list[Node], post: list[Node], inside_try: bool) -> str:
    """STC001 (set; mid; reset) or STC002 (try: set; mid finally: reset), with statements around."""
    ids = itertools.count()
    lines = ["def f(trace):", *render(pre, "    ", ids)]
    if inside_try:
        lines += ["    try:", "        tok = set_tracectx(trace)", *render(mid, "        ", ids)]
        lines += ["    finally:", "        reset_tracectx(tok)"]
    else:
        lines += ["    tok = set_tracectx(trace)", *render(mid, "    ", ids), "    reset_tracectx(tok)"]
    lines += render(post, "    ", ids)
    return "\n".join(lines) + "\n"


def context_manager(pre: list[Node], before: list[Node], after: list[Node]) -> str:
    """STC003: a @contextmanager that sets, runs ``before``, yields, runs ``after`` and resets."""
    ids = itertools.count()
    lines = ["@contextmanager", "def f(trace):", *render(pre, "    ", ids), "    tok = set_tracectx(trace)"]
    lines += [*render(before, "    ", ids), "    yield", *render(after, "    ", ids), "    reset_tracectx(tok)"]
    return "\n".join(lines) + "\n"


def run(source: str, boom: object) -> tuple[list[object], BaseException | None, str | None]:
    """Run ``f`` with ``outer`` active and the statement ``boom`` raising: (steps run, error, trace after).

    A context manager ``f`` runs a with-block whose one statement is ``step("body")``."""
    log: list[object] = []

    def step(number: object) -> object:
        log.append(number)
        if number == boom:
            raise Injected(number)
        return number

    def set_tracectx(trace: str) -> contextvars.Token[str | None]:
        step("set")
        return _active.set(trace)

    def reset_tracectx(token: contextvars.Token[str | None]) -> None:
        _active.reset(token)

    namespace: dict[str, object] = {
        "step": step,
        "set_tracectx": set_tracectx,
        "reset_tracectx": reset_tracectx,
        "nullcontext": contextlib.nullcontext,
        "contextmanager": contextlib.contextmanager,
    }
    exec(compile(source, "<generated>", "exec"), namespace)

    def call() -> tuple[BaseException | None, str | None]:
        _active.set("outer")
        try:
            if source.startswith("@contextmanager"):
                with namespace["f"]("inner"):  # type: ignore[operator]
                    step("body")
            else:
                namespace["f"]("inner")  # type: ignore[operator]
        except BaseException as error:  # noqa: BLE001 - the property is about every error
            return error, _active.get()
        return None, _active.get()

    error, after = contextvars.copy_context().run(call)
    return log, error, after


@settings(max_examples=150, deadline=None)
@given(pre=st.lists(nodes, max_size=2), mid=blocks, post=st.lists(nodes, max_size=2), inside_try=st.booleans())
def test_the_fixed_function_always_restores_the_trace_and_reraises(
    pre: list[Node], mid: list[Node], post: list[Node], inside_try: bool
) -> None:
    check(function(pre, mid, post, inside_try))


@settings(max_examples=100, deadline=None)
@given(pre=st.lists(nodes, max_size=2), before=st.lists(nodes, max_size=2), after=st.lists(nodes, max_size=2))
def test_the_fixed_context_manager_always_restores_the_trace_and_reraises(
    pre: list[Node], before: list[Node], after: list[Node]
) -> None:
    check(context_manager(pre, before, after), extra=["body"])


def check(original: str, extra: list[object] | None = None) -> None:
    """Fix ``original``; with each statement raising in turn, the fixed code restores the trace and re-raises."""
    result = fix_source(original)
    fixed = result.source
    assert result.fixed == 1 and result.unfixed == [], (original, result)
    assert not [f for f in lint_source(fixed) if f.code in FIXABLE], fixed
    assert fix_source(fixed).source == fixed
    statements = original.count("step(")
    for boom in ["set", None, *range(statements), *(extra or [])]:
        steps_before, _, _ = run(original, boom)
        steps_after, error, after = run(fixed, boom)
        assert steps_after == steps_before, (fixed, boom)
        assert after == "outer", (fixed, boom)
        if boom in steps_after:
            assert type(error) is Injected and error.args == (boom,), (fixed, boom, error)
        else:
            assert error is None, (fixed, boom, error)


def test_the_original_really_leaks_or_hides_the_error() -> None:
    """The property is not vacuous: unfixed, these two leave the trace active or raise UnboundLocalError."""
    leaky = function([], ["step"], [], inside_try=False)
    assert run(leaky, 0)[2] == "inner"
    hiding = function([], ["step"], [], inside_try=True)
    assert type(run(hiding, "set")[1]) is UnboundLocalError
    manager = context_manager([], [], ["step"])
    assert run(manager, "body")[2] == "inner"
