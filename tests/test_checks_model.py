"""check_trace against a plain model of it: every occurrence of every proxy looked at.

check_trace skips a proxy it has settled (met again, it can report nothing new) and
keeps owners only for names met first inside a fusion region; the model does neither,
so any case where that shortcut changed a result shows up as a difference here.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from thunder.core import prims
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import TraceCtx

from safe_tracectx import is_traceless, scratch_trace, traceless, tracectx
from safe_tracectx.checks import check_trace

Found = tuple[str, str, str, str]  # kind, name, message, where


def _walk(bsyms: Iterable[Any]) -> Iterator[Proxy]:
    for bsym in bsyms:
        yield from bsym.flat_proxy_args
        yield from bsym.flat_proxy_outs
        yield from _walk(bsym.subsymbols)


def model(trace: TraceCtx) -> list[Found]:
    """What check_trace reports, computed the long way (messages as check_trace words them)."""
    found: list[Found] = []
    defined: dict[str, Proxy] = {}
    owners: dict[str, tuple[Proxy, str]] = {}
    where = ""

    def add(kind: str, name: str, message: str, at: str | None = None) -> None:
        if all((f[0], f[1]) != (kind, name) for f in found):
            found.append((kind, name, message, at or where))

    def own(proxy: Proxy, region: str, at: str | None = None) -> None:
        if is_traceless(proxy):
            add("traceless-proxy", proxy.name, f"traceless proxy {proxy.name} is used in trace @{id(trace):#x}", at)
        first, where_first = owners.setdefault(proxy.name, (proxy, region))
        if first is not proxy and where_first != region:
            message = f"name {proxy.name} is one proxy in {where_first} and another in {region}"
            add("fusion-name-clash", proxy.name, message, at)

    for proxy in (a for a in trace.args if isinstance(a, Proxy)):
        defined.setdefault(proxy.name, proxy)
        own(proxy, "the trace", "trace inputs")
    for index, bsym in enumerate(trace.bound_symbols):
        where = f"bound symbol {index} ({bsym.sym.name})"
        for proxy in bsym.flat_proxy_args:
            if proxy.name not in defined:
                add("use-before-definition", proxy.name, f"{proxy.name} is used before any bound symbol defines it")
            elif defined[proxy.name] is not proxy:
                add("name-clash", proxy.name, f"{proxy.name} names two different proxies")
            defined.setdefault(proxy.name, proxy)
            if proxy.name not in trace.names:
                add("unregistered-name", proxy.name, f"{proxy.name} is not registered in the trace's names")
            own(proxy, "the trace")
        for proxy in bsym.flat_proxy_outs:
            if defined.setdefault(proxy.name, proxy) is not proxy:
                add("ssa-redefinition", proxy.name, f"{proxy.name} is defined again by a different proxy")
            if proxy.name not in trace.names:
                add("unregistered-name", proxy.name, f"{proxy.name} is not registered in the trace's names")
            own(proxy, "the trace")
        if bsym.sym.is_fusion:
            for proxy in _walk(bsym.subsymbols):
                own(proxy, f"fusion region {bsym.sym.name}")
    return found


def _found(trace: TraceCtx) -> list[Found]:
    return [(v.kind, v.name, v.message, v.where) for v in check_trace(trace)]


def _checked(trace: TraceCtx) -> list[tuple[str, str, str]]:
    """(kind, name, where) of each violation, once the check is seen to agree with the model."""
    found = _found(trace)
    assert found == model(trace)
    return [(kind, name, where) for kind, name, _, where in found]


class _RandomTrace:
    """Proxies drawn from a few names: registered, unregistered (scratch), traceless; reused at random."""

    def __init__(self, seed: int, *, with_traceless: bool) -> None:
        self.rng = random.Random(seed)
        self.trace = TraceCtx()
        self.names = [f"n{i}" for i in range(self.rng.randint(2, 10))]
        self.with_traceless = with_traceless

    def proxy(self) -> TensorProxy:
        draw, name = self.rng.random(), self.rng.choice(self.names)
        if self.with_traceless and draw < 0.05:
            with traceless():
                return TensorProxy(shape=(2,), device=cpu, dtype=float32)
        if draw < 0.25:  # unregistered, maybe the name of another proxy
            with scratch_trace():
                return TensorProxy(name, shape=(2,), device=cpu, dtype=float32)
        with tracectx(self.trace):
            return TensorProxy(None if self.trace.has_name(name) else name, shape=(2,), device=cpu, dtype=float32)

    def pick(self, pool: list[TensorProxy], reuse: float, most: int) -> list[TensorProxy]:
        """Up to ``most`` proxies, each one of ``pool`` with probability ``reuse``, else a new one."""
        count = self.rng.randint(0, most)
        return [self.rng.choice(pool) if pool and self.rng.random() < reuse else self.proxy() for _ in range(count)]

    def bsyms(self, pool: list[TensorProxy], depth: int, count: int) -> list[BoundSymbol]:
        made = []
        for _ in range(count):
            args, outs = self.pick(pool, 0.85, 3), self.pick(pool, 0.1, 2)
            output = (outs[0] if self.rng.random() < 0.5 else tuple(outs)) if len(outs) == 1 else tuple(outs) or None
            if depth < 2 and self.rng.random() < 0.2:
                inner = self.bsyms(pool + args, depth + 1, self.rng.randint(0, 4))
                sym = Symbol(name=f"Fusion{self.rng.randint(0, 3)}", meta=None, is_fusion=self.rng.random() < 0.8)
                made.append(sym.bind(*args, output=output, subsymbols=inner))
            else:
                made.append(Symbol(name="op", meta=None).bind(*args, output=output))
            pool = pool + args + outs
        return made

    def build(self) -> TraceCtx:
        inputs = [self.proxy() for _ in range(self.rng.randint(0, 3))]
        self.trace.args = tuple(inputs)
        self.trace.bound_symbols = self.bsyms(inputs, 0, self.rng.randint(0, 12))
        return self.trace


@pytest.mark.parametrize("with_traceless", [False, True])
def test_random_traces_agree_with_the_model(with_traceless: bool) -> None:
    kinds: set[str] = set()
    for seed in range(400):
        trace = _RandomTrace(seed, with_traceless=with_traceless).build()
        expected = model(trace)
        assert _found(trace) == expected, f"seed {seed}"
        kinds |= {f[0] for f in expected}
    every = {"use-before-definition", "name-clash", "ssa-redefinition", "unregistered-name", "fusion-name-clash"}
    assert kinds >= every | ({"traceless-proxy"} if with_traceless else set())


def _two(names: str, trace: TraceCtx) -> tuple[TensorProxy, ...]:
    with tracectx(trace):
        return tuple(TensorProxy(n, shape=(2,), device=cpu, dtype=float32) for n in names.split())


def test_an_unregistered_input_is_reported_where_a_bound_symbol_first_meets_it() -> None:
    trace = TraceCtx()
    with scratch_trace():
        a = TensorProxy("a", shape=(2,), device=cpu, dtype=float32)
    (b,) = _two("b", trace)
    trace.args = (a,)
    trace.bound_symbols += [prims.neg.bind(b, output=a), prims.neg.bind(a, output=None)]  # `a` met first as an output
    assert _checked(trace) == [
        ("use-before-definition", "b", "bound symbol 0 (neg)"),
        ("unregistered-name", "a", "bound symbol 0 (neg)"),
    ]


def test_a_proxy_defined_twice_is_fine_and_a_second_proxy_is_reported_at_each_kind_once() -> None:
    trace = TraceCtx()
    x, y = _two("x y", trace)
    with scratch_trace():
        x2 = TensorProxy("x", shape=(2,), device=cpu, dtype=float32)
    trace.args = (y,)
    trace.bound_symbols += [
        prims.neg.bind(y, output=x),
        prims.neg.bind(y, output=x),  # the same proxy again: no redefinition
        prims.neg.bind(x, output=x2),
        prims.add.bind(x2, x2, output=None),
        prims.add.bind(x, x2, output=None),
    ]
    assert _checked(trace) == [
        ("ssa-redefinition", "x", "bound symbol 2 (neg)"),
        ("name-clash", "x", "bound symbol 3 (add)"),
    ]


def test_a_nested_region_name_met_again_at_the_top_level_is_a_fusion_clash() -> None:
    trace = TraceCtx()
    a, inner, out = _two("a i0 o0", trace)
    with scratch_trace():
        top = TensorProxy("i0", shape=(2,), device=cpu, dtype=float32)  # the region's name, another proxy
    nested = Symbol(name="group", meta=None).bind(a, output=inner, subsymbols=[prims.neg.bind(a, output=inner)])
    region = Symbol(name="Fusion0", meta=None, is_fusion=True).bind(
        a, output=out, subsymbols=[Symbol(name="outer", meta=None).bind(a, output=out, subsymbols=[nested])]
    )
    trace.args = (a,)
    trace.bound_symbols += [region, prims.neg.bind(a, output=top)]
    clashes = [v for v in check_trace(trace) if v.kind == "fusion-name-clash"]
    assert [(v.name, v.message, v.where) for v in clashes] == [
        ("i0", "name i0 is one proxy in fusion region Fusion0 and another in the trace", "bound symbol 1 (neg)")
    ]
    assert _found(trace) == model(trace)


def test_a_traceless_proxy_used_again_and_again_is_reported_once() -> None:
    trace = TraceCtx()
    (a,) = _two("a", trace)
    with traceless():
        leaked = TensorProxy(shape=(2,), device=cpu, dtype=float32)
    trace.args = (a,)
    trace.bound_symbols += [prims.add.bind(a, leaked, output=None) for _ in range(3)]
    assert [(kind, name) for kind, name, _ in _checked(trace)] == [
        ("use-before-definition", leaked.name),
        ("unregistered-name", leaked.name),
        ("traceless-proxy", leaked.name),
    ]
