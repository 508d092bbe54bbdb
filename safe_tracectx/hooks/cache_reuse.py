"""A cache entry run for a call it was not compiled for: its prologue does not check a dtype argument (``cache-entry-reused``).

Thunder serves a call from the first cache entry whose prologue accepts the call's
inputs. The interpretation bakes the dtypes and devices a program passes to torch functions
into the computation trace as literals (``x.to(dt)`` becomes ``ltorch.to(x, torch.float64)``);
its prologue checks a ``torch.device`` argument (``JitCtx.proxify`` adds a
``check_literal_like`` for it) but, on Thunder 0.2.6 and main, not a ``torch.dtype`` one,
which it does not even unpack. A later call with another dtype then runs the program compiled
for the first, silently: ``jf(x, torch.float16)`` after ``jf(x, torch.float64)`` returns float64.

When a call compiles a cache entry, the call's dtypes and devices are kept by their path in
its ``args`` and ``kwargs`` (:mod:`safe_tracectx.traces.baked_values`), those whose value the
interpretation's trace holds as a literal; if any is, the program is watched at the end of
each call (:mod:`safe_tracectx.hooks.call_ends`), and a call that ran it with another value
at such a path is reported, once per program and installation, charged to the prologue's
guards. A function with no such argument is not watched::

    >>> from safe_tracectx.hooks.cache_reuse import KIND
    >>> KIND
    'cache-entry-reused'
"""

from __future__ import annotations

from typing import Any, Final

import torch

from safe_tracectx.errors import TraceContextError
from safe_tracectx.hooks import call_ends
from safe_tracectx.hooks.call_ends import Call, user_site
from safe_tracectx.traces.baked_values import MISSING, Key, key, literals, shown, value_at
from safe_tracectx.traces.violations import Violation

__all__ = ["CULPRIT", "KIND", "watch"]

KIND: Final = "cache-entry-reused"
#: What decides which of a call's values the prologue checks: the interpretation's ``proxify``, which gives a
#: ``torch.device`` a ``check_literal_like`` guard and a ``torch.dtype`` none.
CULPRIT: Final = ("prologue guards (input binding)", "thunder.core.jit_ext.JitCtx.proxify")


class _Baked:
    """The dtypes and devices one compiled program was compiled for, by their path in the call: checked at the
    end of each call that runs it (:class:`safe_tracectx.hooks.call_ends.EndCheck`)."""

    __slots__ = ("values", "what", "reported")

    def __init__(self, values: dict[str, tuple[tuple[Any, ...], Key]], what: str) -> None:
        self.values, self.what = values, what
        self.reported = False

    def __call__(self, call: Call) -> TraceContextError | None:
        if call.args is None or call.kwargs is None:
            return None  # a Thunder whose call wrapper has no args/kwargs: nothing is known of the call
        changed: list[tuple[str, Key, Key]] = []
        for path, (steps, compiled) in self.values.items():
            value = value_at(call.args, call.kwargs, steps)
            now = None if value is MISSING else key(value)
            if now is not None and now[0] == compiled[0] and now != compiled:
                changed.append((path, compiled, now))
        changed = _baked_in(changed, call) if changed else []
        return _error(self.what, changed) if changed else None


def _baked_in(changed: list[tuple[str, Key, Key]], call: Call) -> list[tuple[str, Key, Key]]:
    """Of the arguments that changed (rare: the check's only costly path), those whose compiled value the program
    about to run still holds as a literal (not one dead-code elimination removed), and that no tensor input has as
    its dtype (``torch.zeros(n, dtype=x.dtype)`` beside an unused dtype argument holds it for another reason)."""
    traces = getattr(call.entry, "computation_traces", None) or ()
    held = literals(traces[-1]) if traces else set()
    inputs = {key(t.dtype) for t in call.inputs if isinstance(t, torch.Tensor)}
    return [(path, compiled, now) for path, compiled, now in changed if compiled in held and compiled not in inputs]


def _error(what: str, changed: list[tuple[str, Key, Key]]) -> TraceContextError:
    path, compiled, now = changed[0]
    kind = compiled[0]
    others = "".join(f"; {p} too, compiled for {shown(c)}, ran for {shown(n)}" for p, c, n in changed[1:])
    violation = Violation(
        KIND, path,
        f"the jitted program of {what} compiled for {path}={shown(compiled)} ran for {shown(now)}: Thunder served "
        f"the call from the cache entry compiled for {shown(compiled)} because its prologue does not check that "
        f"argument, while the program has the {kind} baked in as a literal, so the call computes what the compiling "
        f"call asked for ({shown(compiled)}), not what this call asks for, where eager PyTorch uses {shown(now)}"
        f"{others}",
        "when the jitted call returns", culprit=CULPRIT,
    )
    error = violation.to_error(user_site())
    error.names = tuple(dict.fromkeys(p for p, _, _ in changed))
    return error


def _describe(function: Any) -> str:
    if isinstance(function, torch.nn.Module):
        return f"the module {type(function).__qualname__}"
    name = getattr(function, "__qualname__", None)
    return name if isinstance(name, str) else f"a {type(function).__name__}"


def watch(compilation: Any, interpreted: list[Any]) -> None:
    """The interpretation of ``compilation`` made ``interpreted`` (the last is the one its cache entry keeps first):
    if the call it compiles hands it a dtype or device the program bakes in, judge each call that runs it."""
    values = getattr(compilation, "literals", None)
    if not values or not interpreted:
        return
    program = interpreted[-1]
    baked = literals(program)
    kept = {path: found for path, found in values.items() if found[1] in baked}
    if not kept:
        return
    data, stats = call_ends.compiling()
    function = getattr(data, "fn", None)
    call_ends.watch(program, stats, _Baked(kept, _describe(function)))
