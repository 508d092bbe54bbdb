"""What a jitted call leaves PyTorch's grad mode at: the mode its program left, as eager PyTorch does (``grad-mode-lost``).

Inside a jitted function Thunder follows ``torch.set_grad_enabled``, ``torch.no_grad()`` and
``torch._C._set_grad_enabled`` in its compile data only; the call must then leave PyTorch
in the mode the program left it. Before Thunder's fix of #2499 no call did (a ThunderFX
split whose ``no_grad`` region ends in another partition left grad disabled); since it,
the call applies the compile data's mode, which only a compiling call updates, so a call
served from the cache leaves the mode it was called in.

A function whose program changes the mode (its interpreted trace's grad-mode markers end
in another mode than it started in) is watched at the end of each of its calls, at
Thunder's last statement of the call (``cs.last_computation = ...``: its ``CompileStats``
object gets a class with a property there). A function that does not change it costs
nothing::

    >>> from safe_tracectx.hooks.call_grad_mode import watched
    >>> watched()
    0
"""

from __future__ import annotations

import ast
import linecache
import os
import sys
import threading
import weakref
from typing import Any, Final

import torch

from safe_tracectx.hooks.reporting import internal_error
from safe_tracectx.policy.actions import act
from safe_tracectx.traces.grad_mode import mode_left
from safe_tracectx.traces.violations import Violation

__all__ = ["unwatch_all", "watch", "watched"]

#: Thunder's wrapper of a jitted function, the code that leaves PyTorch's grad mode as it is after the call.
_CULPRIT: Final = ("thunder.jit's call", "thunder.jit.<locals>.fn_")


class _Expected:
    """What one compiled program leaves the grad mode at, and the marker that set it (said in the report)."""

    __slots__ = ("mode", "said", "names", "reported")

    def __init__(self, mode: bool, said: str, names: tuple[str, ...]) -> None:
        self.mode, self.said, self.names, self.reported = mode, said, names, False


#: Per watched CompileStats: the prologue of each of its cache entries -> what the entry's program leaves (weak: they
#: go with the cache).
_programs: Final[weakref.WeakKeyDictionary[Any, weakref.WeakKeyDictionary[Any, _Expected]]] = (
    weakref.WeakKeyDictionary()
)
#: (id of the CompileStats, thread) -> (compilation, expectation) of the compile running there: the cache entry it
#: makes is known only when the call sets ``last_computation``.
_pending: Final[dict[tuple[int, int], tuple[Any, _Expected]]] = {}
#: Each CompileStats class -> its watched subclass.
_subclasses: Final[dict[type, type]] = {}
_lock: Final = threading.Lock()


def watched() -> int:
    """How many jitted functions are watched now."""
    return len(_programs)


def _marker_text(marker: Any) -> tuple[str, tuple[str, ...]]:
    """(the grad-mode change the marker records and where the program made it, the variable its result went to
    if that line assigns one)."""
    call = f"torch._C._set_grad_enabled({', '.join(map(repr, marker.args))})"
    filename = getattr(marker, "source_filename", None)
    lineno = getattr(getattr(marker, "source_positions", None), "lineno", None)
    if not isinstance(filename, str) or not isinstance(lineno, int):
        return call, ()
    if filename.startswith(os.path.dirname(torch.__file__) + os.sep):  # torch.set_grad_enabled, torch.no_grad()
        return f"{call}, called by torch's grad-mode API ({os.path.basename(filename)}:{lineno})", ()
    line = linecache.getline(filename, lineno).strip()
    if not line:
        return f"{call} at {filename}:{lineno}", ()
    names: tuple[str, ...] = ()
    try:
        statement = ast.parse(line).body[0]
    except (SyntaxError, IndexError):
        statement = None
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        names = (statement.targets[0].id,)
    return f"`{line}` ({filename}:{lineno})", names


