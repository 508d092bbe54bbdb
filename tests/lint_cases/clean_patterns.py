# mypy: ignore-errors
"""Correct code that must give no finding at all (no line here is marked)."""
import contextlib
from contextlib import ExitStack
from contextvars import Token

from thunder.core.trace import reset_tracectx, set_tracectx


def annotated_token(t):
    token: Token = set_tracectx(t)
    try:
        g()
    finally:
        reset_tracectx(token)


def except_star_finally(t):
    tok = set_tracectx(t)
    try:
        g()
    except* ValueError:
        log()
    finally:
        reset_tracectx(tok)


def keyword_token(t):
    tok = set_tracectx(t)
    try:
        g()
    finally:
        reset_tracectx(token=tok)


def exit_stack(t):
    with ExitStack() as stack:
        tok = set_tracectx(t)
        stack.callback(reset_tracectx, tok)
        g()


def exit_stack_keyword(t):
    with contextlib.ExitStack() as stack:
        tok = set_tracectx(t)
        stack.callback(reset_tracectx, token=tok)
        g()


class ActiveTrace:
    def __init__(self, trace):
        self.trace = trace

    def __enter__(self):
        self._token = set_tracectx(self.trace)
        return self.trace

    def __exit__(self, *exc_info):
        reset_tracectx(self._token)


class AsyncActiveTrace:
    async def __aenter__(self):
        self.state.token = set_tracectx(self.trace)

    async def __aexit__(self, *exc_info):
        reset_tracectx(self.state.token)


def reset_in_catch_all_and_on_the_normal_path(t):
    tok = set_tracectx(t)
    try:
        g()
    except BaseException:
        reset_tracectx(tok)
        raise
    reset_tracectx(tok)


def bare_except_and_else(t):
    tok = set_tracectx(t)
    try:
        g()
    except:  # noqa: E722
        reset_tracectx(tok)
        raise
    else:
        reset_tracectx(tok)


def set_then_reset(t):
    tok = set_tracectx(t)
    reset_tracectx(tok)


def attribute_token_with_finally(self, t):
    self.tok = set_tracectx(t)
    try:
        g()
    finally:
        reset_tracectx(self.tok)


def loop_with_its_own_break(t, items):
    tok = set_tracectx(t)
    try:
        for item in items:
            if item:
                break
    finally:
        reset_tracectx(tok)
