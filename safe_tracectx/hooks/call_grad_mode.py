"""What a jitted call leaves PyTorch's grad mode at: the mode its program left, as eager PyTorch does (``grad-mode-lost``).

Inside a jitted function Thunder follows ``torch.set_grad_enabled``, ``torch.no_grad()`` and
``torch._C._set_grad_enabled`` in its compile data only; the call must then leave PyTorch
in the mode the program left it. Before Thunder's fix of #2499 no call did (a ThunderFX
split whose ``no_grad`` region ends in another partition left grad disabled); since it,
the call applies the compile data's mode, which only a compiling call updates, so a call
served from the cache leaves the mode it was called in.

What the program leaves is read from the grad-mode markers of the trace the interpretation
makes (its top-level ``set_grad_enabled`` symbols, eager's order of events), and watched
only where Thunder's compile data agrees: a change made inside a higher-order function
(an ``autograd.Function``'s forward, a checkpoint) shows in the one and not in the other,
and whether eager keeps it depends on the function. A function whose program changes the
mode is watched at the end of each call made while the hooks are installed
(:mod:`safe_tracectx.hooks.call_ends`); of a ThunderFX split, a module only when no module after it
sets the mode and leaves it set. A function that does not change it costs nothing::

    >>> from safe_tracectx.hooks.call_ends import watched
    >>> watched()
    0
"""

from __future__ import annotations

import ast
import linecache
import os
from typing import Any, Final

import torch

from safe_tracectx.errors import TraceContextError
from safe_tracectx.hooks import call_ends
from safe_tracectx.hooks.call_ends import Call, user_site
from safe_tracectx.traces.grad_mode import mode_left
from safe_tracectx.traces.violations import Violation

__all__ = ["watch"]

#: Thunder's wrapper of a jitted function, the code that leaves PyTorch's grad mode as it is after the call.
_CULPRIT: Final = ("thunder.jit's call", "thunder.jit.<locals>.fn_")


class _Expected:
    """What one compiled program leaves the grad mode at, and the marker that set it (said in the report): checked
    at the end of each call (:class:`safe_tracectx.hooks.call_ends.EndCheck`)."""

    __slots__ = ("mode", "said", "names", "what", "calls", "reported")

    def __init__(self, mode: bool, said: str, names: tuple[str, ...], what: str | None, calls: object) -> None:
        self.mode, self.said, self.names, self.what = mode, said, names, what
        #: The CompileStats' call count when it was compiled (the call that compiled it has that count at its end).
        self.calls = calls
        self.reported = False

    def __call__(self, call: Call) -> TraceContextError | None:
        if torch.is_grad_enabled() == self.mode:
            return None
        calls = getattr(call.stats, "calls", None)
        compiled = None if self.calls is None or calls is None else calls == self.calls
        return _error(self.what or _describe(call.function), self, compiled)


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


def watch(compilation: Any, traces: list[Any], thunderfx: dict[str, Any] | None = None) -> None:
    """The interpretation of ``compilation`` made ``traces``: if its program leaves another grad mode than it
    was called in, its jitted function is watched from the end of this call on. ``thunderfx``: the split
    module it compiles, if a ThunderFX splitter made it."""
    start = getattr(compilation, "grad_enabled", None)
    if type(start) is not bool:
        return
    for trace in traces:
        mode, marker = mode_left(trace, grad_enabled=start)
        if marker is not None:
            break
    else:
        return
    if not isinstance(mode, bool) or mode == start:
        return
    if thunderfx is not None and not _reaches_the_caller(thunderfx):
        return
    data, stats = call_ends.compiling()
    followed = getattr(data, "is_grad_enabled", None)
    if type(followed) is not bool or followed != mode or not hasattr(stats, "last_computation"):
        return  # Thunder's compile data does not agree with the markers: a change inside a higher-order function
    said, names = _marker_text(marker)
    what = None if thunderfx is None else (
        f"the ThunderFX split module {thunderfx.get('split')} (of FX graph {thunderfx.get('graph')})")
    call_ends.watch(trace, stats, _Expected(mode, said, names, what, getattr(stats, "calls", None)))


def _reaches_the_caller(split: dict[str, Any]) -> bool:
    """Whether the mode a module of a ThunderFX split leaves is the one its caller gets: no module after it sets
    the mode and leaves it set (what torch._inductor compiled restores the mode it was called in)."""
    modules, setters = split.get("modules") or [], split.get("mode_setters")
    name = split.get("split")
    if setters is None or name not in modules:
        return False
    return not set(modules[modules.index(name) + 1 :]) & set(setters)


def _describe(function: Any) -> str:
    if isinstance(function, torch.nn.Module):
        return f"the module {type(function).__qualname__}"
    return getattr(function, "__qualname__", None) or f"a {type(function).__name__}"


def _error(what: str, expected: _Expected, compiled: bool | None) -> TraceContextError:
    mode = "enabled" if expected.mode else "disabled"
    now = "disabled" if expected.mode else "enabled"
    call = {
        True: "the call that compiled it returns without it",
        False: "a call served from Thunder's cache returns without it (its compile data holds the mode the call was "
        "made in, not the one the program leaves)",
        None: "the call returns without it",
    }[compiled]
    violation = Violation(
        "grad-mode-lost", expected.names[0] if expected.names else "grad mode",
        f"the jitted call of {what} returns with PyTorch's grad mode {now}, but its program leaves it {mode}, "
        f"as eager PyTorch would: its last grad-mode change is {expected.said}. Thunder followed the change in its "
        f"compile data only, and {call}, so what runs next runs with grad {now}: it computes "
        "something else (no autograd graph where one is wanted, or one recorded where the program turned it off)",
        "when the jitted call returns", culprit=_CULPRIT,
    )
    error = violation.to_error(user_site())
    error.names = expected.names
    return error
