"""One ``thunder.jit`` compilation: its forward/backward pair, every trace-to-trace step, and who made what.

The interpretation pass starts a :class:`Compilation` in the running context (a
ContextVar: each thread, asyncio task and copied Context has its own). While it
runs, every trace created is a step, named by the function that created it and
then by the provenance Thunder gives it (``Update aliases for in-place ops``,
``Dead Code Elimination``, ...). A violation found in any checked trace is
charged to the first step whose trace already had it, found only when there is
one (nothing is checked twice, nothing is checked ahead). While the compilation
runs it keeps alive every trace a pass read or returned (an intermediate trace
the next pass dropped may be where the defect began; a scratch trace Thunder
makes for itself is let go as usual); when it ends, nothing is kept::

    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx.hooks.compilation import Compilation
    >>> c = Compilation()
    >>> trace = TraceCtx()
    >>> c.record_step(trace, "my step", "tests.my_step", within=None)
    >>> c.step_of(trace).culprit
    ('my step', 'tests.my_step')
    >>> c.culprit_of("use-before-definition", "t0") is None
    True
"""

from __future__ import annotations

import sys
import weakref
from contextvars import ContextVar
from types import FrameType
from typing import Any, Final

import torch

from safe_tracectx.hooks.step_record import Step
from safe_tracectx.traces.baked_values import typed_leaves
from safe_tracectx.traces.call_inputs import Region, call_grad_leaves, call_storages, storage_keys, unpacked
from safe_tracectx.traces.updated_inputs import update_modes, updated_inputs, updated_under_grad
from safe_tracectx.traces.checks import Violation, trace_findings
from safe_tracectx.traces.program import signature_name
from safe_tracectx.traces.grad_mode import Retagging, detached_across

__all__ = ["Compilation", "Step", "checked_kind", "current", "end", "is_backward", "signature_name", "start"]

#: The compilation running in this context (the interpretation pass of a thunder.jit compile starts one).
_current: Final[ContextVar[Compilation | None]] = ContextVar("safe_tracectx.compilation", default=None)


