"""AuditLog: events, bounded memory, views, the text report and the JSON schema; seeded pass faults."""

from __future__ import annotations

import gc
import json
import threading
from pathlib import Path

import pytest
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, from_trace, reset_tracectx, set_tracectx

from safe_tracectx import LeakedProxyError, NameClashError, traceless, tracectx, use_policy
from safe_tracectx._support.callsite import CallSite
from safe_tracectx._support.events import Event
from safe_tracectx.auditlog.log import AuditLog
from safe_tracectx.hooks import PassSpec, installed
from safe_tracectx.hooks import audit
from safe_tracectx.hooks.passes import wrap_pass

ROOT = Path(__file__).resolve().parent.parent


def _make_proxies(n: int) -> None:
    trace = TraceCtx()
    with tracectx(trace):
        for _ in range(n):
            TensorProxy(shape=(1,), device=cpu, dtype=float32)


def test_events_carry_site_thread_trace_and_pass() -> None:
    with audit() as log:
        _make_proxies(3)
        token = set_tracectx(TraceCtx())
        reset_tracectx(token)
    created = [e for e in log.events if e.kind == "proxy_created"]
    assert len(created) == 3 and {e.thread for e in created} == {threading.current_thread().name}
    assert all(e.site is not None and e.site.function == "_make_proxies" for e in created)
    assert all(e.pass_name is None and e.trace_id is not None for e in created)
    assert log.counts["trace_set"] == log.counts["trace_reset"] == 1
    (site, pass_name, count), = log.by_call_site()
    assert (site.function if site else None, pass_name, count) == ("_make_proxies", "(outside remat passes)", 3)


def _alive(kind: type) -> int:
    return sum(type(o) is kind for o in gc.get_objects())


def test_a_proxy_made_is_counted_not_kept_as_an_event_and_a_call_site() -> None:
    """The audit's per-proxy cost: no Event and no CallSite per proxy (counts, and a name per kept proxy)."""
    with audit() as log:
        _make_proxies(1)
        gc.collect()
        events_before, sites_before = _alive(Event), _alive(CallSite)
        _make_proxies(300)
        gc.collect()
        events_after, sites_after = _alive(Event), _alive(CallSite)
    assert (events_after - events_before, sites_after - sites_before) == (0, 0)
    assert log.counts["proxy_created"] == 301 and sum(n for _, _, n in log.by_call_site()) == 301
    assert [e.detail["name"] for e in log.events if e.kind == "proxy_created"] == ["t0"] + [f"t{i}" for i in range(300)]


def test_kept_events_keep_the_order_they_happened_in() -> None:
    with audit(max_events=5) as log:
        trace = TraceCtx()
        with tracectx(trace):
            TensorProxy(shape=(1,), device=cpu, dtype=float32)
            token = set_tracectx(trace)
            TensorProxy(shape=(1,), device=cpu, dtype=float32)
            reset_tracectx(token)
            TensorProxy(shape=(1,), device=cpu, dtype=float32)
            TensorProxy(shape=(1,), device=cpu, dtype=float32)  # the sixth: dropped
    kept = [("proxy_created", "t0"), ("trace_set", None), ("proxy_created", "t1"), ("trace_reset", None),
            ("proxy_created", "t2")]
    assert [(e.kind, e.detail.get("name")) for e in log.events] == kept
    document = log.to_dict()
    assert (document["kept"], document["dropped"], document["counts"]["proxy_created"]) == (5, 1, 4)
    assert [(e["kind"], e["detail"].get("name")) for e in document["events"]] == kept


def test_max_events_bounds_memory_but_counters_keep_counting() -> None:
    with audit(max_events=5) as log:
        _make_proxies(50)
    assert len(log.events) == 5 and log.dropped == 45
    assert log.counts["proxy_created"] == 50 and sum(n for _, _, n in log.by_call_site()) == 50
    assert "kept 5, dropped 45" in log.report()
    with pytest.raises(ValueError, match="max_events must be None or >= 0"):
        AuditLog(max_events=-1)


def test_events_from_other_threads_are_recorded() -> None:
    with audit() as log:
        thread = threading.Thread(target=_make_proxies, args=(4,), name="worker-7")
        thread.start()
        thread.join()
    assert {e.thread for e in log.events if e.kind == "proxy_created"} == {"worker-7"}


def test_violations_are_events_with_the_action_taken() -> None:
    with audit() as log, use_policy("lenient"):
        with pytest.warns(Warning):
            with tracectx(TraceCtx(), read_only=True) as trace:
                assert trace is not None
                trace.add_name("sneaky")
    (violation,) = log.violations
    assert violation.detail["code"] == "ReadOnlyTraceError" and violation.detail["action"] == "warn"
    report = log.report()
    assert "Violations (1)" in report and "[ReadOnlyTraceError, warn]" in report and "fix:" in report


def _seeded_pass(result_factory: object) -> object:
    return wrap_pass(PassSpec("tests", "seeded", "seeded pass"), result_factory)  # type: ignore[arg-type]


