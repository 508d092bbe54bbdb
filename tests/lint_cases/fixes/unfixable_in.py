# mypy: ignore-errors
"""Findings --fix leaves as they are: each marked line says the reason it must give."""
from thunder.core.trace import reset_tracectx, set_tracectx


def maybe_start_trace(fn):
    tok = set_tracectx(TraceCtx(fn))  # not fixed: the token is returned or passed on
    return True, tok


def stored(self, t):
    self.tok = set_tracectx(t)  # not fixed: only its owner can reset it


def discarded(t):
    set_tracectx(t)  # not fixed: only its owner can reset it


def several_paths(t):
    tok = set_tracectx(t)  # not fixed: resets on several paths (lines 22, 24)
    if t.fast:
        reset_tracectx(tok)
        return
    reset_tracectx(tok)


def early_return(t):
    tok = set_tracectx(t)  # not fixed: an early return at line 30 between the set and the reset
    if t.empty:
        return None
    g()
    reset_tracectx(tok)


def early_break(traces):
    for t in traces:
        tok = set_tracectx(t)  # not fixed: a break at line 39 between the set and the reset
        if t.last:
            break
        reset_tracectx(tok)


def reset_in_a_later_finally(t):
    tok = set_tracectx(t)  # not fixed: is not a statement of the same block as the set
    g()
    try:
        h()
    finally:
        reset_tracectx(tok)


def rebound(t, u):
    tok = set_tracectx(t)  # not fixed: `tok` is rebound at line 55
    g()
    tok = set_tracectx(u)
    reset_tracectx(tok)


def statements_before_the_set(t):
    try:
        g()
        tok = set_tracectx(t)  # not fixed: statements before the set inside the `try` (from line 61)
    finally:
        reset_tracectx(tok)


def one_line_block(t):
    if t: tok = set_tracectx(t); g(); reset_tracectx(tok)  # not fixed: the set or the reset shares its line
