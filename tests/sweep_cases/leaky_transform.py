"""A Transform that sets the trace, makes a proxy and resets it without ``finally`` (the leak a sweep finds)."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from thunder.core import devices, dtypes
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, reset_tracectx, set_tracectx
from thunder.core.transform_common import Transform

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder


class LeakyTransform(Transform):
    def transform_trace_post_optimization(self, computation_trace: TraceCtx, **kwargs: Any) -> TraceCtx:
        token = set_tracectx(computation_trace)  # LEAKING SET
        TensorProxy(shape=(1,), device=devices.cpu, dtype=dtypes.float32)  # a fault here skips the reset
        reset_tracectx(token)
        return computation_trace


def f(x: torch.Tensor) -> torch.Tensor:
    return (x.sin() * 2).sum()


thunder.jit(f, transforms=[LeakyTransform()])(torch.ones(3, requires_grad=True)).backward()
