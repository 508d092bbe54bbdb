"""A guided tour of the three managers on real Thunder objects (``safe-tracectx demo --tour``).

Each step prints what Thunder does on its own and what safe_tracectx does instead.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TextIO


def _say(out: TextIO, text: str = "") -> None:
    print(text, file=out, flush=True)


def _step(out: TextIO, number: int, title: str) -> None:
    _say(out)
    _say(out, f"{number}. {title}")
    _say(out, "-" * (len(title) + 3))


def _indent(text: str) -> str:
    return "\n".join("     " + line for line in text.splitlines())


def run_tour(out: TextIO) -> int:
    """Run every step; return 0 if each showed what it should, 1 otherwise."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import thunder
        import torch
    from thunder.core import prims
    from thunder.core.devices import cpu
    from thunder.core.dtypes import float32
    from thunder.core.proxies import TensorProxy
    from thunder.dev_utils.check_trace import check_trace

    from safe_tracectx import (
        MissingTraceError,
        ReadOnlyTraceError,
        TracelessRecordingError,
        installed,
        is_traceless,
        scratch_trace,
        traceless,
        traceless_tensorproxy,
        tracectx,
    )

    failures: list[str] = []

    def expect(ok: bool, what: str) -> None:
        _say(out, f"   [{'ok' if ok else 'FAILED'}] {what}")
        if not ok:
            failures.append(what)

    _say(out, "safe-tracectx tour: Thunder's trace context, made safe")
    _say(out, f"(lightning-thunder {getattr(thunder, '__version__', '?')}, torch {torch.__version__})")

    _step(out, 1, "A proxy made with no active trace")
    try:
        TensorProxy(shape=(1,), device=cpu, dtype=float32)
        thunder_error = "(no error)"
    except AttributeError as error:
        thunder_error = f"AttributeError: {error}"
    _say(out, "   Thunder: TensorProxy(shape=(1,), device=cpu, dtype=float32) raises")
    _say(out, _indent(thunder_error))
    try:
        with installed("strict"):
            TensorProxy(shape=(1,), device=cpu, dtype=float32)
        ours = None
    except MissingTraceError as error:
        ours = error
    _say(out, "   with safe_tracectx.installed('strict'), the same call raises instead:")
    _say(out, _indent(str(ours)))
    _say(out, "   (the 'at' line is the first frame outside safe_tracectx and Thunder: in your code, your line)")
    expect(isinstance(ours, MissingTraceError), "MissingTraceError names the line and the three fixes")
    with installed("lenient"):
        lenient = TensorProxy(shape=(1,), device=cpu, dtype=float32)
    expect(is_traceless(lenient), f"with installed('lenient') it is a traceless proxy instead ({lenient.name})")

    _step(out, 2, "An explicit traceless proxy, and a meta function called on it")
    with traceless():
        a = TensorProxy(shape=(2, 3), device=cpu, dtype=float32)
        b = TensorProxy(shape=(2, 3), device=cpu, dtype=float32)
        c = prims.add.meta(a, b)
        _say(out, f"   with traceless(): a={a.name}, b={b.name}, prims.add.meta(a, b) -> {c}")
        try:
            prims.add(a, b)
            recorded: Exception | None = None
        except TracelessRecordingError as error:
            recorded = error
    expect(is_traceless(a) and is_traceless(c), "the proxies are remembered as traceless")
    _say(out, "   recording the operation prims.add(a, b) inside traceless() raises:")
    _say(out, _indent(str(recorded).splitlines()[0]))
    expect(isinstance(recorded, TracelessRecordingError), "TracelessRecordingError points to scratch_trace()")
    one_call = traceless_tensorproxy(shape=(4,), device="cpu", dtype="float32")
    _say(out, f"   traceless_tensorproxy(shape=(4,), device='cpu', dtype='float32') -> {one_call}")

    _step(out, 3, "A scratch trace names proxies without touching the traces it reserves")

    def model(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x * 2.0).sum()

    jitted: Callable[[torch.Tensor], torch.Tensor] = thunder.jit(model)
    jitted(torch.randn(8, requires_grad=True)).backward()  # type: ignore[no-untyped-call]
    fw = thunder.last_traces(jitted)[-1]
    bw = thunder.last_backward_traces(jitted)[-1]
    before = (set(fw.names), set(bw.names), list(fw.bound_symbols), list(bw.bound_symbols))
    _say(out, f"   forward trace: {len(fw.names)} names; backward trace: {len(bw.names)} names")
    with scratch_trace(fw, bw) as scratch:
        fresh = [TensorProxy(like=a) for _ in range(3)]
    _say(out, f"   with scratch_trace(fw, bw): new proxies {[p.name for p in fresh]}")
    unchanged = before == (set(fw.names), set(bw.names), list(fw.bound_symbols), list(bw.bound_symbols))
    clash_free = not any(p.name in fw.names or p.name in bw.names for p in fresh)
    expect(clash_free, "no new name is taken in the forward or the backward trace")
    expect(unchanged, "both traces are unchanged (names and bound symbols)")
    committed = scratch.commit_names(into=bw)
    expect(all(name in bw.names for name in committed), f"commit_names(into=bw) registered {list(committed)}")

    _step(out, 4, "read_only catches Thunder's check_trace adding names to the trace it checks")
    checked = thunder.last_traces(jitted)[0]
    names_before = len(checked.names)
    try:
        with tracectx(checked, read_only=True):
            check_trace(checked)
        caught: Exception | None = None
    except ReadOnlyTraceError as error:
        caught = error
    _say(out, "   with tracectx(trace, read_only=True): check_trace(trace) ->")
    _say(out, _indent(str(caught)))
    expect(isinstance(caught, ReadOnlyTraceError), "ReadOnlyTraceError lists the names check_trace added")
    expect(len(checked.names) == names_before, f"the trace was restored ({names_before} names)")

    _say(out)
    if failures:
        _say(out, f"tour: {len(failures)} step(s) did not show what they should: {failures}")
        return 1
    _say(out, "tour: every step showed what it should")
    return 0