def watch(compilation: Any, traces: list[Any]) -> None:
    """The interpretation of ``compilation`` made ``traces``: if its program leaves another grad mode than it
    was called in, its jitted function is watched from the end of this call on."""
    start = getattr(compilation, "grad_enabled", None)
    if type(start) is not bool:
        return
    for trace in traces:
        mode, marker = mode_left(trace, grad_enabled=start)
        if marker is not None:
            break
    else:
        return
    if mode is None or mode == start:
        return
    from thunder.core import compile_data

    variable = getattr(compile_data, "_compile_data", None)  # (cd, cs) of the compile running
    stats = variable.get()[1] if variable is not None else None
    if stats is None or not hasattr(stats, "last_computation"):
        return
    said, names = _marker_text(marker)
    with _lock:
        _pending[(id(stats), threading.get_ident())] = (compilation, _Expected(mode, said, names))
        if _programs.get(stats) is None:
            _programs[stats] = weakref.WeakKeyDictionary()
            stats.__class__ = _watched_class(type(stats))


def _watched_class(base: type) -> type:
    subclass = _subclasses.get(base)
    if subclass is None:

        def get(self: Any) -> Any:
            return self.__dict__["last_computation"]

        def set_(self: Any, value: Any) -> None:
            self.__dict__["last_computation"] = value
            # the entry of Thunder's cache the call ran (its computation function is wrapped anew per call)
            local = sys._getframe(1).f_locals
            entry, function = local.get("cache_entry"), local.get("fn")
            name = getattr(function, "__qualname__", None) or f"a {type(function).__name__}"
            _called(self, getattr(entry, "prologue_fn", None), name)

        subclass = _subclasses[base] = type(base.__name__, (base,), {
            "__module__": base.__module__, "__qualname__": base.__qualname__, "__slots__": (),
            "last_computation": property(get, set_),
        })
    return subclass


def _called(stats: Any, entry: Any, function: str) -> None:
    """A call of a watched function ends, having run the cache entry whose prologue is ``entry``: PyTorch's grad
    mode against what its program leaves."""
    try:
        expected, compiled = _expectation(stats, entry)
        if expected is None or expected.reported or torch.is_grad_enabled() == expected.mode:
            return
        expected.reported = True  # once per program: a loop of calls says it once
        error = _error(function, expected, compiled)
    except Exception as bug:  # noqa: BLE001 - a bug of ours never stops the user's program
        internal_error("the grad mode a jitted call leaves", bug)
        return
    act(error)


def _expectation(stats: Any, entry: Any) -> tuple[_Expected | None, bool]:
    """(what the program of the entry leaves, whether this call compiled it)."""
    from safe_tracectx.hooks import compilation as compilations

    programs = _programs.get(stats)
    pending = _pending.pop((id(stats), threading.get_ident()), None)
    if programs is None or entry is None:
        return None, False
    if pending is not None and pending[0] is compilations.current():  # this call compiled it
        try:
            programs[entry] = pending[1]
        except TypeError:  # an entry that takes no weak reference is watched on this call only
            pass
        return pending[1], True
    try:
        return programs.get(entry), False
    except TypeError:
        return None, False


def _error(function: str, expected: _Expected, compiled: bool) -> Any:
    from safe_tracectx._support.callsite import find_call_site

    mode = "enabled" if expected.mode else "disabled"
    now = "disabled" if expected.mode else "enabled"
    call = ("the call that compiled it" if compiled else
            "a call served from Thunder's cache (whose compile data holds the mode the call was made in, not the one "
            "the program leaves)")
    violation = Violation(
        "grad-mode-lost", expected.names[0] if expected.names else "grad mode",
        f"the jitted call of {function} returns with PyTorch's grad mode {now}, but its program leaves it {mode}, "
        f"as eager PyTorch would: its last grad-mode change is {expected.said}. Thunder followed the change in its "
        f"compile data only, and {call} returns without it, so what runs next runs with grad {now}: it computes "
        "something else (no autograd graph where one is wanted, or one recorded where the program turned it off)",
        "when the jitted call returns", culprit=_CULPRIT,
    )
    error = violation.to_error(find_call_site(skip_thunder=True))
    error.names = expected.names
    return error


def unwatch_all() -> None:
    """Every watched function's CompileStats gets its own class back (the hooks are removed)."""
    with _lock:
        for stats in list(_programs):
            original = type(stats).__mro__[1]
            if type(stats) is _subclasses.get(original):
                stats.__dict__.setdefault("last_computation", None)
                stats.__class__ = original
        _programs.clear()
        _pending.clear()
