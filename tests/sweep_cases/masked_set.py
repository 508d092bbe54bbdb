"""The STC002 shape: the set inside the ``try`` whose ``finally`` resets it (a fault at the set is masked)."""

from __future__ import annotations

from thunder.core.trace import TraceCtx, reset_tracectx, set_tracectx


def borrow_namer(trace: TraceCtx) -> str:
    try:
        token = set_tracectx(trace)
        return trace.make_name()
    finally:
        reset_tracectx(token)  # UnboundLocalError when set_tracectx itself failed


borrow_namer(TraceCtx())