def test_a_pair_pass_whose_backward_defines_a_name_twice_is_a_name_clash() -> None:
    fw = TraceCtx()
    with tracectx(fw):
        a = TensorProxy("a", shape=(1,), device=cpu, dtype=float32)
        b = TensorProxy("b", like=a)
    from thunder.core import prims

    fw.args = (a,)
    fw.bound_symbols.append(prims.neg.bind(a, output=b))
    bw = from_trace(fw)  # shares the names set, like Thunder's own passes
    bw.args = (a,)
    bw.bound_symbols = [prims.neg.bind(a, output=b), prims.exp.bind(a, output=b)]  # b means two values
    seeded = wrap_pass(PassSpec("tests", "seeded", "seeded pass", returns_pair=True), lambda: (fw, bw))
    with audit() as log, pytest.raises(NameClashError) as info:
        seeded()
    assert "seeded pass (tests.seeded) produced trace @" in str(info.value)
    assert "where b is defined again, after bound symbol 0 (neg) (bound symbol 1 (exp))" in str(info.value)
    assert log.passes["seeded pass"]["violations"]
    (violation,) = log.to_dict()["violations"]
    assert (violation["kind"], violation["names"], violation["culprit"]) == (
        "defined-twice", ["b"], "seeded pass (tests.seeded)"
    )


def test_a_pair_pass_whose_backward_unpacks_less_than_the_forward_saves_is_a_broken_trace() -> None:
    from thunder.core import prims
    from thunder.core.proxies import CollectionProxy

    from safe_tracectx import BrokenTraceError

    fw, bw = TraceCtx(), TraceCtx()
    with tracectx(fw):
        a = TensorProxy("a", shape=(1,), device=cpu, dtype=float32)
        b, c = TensorProxy("b", like=a), TensorProxy("c", like=a)
    fw.args = (a,)
    fw.bound_symbols += [prims.neg.bind(a, output=b), prims.neg.bind(b, output=c)]
    fw.bound_symbols.append(prims.python_return.bind(({"flat_args": [a]}, ((b, c), ())), output=None))

    def backward_fn(saved_for_backward: object, cotangents: object) -> None: ...

    bw.fn = backward_fn
    with tracectx(bw):
        saved = CollectionProxy([[b], []], name="saved_for_backward")
        part = CollectionProxy([b], name="C0")
    bw.args = (saved, ())
    bw.bound_symbols += [
        prims.unpack_sequence.bind(saved, 2, output=[part, None]),
        prims.unpack_sequence.bind(part, 1, output=[b]),  # the forward saves b and c
        prims.python_return.bind((None,), output=None),
    ]
    seeded = wrap_pass(PassSpec("tests", "seeded", "seeded pass", returns_pair=True), lambda: (fw, bw))
    with audit() as log, pytest.raises(BrokenTraceError, match="the forward saves 2 saved tensors and the backward unpacks 1"):
        seeded()
    assert [v["kind"] for v in log.to_dict()["violations"]] == ["handover-mismatch"]


def test_a_pass_that_smuggles_a_traceless_proxy_is_a_leaked_proxy() -> None:
    trace = TraceCtx()
    with traceless():
        smuggled = TensorProxy(shape=(1,), device=cpu, dtype=float32)
    trace.args = (smuggled,)
    seeded = wrap_pass(PassSpec("tests", "seeded", "seeded pass"), lambda: trace)
    with installed("strict"), pytest.raises(LeakedProxyError, match="traceless proxy"):
        seeded()
    with use_policy("strict", leaked_proxy="ignore"):
        assert seeded() is trace


def test_to_json_schema_is_documented() -> None:
    with audit() as log:
        _make_proxies(1)
    document = json.loads(log.to_json())
    documented = (ROOT / "docs" / "audit-schema.md").read_text()
    for key in document:
        assert f"`{key}`" in documented, key
    assert set(document["events"][0]) == {"kind", "site", "thread", "trace_id", "trace", "pass", "detail"}
    for key in document["events"][0]:
        assert f"`{key}`" in documented, key


def test_the_recorded_action_is_what_was_done_with_the_violation() -> None:
    """One error raises when an installation ends; the others are found with it; under a KeyboardInterrupt, a note."""
    from safe_tracectx.policy.actions import act
    from safe_tracectx.errors import UnbalancedContextError
    from safe_tracectx.hooks import begin
    from safe_tracectx.policy import STRICT

    outer = begin("outer", STRICT, audit=True)
    begin("inner", STRICT)  # still running when outer ends
    set_tracectx(TraceCtx())  # never reset
    with pytest.raises(UnbalancedContextError, match="was still running when"):
        outer.end()
    assert outer.audit_log is not None
    actions = [v.detail["action"] for v in outer.audit_log.violations]
    assert actions == ["raise", "found with the raised UnbalancedContextError"]
    with AuditLog() as log:
        act(UnbalancedContextError("exited twice", fix="exit once"), policy=STRICT, in_flight=KeyboardInterrupt())
    assert [v.detail["action"] for v in log.violations] == ["a note on the KeyboardInterrupt"]


