# Partial stubs: thunder.dev_utils.check_trace (lightning-thunder 0.2.4 / 0.2.6).
from thunder.core.trace import TraceCtx

CHECK_VERSION: int

def check_trace(trace: TraceCtx, *, version: int = ...) -> None: ...
