"""Thunder's trace substitution, watched: a swap that puts a tensor of another dtype where a traced value was.

``TraceSubstitutionProcessor.add_to_swap_map(old, new)`` is hooked while installed (on the class: no Thunder
processor overrides it). Before the original runs, the swap is read (``safe_tracectx.traces.substitution``); a
violation is charged to the pass running the processor (the grad transform for its augmented forward) and
acted on, so strict raises before the swap is made and before Thunder's own failure at run time. The
original is then called with the same arguments and its result returned; its exceptions are untouched.
``rerun_trace``'s processor is left alone: it re-traces every symbol to fix metadata, so no symbol keeps
what was traced for the old value; so is an executor's translation of a symbol (its metas follow what runs, and the
symbols after it are given to the executors again)::

    >>> from thunder.core.trace_interpreter import TraceSubstitutionProcessor as Processor
    >>> from safe_tracectx.hooks import installed
    >>> original = Processor.add_to_swap_map
    >>> with installed():
    ...     Processor.add_to_swap_map is original
    False
    >>> Processor.add_to_swap_map is original
    True
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, Final

from safe_tracectx._support.callsite import find_call_site
from safe_tracectx.hooks import compilation as compilations
from safe_tracectx.hooks.reporting import culprit_error, internal_error, report_all, switched_off
from safe_tracectx.hooks.runs import current_run
from safe_tracectx.traces.substitution import KIND, dtype_swap, swapped_dtypes
from safe_tracectx.traces.violations import Violation

__all__ = ["hook_substitution", "hooked_substitution", "unhook_substitution"]

#: (class, original method, ours) while hooked.
_replaced: Final[list[tuple[type, Any, Any]]] = []
#: Processors whose purpose is new metadata for every symbol (they re-trace each one).
_RETRACING: Final = frozenset({"RerunProcessor"})
#: Where the operator executors' pass defines its processor (a grad transform an executor registers runs in the
#: grad transform's processor, and is checked as a grad rule is).
_EXECUTORS_PASS: Final = "thunder.executors.passes"
#: How many frames up the symbol being substituted is looked for.
_MAX_FRAMES: Final = 6


def _processor_class() -> type | None:
    try:
        from thunder.core.trace_interpreter import TraceSubstitutionProcessor
    except ImportError:  # a Thunder before the processor: nothing to watch
        return None
    return TraceSubstitutionProcessor


def _substituted(processor: Any, frame: FrameType | None) -> Any:
    """The bound symbol the processor is substituting now: the ``bsym`` its ``__call__`` (or the subclass's
    ``process_bsym``) holds, read from the frames above the hook (violation path only)."""
    for _ in range(_MAX_FRAMES):
        if frame is None:
            return None
        if frame.f_locals.get("self") is processor and hasattr(frame.f_locals.get("bsym"), "sym"):
            return frame.f_locals["bsym"]
        frame = frame.f_back
    return None


def _executor_operation(processor: Any, bsym: Any) -> bool:
    """Whether what stands in for ``bsym`` is made of an executor's operations (the operator executors' pass):
    typed by the executor's metas after what runs (torch's sum of a bool tensor is int64 where ``prims.sum``'s
    meta says bool), and every later symbol is given to an executor again with the new value. A grad rule's
    forward is Thunder's symbols re-stating the one it stands for: another dtype there is another computation."""
    new = getattr(processor, "new_bsyms", None)
    if bsym is None or not isinstance(new, list) or not new or type(processor).__module__ != _EXECUTORS_PASS:
        return False
    return all(getattr(getattr(b, "sym", None), "executor", None) is not None for b in new)


def _step(processor: Any) -> tuple[str, str]:
    """(label, qualname) of the pass running ``processor``: the current run, else the processor's class."""
    run = current_run.get()
    if run is not None:
        return run.label, run.qualname
    cls = type(processor)
    return cls.__qualname__, f"{cls.__module__}.{cls.__qualname__}"


def _check(processor: Any, old: Any, new: Any, frame: FrameType | None) -> Violation | None:
    if swapped_dtypes(old, new) is None or type(processor).__name__ in _RETRACING or switched_off(KIND):
        return None  # the common case: one isinstance, one dtype comparison
    bsym = _substituted(processor, frame)
    if _executor_operation(processor, bsym):
        return None
    label, qualname = _step(processor)
    violation = dtype_swap(old, new, getattr(processor, "trace", None), bsym, f"{label} ({qualname})")
    if violation is None:
        return None
    return Violation(violation.kind, violation.name, violation.message, violation.where, violation.also,
                     culprit=(label, qualname))


def _report(processor: Any, violation: Violation) -> None:
    compilation = compilations.current()
    if compilation is not None:
        key = (violation.kind, violation.name)
        if key in compilation.reported:
            return
        compilation.reported.add(key)
    trace: Any = getattr(processor, "new_trace", None)
    assert violation.culprit is not None
    error = culprit_error(compilation, violation, trace, find_call_site(skip_thunder=True),
                          fallback=violation.culprit, context="a trace substitution: ")
    report_all([error])


def _make(original: Callable[..., Any]) -> Callable[..., Any]:
    def add_to_swap_map(self: Any, old: Any, new: Any) -> Any:
        if old is not new:
            try:
                violation = _check(self, old, new, sys._getframe(1))
            except Exception as error:  # noqa: BLE001 - a bug of ours never stops the user's program
                internal_error("a trace substitution", error)
                violation = None
            if violation is not None:
                _report(self, violation)  # strict raises here, before the swap is made
        return original(self, old, new)

    add_to_swap_map.__wrapped__ = original  # type: ignore[attr-defined]
    add_to_swap_map.__doc__ = original.__doc__
    add_to_swap_map.__name__ = getattr(original, "__name__", "add_to_swap_map")
    add_to_swap_map.__qualname__ = getattr(original, "__qualname__", "add_to_swap_map")
    return add_to_swap_map


def hook_substitution() -> None:
    """Replace ``TraceSubstitutionProcessor.add_to_swap_map`` (once: a second call changes nothing)."""
    cls = _processor_class()
    if _replaced or cls is None or "add_to_swap_map" not in cls.__dict__:
        return
    original = cls.__dict__["add_to_swap_map"]
    ours = _make(original)
    setattr(cls, "add_to_swap_map", ours)
    _replaced.append((cls, original, ours))


def unhook_substitution() -> None:
    """Put the original method back, unless the user replaced ours meanwhile (their patch is left in place)."""
    while _replaced:
        cls, original, ours = _replaced.pop()
        if cls.__dict__.get("add_to_swap_map") is ours:
            setattr(cls, "add_to_swap_map", original)


def hooked_substitution() -> list[str]:
    """``module.Class.add_to_swap_map`` of the method replaced now."""
    return [f"{cls.__module__}.{cls.__qualname__}.add_to_swap_map" for cls, _, _ in _replaced]
