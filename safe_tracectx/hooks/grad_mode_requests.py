"""The grad-mode changes a program asks for while Thunder interprets it, and whether the trace recorded each.

``torch.no_grad()``, ``torch.enable_grad()`` and ``torch.set_grad_enabled`` all end in
``torch._C._set_grad_enabled``, which the interpretation diverts to Thunder's mapping of it
(``thunder.torch._set_grad_enabled_with_warning``): since Thunder's fix of the no_grad
regions a symbol that records a ``set_grad_enabled`` marker, before it a function that only
warned. That lookaside is wrapped while the hooks are installed: each call made at the top
level of a trace a compilation interprets is kept with the trace (its position among the
trace's bound symbols, the mode asked for, the user's line, whether a marker was recorded),
for ``traces.unrecorded_grad_mode`` to judge when the interpretation returns. Thunder has no
lookaside for ``torch.inference_mode()``: the interpretation runs it opaquely, which turns
PyTorch's inference mode on while it traces; ``symbol_calls``' ``get_tracectx`` sees it on at
each symbol call made then, and each top-level one is marked (``symbol_in_inference_mode``):
a region Thunder never records. Nothing is kept outside a compilation; no call is changed::

    >>> from safe_tracectx.hooks.grad_mode_requests import requests_in
    >>> from thunder.core.trace import TraceCtx
    >>> requests_in(TraceCtx())
    ()
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import torch

from safe_tracectx._support.pass_catalog import PASSES
from safe_tracectx.hooks import compilation as compilations
from safe_tracectx.hooks.reporting import internal_error
from safe_tracectx.traces.grad_mode import MARKER, across
from safe_tracectx.traces.unrecorded_grad_mode import Request, unrecorded_changes
from safe_tracectx.traces.violations import Violation

__all__ = ["hook_grad_mode_lookaside", "inference_in", "markers_followed_until", "requests_in", "symbol_in_inference_mode",
           "unhook_grad_mode_lookaside", "unrecorded"]

#: The trace each request was made in -> its requests, in order (weak: they go with the trace).
_requests: Final[weakref.WeakKeyDictionary[Any, list[_Asked]]] = weakref.WeakKeyDictionary()
#: The trace -> its symbols called in inference mode (the bound symbol before each), in order.
_inference: Final[weakref.WeakKeyDictionary[Any, list[_Asked]]] = weakref.WeakKeyDictionary()
_lock: Final = threading.Lock()
#: (the lookaside map, the lookaside, ours) while hooked.
_hooked: Final[list[tuple[dict[Any, Any], Any, Any]]] = []
#: Files whose frames are not the user's line: torch's (its grad-mode API), Thunder's.
_NOT_USER: Final = (os.path.dirname(torch.__file__) + os.sep,)
_THUNDER_MODULES: Final = ("thunder.core.interpreter", "thunder.core.jit_ext", "thunder.torch")


class _Asked(NamedTuple):
    """A request as it was made: the top-level bound symbol it came after (None: the first), as Thunder records its
    inputs' unpacking in front of the interpretation's symbols when it is done."""

    after: Any
    enabled: object
    recorded: bool
    line: str | None
    call: str | None = None


class _Marks(threading.local):
    """This thread's last trace with a symbol called in inference mode: its marks (None: not judged)."""

    trace: Any = None  # a weak reference
    marks: list[_Asked] | None = None


_thread: Final = _Marks()


def requests_in(trace: Any) -> tuple[Request, ...]:
    """The grad-mode changes asked for at the top level of ``trace`` while it was interpreted, in order, each at
    the position among the trace's bound symbols from which it applies (none, if one's place is gone)."""
    with _lock:
        try:
            asked = tuple(_requests.get(trace, ()))
        except TypeError:  # a trace that takes no weak reference
            return ()
    places = _places(trace)
    requests = []
    for request in asked:
        if request.after is not None and id(request.after) not in places:
            return ()
        requests.append(Request(places[id(request.after)], request.enabled, request.recorded, request.line, request.call))
    return tuple(requests)


def _places(trace: Any) -> dict[int, int]:
    """``id`` of each top-level bound symbol of ``trace`` -> the index of the one after it; ``id(None)`` -> the index
    of the first the interpretation recorded (after the unpacking of the inputs Thunder puts in front)."""
    bsyms = trace.bound_symbols
    places = {id(bsym): index + 1 for index, bsym in enumerate(bsyms)}
    places[id(None)] = next((i for i, b in enumerate(bsyms) if not str(getattr(b.sym, "name", "")).startswith("unpack")),
                            len(bsyms))
    return places


def _user_line() -> str | None:
    """``file:line`` of the program's code that asked (past torch's grad-mode API and Thunder's own frames)."""
    from thunder.core.interpreter import get_interpreterruntimectx

    for frame in reversed(getattr(get_interpreterruntimectx(), "frame_stack", None) or ()):
        code, globals_ = getattr(frame, "code", None), getattr(frame, "globals", None)
        name = getattr(globals_, "value", globals_)
        filename = getattr(code, "co_filename", "")
        if (isinstance(name, dict) and name.get("__name__") in _THUNDER_MODULES) or filename.startswith(_NOT_USER):
            continue
        line = getattr(getattr(frame, "positions", None), "lineno", None)
        return f"{filename}:{line}" if line is not None else filename
    return None