class Compilation:
    """What the passes and steps of one compilation produced so far."""

    __slots__ = ("forward", "backward", "running", "handed_over", "reported", "traces", "steps", "extent", "outer",
                 "grad_enabled", "inference", "differentiates", "updates", "update_modes", "program", "refusing", "grad_leaves", "retagged", "call", "literals", "_retagged_proxies", "_kept", "_names", "_by_trace", "_findings",
                 "_storages", "__weakref__")

    def __init__(self, extent: FrameType | None = None, outer: Compilation | None = None) -> None:
        #: (code, id) of the frame of the outermost Thunder call that runs the compilation (``thunder.jit``'s
        #: callable), not the frame itself (that would keep the call's arguments alive): the compilation lasts
        #: while that frame runs (None: until another starts, for one started by hand).
        self.extent = None if extent is None else (extent.f_code, id(extent))
        #: The compilation this one runs inside (a jit called by a Transform of another): current again after it.
        self.outer = outer
        #: The grad mode the jit call was made in (made when the interpretation starts, before it changes any).
        self.grad_enabled = torch.is_grad_enabled()
        #: Whether the jit call was made in inference mode (``torch.inference_mode()`` around it).
        self.inference = torch.is_inference_mode_enabled()
        self.forward: Any = None
        self.backward: Any = None
        #: The trace Thunder's first autodiff pass was given: the program the forward/backward split differentiates.
        self.differentiates: Any = None
        #: (names set of the interpretation's trace, which its later forms share; its updates of inputs, by name).
        self.updates: tuple[Any, dict[str, Any]] | None = None
        #: The grad modes of the program's copies into each input it updates (``traces.updated_inputs.update_modes``).
        self.update_modes: dict[str, set[bool]] = {}
        #: The interpretation's trace (replayed by ``hooks.replay`` and ``hooks.output_replay``).
        self.program: Any = None
        #: The inputs updated with grad enabled; the call's tensors as whether each is a leaf requiring grad.
        self.refusing: set[str] = set()
        self.grad_leaves: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        #: The forward and backward Thunder made callables of (about to run), with the callable, until both are there.
        self.running: dict[str, tuple[Any, Any]] = {}
        #: The last (forward, backward) compared as about to run.
        self.handed_over: tuple[Any, Any] = (None, None)
        #: (violation kind, name) already reported (a later pass or the program does not report it again).
        self.reported: set[tuple[str, str]] = set()
        #: Every trace a pass read or returned (a proxy named by one of them elsewhere borrowed its namer).
        self.traces: weakref.WeakSet[Any] = weakref.WeakSet()
        #: The traces of ``traces``, alive until the compilation ends (None: it ended).
        self._kept: list[Any] | None = []
        #: (id(proxy), tag) -> the first step that added the tag to a proxy it was only given (``hooks.bindings``);
        #: with the proxies, kept alive while the compilation runs so that no id is reused.
        self.retagged: dict[tuple[int, Any], Retagging] = {}
        self._retagged_proxies: list[Any] = []
        #: Every trace made while the compilation ran, in the order made.
        self.steps: list[Step] = []
        #: The ``names`` sets of those traces (``from_trace`` shares them): a trace derived from one belongs here.
        self._names: dict[int, Any] = {}
        self._by_trace: dict[int, Step] = {}
        #: The ``args`` and ``kwargs`` of the call being compiled (given to the interpretation) as their storages
        #: (``traces.call_inputs.call_storages``: no tensor of the user's is kept).
        self.call: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        #: The call's torch dtypes and devices by path, as (steps, key) (``traces.baked_values.typed_leaves``).
        self.literals: dict[str, tuple[tuple[Any, ...], tuple[str, str]]] = {}
        #: (prologues read, each input name's storage in the call) once a prologue is there.
        self._storages: tuple[int, dict[str, Region | None]] | None = None
        #: id(trace) -> (weak reference, stamp, violations, notes): each trace is checked once while unchanged.
        self._findings: dict[int, tuple[Any, tuple[int, int], list[Violation], list[Violation]]] = {}

    # ---- traces of the compilation ---------------------------------------------------

    def add(self, trace: Any) -> None:
        """``trace`` is one of this compilation's (a pass read or returned it)."""
        if self._kept is not None and trace not in self.traces:
            self._kept.append(trace)
        self.traces.add(trace)
        names = getattr(trace, "names", None)
        if names is not None:
            self._names[id(names)] = names

    def owns(self, trace: Any) -> bool:
        """True for a trace a pass of this compilation read or returned, one derived from it, or one a step of
        it made (the region trace a fusion pass builds for its own ``transform_for_execution``)."""
        return trace in self.traces or id(getattr(trace, "names", None)) in self._names or self.step_of(trace) is not None

    def role_of(self, trace: Any) -> str | None:
        """``backward`` for a backward trace; ``forward`` for another one once the pair exists; else None."""
        if is_backward(trace):
            return "backward"
        return "forward" if self.backward is not None else None

    # ---- steps -----------------------------------------------------------------------

    def record_step(self, trace: Any, label: str, qualname: str, *, within: str | None, named: bool = False,
                    pass_function: str | None = None) -> None:
        """``trace`` was made (``named``: given its provenance) by ``qualname``; naming a known step relabels it."""
        known = self._by_trace.get(id(trace))
        if known is not None and known.ref() is trace:
            if named:
                known.label, known.namer = label, qualname
            return
        step = Step(trace, label, qualname, within, pass_function)
        if named:
            step.namer = qualname
        self.steps.append(step)
        self._by_trace[id(trace)] = step

    def remake(self, trace: Any, label: str, qualname: str, *, within: str | None) -> None:
        """``trace`` was changed in place by ``qualname``: it is now that step's trace, the last made."""
        known = self._by_trace.get(id(trace))
        if known is not None and known.ref() is trace:
            self.steps.remove(known)
            del self._by_trace[id(trace)]
        self.record_step(trace, label, qualname, within=within)

    def release(self) -> None:
        """The compilation ended: the traces its passes read or returned are no longer kept alive."""
        self._kept = None
        self.differentiates = self.updates = self.grad_leaves = None
        self.update_modes, self.program = {}, None
        self.retagged, self._retagged_proxies = {}, []
        self.call, self.literals = None, {}

    def step_of(self, trace: Any) -> Step | None:
        """The step that made ``trace``, if one of this compilation did."""
        step = self._by_trace.get(id(trace))
        return step if step is not None and step.ref() is trace else None

    # ---- checks ----------------------------------------------------------------------

    def findings(self, trace: Any, *, executed: bool = False) -> tuple[list[Violation], list[Violation]]:
        """``trace_findings(trace)``, computed once while the trace's bound symbols stay the same list and length."""
        bsyms = trace.bound_symbols
        stamp = _stamp(bsyms)
        cached = self._findings.get(id(trace))
        if cached is None or cached[0]() is not trace or cached[1] != stamp:
            violations, notes = trace_findings(trace, storages=self.storages())
            self._findings[id(trace)] = (weakref.ref(trace), stamp, violations, notes)
        else:
            violations, notes = cached[2], cached[3]
        return (violations + notes, []) if executed else (violations, notes)

    def storages(self) -> dict[str, Region | None] | None:
        """The storage of each tensor input name in the call being compiled (by the prologues made so far), or
        None while there is no call or no prologue to read it from."""
        if self.call is None:
            return None
        prologues = self.prologues()
        if not prologues:
            return None
        if self._storages is None or self._storages[0] != len(prologues):
            self._storages = (len(prologues), storage_keys(prologues, self.call))
        return self._storages[1]

    def prologues(self) -> list[Any]:
        """The prologue traces made so far, in the order made."""
        return [t for t in (s.ref() for s in self.steps) if t is not None and signature_name(t) == "prologue"]

    def read_program(self, interpreted: list[Any], *, until: int | None) -> None:
        """The interpretation made ``interpreted``: keep the program's in-place updates of its inputs, and those made
        with grad enabled (up to the symbol ``until``, where its markers stop being eager's: ``traces.updated_inputs``)."""
        if interpreted:
            program = interpreted[-1]
            self.updates = (program.names, updated_inputs(program))
            self.update_modes = update_modes(program)
            self.program = program
            self.refusing = {u.input for u in updated_under_grad(program, grad_enabled=self.grad_enabled, until=until)}

    def judges_gradients(self) -> bool:
        """Whether the gradients of the program the split differentiates are judged: not when eager refuses it at
        this call (it updates, with grad enabled, an input that is a leaf requiring grad, or a view of one)."""
        return self.differentiates is not None and not (self.refusing and self.refusing & self.leaf_inputs())

    def leaf_inputs(self) -> set[str]:
        """The inputs that are, at this call, leaves requiring grad or views of one (by the prologues' names)."""
        leaves = self.grad_leaves
        if leaves is None:
            return set()
        return {n for p in self.prologues() for n, v in unpacked(p, *leaves).items() if v is True}

    def interpreted(self, outputs: list[Any], *, since: int, maker: str) -> list[Any]:
        """The interpretation's computation traces (the only ones that still hold the grad-mode markers:
        ``traces.grad_mode``), in the order made: those its own function (``maker``) made from step ``since`` on,
        then ``outputs``."""
        made = [s.ref() for s in self.steps[since:] if s.maker == maker]
        return list({id(t): t for t in (*made, *outputs) if t is not None and checked_kind(t)}.values())

    def detached(self, traces: list[Any]) -> list[tuple[Violation, Any]]:
        """The outputs detached under grad in the interpretation's computation ``traces``, followed from the mode
        of the jit call."""
        return detached_across(traces, grad_enabled=self.grad_enabled, retagged=self.retagged)

    def record_retagging(self, proxy: Any, retagging: Retagging) -> None:
        """A step added tags to ``proxy``, which it was only given (for each tag, the first step that added it)."""
        first = [tag for tag in retagging.added if (id(proxy), tag) not in self.retagged]
        for tag in first:
            self.retagged[(id(proxy), tag)] = retagging
        if first:  # kept alive while the compilation runs, so that its id is not reused
            self._retagged_proxies.append(proxy)

    def seen(self, trace: Any) -> bool:
        """True if ``trace`` was checked already and has not changed since."""
        cached = self._findings.get(id(trace))
        return cached is not None and cached[0]() is trace and cached[1] == _stamp(trace.bound_symbols)

    def culprit_of(self, kind: str, name: str) -> Step | None:
        """The first step whose trace has this problem (a note counts: the defect is there, if not yet harmful)."""
        for step in self.steps:
            trace = step.ref()
            if trace is None:
                continue
            violations, notes = self.findings(trace)
            if any(v.kind == kind and v.name == name for v in (*violations, *notes)):
                return step
        return None


