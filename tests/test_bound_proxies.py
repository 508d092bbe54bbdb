"""bound_proxies: the same proxies as Thunder's flat_proxy_args/outs, and the checks leave Thunder's caches alone."""

from __future__ import annotations

import collections
import dataclasses
import enum
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import thunder
import torch
from thunder.core import prims
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import TraceCtx

from safe_tracectx import install, tracectx, uninstall
from safe_tracectx.policy import PresetName
from safe_tracectx.traces.bound_proxies import proxy_args, proxy_outs
from safe_tracectx.traces.checks import check_forward_backward, check_trace
from safe_tracectx.traces.fingerprint import fingerprint, names_defined_by

CACHES = ("flat_args_and_spec", "flat_args", "flat_proxy_args", "flat_outs_and_spec", "flat_outs", "flat_proxy_outs")


def _mlp() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    return model, torch.randn(3, 8)


def _compiled_traces() -> list[TraceCtx]:
    model, x = _mlp()
    jitted = thunder.jit(model)
    jitted(x).sum().backward()
    return [*thunder.last_traces(jitted), *thunder.last_backward_traces(jitted)]


def _bsyms(bsyms: Any) -> Iterator[BoundSymbol]:
    for bsym in bsyms:
        yield bsym
        yield from _bsyms(bsym.subsymbols)


def _caches(traces: list[TraceCtx]) -> list[tuple[int, frozenset[str]]]:
    return [
        (id(bsym), frozenset(k for k in CACHES if k in bsym.__dict__)) for t in traces for bsym in _bsyms(t.bound_symbols)
    ]


def _same(ours: tuple[Proxy, ...], thunders: tuple[Proxy, ...]) -> bool:
    return len(ours) == len(thunders) and all(a is b for a, b in zip(ours, thunders, strict=True))


def test_the_same_proxies_as_thunder_in_every_bound_symbol_of_a_real_compile() -> None:
    traces = _compiled_traces()
    compared = 0
    for bsym in (b for t in traces for b in _bsyms(t.bound_symbols)):
        args, outs = proxy_args(bsym), proxy_outs(bsym)
        assert _same(args, bsym.flat_proxy_args), bsym
        assert _same(outs, bsym.flat_proxy_outs), bsym
        compared += 1
    assert compared > 200


def test_checks_and_fingerprints_fill_no_cache_of_thunders() -> None:
    traces = _compiled_traces()
    before = _caches(traces)
    assert sum(not keys for _, keys in before) > 20  # Thunder leaves many symbols unflattened
    for trace in traces:
        check_trace(trace)
        fingerprint(trace)
        names_defined_by(trace)
    check_forward_backward(traces[-1], traces[0])
    assert _caches(traces) == before


def _cold_symbols_after_a_compile(policy: PresetName | None) -> int:
    if policy is not None:
        install(policy)
    try:
        return sum(not keys for _, keys in _caches(_compiled_traces()))
    finally:
        if policy is not None:
            uninstall()


def test_every_pass_hooked_leaves_thunders_caches_as_thunder_does() -> None:
    # Filling them cost ~130 ms of a 9 s nanoGPT compile and left thousands of objects for the collector.
    assert _cold_symbols_after_a_compile("strict") == _cold_symbols_after_a_compile(None) > 0


class Pair(tuple[Any, ...]):
    """A tuple subclass: Thunder's pytree keeps it whole, as one leaf."""


class Bag(dict[Any, Any]):
    """A dict subclass: one leaf too."""


class Color(enum.Enum):
    RED = 1


@dataclasses.dataclass
class Holder:
    tensor: Any
    scale: float = 1.0


def _tensor(name: str) -> TensorProxy:
    return TensorProxy(name, shape=(2,), device=cpu, dtype=float32)


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param(lambda a, b, n: (([a, (b, [a])], None, 2.5, float32, cpu, torch.float32), {}), id="nested"),
        pytest.param(lambda a, b, n: ((a,), {"zeta": b, "alpha": [n, a], "mid": {"y": b, "x": a}}), id="kwargs-sorted"),
        pytest.param(lambda a, b, n: ((slice(n, None, 2), b), {}), id="slice"),
        pytest.param(lambda a, b, n: ((Holder(a), b), {}), id="dataclass-falls-back"),
        pytest.param(lambda a, b, n: ((collections.OrderedDict(z=a, a=b),), {}), id="ordereddict-insertion-order"),
        pytest.param(lambda a, b, n: ((collections.defaultdict(list, z=a, a=b),), {}), id="defaultdict-sorted"),
        pytest.param(lambda a, b, n: (({"x": a, 1: b, None: n},), {}), id="mixed-keys-by-type"),
        pytest.param(lambda a, b, n: (({object(): a, object(): b},), {}), id="unsortable-keys"),
        pytest.param(lambda a, b, n: ((Pair((a,)), [b]), {}), id="tuple-subclass-is-a-leaf"),
        pytest.param(lambda a, b, n: ((Bag(k=a), b), {}), id="dict-subclass-is-a-leaf"),
        pytest.param(lambda a, b, n: ((collections.deque([b, a]), Color.RED, {1}, torch.ones(1)), {}), id="optree-types"),
        pytest.param(lambda a, b, n: ((torch.Size([2]), a), {"od": collections.OrderedDict(z=b, a=n)}), id="kwargs"),
    ],
)
def test_containers_give_thunders_order(arguments: Any) -> None:
    trace = TraceCtx()
    with tracectx(trace):
        a, b, n = _tensor("a"), _tensor("b"), NumberProxy("n", 3, python_type=int)
        out = _tensor("c")
    args, kwargs = arguments(a, b, n)
    bsym = BoundSymbol(prims.python_return, args=args, kwargs=kwargs, output=(out, [n]))
    ours_args, ours_outs = proxy_args(bsym), proxy_outs(bsym)
    assert _same(ours_args, bsym.flat_proxy_args)
    assert _same(ours_outs, bsym.flat_proxy_outs)
    assert [p.name for p in ours_outs] == ["c", "n"]


