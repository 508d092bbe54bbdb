"""Trace checks judged by Thunder's semantics, that never modify the trace they read.

Thunder turns a trace into a Python function by name: its parameters are the
names of its signature, each top-level bound symbol assigns the names of its
outputs, and every name a bound symbol reads must have been assigned before.
A violation here means the generated program will fail, compute something else, or a
name is about to clash: a use with no definition, a name defined twice (whatever the
objects), a name the trace's namer will hand out again, a callee the program cannot name, a
traceless proxy, one name computed differently in two fusion regions, a saved-for-backward
hand-over that does not match, a forward symbol of a joint trace reading a backward value or
a tensor an in-place update it leaves to the backward changed, a return handing autograd
other inputs than the trace's arguments, a symbol reading a name as another tensor than its
definition gives (a pass swapped the proxy and missed that use). Same-named objects are one
variable, as in the program. Unlike ``thunder.dev_utils.check_trace``, nothing is made
active, no name registered, no cache filled::

    >>> import torch, thunder
    >>> from safe_tracectx.traces.checks import check_trace
    >>> jitted = thunder.jit(lambda x: x.sin() * 2)
    >>> _ = jitted(torch.ones(2))
    >>> check_trace(thunder.last_traces(jitted)[-1])
    []
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.checks")

import re
from collections.abc import Mapping
from typing import Any, Final

from thunder.core.prims import PrimIDs
from thunder.core.proxies import NumberProxy, Proxy
from thunder.core.trace import TraceCtx

from safe_tracectx._support.arguments import expect_trace
from safe_tracectx._support.labels import describe_trace
from safe_tracectx.context.traceless_proxies import is_traceless, traceless_proxies_made
from safe_tracectx.traces import joint
from safe_tracectx.traces.bound_proxies import proxy_args, proxy_outs
from safe_tracectx.traces.call_inputs import Region
from safe_tracectx.traces.flat_args import flat_args_mismatches
from safe_tracectx.traces.handover import check_forward_backward, check_handover
from safe_tracectx.traces.lazy_gradients import describe as describe_lazy_read, lazy_sum_reads
from safe_tracectx.traces.printing import unprintable
from safe_tracectx.traces.program import Program, signature_name, signature_names
from safe_tracectx.traces.returns import is_return
from safe_tracectx.traces.decomposition import check_decomposition, made_for_another
from safe_tracectx.traces.swaps import made_for_another_tensor, other_tensor
from safe_tracectx.traces.violations import KINDS, Violation, ViolationKind, bsym_label

__all__ = [
    "KINDS", "Violation", "ViolationKind", "check_forward_backward", "check_handover", "check_trace", "generatable",
    "region_name_clashes", "signature_names", "names_used", "trace_findings", "unregistered_names",
]

#: Prefixes Thunder's namers use (``TraceCtx.make_name``, the Proxy classes' defaults, explicit ``prefix=``).
_PREFIXES: Final[frozenset[str]] = frozenset({
    "_", "p", "t", "i", "f", "c", "b", "n", "s", "C", "tup", "lst", "d", "fc", "ft", "any", "obj", "m", "subscr",
    "module", "q", "r", "dtensor_", "dtensor_spec",
})
_COUNTED: Final = re.compile(r"(\D*?)(\d+)")
_SHAPE: Final = PrimIDs.SHAPE
_GET_GRAD: Final = PrimIDs.GET_GRAD


def generatable(name: str, trace: Any) -> bool:
    """Whether ``trace``'s namer can still hand out ``name`` (a prefix Thunder uses, a count it has not reached)."""
    match = _COUNTED.fullmatch(name)
    if match is None or match.group(1) not in _PREFIXES:
        return False
    counter = getattr(trace, "name_ctr", 0)
    return isinstance(counter, int) and int(match.group(2)) >= counter


