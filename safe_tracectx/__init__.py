"""safe_tracectx: Lightning Thunder's trace context, made safe.

    >>> from thunder.core.trace import TraceCtx
    >>> import safe_tracectx as stc
    >>> with stc.tracectx(TraceCtx()) as trace:
    ...     stc.current_trace() is trace
    True
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import TYPE_CHECKING, Any

from safe_tracectx._support.callsite import CallSite
from safe_tracectx._support.extras import SUPPORTED_THUNDER, MissingExtraError, UnsupportedThunderError, require_thunder
from safe_tracectx._support.pass_catalog import PassKind
from safe_tracectx.errors import (
    BrokenTraceError,
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
    OverrideAction,
    Policy,
    PresetName,
    get_policy,
    set_default_policy,
)

if TYPE_CHECKING:
    from safe_tracectx.auditlog.log import AuditLog
    from safe_tracectx.traces.checks import Violation, check_forward_backward, check_trace
    from safe_tracectx.context import (
        ScratchTrace,
        TracelessTrace,
        current_trace,
        is_traceless,
        require_trace,
        scratch_trace,
        traceless,
        traceless_tensorproxy,
        tracectx,
        use_policy,
    )
    from safe_tracectx.hooks import audit, install, installed, is_installed, thunder_support, uninstall
    from safe_tracectx.hooks.audited import PassRole, audited_pass
    from safe_tracectx._support.labels import describe_trace

try:
    __version__ = metadata.version("safe-tracectx")
except metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

# Names whose modules import Thunder (and so torch) are loaded on first use, so
# that `safe_tracectx.lint` and the CLI's `lint` start without them.
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        [
            "ScratchTrace",
            "TracelessTrace",
            "current_trace",
            "is_traceless",
            "require_trace",
            "scratch_trace",
            "traceless",
            "traceless_tensorproxy",
            "tracectx",
            "use_policy",
        ],
        "safe_tracectx.context",
    ),
    "describe_trace": "safe_tracectx._support.labels",
    **dict.fromkeys(["PassRole", "audited_pass"], "safe_tracectx.hooks.audited"),
    "AuditLog": "safe_tracectx.auditlog.log",
    **dict.fromkeys(["Violation", "check_forward_backward", "check_trace"], "safe_tracectx.traces.checks"),
    **dict.fromkeys(
        ["audit", "install", "installed", "is_installed", "thunder_support", "uninstall"], "safe_tracectx.hooks"
    ),
}


_WITHOUT_THUNDER = frozenset({"safe_tracectx._support.labels", "safe_tracectx.auditlog.log"})


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'safe_tracectx' has no attribute {name!r}")
    if module not in _WITHOUT_THUNDER:
        require_thunder(f"safe_tracectx.{name}")
    try:
        loaded = importlib.import_module(module)
    except ImportError as error:
        if isinstance(error, UnsupportedThunderError) or not (error.name or "").startswith("thunder"):
            raise
        raise UnsupportedThunderError(
            f"safe_tracectx.{name} needs a part of Lightning Thunder this one lacks ({error}); "
            f"safe-tracectx supports {SUPPORTED_THUNDER}: pip install -U 'lightning-thunder>=0.2.1,<0.3'"
        ) from error
    value = getattr(loaded, name)
    globals()[name] = value
    return value


__all__ = [
    "AuditLog",
    "LENIENT",
    "STRICT",
    "Action",
    "BrokenTraceError",
    "CallSite",
    "LeakedProxyError",
    "MissingExtraError",
    "UnsupportedThunderError",
    "MissingTraceAction",
    "MissingTraceError",
    "NameClashError",
    "OverrideAction",
    "PassKind",
    "PassRole",
    "Policy",
    "PresetName",
    "ReadOnlyTraceError",
    "ScratchTrace",
    "TraceContextError",
    "TraceContextWarning",
    "TracelessRecordingError",
    "TracelessTrace",
    "UnbalancedContextError",
    "Violation",
    "audit",
    "audited_pass",
    "check_forward_backward",
    "check_trace",
    "current_trace",
    "describe_trace",
    "get_policy",
    "install",
    "installed",
    "is_installed",
    "is_traceless",
    "require_trace",
    "scratch_trace",
    "set_default_policy",
    "thunder_support",
    "traceless",
    "traceless_tensorproxy",
    "tracectx",
    "uninstall",
    "use_policy",
]