def test_a_cache_thunder_filled_is_read_as_it_is() -> None:
    trace = TraceCtx()
    with tracectx(trace):
        a = _tensor("a")
    bsym = BoundSymbol(prims.python_return, args=(a,), kwargs={}, output=None)
    cached = bsym.flat_proxy_args
    assert proxy_args(bsym) is cached


def _bound(make_args: Callable[[TensorProxy], tuple[Any, ...]], output: Any = None) -> tuple[BoundSymbol, TensorProxy]:
    with tracectx(TraceCtx()):
        a = _tensor("a")
    return BoundSymbol(prims.python_return, args=make_args(a), kwargs={}, output=output), a


def _in(bsym: BoundSymbol) -> TraceCtx:
    trace = TraceCtx()
    trace.bound_symbols.append(bsym)
    return trace


def test_types_optree_keeps_whole_are_read_without_thunders_caches() -> None:
    bsym, a = _bound(lambda a: (Color.RED, {1}, torch.ones(1), Pair((2,)), a))
    assert _same(proxy_args(bsym), (a,))
    assert "flat_proxy_args" not in bsym.__dict__


def test_a_dataclass_is_flattened_by_thunders_code_without_filling_its_caches() -> None:
    bsym, a = _bound(lambda a: (Holder(a), 2))
    bsym = BoundSymbol(prims.python_return, args=bsym.args, kwargs={}, output=Holder(a))
    assert _same(proxy_args(bsym), (a,)) and _same(proxy_outs(bsym), (a,))
    assert not {"flat_args", "flat_args_and_spec", "flat_proxy_args", "flat_outs", "flat_outs_and_spec",
                "flat_proxy_outs"} & set(bsym.__dict__)
    assert _same(proxy_outs(bsym), bsym.flat_proxy_outs)  # the same as Thunder's property, once it is filled


def test_a_root_thunder_refuses_is_refused_as_thunder_does() -> None:
    bsym, _ = _bound(lambda a: (), output=collections.OrderedDict(k=1))
    with pytest.raises(TypeError, match="tree_flatten of type"):
        proxy_outs(bsym)
    with pytest.raises(TypeError, match="tree_flatten of type"):
        check_trace(_in(bsym))  # as before: Thunder's own passes cannot read this symbol either


def _nested(a: TensorProxy) -> tuple[Any, ...]:
    nested: Any = a
    for _ in range(600):
        nested = [nested]
    return (nested,)


def _from_deep_in_the_stack(frames: int, read: Callable[[], tuple[Proxy, ...]]) -> tuple[Proxy, ...]:
    return _from_deep_in_the_stack(frames - 1, read) if frames else read()


def test_deep_arguments_read_deep_in_the_stack_as_thunder_reads_them() -> None:
    # optree's depth limit does not count the caller's frames; a Python walk's does
    bsym, a = _bound(_nested)
    frames = sys.getrecursionlimit() - 300
    assert _same(_from_deep_in_the_stack(frames, lambda: proxy_args(bsym)), (a,))
    assert _same(_from_deep_in_the_stack(frames, lambda: bsym.flat_proxy_args), (a,))


def test_check_trace_sees_no_proxy_inside_a_leaf() -> None:
    bsym, _ = _bound(lambda a: (Pair((a,)),))
    # Thunder's passes never see that proxy: no use before definition. Thunder cannot print the leaf either
    # (its tree_flatten refuses a tuple subclass), which the printing check says.
    assert [(v.kind, "tree_flatten" in v.message) for v in check_trace(_in(bsym))] == [("generated-code", True)]


def test_fingerprint_stays_duck_typed_for_entries_that_are_not_bound_symbols() -> None:
    from types import SimpleNamespace

    odd = SimpleNamespace(bound_symbols=[object()])
    assert fingerprint(odd) == [["?", [], [], []]]
    assert names_defined_by(odd) == frozenset()


def test_fingerprint_of_a_look_alike_with_an_output_reads_its_flat_proxy_outs() -> None:
    from collections import namedtuple
    from types import SimpleNamespace

    proxy = _bound(lambda a: (a,))[1]
    Entry = namedtuple("Entry", "output flat_proxy_outs")
    odd = SimpleNamespace(bound_symbols=[SimpleNamespace(output=object()), Entry(proxy, (proxy,))])
    assert [row[1] for row in fingerprint(odd)] == [[], [proxy.name]]  # was AttributeError (no flat_proxy_outs / __dict__)
    assert names_defined_by(odd) == frozenset({proxy.name})
