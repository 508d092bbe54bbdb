"""A trace Thunder cannot print: a bound symbol whose contexts or lines Thunder's printer fails on.

Thunder prints a trace (``str(trace)``, ``trace.python()``, and to run it) by
gathering every bound symbol's import, call and object contexts and printing its
line, and ``str(trace)`` its subsymbols' lines as comments. One that fails makes
the whole trace unprintable (#1544: a custom ``torch.autograd.Function``'s symbol
with no module). This prints each bound symbol as Thunder does, on a copy, with no
trace active, and names the function of Thunder's that raised::

    >>> from thunder.core import prims
    >>> from thunder.core.symbol import Symbol
    >>> print_problem(prims.neg.bind(1.0, output=None)) is None
    True
    >>> print_problem(Symbol(name="no_module", meta=None).bind(1.0, output=None)).describe()  # doctest: +ELLIPSIS
    'AssertionError in BoundSymbol.import_ctx (thunder/core/symbol.py:...)'
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.printing")

import contextvars
import copy
import os
import weakref
from typing import Any, Final

import thunder
import torch
from thunder.core import devices, dtypes
from thunder.core.proxies import Proxy
from thunder.core.symbol import BoundSymbol

from safe_tracectx.context.blocks import TRACE_VAR
from safe_tracectx.traces.bound_proxies import proxy_outs
from safe_tracectx.traces.program import Program
from safe_tracectx.traces.violations import Violation, bsym_label

__all__ = ["PrintProblem", "PrintedSymbols", "print_problem", "unprintable"]

_THUNDER_DIR: Final = os.path.dirname(os.path.abspath(thunder.__file__)) + os.sep


class PrintProblem:
    """Why Thunder cannot print a bound symbol: its exception, and the function of Thunder's that raised it."""

    __slots__ = ("error", "function", "qualname", "location", "top_level")

    def __init__(self, error: Exception, *, top_level: bool = True) -> None:
        self.error = error
        #: It fails printing the bound symbol's own line (else only its subsymbols', which ``str(trace)`` prints
        #: as comments and ``trace.python()`` leaves out).
        self.top_level = top_level
        self.function, self.qualname, self.location = "its printer", "?", "?"
        tb = error.__traceback__
        while tb is not None:  # the innermost frame in Thunder's package
            code = tb.tb_frame.f_code
            if os.path.abspath(code.co_filename).startswith(_THUNDER_DIR):
                self.function = str(getattr(code, "co_qualname", code.co_name))
                self.qualname = f"{tb.tb_frame.f_globals.get('__name__', '?')}.{self.function}"
                relative = os.path.relpath(code.co_filename, os.path.dirname(_THUNDER_DIR.rstrip(os.sep)))
                self.location = f"{relative}:{tb.tb_lineno}"
            tb = tb.tb_next

    def describe(self) -> str:
        """``AssertionError in BoundSymbol.import_ctx (thunder/core/symbol.py:637)``, then the error's text."""
        text = " ".join(str(self.error).split())
        return f"{type(self.error).__name__} in {self.function} ({self.location})" + (f": {text!r}" if text else "")


def _detached_copy(bsym: Any) -> Any:
    """A copy of ``bsym`` to print: its own (empty) context caches, its subsymbols copied alike; no binding step
    runs (a stateful executor's binding makes a new state object)."""
    duplicate = copy.copy(bsym)
    duplicate._import_ctx = {}
    duplicate._object_ctx = {}
    duplicate.subsymbols = [_detached_copy(sub) for sub in bsym.subsymbols]
    return duplicate


def _print_without_trace(bsym: Any, depth: int) -> None:
    TRACE_VAR.set(None)  # in a copied context: printing an object would name it in the active trace
    if depth == 1:
        bsym.gather_ctxs()
    bsym.python(indent=1, print_depth=depth)  # 1: as trace.python(); -1: as str(trace), subsymbols as comments


def print_problem(bsym: Any) -> PrintProblem | None:
    """Why Thunder cannot print ``bsym`` (None: it can), found as ``str(trace)`` and ``TraceCtx.python`` find
    it: gathering its import, call and object contexts, then printing its line and its subsymbols'; on a copy
    (the trace's bound symbols and their cached contexts stay as they were), with no trace active."""
    try:
        duplicate = _detached_copy(bsym)
    except Exception:  # noqa: BLE001 - a bound symbol that cannot be copied: not checked
        return None
    for depth in (1, -1):
        try:
            contextvars.copy_context().run(_print_without_trace, duplicate, depth)
        except Exception as error:  # noqa: BLE001 - whatever Thunder's printer raises is the finding
            return PrintProblem(error, top_level=depth == 1)
    return None


def _subclasses(base: type) -> set[type]:
    found = {base}
    subclass: type
    for subclass in base.__subclasses__():
        found |= _subclasses(subclass)
    return found