def trace_findings(
    trace: TraceCtx, *, executed: bool = False, storages: Mapping[str, Region | None] | None = None
) -> tuple[list[Violation], list[Violation]]:
    """(violations, notes) of ``trace``; reads only.

    A note is a violation in dead code that Thunder's dead-code elimination
    removes before the trace runs; with ``executed`` (the trace is about to
    run as it is) there are no notes. ``storages``: the storage of each input
    name in the call being compiled, when known (:mod:`~safe_tracectx.traces.call_inputs`).
    """
    expect_trace(trace, "check_trace()")
    program = Program(trace)
    violations: list[Violation] = []
    notes: list[Violation] = []
    reported: set[tuple[str, str]] = set()
    registered = trace.names
    look_for_traceless = traceless_proxies_made()
    dead: set[int] | None = None

    bsyms = trace.bound_symbols

    def add(kind: ViolationKind, name: str, message: str, index: int | None, *, note: bool = False,
            also: tuple[str, ...] = (), advice: str | None = None, culprit: tuple[str, str] | None = None) -> None:
        nonlocal dead
        if (kind, name) in reported:
            return
        reported.add((kind, name))
        where = "trace inputs" if index is None else bsym_label(index, bsyms[index])
        violation = Violation(kind, name, message, where, also=also, advice=advice, culprit=culprit)
        if index is not None and not executed and not note:
            if dead is None:
                dead = program.dead_indices()
            note = index in dead
        (notes if note and not executed else violations).append(violation)

    def registration(proxy: Proxy, name: str, index: int | None) -> None:
        if name not in registered and generatable(name, trace):
            add(
                "unregistered-name",
                name,
                f"{name} is not registered in the trace's names, and its namer (at {trace.name_ctr}) "
                "will hand it out again",
                index,
            )
        if look_for_traceless and is_traceless(proxy):
            add("traceless-proxy", name, f"traceless proxy {name} is used in {describe_trace(trace)}", index)

    defined: dict[str, int] = dict.fromkeys(program.parameters, -1)  # name -> index of its definition (-1: parameter)
    objects: dict[str, Proxy] = {}  # name -> the proxy object its definition gives it (the last one)
    for proxy in program.input_proxies():
        registration(proxy, proxy.name, None)
        if proxy.name in defined:
            objects[proxy.name] = proxy
    callees: dict[int, str | None] = {}  # id(symbol) -> its callee problem, for symbols called by their own name
    for finding in joint.findings(trace, executed=executed):
        add(finding.kind, finding.name, finding.message, finding.position, note=finding.note, also=finding.also)
    # thunder.jit's computation hands flat_args to autograd (a pass's own joint trace copies them: not its business)
    for mismatch in flat_args_mismatches(trace, storages) if signature_name(trace) == "computation" else ():
        add("flat-args-mismatch", mismatch.names[0], mismatch.message, len(bsyms) - 1, also=mismatch.names[1:],
            advice=mismatch.advice)
    deleted: dict[str, int] = {}  # name -> the `del` that ended it
    joint_trace = False  # it has get_grad: gradients are computed in it
    for index, bsym in enumerate(bsyms):
        reads = proxy_args(bsym)
        for proxy in reads:
            name = proxy.name
            if name not in defined:
                gone = deleted.get(name)
                add(
                    "use-before-definition",
                    name,
                    (f"{name} is used after {bsym_label(gone, bsyms[gone])} deleted it" if gone is not None else
                     f"{name} is used before any bound symbol defines it")
                    + f": the generated program would fail with {_unbound_error(name, program)}",
                    index,
                    # A trace on its way may return a name it declared (registered) for a later pass to define
                    # (the gradients before the grad transform): a note until the trace is about to run.
                    note=gone is None and name in registered and is_return(bsym),
                )
            if look_for_traceless or name not in registered:
                registration(proxy, name, index)
            definition = objects.get(name)
            if definition is not None and definition is not proxy:  # another object: is it the same tensor?
                stale = other_tensor(proxy, definition)
                if stale is not None:
                    origin = defined.get(name, -1)
                    given = "a parameter of the trace" if origin == -1 else f"the output of {bsym_label(origin, bsyms[origin])}"
                    add("stale-proxy-after-swap", name,
                        f"{bsym_label(index, bsym)} reads {name} as {stale[0]}, but {name} is {given}, {stale[1]}: "
                        f"a name is one variable, so the symbol's outputs were computed for another tensor than the "
                        f"one it gets (a pass swapped the proxy of {name} and missed this use)", index)
        if program.is_del(bsym):  # `del a, b`: the names end here
            for proxy in reads:
                objects.pop(proxy.name, None)
                if defined.pop(proxy.name, None) is not None:
                    deleted[proxy.name] = index
            continue
        for proxy in proxy_outs(bsym):
            name = proxy.name
            objects[name] = proxy
            first = defined.get(name)
            if first is None:
                defined[name] = index
            elif not _same_variable(bsym, proxy, reads, program, None if first == -1 else bsyms[first]):
                before = "a parameter of the trace" if first == -1 else bsym_label(first, bsyms[first])
                add("defined-twice", name, f"{name} is defined again, after {before}", index)
            if look_for_traceless or name not in registered:
                registration(proxy, name, index)
        sym = bsym.sym
        own_context = getattr(bsym, "_call_ctx", None) is not None
        if not own_context and id(sym) in callees:
            problem = callees[id(sym)]
        else:
            problem = program.callee_problem(bsym)
            if not own_context:
                callees[id(sym)] = problem
        if problem is not None:  # the program fails when it calls it: a defect on its way until the trace runs
            add("generated-code", program.callee(bsym), problem, index, note=True)
        if (unprinted := unprintable(bsym, index)) is not None:
            add(unprinted.kind, unprinted.name, unprinted.message, index, also=unprinted.also, advice=unprinted.advice,
                culprit=unprinted.culprit)
        if (made := made_for_another_tensor(bsym)) is not None:
            made_for_another(bsym, None, made, index, add)
        if bsym.subsymbols:
            check_decomposition(bsym, index, add)
            if getattr(sym, "is_fusion", False):
                _check_region(bsym, index, add)
        elif getattr(sym, "id", None) is _GET_GRAD:
            joint_trace = True
    if joint_trace:  # the grad transform's: where gradients of 0-dim values are given the full shape
        for read in lazy_sum_reads(trace):
            add("stale-proxy-after-swap", read.name, describe_lazy_read(read, bsym_label(read.position, bsyms[read.position])),
                read.position)
    return violations, notes


