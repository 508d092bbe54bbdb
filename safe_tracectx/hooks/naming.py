"""The proxy-naming hook: ``thunder.core.proxies.make_proxy_name`` under ``Policy.missing_trace``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Final

from safe_tracectx import events
from safe_tracectx.callsite import find_call_site
from safe_tracectx.context import TRACE_VAR, TracelessTrace, missing_trace_error
from safe_tracectx.policy import act, get_policy

__all__ = ["make_naming_hook"]

_trace_get: Final = TRACE_VAR.get


def _what_is_being_made() -> str:
    """'creating a TensorProxy', from the Proxy.__init__ frame above the hook."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(4):
        if frame is None:
            break
        proxy = frame.f_locals.get("self") if frame.f_code.co_name == "__init__" else None
        if proxy is not None:
            return f"creating a {type(proxy).__name__}"
        frame = frame.f_back
    return "naming a proxy"


def make_naming_hook(original: Callable[..., str]) -> Callable[..., str]:
    """A ``make_proxy_name`` that applies the policy when no trace is active and reports to the audit."""

    def make_proxy_name(*, name: str | None = None, prefix: str | None = None) -> str:
        trace = _trace_get(None)
        if trace is None:
            policy = get_policy()
            if policy.missing_trace == "traceless":
                trace = TracelessTrace()
            else:
                act(missing_trace_error(_what_is_being_made()), policy=policy)
                return original(name=name, prefix=prefix)  # warn/log/ignore: Thunder's own behaviour
        made: str = trace.make_name(name=name, prefix=prefix)
        if events.sinks:
            events.emit("proxy_created", trace=trace, site=find_call_site(), name=made)
        return made

    make_proxy_name.__wrapped__ = original  # type: ignore[attr-defined]
    make_proxy_name.__doc__ = original.__doc__
    return make_proxy_name