#: A prologue or epilogue unpacks names it never registers: only computation and backward traces are checked.
_UNCHECKED: Final = ("prologue", "epilogue")


def checked_kind(trace: Any) -> bool:
    """Whether ``trace`` is of a kind the checks read: a computation or backward trace, not a prologue/epilogue,
    nor Thunder's record of a step inside a pass that nothing runs ("Intermediate trace of ...", which a pass
    returns beside the trace it hands on; a defect that stays is in that one)."""
    provenance = str(getattr(getattr(trace, "_provenance", None), "pss", ""))
    return signature_name(trace) not in _UNCHECKED and not provenance.startswith("Intermediate trace of")


def is_backward(trace: Any) -> bool:
    """True for a trace whose function is Thunder's ``backward_fn``."""
    return signature_name(trace) == "backward_fn"


def _stamp(bsyms: list[Any]) -> tuple[int, int]:
    """What a trace's findings stay valid for: its bound symbols list, holding the same symbols (a list changed in
    place, reordered or not, is checked again)."""
    return id(bsyms), hash(tuple(map(id, bsyms)))


def _outermost_thunder_frame(frame: FrameType | None) -> FrameType | None:
    """The outermost frame of the unbroken run of Thunder (and safe_tracectx) frames that ``frame`` is in: the
    call the user made (the jitted function, ``ThunderModule.forward``); None if nothing but Thunder is above."""
    outermost = None
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        top = module.partition(".")[0]
        if top not in ("thunder", "safe_tracectx") or module.startswith("thunder.tests"):
            return outermost
        outermost = frame
        frame = frame.f_back
    return None