#: Arguments every printer prints the same way, whatever the bound symbol (others, a dataclass or a frozenset,
#: depend on the value: such a bound symbol is printed each time). Proxy classes by type for speed, and by
#: ``isinstance`` for those defined later.
_PLAIN_TYPES: Final[frozenset[type]] = frozenset(
    {int, float, bool, complex, str, type(None), slice, type(Ellipsis), torch.dtype, torch.device, torch.memory_format}
    | _subclasses(Proxy)
)
_PLAIN_CLASSES: Final = (Proxy, dtypes.dtype, devices.Device)


def _plain(values: Any) -> bool:
    for value in values:
        kind = type(value)
        if kind in _PLAIN_TYPES:
            continue
        if kind is tuple or kind is list:
            if not _plain(value):
                return False
        elif not isinstance(value, _PLAIN_CLASSES):
            return False
    return True


def _plain_arguments(bsym: Any) -> bool:
    return _plain(bsym.args) and (not bsym.kwargs or _plain(bsym.kwargs.values()))


class PrintedSymbols:
    """The symbols whose bound symbols printed, so that one with plain arguments is printed once per process,
    not once per trace: what a printer needs besides its arguments comes from the symbol (its module, executor,
    implementation, printer). Keyed by the symbol's identity and its name (the very string object: another
    symbol given a freed one's id has its own), holding no reference to the symbol (a symbol keeps its
    executor, and a jit's temporary executor its compilation, alive)::

        >>> from thunder.core import prims
        >>> printed = PrintedSymbols()
        >>> bsym = prims.neg.bind(1.0, output=None)
        >>> printed.needs_printing(bsym), printed.add(bsym), printed.needs_printing(bsym)
        (True, None, False)
    """

    __slots__ = ("_names", "_printed", "limit")

    def __init__(self, limit: int = 8192) -> None:
        self._names: dict[int, object] = {}  # id(symbol) -> its name
        #: The bound symbols printed (traces share them: a pass copies the list, not the symbols), by id, each
        #: entry a weak reference that removes itself.
        self._printed: dict[int, weakref.ref[Any]] = {}
        self.limit = limit

    def needs_printing(self, bsym: Any) -> bool:
        """Whether ``bsym`` must be printed to know it prints: a new symbol, arguments beyond plain values, a
        header that is not text, or a subsymbol (their arguments come from the values) that needs it."""
        known = self._printed.get(id(bsym))
        if known is not None and known() is bsym:
            return False
        names = self._names
        stack = [bsym]
        while stack:
            current = stack.pop()
            sym = current.sym
            if names.get(id(sym)) is not sym.name or not _plain_arguments(current):
                return True
            header = current.header
            if header and not isinstance(header, str):
                return True
            stack.extend(current.subsymbols)
        return False  # not remembered: a walk is cheaper than a weak reference per bound symbol held for the GC

    def _remember(self, bsym: Any) -> None:
        key, printed = id(bsym), self._printed
        try:
            printed[key] = weakref.ref(bsym, lambda _, key=key: printed.pop(key, None))  # type: ignore[misc]
        except TypeError:  # no weak reference to it: judged by its symbols each time
            pass

    def add(self, bsym: Any) -> None:
        """``bsym`` printed, with its subsymbols: so do the other bound symbols of their symbols, with plain
        arguments."""
        if len(self._names) >= self.limit:
            self._names.clear()
        stack = [bsym]
        while stack:
            current = stack.pop()
            self._names[id(current.sym)] = current.sym.name
            stack.extend(current.subsymbols)
        self._remember(bsym)


_PRINTED: Final = PrintedSymbols()


def unprintable(bsym: Any, index: int) -> Violation | None:
    """The ``generated-code`` violation of a bound symbol Thunder cannot print (None: it prints, or it printed
    before with the same kind of arguments); named after its first output, or how the program calls it."""
    if not isinstance(bsym, BoundSymbol) or not _PRINTED.needs_printing(bsym):
        return None  # a look-alike (duck-typed entries of a trace built by hand) has no printer to ask
    problem = print_problem(bsym)
    if problem is None:
        _PRINTED.add(bsym)
        return None
    outputs = [p.name for p in proxy_outs(bsym)]
    consequence = (
        "str(trace), trace.python() and running the trace fail" if problem.top_level else
        "str(trace) fails (in the commented lines of its subsymbols; trace.python() prints the top level only)"
    )
    return Violation(
        "generated-code", outputs[0] if outputs else Program.callee(bsym),
        f"the trace cannot be printed: printing {bsym_label(index, bsym)}"
        + (f", which defines {', '.join(outputs)}," if outputs else "")
        + f" raises {problem.describe()}, so {consequence}",
        bsym_label(index, bsym), also=tuple(outputs[1:]), culprit=(problem.function, problem.qualname),
        advice=f"every trace a pass returns must print: give the symbol what Thunder's printer needs ({problem.function} "
               "failed): a module to import, a call context or a printer of its own, and arguments Thunder can print "
               "(a tuple rather than a frozenset, a dataclass without __slots__)",
    )
