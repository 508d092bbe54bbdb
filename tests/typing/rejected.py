# mypy --strict must reject each line marked E: with that error code.
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx

from safe_tracectx import Policy, scratch_trace, tracectx
from safe_tracectx.proxies import rename

trace = TraceCtx()
proxy = TensorProxy(shape=(1,), device=cpu, dtype=float32)

tracectx("not a trace")  # E: [type-var]
rename(proxy, 3, trace=trace)  # E: [arg-type]
rename(proxy, "x")  # E: [call-arg]
Policy(missing_trace="explode")  # E: [arg-type]
Policy(unbalanced="traceless")  # E: [arg-type]
scratch_trace(reserve=trace)  # E: [call-arg]
scratch_trace("x")  # E: [arg-type]
scratch_trace(trace, names=3)  # E: [arg-type]
name: int = rename(proxy, "y", trace=trace)  # E: [assignment]
trace.names = ["t0"]  # E: [assignment]
# The Thunder stubs themselves:
from thunder.core.trace import reset_tracectx, set_tracectx  # noqa: E402

set_tracectx("trace")  # E: [arg-type]
reset_tracectx("token")  # E: [arg-type]
proxy.replace_name(3)  # E: [arg-type]
count: int = proxy.replace_name("z")  # E: [assignment]