def test_a_proxy_keeps_its_own_thread_and_trace_when_another_thread_records_between() -> None:
    """A kept proxy is a name and the index of its context: another thread's proxy recorded between the two
    must not pair this proxy's name with that thread's context."""
    from safe_tracectx._support import events

    log = AuditLog()
    mine, theirs = TraceCtx(), TraceCtx()

    class Interleaved(list[str]):
        """The names list: while the first name is kept, another thread records a proxy (waiting at most 1 s)."""

        def append(self, name: str) -> None:
            if name == "mine":
                other = threading.Thread(target=events.proxy_created, args=(theirs, "theirs"), name="other")
                other.start()
                other.join(timeout=1.0)
            super().append(name)

    log._proxy_names = Interleaved()
    with log:
        events.proxy_created(mine, "mine")
        for thread in threading.enumerate():
            if thread.name == "other":
                thread.join()
    kept = {e.detail["name"]: (e.thread, e.trace_id) for e in log.events}
    assert kept == {"mine": ("MainThread", id(mine)), "theirs": ("other", id(theirs))}


@pytest.mark.parametrize("max_events", [None, 0, 1])
def test_a_count_is_not_lost_when_another_thread_counts_between_its_read_and_its_write(max_events: int | None) -> None:
    """Counters are always complete: another thread's proxy counted while this one's count is read (it waits
    at most 1 s) is counted too, kept or dropped."""
    import collections

    from safe_tracectx._support import events

    log = AuditLog(max_events=max_events)
    other = threading.Thread(target=events.proxy_created, args=(None, "theirs"), name="other")

    class Interleaved(collections.Counter[str]):
        def __getitem__(self, kind: str) -> int:
            value = super().__getitem__(kind)
            if kind == "proxy_created" and not other.is_alive() and other.ident is None:
                other.start()
                other.join(timeout=1.0)
            return value

    log.counts = Interleaved()
    with log:
        events.proxy_created(None, "mine")
        other.join()
    document = log.to_dict()
    assert document["counts"]["proxy_created"] == 2 == sum(entry["count"] for entry in document["call_sites"])
    assert document["kept"] + document["dropped"] == 2 and len(log.events) == document["kept"]


@pytest.mark.parametrize("wrong", ["5", 2.5, True])
def test_max_events_that_is_not_an_integer_is_refused_where_it_is_given(wrong: object) -> None:
    with pytest.raises(TypeError, match=r"^max_events must be None or an integer >= 0, got "):
        AuditLog(max_events=wrong)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^max_events must be None or an integer >= 0, got "):
        audit(max_events=wrong)  # type: ignore[arg-type]  # at the call, not at the with-statement
    with pytest.raises(ValueError, match="max_events must be None or >= 0, got -1"):
        audit(max_events=-1)


def test_max_events_zero_and_one_keep_that_many_and_count_every_event_of_a_compile() -> None:
    import thunder
    import torch

    documents = []
    for max_events in (None, 0, 1):
        with audit(max_events=max_events) as log:
            thunder.jit(lambda x: x.cos() + 1)(torch.ones(2))
        documents.append(log.to_dict())
    everything = documents[0]
    assert everything["dropped"] == 0 and everything["kept"] == len(everything["events"]) > 1
    for kept, document in zip((0, 1), documents[1:]):
        assert document["counts"] == everything["counts"] and document["call_sites"] == everything["call_sites"]
        assert document["kept"] == kept == len(document["events"])
        assert document["kept"] + document["dropped"] == everything["kept"]


def test_a_trace_description_is_reused_only_for_the_same_trace() -> None:
    """describe_trace remembers the last trace it described (weakly): never for another trace, even one that
    takes the freed trace's address, nor for objects that take no weak reference."""
    import gc

    from thunder.core.trace import TraceCtx

    from safe_tracectx._support.labels import describe_trace

    def f() -> None: ...

    def g() -> None: ...

    a, b = TraceCtx(f), TraceCtx(g)
    assert [describe_trace(t) for t in (a, b, a, a)] == [f"trace of {f.__qualname__} @{id(a):#x}",
                                                         f"trace of {g.__qualname__} @{id(b):#x}",
                                                         f"trace of {f.__qualname__} @{id(a):#x}",
                                                         f"trace of {f.__qualname__} @{id(a):#x}"]
    freed = id(b)
    del b
    gc.collect()
    c = TraceCtx(f)  # may be given b's address: its description is its own
    assert describe_trace(c) == f"trace of {f.__qualname__} @{id(c):#x}"
    assert describe_trace(c) == describe_trace(c) and (id(c) != freed or "of " + g.__qualname__ not in describe_trace(c))

    t = TraceCtx()
    assert describe_trace(t) == f"trace @{id(t):#x}"
    t.fn = g
    assert describe_trace(t) == f"trace of {g.__qualname__} @{id(t):#x}"  # given another fn: described again

    class Slotted:
        __slots__ = ("bound_symbols", "names")

        def __init__(self) -> None:
            self.bound_symbols: list[object] = []
            self.names: set[str] = set()

    s = Slotted()
    assert describe_trace(s) == describe_trace(s) == f"trace @{id(s):#x}"
