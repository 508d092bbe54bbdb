# mypy: ignore-errors
"""STC003: @contextmanager sets a trace around `yield` without try/finally."""
import contextlib
from contextlib import contextmanager

from thunder.core.trace import reset_tracectx, set_tracectx


@contextlib.contextmanager
def attribute_decorator():
    tok = set_tracectx(T())  # STC003
    yield
    reset_tracectx(tok)


@contextlib.asynccontextmanager
async def asynchronous():
    tok = set_tracectx(T())  # STC003
    yield
    reset_tracectx(tok)


@contextmanager
def detached_trace():
    token = set_tracectx(TraceCtx(None))  # STC003
    yield
    reset_tracectx(token)


# ---- clean -----------------------------------------------------------------------------


@contextlib.contextmanager
def good():
    tok = set_tracectx(T())
    try:
        yield
    finally:
        reset_tracectx(tok)


@contextmanager
def borrowed():
    with tracectx(T()) as trace:
        yield trace
