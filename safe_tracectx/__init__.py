"""safe_tracectx: Lightning Thunder's trace context, made safe.

    >>> from thunder.core.trace import TraceCtx
    >>> import safe_tracectx as stc
    >>> with stc.tracectx(TraceCtx()) as trace:
    ...     stc.current_trace() is trace
    True
"""

from __future__ import annotations

from safe_tracectx.callsite import CallSite
from safe_tracectx.context import (
    ScratchTrace,
    TracelessTrace,
    current_trace,
    describe_trace,
    is_traceless,
    require_trace,
    scratch_trace,
    traceless,
    traceless_tensorproxy,
    tracectx,
)
from safe_tracectx.errors import (
    LeakedProxyError,
    MissingTraceError,
    NameClashError,
    ReadOnlyTraceError,
    TraceContextError,
    TraceContextWarning,
    TracelessRecordingError,
    UnbalancedContextError,
)
from safe_tracectx.policy import (
    LENIENT,
    STRICT,
    Action,
    MissingTraceAction,
    Policy,
    get_policy,
    set_default_policy,
    use_policy,
)

__version__ = "0.1.0"

__all__ = [
    "LENIENT",
    "STRICT",
    "Action",
    "CallSite",
    "LeakedProxyError",
    "MissingTraceAction",
    "MissingTraceError",
    "NameClashError",
    "Policy",
    "ReadOnlyTraceError",
    "ScratchTrace",
    "TraceContextError",
    "TraceContextWarning",
    "TracelessRecordingError",
    "TracelessTrace",
    "UnbalancedContextError",
    "current_trace",
    "describe_trace",
    "get_policy",
    "is_traceless",
    "require_trace",
    "scratch_trace",
    "set_default_policy",
    "traceless",
    "traceless_tensorproxy",
    "tracectx",
    "use_policy",
]
