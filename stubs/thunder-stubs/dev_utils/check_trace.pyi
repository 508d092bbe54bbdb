# Partial stubs: thunder.dev_utils.check_trace (lightning-thunder 0.2.1 to main).
from typing import Any

from thunder.core.trace import TraceCtx

CHECK_VERSION: int

def check_trace(trace: TraceCtx, *, version: int = ...) -> None: ...

class CheckedListOfTraces(list[Any]):
    def __getattr__(self, name: str) -> Any: ...
    def __init__(self, *args: Any, **kwargs: Any) -> None: ...

# The rest of the module: whatever these stubs do not spell out has the type Thunder gives it, never an error.
def __getattr__(name: str) -> Any: ...