def _unbound_error(name: str, program: Program) -> str:
    """What Python raises reading ``name`` before it holds a value: UnboundLocalError for a local of the
    generated function, NameError for any other name (``Program.local_names``)."""
    if name in program.local_names():
        return f"UnboundLocalError: cannot access local variable {name!r} where it is not associated with a value"
    return f"NameError: name {name!r} is not defined"


def _same_variable(bsym: Any, proxy: Proxy, reads: tuple[Proxy, ...], program: Program, first: Any) -> bool:
    """Whether a bound symbol that outputs an already-defined name leaves it the same variable (``first``: the
    bound symbol that defined it, None for a parameter): it returns its own argument (the very proxy it reads,
    computing nothing: no subsymbols),
    it unpacks a value under the name it has, or it is a number that repeats the computation that defined it
    with the same inputs, or a shape query giving a symbolic dimension again (Thunder's
    ``remove_duplicate_number_proxies`` drops both; a tensor computed twice may differ, a random one; a number
    from another computation, ``item`` of another tensor, is another value)."""
    if program.is_unpack(bsym):
        return True
    if any(p is proxy for p in reads) and not getattr(bsym, "subsymbols", None):
        return True  # its meta returned the argument itself and recorded nothing (``contiguous`` of a contiguous x)
    if not isinstance(proxy, NumberProxy):
        return False
    if bsym.sym.id == _SHAPE or bsym.sym.name == "shape":  # prims.shape, or an executor's: a symbolic dimension
        # names one value, whichever tensor's shape gives it again; a parameter of the trace only from a tensor whose
        # shape holds it (the prologue unpacked it from there: `(i0, i1) = prims.shape(x)` of `computation(x, i0,
        # i1)`), not from another tensor's, whose length it would then hold
        return first is not None or any(getattr(d, "name", None) == proxy.name for p in reads
                                        for d in (getattr(p, "_shape", None) or ()))
    if first is None or getattr(first, "sym", None) is None:
        return False
    return bool(first.sym.id == bsym.sym.id and [p.name for p in proxy_args(first)] == [p.name for p in reads])


def _check_region(region: Any, index: int, add: Any) -> None:
    """A fusion region runs as a function of its own: its parameters are the fusion's inputs, its statements the
    region's bound symbols (their subsymbols only say what each computes). Each name it reads must be one of them."""
    label = f"fusion region {region.sym.name}"
    inside = {p.name for p in proxy_args(region)}
    for position, bsym in enumerate(region.subsymbols):
        for proxy in proxy_args(bsym):
            if proxy.name not in inside:
                add("use-before-definition", proxy.name,
                    f"{proxy.name} is used in {label} (its bound symbol {position}, "
                    f"{getattr(bsym.sym, 'name', '?')}) but is neither an input of the region nor defined in it "
                    "before: the fusion's function would fail with NameError", index)
                inside.add(proxy.name)
        inside.update(p.name for p in proxy_outs(bsym))


