"""The context managers on Thunder's own ContextVar, one concern per module.

- ``blocks``: the block mechanism every manager shares (states, the ContextVars, ``Block``);
- ``active_trace``: ``tracectx`` (with the ``read_only`` snapshot of ``readonly``);
- ``scratch``: ``scratch_trace`` and ``ScratchTrace``;
- ``traceless_proxies``: ``traceless``, ``TracelessTrace`` and traceless proxies;
- ``lookup``: ``current_trace``, ``require_trace`` and the missing-trace branch;
- ``policy_block``: ``use_policy``;
- ``decorate``: the decorator form all of them share.
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.context")

from safe_tracectx._support.labels import describe_trace
from safe_tracectx.context.active_trace import tracectx
from safe_tracectx.context.blocks import OWNER_VAR, TRACE_VAR, Block
from safe_tracectx.context.lookup import current_trace, missing_trace_error, on_missing_trace, require_trace
from safe_tracectx.context.policy_block import use_policy
from safe_tracectx.context.scratch import ScratchTrace, scratch_trace
from safe_tracectx.context.traceless_proxies import (
    TracelessTrace,
    is_traceless,
    traceless,
    traceless_proxies_made,
    traceless_tensorproxy,
)
from safe_tracectx.errors import FIXES

#: The fix of a missing trace (kept under its old name).
MISSING_TRACE_FIX = FIXES["missing_trace"]

__all__ = [
    "MISSING_TRACE_FIX",
    "OWNER_VAR",
    "TRACE_VAR",
    "Block",
    "ScratchTrace",
    "TracelessTrace",
    "current_trace",
    "describe_trace",
    "is_traceless",
    "missing_trace_error",
    "on_missing_trace",
    "require_trace",
    "scratch_trace",
    "traceless",
    "traceless_proxies_made",
    "traceless_tensorproxy",
    "tracectx",
    "use_policy",
]
