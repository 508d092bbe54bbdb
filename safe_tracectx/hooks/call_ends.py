"""Checks run when a jitted call ends: what its program left against what eager PyTorch would have.

Some bugs show only once a call has run: the grad mode it leaves (``grad-mode-lost``),
an input it updated in place (``leaf-updated-in-place``). A check that needs the end of
the call registers, for one compiled program (the first of its cache entry's computation
traces), an :class:`EndCheck`; the jitted function's ``CompileStats`` object then gets a
subclass with a property at Thunder's last statement of the call
(``cs.last_computation = ...``, after the program ran and its result was connected to
autograd), which runs the program's checks with the call's inputs. A call whose program
has no check costs nothing, and a call that raised never gets there::

    >>> from safe_tracectx.hooks.call_ends import watched
    >>> watched()
    0
"""

from __future__ import annotations

import copyreg
import os
import sys
import threading
import weakref
from types import FrameType
from typing import Any, Final, NamedTuple, Protocol

import torch

from safe_tracectx._support.callsite import CallSite, find_call_site
from safe_tracectx.errors import TraceContextError
from safe_tracectx.hooks.reporting import internal_error, report_all

__all__ = ["Call", "EndCheck", "compiling", "unwatch_all", "user_site", "watch", "watch_all", "watched"]


class Call(NamedTuple):
    """One call of a jitted function, at its end."""

    #: Its ``CompileStats`` (``calls`` counts the calls so far, this one included).
    stats: Any
    #: The cache entry it ran.
    entry: Any
    #: What ``thunder.jit`` compiled (a function or a module).
    function: Any
    #: The inputs the program ran with, in the order of its computation trace's arguments (the prologue's result).
    inputs: tuple[Any, ...]
    #: What the call returns.
    result: Any
    #: The call's own ``args`` and ``kwargs`` (Thunder's call wrapper's; None where it has none).
    args: tuple[Any, ...] | None = None
    kwargs: dict[str, Any] | None = None


class EndCheck(Protocol):
    """A check of one compiled program at the end of each of its calls: the error to act on, or None. Once it has
    reported (``reported``), it is not asked again until the next installation."""

    reported: bool

    def __call__(self, call: Call) -> TraceContextError | None: ...


#: The trace each compiled program's interpretation made (the first of its cache entry's computation traces) ->
#: its checks (weak: they go with Thunder's cache). Kept across installations.
_programs: Final[weakref.WeakKeyDictionary[Any, list[EndCheck]]] = weakref.WeakKeyDictionary()
#: The CompileStats of each function with such a program (their class is swapped while installed).
_stats: Final[weakref.WeakSet[Any]] = weakref.WeakSet()
#: Each CompileStats class -> its watched subclass.
_subclasses: Final[dict[type, type]] = {}
_lock: Final = threading.RLock()
#: How pickle and copy make an object of a class without calling its __init__ (protocol 2's ``copyreg.__newobj__``).
_NEW_OBJECT: Final = getattr(copyreg, "__newobj__")
#: Whether the hooks are installed (set by ``watch_all``/``unwatch_all``): a compile that ends after the hooks were
#: removed watches nothing.
_active = False


def watched() -> int:
    """How many jitted functions are watched now."""
    with _lock:
        return sum(1 for stats in _stats if type(stats) in _subclasses.values()) if _active else 0


def compiling() -> tuple[Any, Any]:
    """(the compile data, the ``CompileStats``) of the jitted function being compiled now, or (None, None)."""
    from thunder.core import compile_data

    variable = getattr(compile_data, "_compile_data", None)
    found = variable.get() if variable is not None else None
    return found if isinstance(found, tuple) and len(found) == 2 else (None, None)


