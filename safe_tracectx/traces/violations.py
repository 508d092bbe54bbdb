"""A violation: what one trace check found, with its fix and the error a policy acts on (no Thunder import).

    >>> from safe_tracectx.traces.violations import Violation
    >>> v = Violation("defined-twice", "t0", "t0 is defined again, after bound symbol 0 (neg)", "bound symbol 1 (neg)")
    >>> type(v.to_error()).__name__, v.to_error().kind
    ('NameClashError', 'defined-twice')
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from safe_tracectx._support.callsite import CallSite
from safe_tracectx.errors import (
    FIXES,
    TRACE_CHECKS,
    BrokenTraceError,
    LeakedProxyError,
    NameClashError,
    SymbolOutsideTraceError,
    TraceCheck,
    TraceContextError,
    UseBeforeDefinitionError,
)

__all__ = ["KINDS", "Violation", "ViolationKind", "bsym_label"]

#: The kinds of violation (one per trace check), as ``--check KIND=ACTION`` and ``Policy.checks`` name them.
ViolationKind = TraceCheck
KINDS: Final[tuple[str, ...]] = TRACE_CHECKS

#: The error (and so the policy check) of each kind that is not ``name_clash``.
ERRORS: Final[dict[str, type[TraceContextError]]] = {
    "traceless-proxy": LeakedProxyError,
    "use-before-definition": UseBeforeDefinitionError,
    "handover-mismatch": BrokenTraceError,
    "handover-emptied": BrokenTraceError,
    "forward-reads-backward": BrokenTraceError,
    "stale-after-in-place": BrokenTraceError,
    "flat-args-mismatch": BrokenTraceError,
    "stale-proxy-after-swap": BrokenTraceError,
    "detached-under-grad": BrokenTraceError,
    "generated-code": BrokenTraceError,
    "untranslated-value": BrokenTraceError,
    "gradient-mismatch": BrokenTraceError,
    "custom-backward-ignored": BrokenTraceError,
    "dtype-changed-by-substitution": BrokenTraceError,
    "symbol-outside-trace": SymbolOutsideTraceError,
    "unreturned-output": BrokenTraceError,
    "grad-mode-lost": BrokenTraceError,
    "grad-mode-unrecorded": BrokenTraceError,
    "gradient-dropped": BrokenTraceError,
    "gradient-skips-update": BrokenTraceError,
    "leaf-updated-in-place": BrokenTraceError,
    "update-dropped": BrokenTraceError,
    "update-grad-mode": BrokenTraceError,
    "update-wrong-value": BrokenTraceError,
    "gradient-wrong-value": BrokenTraceError,
    "gained-requires-grad": BrokenTraceError,
    "cache-entry-reused": BrokenTraceError,
    "output-aliases-input": BrokenTraceError,
    "output-wrong-value": BrokenTraceError,
    "metadata-mismatch": BrokenTraceError,
}


@dataclasses.dataclass(frozen=True)
class Violation:
    """One problem found in a trace: its kind, the name involved (and ``also`` the others), where, and the fix."""

    kind: ViolationKind
    name: str
    message: str
    where: str
    also: tuple[str, ...] = ()
    #: What made the problem, when the check knows it better than by the trace's step (label, qualname): the
    #: function that is a symbol's meta, for a tag its outputs should not carry.
    culprit: tuple[str, str] | None = None
    #: The fix, when this violation's cause needs another than its kind's (:data:`FIXES`).
    advice: str | None = None

    @property
    def fix(self) -> str:
        return self.advice if self.advice is not None else FIXES[self.kind]

    def to_error(self, site: CallSite | None = None, *, context: str = "") -> TraceContextError:
        """The error a policy acts on (its class says which policy check applies, its ``kind`` which trace check)."""
        error_type = ERRORS.get(self.kind, NameClashError)
        error = error_type(f"{context}{self.message} ({self.where})", fix=self.fix, site=site)
        error.kind = self.kind
        error.names = tuple(dict.fromkeys((self.name, *self.also)))
        error.culprit = self.culprit
        return error

    def __str__(self) -> str:
        return f"{self.kind}: {self.message} ({self.where})"


def bsym_label(index: int, bsym: Any, region: str | None = None) -> str:
    """``bound symbol 3 (mul)``: how messages name a top-level bound symbol."""
    name = getattr(getattr(bsym, "sym", None), "name", "?")
    return f"bound symbol {index} ({name})" + (f" in {region}" if region else "")
