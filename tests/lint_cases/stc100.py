# mypy: ignore-errors
"""STC100 (--list-proxy-sites): each proxy-creating call; `STC100(guarded)` marks one a trace context guards."""
from thunder.core.proxies import TensorProxy as TP
from thunder.core.trace import tracectx


def f(trace, p, q):
    a = TP(like=p)  # STC100
    with tracectx(trace):
        b = p.replace_name("bw_" + p.name)  # STC100(guarded)
        c = q.replace(name="x")  # STC100(guarded)
    tok = set_tracectx(trace)
    try:
        d = tensorproxy(q, name=None)  # STC100(guarded)
    finally:
        reset_tracectx(tok)
    e = make_proxy_name(name=None)  # STC100


def make_output(like):
    return TensorProxy(like=like)  # STC100


def not_proxies(s):
    return s.replace("a", "b"), str(s), len(s)
