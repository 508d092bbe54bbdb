"""A Transform that rewrites each ``copy_`` of the forward it is about to run: a step that breaks how the
program's in-place updates reach its inputs, for the checks of those updates to find (Thunder 0.2.6 and main
get these programs right)."""

from __future__ import annotations

import warnings
from typing import Any

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from thunder.core.trace import TraceCtx, from_trace
    from thunder.core.transform_common import Transform


class RewritesCopies(Transform):
    """Each ``copy_`` bound symbol of the forward (not the backward) replaced by :meth:`rewrite` of it."""

    def rewrite(self, copy: Any) -> Any:
        raise NotImplementedError

    def transform_trace_post_optimization(self, computation_trace: TraceCtx, **kwargs: Any) -> TraceCtx:
        trace = computation_trace
        if trace.siginfo().name == "backward_fn":
            return trace
        new = from_trace(trace)
        new.bound_symbols = [self.rewrite(b) if b.sym.name == "copy_" else b for b in trace.bound_symbols]
        return new
