"""The proxy-naming hook: ``thunder.core.proxies.make_proxy_name`` under ``Policy.missing_trace``.

Without an active trace Thunder fails with ``AttributeError: 'NoneType' object
has no attribute 'make_name'``; the hook instead raises ``MissingTraceError``
naming the user's line (strict), or names the proxy traceless (lenient).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Final

from safe_tracectx import events
from safe_tracectx.callsite import find_call_site, find_frame
from safe_tracectx.context.blocks import TRACE_VAR
from safe_tracectx.context.lookup import on_missing_trace

__all__ = ["make_naming_hook"]

_trace_get: Final = TRACE_VAR.get


def _in_proxy_init(frame: FrameType) -> bool:
    return frame.f_code.co_name == "__init__" and frame.f_locals.get("self") is not None


def _what_is_being_made() -> str:
    """'creating a TensorProxy', from the Proxy.__init__ frame above the hook."""
    init = find_frame(_in_proxy_init, sys._getframe(2), limit=4)
    return "naming a proxy" if init is None else f"creating a {type(init.f_locals['self']).__name__}"


def make_naming_hook(original: Callable[..., str]) -> Callable[..., str]:
    """A ``make_proxy_name`` that applies the policy when no trace is active and reports to the audit."""

    def make_proxy_name(*, name: str | None = None, prefix: str | None = None) -> str:
        trace = _trace_get(None)
        if trace is None:
            trace = on_missing_trace(_what_is_being_made())
            if trace is None:  # warn/log/ignore: Thunder's own behaviour
                return original(name=name, prefix=prefix)
            if events.sinks:
                events.emit("proxy_traceless", trace=None, site=find_call_site(skip_thunder=True))
        made: str = trace.make_name(name=name, prefix=prefix)
        if events.sinks:
            events.emit("proxy_created", trace=trace, site=find_call_site(), name=made)
        return made

    make_proxy_name.__wrapped__ = original  # type: ignore[attr-defined]
    make_proxy_name.__doc__ = original.__doc__
    return make_proxy_name
