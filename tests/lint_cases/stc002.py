# mypy: ignore-errors
"""STC002: set_tracectx() inside the `try` whose `finally` resets its token."""
from thunder.core.trace import reset_tracectx, set_tracectx


def insert_inplace(trace, fn):
    try:
        token = set_tracectx(trace)  # STC002
        fn()
    finally:
        reset_tracectx(token)


def only_annotated_before(t):
    tok: Any
    try:
        tok = set_tracectx(t)  # STC002
    finally:
        reset_tracectx(tok)


def nested_try(t):
    try:
        g()
        try:
            tok = set_tracectx(t)  # STC002
        except ValueError:
            pass
    finally:
        reset_tracectx(tok)


# ---- clean -----------------------------------------------------------------------------


def bound_before(t):
    """The guarded pair of thunder/common.py."""
    try:
        tok = None
        tok = set_tracectx(t)
        g()
    finally:
        if tok is not None:
            reset_tracectx(tok)


def set_before_try(trace, fn):
    token = set_tracectx(trace)
    try:
        fn()
    finally:
        reset_tracectx(token)
