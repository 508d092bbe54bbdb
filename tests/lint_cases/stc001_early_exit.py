# mypy: ignore-errors
"""STC001 for a reset that an early return, raise, break or continue skips (the message names it)."""
from thunder.core.trace import reset_tracectx, set_tracectx


def early_return(t):
    tok = set_tracectx(t)  # STC001
    if t.empty:
        return None
    reset_tracectx(tok)


def early_raise(t):
    tok = set_tracectx(t)  # STC001
    if not t.ok:
        raise ValueError(t)
    reset_tracectx(tok)


def break_out(traces):
    for t in traces:
        tok = set_tracectx(t)  # STC001
        if t.last:
            break
        reset_tracectx(tok)


def continue_past(traces):
    while traces:
        tok = set_tracectx(traces.pop())  # STC001
        if not traces:
            continue
        reset_tracectx(tok)


def inner_loop_break_is_not_an_exit(t, items):
    tok = set_tracectx(t)  # STC001
    for item in items:
        if item:
            break
    reset_tracectx(tok)


def catch_exception_only(t):
    tok = set_tracectx(t)  # STC001
    try:
        g()
    except Exception:
        reset_tracectx(tok)
        raise
    reset_tracectx(tok)


def catch_all_without_normal_path_reset(t):
    tok = set_tracectx(t)  # STC001
    try:
        g()
    except BaseException:
        reset_tracectx(tok)
        raise


def callback_after_a_statement(t):
    with ExitStack() as stack:
        tok = set_tracectx(t)  # STC001
        g()
        stack.callback(reset_tracectx, tok)


class EnterWithoutExit:
    def __enter__(self):
        self._token = set_tracectx(self.trace)  # STC001


class SetOutsideEnter:
    def start(self):
        self._token = set_tracectx(self.trace)  # STC001

    def __exit__(self, *exc_info):
        reset_tracectx(self._token)
