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
# Misspelt presets, actions, fields, pass kinds and roles (the run-time checks still refuse them, for untyped callers):
from safe_tracectx import STRICT, audited_pass, install, installed, set_default_policy, use_policy  # noqa: E402

use_policy("strcit")  # E: [arg-type]
use_policy("strict", read_only="raies")  # E: [arg-type]
use_policy(STRICT, defined_twice="wran")  # E: [arg-type]
STRICT.replace(name_clash="raies")  # E: [arg-type]
STRICT.replace(defined_twice="loud")  # E: [arg-type]
Policy(name_clash="raies")  # E: [arg-type]
audited_pass("x", kind="fusoin")  # E: [arg-type]
audited_pass("x", role="fwd")  # E: [arg-type]
install("lenint")  # E: [arg-type]
installed("audti")  # E: [arg-type]
set_default_policy("strcit")  # E: [arg-type]
set_default_policy("strict", unbalanced="raies")  # E: [arg-type]