def start(*, frame: FrameType | None = None, call: tuple[Any, ...] = ()) -> Compilation:
    """A new compilation in this context (the interpretation pass begins, in ``frame``, given the ``args`` and
    ``kwargs`` of ``call``): it lasts while the outermost Thunder call above ``frame`` runs (without ``frame``,
    until another starts); one running already is current again when it ends."""
    outer = current() if frame is not None else None
    if outer is None and (replaced := _current.get()) is not None:
        replaced.release()
    compilation = Compilation(_outermost_thunder_frame(frame) if frame is not None else None, outer)
    # An ended call's frame address is reused by the next call of the same function (a loop of compiles), so an
    # ended compilation can look running: one with the new one's very extent has ended (a compile inside a
    # Transform of another runs in another outermost call).
    while outer is not None and outer.extent is not None and outer.extent == compilation.extent:
        outer.release()
        outer = compilation.outer = outer.outer
    if len(call) == 2 and isinstance(call[0], tuple) and isinstance(call[1], dict):
        compilation.call = call_storages(call[0], call[1])
        compilation.grad_leaves = call_grad_leaves(call[0], call[1])
        compilation.literals = typed_leaves(call[0], call[1])
    _current.set(compilation)
    return compilation


def end() -> None:
    """No compilation runs in this context any more (the hooks were removed)."""
    compilation = _current.get()
    while compilation is not None:
        compilation.release()
        compilation = compilation.outer
    _current.set(None)


def _running(extent: tuple[Any, int], frame: FrameType | None) -> bool:
    code, ident = extent
    while frame is not None:
        if frame.f_code is code and id(frame) == ident:
            return True
        frame = frame.f_back
    return False


def leave_all() -> None:
    """No compilation is current in this context (a copied one, where this package runs Thunder for itself)."""
    _current.set(None)


def current() -> Compilation | None:
    """The compilation running in this context, if a pass started one and the call that runs it has not
    returned (after ``thunder.jit``'s callable returns, what the program does with traces is its own)."""
    compilation = _current.get()
    ended = False
    while compilation is not None and compilation.extent is not None and not _running(compilation.extent, sys._getframe(1)):
        compilation.release()
        compilation, ended = compilation.outer, True
    if ended:
        _current.set(compilation)  # the ended ones are let go
    return compilation
