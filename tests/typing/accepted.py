# Everything here must pass mypy --strict; the N: comments are the revealed types.
from thunder.core.proxies import IntegerProxy, TensorProxy
from thunder.core.trace import TraceCtx

from safe_tracectx import Policy, ScratchTrace, scratch_trace, traceless, tracectx
from safe_tracectx.proxies import new_tensor_proxy, rename, rename_outputs

trace = TraceCtx()
tensor = new_tensor_proxy(trace=trace, shape=(1,), device="cpu", dtype="float32")
reveal_type(rename(tensor, "bw_t0", trace=trace))  # N: Revealed type is "thunder.core.proxies.TensorProxy"
number = IntegerProxy(name="i0", value=1)
reveal_type(rename(number, "bw_i0", trace=trace))  # N: Revealed type is "thunder.core.proxies.IntegerProxy"
with tracectx(trace) as active:
    reveal_type(active)  # N: Revealed type is "thunder.core.trace.TraceCtx"
with tracectx(None) as nothing:
    reveal_type(nothing)  # N: Revealed type is "None"
with scratch_trace(trace, names=["t0"]) as scratch:
    reveal_type(scratch)  # N: Revealed type is "safe_tracectx.context.scratch.ScratchTrace"
    reveal_type(scratch.created_names)  # N: Revealed type is "tuple[str, ...]"
with traceless() as naming:
    reveal_type(naming)  # N: Revealed type is "safe_tracectx.context.traceless_proxies.TracelessTrace"
policy = Policy(missing_trace="traceless", unbalanced="warn")
swap = rename_outputs([], trace=trace)
reveal_type(swap)  # N: Revealed type is "dict[thunder.core.proxies.Variable, thunder.core.proxies.Proxy]"
isinstance(scratch, ScratchTrace)
isinstance(tensor, TensorProxy)
# The Thunder stubs themselves (stubs/thunder-stubs):
from thunder.core.trace import get_tracectx, reset_tracectx, set_tracectx  # noqa: E402

reveal_type(tensor.replace_name("x"))  # N: Revealed type is "thunder.core.proxies.TensorProxy"
reveal_type(number.replace(name="n1"))  # N: Revealed type is "thunder.core.proxies.IntegerProxy"
reveal_type(get_tracectx())  # N: Revealed type is "thunder.core.trace.TraceCtx | None"
token = set_tracectx(trace)
reveal_type(token)  # N: Revealed type is "_contextvars.Token[thunder.core.trace.TraceCtx | None]"
reset_tracectx(token)
reveal_type(trace.names)  # N: Revealed type is "set[str]"
reveal_type(trace.bound_symbols)  # N: Revealed type is "list[thunder.core.symbol.BoundSymbol]"
# Presets, actions, pass kinds and roles spelt right (tests/typing/rejected.py has them misspelt):
from safe_tracectx import (  # noqa: E402
    LENIENT,
    STRICT,
    OverrideAction,
    PassKind,
    PassRole,
    PresetName,
    audited_pass,
    install,
    installed,
    set_default_policy,
    use_policy,
)

with use_policy("lenient", unbalanced="raise", defined_twice="off") as chosen:
    reveal_type(chosen)  # N: Revealed type is "safe_tracectx.policy.Policy"
with use_policy(STRICT, missing_trace="traceless"), installed("audit"), installed(LENIENT, audit=True):
    pass
preset: PresetName = "strict"
action: OverrideAction = "warn"
reveal_type(STRICT.replace(name_clash=action, use_before_definition="log"))  # N: Revealed type is "safe_tracectx.policy.Policy"
reveal_type(install(preset, audit=True))  # N: Revealed type is "safe_tracectx.hooks.installer.Installation"
set_default_policy("lenient", read_only="ignore")
set_default_policy(None)
kind: PassKind = "fusion"
role: PassRole = "backward"
reveal_type(audited_pass("mine", kind=kind, role=role))  # N: Revealed type is "safe_tracectx.hooks.audited.audited_pass"
audited_pass("pair", kind="remat", pair=True)