def watch(program: Any, stats: Any, check: EndCheck) -> bool:
    """Run ``check`` at the end of each call of the jitted function whose ``CompileStats`` is ``stats`` that runs
    ``program`` (its cache entry's first computation trace); False if it cannot be watched (the hooks are not
    installed, or Thunder's call wrapper is not the one this module knows)."""
    if not hasattr(stats, "last_computation"):
        return False
    with _lock:
        if not _active:
            return False
        try:
            _programs.setdefault(program, []).append(check)
        except TypeError:  # a trace that takes no weak reference: not watched
            return False
        _stats.add(stats)
        _swap(stats)
    return True


def user_site() -> CallSite | None:
    """The user's line that made the call: past Thunder, this package and torch (a ThunderFX split module is called
    by Dynamo's frames and ``nn.Module.__call__``)."""
    torch_files = (os.path.dirname(torch.__file__) + os.sep, "<eval_with_key>")  # torch's, and FX's generated code
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        site = find_call_site(skip_thunder=True, frame=frame)
        if site is None or not site.filename.startswith(torch_files):
            return site
        while frame is not None and frame.f_code.co_filename != site.filename:
            frame = frame.f_back
        while frame is not None and frame.f_code.co_filename.startswith(torch_files):
            frame = frame.f_back
    return None


def _swap(stats: Any) -> None:
    base = type(stats)
    if base not in _subclasses.values():
        stats.__class__ = _watched_class(base)


def _watched_class(base: type) -> type:
    subclass = _subclasses.get(base)
    if subclass is None:

        def get(self: Any) -> Any:
            return self.__dict__["last_computation"]

        def set_(self: Any, value: Any) -> None:
            self.__dict__["last_computation"] = value
            if _active:  # the caller is Thunder's call wrapper: the cache entry it ran, its inputs, what it compiled
                _ended(self, sys._getframe(1).f_locals)

        def __reduce_ex__(self: Any, protocol: Any) -> Any:
            return _NEW_OBJECT, (base,), dict(self.__dict__)  # copied and pickled as Thunder's own class

        subclass = _subclasses[base] = type(base.__name__, (base,), {
            "__module__": base.__module__, "__qualname__": base.__qualname__, "__slots__": (),
            "last_computation": property(get, set_), "__reduce_ex__": __reduce_ex__,
        })
    return subclass


def _ended(stats: Any, local: dict[str, Any]) -> None:
    """A call of a watched function ends: each unreported check of the program it ran."""
    errors: list[TraceContextError] = []
    try:
        entry = local.get("cache_entry")
        traces = getattr(entry, "computation_traces", None)
        checks = _programs.get(traces[0]) if traces else None
        if not checks:
            return
        inputs = local.get("inps")
        args, kwargs = local.get("args"), local.get("kwargs")
        call = Call(stats, entry, local.get("fn"), tuple(inputs) if isinstance(inputs, tuple | list) else (),
                    local.get("result"), args if isinstance(args, tuple) else None,
                    kwargs if isinstance(kwargs, dict) else None)
        for check in checks:
            if check.reported:
                continue
            error = check(call)
            if error is not None:
                check.reported = True  # once per program: a loop of calls says it once
                errors.append(error)
    except Exception as bug:  # noqa: BLE001 - a bug of ours never stops the user's program
        internal_error("the end of a jitted call", bug)
        return
    report_all(errors)


def watch_all() -> None:
    """The hooks are installed: every function watched before (compiled under an earlier installation) is again."""
    global _active
    with _lock:
        _active = True
        for stats in list(_stats):
            _swap(stats)
        for checks in _programs.values():  # each installation says each program once
            for check in checks:
                check.reported = False


def unwatch_all() -> None:
    """The hooks are removed: every watched function's CompileStats gets its own class back (its programs' checks
    are kept, weakly, for the next installation)."""
    global _active
    with _lock:
        _active = False
        for stats in list(_stats):
            subclass = type(stats)
            if subclass in _subclasses.values():
                stats.__dict__.setdefault("last_computation", None)
                stats.__class__ = subclass.__mro__[1]
