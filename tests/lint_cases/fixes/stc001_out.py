# mypy: ignore-errors
from thunder.core.trace import reset_tracectx, set_tracectx


def grad_transform(trace):
    token = set_tracectx(trace)
    try:
        # the pass
        run_pass(trace)  # an exception here leaves `trace` active
        for bsym in trace.bound_symbols:
            if bsym is None:
                raise NotImplementedError
            if bsym.skip:
                continue
    finally:
        # Resets tracing context
        reset_tracectx(token)
    return trace


class Fusion:
    def fuse(self, trace):
        fused = from_trace(trace)
        fused_tok: Token = set_tracectx(fused)
        try:
            fused.bound_symbols = fuse(trace)
        finally:
            reset_tracectx(token=fused_tok)
        return fused


def nested(outer, inner):
    a = set_tracectx(outer)
    try:
        b = set_tracectx(inner)
        try:
            work()
        finally:
            reset_tracectx(b)
        more_work()
    finally:
        reset_tracectx(a)


tok = set_tracectx(module_trace)
try:
    setup()
finally:
    reset_tracectx(tok)
