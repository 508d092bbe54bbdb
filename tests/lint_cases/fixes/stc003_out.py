# mypy: ignore-errors
from contextlib import contextmanager

from thunder.core.trace import TraceCtx, reset_tracectx, set_tracectx


@contextmanager
def detached_trace():
    outer = get_tracectx()
    trace = TraceCtx(None)
    trace_token = set_tracectx(trace)
    try:
        yield trace
    finally:
        reset_tracectx(trace_token)


@contextmanager
def with_value():
    tok = set_tracectx(TraceCtx(None))
    try:
        value = yield
        record(value)
    finally:
        reset_tracectx(tok)
