# mypy: ignore-errors
"""STC001: set_tracectx() whose reset_tracectx() is not guaranteed by `finally`.

Each line marked with a code comment must give that finding; no other line may give one.
"""
from thunder.core.trace import reset_tracectx, set_tracectx
from thunder.core.trace import reset_tracectx as r
from thunder.core.trace import set_tracectx as s
import thunder.core.trace as tr

set_tracectx(t)  # STC001


def returned(t):
    return set_tracectx(t)  # STC001


def stored(self, t):
    self.tok = set_tracectx(t)  # STC001


def token_escapes(t):
    tok = set_tracectx(t)  # STC001
    return tok


def reset_not_in_finally(t):
    tok = set_tracectx(t)  # STC001
    g()
    reset_tracectx(tok)


def statement_between_set_and_try(t):
    tok = set_tracectx(t)  # STC001
    g()
    try:
        h()
    finally:
        reset_tracectx(tok)


def wrong_token(t):
    tok = set_tracectx(t)  # STC001
    try:
        g()
    finally:
        reset_tracectx(other)


def except_not_finally(t):
    tok = set_tracectx(t)  # STC001
    try:
        g()
    except Exception:
        reset_tracectx(tok)


def plain_generator():
    tok = set_tracectx(T())  # STC001
    yield
    reset_tracectx(tok)


def aliased(t):
    tok = s(t)  # STC001
    g()
    r(tok)


def module_attribute(t):
    tok = tr.set_tracectx(t)  # STC001
    g()
    tr.reset_tracectx(tok)


def outer(t):
    tok = set_tracectx(t)  # STC001

    def inner():
        reset_tracectx(tok)

    return inner


class Pass:
    def run(self, t):
        self.tok = set_tracectx(t)  # STC001


# ---- clean -----------------------------------------------------------------------------


def try_finally(t):
    tok = set_tracectx(t)
    try:
        g()
    finally:
        reset_tracectx(tok)


def conditional_reset(t):
    tok = set_tracectx(t)
    try:
        g()
    finally:
        if tok is not None:
            reset_tracectx(tok)


def with_block(t):
    with tracectx(t):
        g()


def set_tracectx_definition(ctx):
    return _tracectx.set(ctx)


def aliased_with_finally(t):
    tok = s(t)
    try:
        pass
    finally:
        r(tok)


def dotted_with_finally(t):
    tok = thunder.core.trace.set_tracectx(t)
    try:
        pass
    finally:
        thunder.core.trace.reset_tracectx(tok)


def nested_good(u):
    tok2 = set_tracectx(u)
    try:
        pass
    finally:
        reset_tracectx(tok2)


x = s.replace("a", "b")
set_tracectx(t)  # noqa: STC001
set_tracectx(t)  # noqa
set_tracectx(t)  # NOQA:STC002,STC001
set_tracectx(t)  # noqa: STC002  # STC001