def region_name_clashes(trace: TraceCtx) -> list[Violation]:
    """Names computed in more than one fusion region of ``trace``: what fusion rematerialization, which finds a
    value's producer and consumers by its name, needs never to happen in the trace it is given; reads only."""
    first: dict[str, tuple[str, Any]] = {}  # name -> (region, the computation that defined it there)
    found: list[Violation] = []
    reported: set[str] = set()
    backward = _reads_cotangents(trace.bound_symbols)
    for index, bsym in enumerate(trace.bound_symbols):
        if not getattr(bsym.sym, "is_fusion", False):
            continue
        where = bsym_label(index, bsym)
        for sub in bsym.subsymbols:
            for proxy in proxy_outs(sub):
                name = proxy.name
                earlier, computation = first.setdefault(name, (where, _computation(sub)))
                if earlier == where or name in reported:
                    continue
                # In a joint trace not yet split, a backward region recomputing a forward value under its name
                # (RECOMPUTE_IN_BACKWARD) defines it on its own side of the split: one value in each program.
                if index in backward and computation == _computation(sub):
                    continue
                reported.add(name)
                found.append(Violation(
                    "fusion-name-clash", name,
                    f"{name} is computed in two fusion regions, {earlier} and {where}: rematerialization, "
                    "which takes a name to mean one value, would take one for the other",
                    where,
                ))
    return found


def _reads_cotangents(bsyms: list[Any]) -> set[int]:
    """The indices of the bound symbols that compute from a cotangent (a ``get_grad`` output): the backward side
    of a joint trace before the split."""
    derived: set[str] = set()
    found: set[int] = set()
    for index, bsym in enumerate(bsyms):
        if getattr(bsym.sym, "name", "") == "get_grad":
            derived.update(p.name for p in proxy_outs(bsym))
        elif any(p.name in derived for p in proxy_args(bsym)):
            found.add(index)
            derived.update(p.name for p in proxy_outs(bsym))
    return found


def _computation(bsym: Any) -> tuple[Any, ...]:
    """What a bound symbol computes, by names: its symbol, and its arguments with each proxy as its name."""
    def by_name(value: Any) -> Any:
        if isinstance(value, Proxy):
            return ("proxy", value.name)
        if isinstance(value, tuple | list):
            return tuple(map(by_name, value))
        if isinstance(value, dict):
            return tuple(sorted((str(k), by_name(v)) for k, v in value.items()))
        return repr(value)

    return getattr(bsym.sym, "id", None), by_name(bsym.args), by_name(bsym.kwargs)


def names_used(trace: TraceCtx, *, subsymbols: bool = True) -> dict[str, str]:
    """Every name ``trace``'s bound symbols and (``subsymbols``) their subsymbols read or assign, with where it is
    first used; reads only. Those are the names an executor may turn into variables of the trace (flattening a symbol it
    cannot run whole into its subsymbols), and the names Thunder registers for a trace it builds (#1545's fix of
    the torch.compile region trace); deeper ones stay inside their symbol."""
    found: dict[str, str] = {}
    for index, bsym in enumerate(trace.bound_symbols):
        where = bsym_label(index, bsym)
        for proxy in (*proxy_outs(bsym), *proxy_args(bsym)):
            found.setdefault(proxy.name, where)
        for position, sub in enumerate(getattr(bsym, "subsymbols", ()) if subsymbols else ()):
            inside = f"{where}, subsymbol {position} ({getattr(sub.sym, 'name', '?')})"
            for proxy in (*proxy_outs(sub), *proxy_args(sub)):
                found.setdefault(proxy.name, inside)
    return found


def unregistered_names(trace: TraceCtx, *, subsymbols: bool = True) -> dict[str, str]:
    """The names of ``trace``'s bound symbols and (``subsymbols``) their subsymbols (:func:`names_used`) that it
    has not registered, so its namer may hand them out again, each with where it is first used; reads only."""
    registered = trace.names
    return {name: where for name, where in names_used(trace, subsymbols=subsymbols).items() if name not in registered}


def check_trace(trace: TraceCtx, *, executed: bool = False) -> list[Violation]:
    """Every violation in ``trace`` (dead code Thunder removes before running is left out); reads only."""
    return trace_findings(trace, executed=executed)[0]