def _mode_asked(args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    from thunder.core.interpreter import unwrap

    value = args[0] if args else kwargs.get("enabled")
    return unwrap(value)


def _keep(trace: Any, start: int, enabled: object, recorded: bool, call: str | None = None) -> None:
    """Keep a request made in ``trace`` when it had ``start`` top-level bound symbols."""
    after = trace.bound_symbols[start - 1] if start else None
    asked = _Asked(after, enabled, recorded, _user_line(), call)
    with _lock:
        _requests.setdefault(trace, []).append(asked)


def symbol_in_inference_mode(trace: Any, symbol_call: Any) -> None:
    """``symbol_calls``' hook: a symbol is called while ``trace`` is active and PyTorch's inference mode is on. At a
    top-level symbol call (``symbol_call``: the code of ``Symbol.__call__``) of a compilation not made in inference
    mode, the symbol about to be recorded is marked as computed in inference mode."""
    local = _thread
    if local.trace is None or local.trace() is not trace:  # the first in this trace (a compilation's few lookups)
        compilation = compilations.current()
        marks: list[_Asked] | None = None if compilation is None or compilation.inference else []
        try:
            local.trace = weakref.ref(trace)
        except TypeError:
            return
        if marks is not None:  # a trace Thunder made current again (a higher-order function's traced between)
            with _lock:
                marks = _inference.setdefault(trace, marks)
        local.marks = marks
    marks = local.marks
    if marks is None:
        return
    try:
        caller = sys._getframe(2)  # what called the hook: Symbol.__call__, or another reader of the trace
    except ValueError:
        return
    scopes = getattr(trace, "scopes", None)
    if caller.f_code is not symbol_call or not (isinstance(scopes, list) and len(scopes) == 1):
        return  # not a symbol's call, or inside a symbol's own scope
    try:
        bsyms = trace.bound_symbols
        marks.append(_Asked(bsyms[-1] if bsyms else None, False, False, _user_line(), _INSIDE))
    except Exception as bug:  # noqa: BLE001 - a bug of ours never stops the user's program
        internal_error("an inference-mode region of the program", bug)


def inference_in(trace: Any) -> dict[int, Request]:
    """The indices of the top-level bound symbols of ``trace`` computed in inference mode while it was interpreted
    (each with what says where)."""
    with _lock:
        try:
            marks = tuple(_inference.get(trace, ()))
        except TypeError:
            return {}
    places = _places(trace)
    found: dict[int, Request] = {}
    for mark in marks:
        index = places.get(id(mark.after))
        if index is not None:
            found[index] = Request(index, False, False, mark.line, mark.call)
    return found


def _observed(lookaside: Callable[..., Any]) -> Callable[..., Any]:
    """``lookaside`` (what the interpretation calls for ``torch._C._set_grad_enabled``), keeping each top-level call
    a compilation makes and whether it recorded a marker."""

    def set_grad_enabled_lookaside(*args: Any, **kwargs: Any) -> Any:
        if compilations.current() is None:
            return lookaside(*args, **kwargs)
        from thunder.core.trace import get_tracectx

        trace = get_tracectx()
        scopes = getattr(trace, "scopes", None)
        if trace is None or not (isinstance(scopes, list) and len(scopes) == 1 and scopes[0] is trace.bound_symbols):
            return lookaside(*args, **kwargs)  # not at the top level of a trace: inside a symbol's own scope
        start = len(trace.bound_symbols)
        result = lookaside(*args, **kwargs)
        try:
            recorded = any(getattr(b.sym, "id", None) == MARKER for b in trace.bound_symbols[start:])
            _keep(trace, start, _mode_asked(args, kwargs), recorded)
        except Exception as bug:  # noqa: BLE001 - a bug of ours never stops the user's program
            internal_error("a grad-mode change the program asked for", bug)
        return result

    set_grad_enabled_lookaside.__wrapped__ = lookaside  # type: ignore[attr-defined]
    return set_grad_enabled_lookaside


def hook_grad_mode_lookaside() -> None:
    """Wrap the interpretation's lookaside of ``torch._C._set_grad_enabled`` (once: a second call changes nothing)."""
    if _hooked:
        return
    try:
        from thunder.core.jit_ext import _general_jit_lookaside_map as lookasides
    except ImportError:  # a Thunder without the general jit's map: nothing is observed
        return
    lookaside = lookasides.get(torch._C._set_grad_enabled)
    if lookaside is None:
        return
    ours = lookasides[torch._C._set_grad_enabled] = _observed(lookaside)
    _hooked.append((lookasides, lookaside, ours))


def unhook_grad_mode_lookaside() -> None:
    """Put Thunder's lookaside back, unless someone replaced ours meanwhile (theirs is left in place)."""
    while _hooked:
        lookasides, lookaside, ours = _hooked.pop()
        if lookasides.get(torch._C._set_grad_enabled) is ours:
            lookasides[torch._C._set_grad_enabled] = lookaside


#: How a symbol computed in inference mode is said (with the line of the code that called it).
_INSIDE: Final = "torch.inference_mode(), in effect"
#: What a jit call made in inference mode asked for.
_AROUND: Final = "torch.inference_mode() around the jitted call"
#: Charged for an inference-mode region: the interpretation's choice of a lookaside, which has none for it.
_NO_LOOKASIDE: Final = ("Thunder's interpretation of torch.inference_mode", "thunder.core.jit_ext.general_jit_lookaside")


#: The fix of an inference-mode region (not the kind's, which is about torch._C._set_grad_enabled).
_INFERENCE_FIX: Final = (
    "Thunder's interpretation must record torch.inference_mode() like torch.no_grad() (a lookaside for "
    "torch._C._InferenceMode's entry and exit recording set_grad_enabled markers); until it does, enter inference "
    "mode around the jitted call, not inside the jitted function, or use torch.no_grad() there")


def _culprit(request: Request, thunderfx: dict[str, Any] | None) -> tuple[tuple[str, str], str, str | None]:
    """(who is charged, why the change left no marker, the fix if not the kind's): Thunder's mapping of
    ``torch._C._set_grad_enabled`` (or its missing lookaside of ``torch.inference_mode``), or the ThunderFX splitter
    that handed Thunder the region."""
    from thunder.torch import _torch_to_thunder_function_map

    advice = None
    if request.call == _AROUND:
        culprit, because, advice = _NO_LOOKASIDE, (
            "the jit call was made in inference mode, where eager PyTorch computes every tensor without autograd "
            "whatever the function asks, and Thunder follows the grad-mode markers the function records"), (
            "do not turn grad on inside a function called in inference mode; to compute gradients in it, call it "
            "under torch.no_grad() instead, whose enable_grad regions Thunder follows as eager does")
    elif request.call is not None:
        culprit, because, advice = _NO_LOOKASIDE, (
            "Thunder has no lookaside for torch.inference_mode (torch._C._InferenceMode): the interpretation runs it "
            "opaquely, which turns PyTorch's inference mode on while it traces and records nothing"), _INFERENCE_FIX
    else:
        mapped = _torch_to_thunder_function_map.get(torch._C._set_grad_enabled)
        name = getattr(mapped, "__qualname__", None) or getattr(mapped, "name", None) or repr(mapped)
        mapping = f"{getattr(mapped, '__module__', None) or 'thunder.torch'}.{name}"
        culprit = ("Thunder's torch._C._set_grad_enabled", mapping)
        because = f"Thunder's mapping of torch._C._set_grad_enabled, {mapping}, recorded no set_grad_enabled symbol for it"
    if thunderfx is None:
        return culprit, because, advice
    splitter = next(spec for spec in PASSES if spec.hook == "splitter")
    handed = (f"the ThunderFX splitter handed Thunder this grad-mode region of FX graph {thunderfx.get('graph')} "
              f"(split module {thunderfx.get('split')}), and ")
    return (splitter.label, splitter.qualname), handed + because, advice


def _kept_for(trace: Any) -> bool:
    """Whether a request or an inference-mode symbol was kept for ``trace``."""
    with _lock:
        try:
            return trace in _requests or trace in _inference
        except TypeError:  # a trace that takes no weak reference
            return False


def markers_followed_until(traces: list[Any]) -> int | None:
    """The index of the first top-level symbol of the interpretation's computation ``traces`` from which the trace's
    grad-mode markers may not be eager's (a change asked for and not recorded, or inference mode); None if they
    can be followed to the end. The renamed traces have the same symbols at the same places."""
    base = next((t for t in traces if _kept_for(t)), None)
    if base is None:
        return None
    unfollowed = [r.position for r in requests_in(base) if not r.recorded or type(r.enabled) is not bool]
    return min([*unfollowed, *inference_in(base)], default=None)


def unrecorded(compilation: Any, traces: list[Any], thunderfx: dict[str, Any] | None) -> list[tuple[Violation, Any]]:
    """The grad-mode changes the interpretation's computation ``traces`` (in the order made) do not record: judged
    in the trace the program asked in, named as in the later ones that rename it (``traces.grad_mode.across``)."""
    base = next((t for t in traces if _kept_for(t)), None)  # a lookup per trace; nothing is built for the others
    if base is None and getattr(compilation, "inference", False) and traces:
        base = traces[0]
    if base is None:
        return []  # the common case: no change asked
    requests, inference = requests_in(base), inference_in(base)
    if getattr(compilation, "inference", False):  # the jit call made in inference mode: all of it
        inference = {i: Request(i, False, False, None, _AROUND) for i in range(len(base.bound_symbols))}
    if not inference and all(request.recorded for request in requests):
        return []  # every change recorded
    later = [t for t in traces[traces.index(base) + 1 :] if len(t.bound_symbols) == len(base.bound_symbols)]
    return across([base, *later], lambda trace: unrecorded_changes(
        trace, requests, grad_enabled=compilation.grad_enabled, inference=inference,
        blame=lambda request: _culprit(request, thunderfx)))
