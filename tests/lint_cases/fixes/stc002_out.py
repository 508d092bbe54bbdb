# mypy: ignore-errors
from thunder.core.trace import reset_tracectx, set_tracectx


def insert_inplace(trc, fn):
    # Records into trc
    # set first
    tracectx_tok = set_tracectx(trc)
    try:
        fn()
    finally:
        reset_tracectx(tracectx_tok)


def only_the_set(trc):
    tok = set_tracectx(trc)
    try:
        pass
    except ValueError:
        log()
    finally:
        reset_tracectx(tok)
