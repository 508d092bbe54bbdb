"""check_trace against a plain model of the program Thunder generates, on random traces.

The model restates the rules without any of check_trace's shortcuts (the
callee cache, labels made only when reported, liveness computed only when a
violation is found): every occurrence of every proxy is looked at, so a case
where a shortcut changed a result shows up as a difference.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from thunder.core import prims
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import TraceCtx

from safe_tracectx import is_traceless, scratch_trace, traceless, tracectx
from safe_tracectx.traces.checks import generatable, trace_findings

Found = tuple[str, str, str]  # kind, name, where


def _label(index: int, bsym: Any) -> str:
    return f"bound symbol {index} ({bsym.sym.name})"


def _dead(trace: TraceCtx) -> set[int]:
    bsyms = trace.bound_symbols
    if not any(b.sym.id == prims.PrimIDs.RETURN for b in bsyms):
        return set()
    produced = {p.name for b in bsyms for p in b.flat_proxy_outs if p.name not in {a.name for a in b.flat_proxy_args}}
    needed: set[str] = set()
    dead = set()
    for index in reversed(range(len(bsyms))):
        bsym = bsyms[index]
        reads = {a.name for a in bsym.flat_proxy_args}
        keep = bsym.sym.id == prims.PrimIDs.RETURN or any(
            p.name in needed and (p.name not in reads or p.name not in produced) for p in bsym.flat_proxy_outs
        )
        if keep:
            needed |= reads
        else:
            dead.add(index)
    return dead


def model(trace: TraceCtx) -> tuple[list[Found], list[Found]]:
    """(violations, notes) as check_trace finds them, computed the long way."""
    found: list[tuple[Found, int | None, bool]] = []

    def add(kind: str, name: str, index: int | None, *, note: bool = False) -> None:
        if all((f[0][0], f[0][1]) != (kind, name) for f in found):
            found.append(((kind, name, "trace inputs" if index is None else _label(index, trace.bound_symbols[index])),
                          index, note))

    def registration(proxy: Proxy, index: int | None) -> None:
        if proxy.name not in trace.names and generatable(proxy.name, trace):
            add("unregistered-name", proxy.name, index)
        if is_traceless(proxy):
            add("traceless-proxy", proxy.name, index)

    inputs = [a for a in trace.args if isinstance(a, Proxy)]
    defined: dict[str, Any] = dict.fromkeys((p.name for p in inputs), None)  # name -> the bound symbol defining it
    for proxy in inputs:
        registration(proxy, None)
    for index, bsym in enumerate(trace.bound_symbols):
        for proxy in bsym.flat_proxy_args:
            if proxy.name not in defined:
                is_return = bsym.sym.id == prims.PrimIDs.RETURN
                add("use-before-definition", proxy.name, index, note=is_return and proxy.name in trace.names)
            registration(proxy, index)
        for proxy in bsym.flat_proxy_outs:
            if proxy.name in defined:
                first = defined[proxy.name]
                # the same variable: the very proxy it reads returned, an unpacking, or a number computed again
                # the same way (same symbol, same inputs)
                same = (any(a is proxy for a in bsym.flat_proxy_args) and not bsym.subsymbols) or bsym.sym.name.startswith("unpack") or (
                    isinstance(proxy, NumberProxy) and first is not None and (bsym.sym.id == prims.PrimIDs.SHAPE or (
                        first.sym.id == bsym.sym.id
                        and [a.name for a in first.flat_proxy_args] == [a.name for a in bsym.flat_proxy_args]))
                )
                if not same:
                    add("defined-twice", proxy.name, index)
            else:
                defined[proxy.name] = bsym
            registration(proxy, index)
        if bsym.sym.is_fusion:
            inside = {a.name for a in bsym.flat_proxy_args}
            for sub in bsym.subsymbols:
                for proxy in sub.flat_proxy_args:
                    if proxy.name not in inside:
                        add("use-before-definition", proxy.name, index)
                        inside.add(proxy.name)
                inside |= {p.name for p in sub.flat_proxy_outs}
    dead = _dead(trace)
    violations = [f for f, index, note in found if not note and (index is None or index not in dead)]
    notes = [f for f, index, note in found if note or (index is not None and index in dead)]
    return violations, notes


def _found(trace: TraceCtx) -> tuple[list[Found], list[Found]]:
    violations, notes = trace_findings(trace)
    return [(v.kind, v.name, v.where) for v in violations], [(v.kind, v.name, v.where) for v in notes]


class _RandomTrace:
    """Proxies drawn from a few names: registered, unregistered (scratch), traceless; reused at random."""

    def __init__(self, seed: int, *, with_traceless: bool) -> None:
        self.rng = random.Random(seed)
        self.trace = TraceCtx()
        self.names = [f"t{i}" for i in range(self.rng.randint(2, 10))] + ["a", "b"]
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
            draw = self.rng.random()
            if depth < 2 and draw < 0.2:
                inner = self.bsyms(pool + args, depth + 1, self.rng.randint(0, 4))
                name = f"Fusion{self.rng.randint(0, 3)}"
                sym = Symbol(name=name, meta=None, is_fusion=self.rng.random() < 0.8, _module=prims)
                made.append(sym.bind(*args, output=output, subsymbols=inner, _call_ctx={name: None}))
            elif draw < 0.3:
                made.append(Symbol(name="unpack_sequence", meta=None, _module=prims).bind(*args, output=output))
            else:
                made.append(Symbol(name="op", meta=None, _module=prims).bind(*args, output=output))
            pool = pool + args + outs
        return made

    def build(self) -> TraceCtx:
        inputs = [self.proxy() for _ in range(self.rng.randint(0, 3))]
        self.trace.args = tuple(inputs)
        self.trace.name_ctr = self.rng.randint(0, 6)
        bsyms = self.bsyms(inputs, 0, self.rng.randint(0, 12))
        if self.rng.random() < 0.6:
            bsyms.append(prims.python_return.bind(tuple(self.pick(inputs, 0.7, 2)), output=None))
        self.trace.bound_symbols = bsyms
        return self.trace


@pytest.mark.parametrize("with_traceless", [False, True])
def test_random_traces_agree_with_the_model(with_traceless: bool) -> None:
    kinds: set[str] = set()
    noted: set[str] = set()
    for seed in range(500):
        trace = _RandomTrace(seed, with_traceless=with_traceless).build()
        expected = model(trace)
        assert _found(trace) == expected, f"seed {seed}"
        kinds |= {f[0] for f in expected[0]}
        noted |= {f[0] for f in expected[1]}
    every = {"use-before-definition", "defined-twice", "unregistered-name"}
    assert kinds >= every | ({"traceless-proxy"} if with_traceless else set())
    assert "use-before-definition" in noted  # some were in dead code


def test_a_violation_is_reported_once_per_kind_and_name_at_its_first_place() -> None:
    trace = TraceCtx()
    with tracectx(trace):
        a = TensorProxy("a", shape=(2,), device=cpu, dtype=float32)
    with traceless():
        leaked = TensorProxy(shape=(2,), device=cpu, dtype=float32)
    trace.args = (a,)
    trace.bound_symbols += [prims.add.bind(a, leaked, output=None) for _ in range(3)]
    violations, notes = _found(trace)
    assert violations == [
        ("use-before-definition", leaked.name, "bound symbol 0 (add)"),
        ("unregistered-name", leaked.name, "bound symbol 0 (add)"),
        ("traceless-proxy", leaked.name, "bound symbol 0 (add)"),
    ] and notes == []
    assert _found(trace) == model(trace)
