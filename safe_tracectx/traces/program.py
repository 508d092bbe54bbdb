"""The Python program Thunder generates from a trace, modelled without generating it.

Thunder prints a trace as a function: the signature's parameter names, then one
statement per top-level bound symbol, calling the symbol by the name its
printer gives it. The checks ask this model what the program defines, calls and
keeps, and never print the trace (printing makes the trace active and can name
proxies)::

    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx.traces.program import Program
    >>> Program(TraceCtx()).parameters
    frozenset()
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.program")

from typing import Any, Final

from thunder.core import codeutils
from thunder.core.prims import OpTags, PrimIDs
from thunder.core.proxies import Proxy
from thunder.core.pytree import tree_flatten
from thunder.core.symbol import default_python_printer

from safe_tracectx.traces import joint
from safe_tracectx.traces.bound_proxies import proxy_args, proxy_outs
from safe_tracectx.traces.flat_args import return_flat_args
from safe_tracectx.traces.returns import is_return, return_args

__all__ = ["Program", "signature_name", "signature_names"]

_DEL: Final = PrimIDs.DEL
_UNPACK_SEQUENCE: Final = PrimIDs.UNPACK_SEQUENCE
_KEEP: Final = frozenset({OpTags.DONT_DCE})


def _signature(trace: Any) -> Any:
    """Thunder's SigInfo of ``trace``, computed (not cached in the trace) when the trace has none yet."""
    info = getattr(trace, "_siginfo", None)
    if info is not None:
        return info
    fn = getattr(trace, "fn", None)
    if fn is None:
        return None
    try:
        return codeutils.get_siginfo(fn, trace.args, trace.kwargs)
    except Exception:  # noqa: BLE001 - a function Thunder cannot read a signature of either: no signature
        return None


def signature_name(trace: Any) -> str | None:
    """The name of the function a trace defines (``computation``, ``backward_fn``, ``prologue``, ...), if known."""
    info = getattr(trace, "_siginfo", None)
    if info is not None:
        return str(info.name)
    fn = getattr(trace, "fn", None)
    name = getattr(fn, "__name__", None)
    return None if name is None else str(name)


def signature_names(trace: Any) -> frozenset[str] | None:
    """The parameter names of the function ``trace`` prints as (None: it prints no signature)."""
    info = _signature(trace)
    if info is None:
        return None
    names = {name for name, _ in info.args}
    names.update(info.kwargs)
    for extra in (info.varargs, info.varkwargs):
        if extra is not None:
            names.add(extra[0] if isinstance(extra, tuple) else str(extra))
    return frozenset(names)


class Program:
    """What the function generated from one trace takes, defines, calls and keeps."""

    __slots__ = ("trace", "parameters", "_signed", "_context", "_assigned")

    def __init__(self, trace: Any) -> None:
        self.trace = trace
        names = signature_names(trace)
        self._signed = names is not None
        self._context: frozenset[str] | None = None
        self._assigned: frozenset[str] | None = None
        # A trace without a signature prints none: its inputs are all it has.
        self.parameters: frozenset[str] = names if names is not None else frozenset(p.name for p in self.input_proxies())

    def input_proxies(self) -> list[Proxy]:
        """The proxies among the trace's ``args`` and ``kwargs``."""
        try:
            flat, _ = tree_flatten((self.trace.args, self.trace.kwargs))  # type: ignore[no-untyped-call]
        except Exception:  # noqa: BLE001 - unusual argument containers
            return []
        return [p for p in flat if isinstance(p, Proxy)]

    def local_names(self) -> frozenset[str]:
        """The names that are local variables of the generated function (computed once): its parameters, what
        it assigns or deletes, and what a statement other than the return reads (Thunder's del-last-used
        deletes it after its last use, which makes it local). Reading one before it has a value is an
        UnboundLocalError; any other name is a NameError."""
        if self._assigned is None:
            names = set(self.parameters)
            for bsym in self.trace.bound_symbols:
                names.update(p.name for p in proxy_outs(bsym))
                if not is_return(bsym):
                    names.update(p.name for p in proxy_args(bsym))
            self._assigned = frozenset(names)
        return self._assigned

    @staticmethod
    def is_unpack(bsym: Any) -> bool:
        """True for an unpacking (``unpack_trivial``, ``unpack_sequence``, ...): it binds values that exist
        already (a parameter, the saved-for-backward values) to their names, defining nothing new."""
        return str(getattr(bsym.sym, "name", "")).startswith("unpack")

    @staticmethod
    def is_del(bsym: Any) -> bool:
        """True for ``del a, b`` (Thunder's ``python_del``): the names it reads end there."""
        return getattr(bsym.sym, "id", None) == _DEL

    def dead_indices(self) -> set[int]:
        """Indices of the top-level bound symbols Thunder's dead-code elimination removes.

        As ``thunder.core.transform_common.dce``: walking back from the return, a
        bound symbol stays if it is tagged DONT_DCE or an output it produces is needed.
        A trace without a return statement is not a whole program: none of it is dead.
        """
        bsyms = self.trace.bound_symbols
        if not any(map(is_return, bsyms)):
            return set()  # not a whole program yet (no return): nothing is dead, everything counts
        # As Thunder's ``producers``: a bound symbol that reads a name is not its producer.
        produced = {p.name for b in bsyms for p in _produces(b)}
        needed: set[str] = set()
        dead: set[int] = set()
        for index in range(len(bsyms) - 1, -1, -1):
            bsym = bsyms[index]
            keep = is_return(bsym) or _has_keep_tag(bsym)
            if not keep:
                made = {p.name for p in _produces(bsym)}
                # A needed output that nothing produces: Thunder's DCE fails on it (KeyError), removing nothing.
                keep = any(p.name in needed and (p.name in made or p.name not in produced) for p in proxy_outs(bsym))
            if keep:
                needed.update(p.name for p in proxy_args(bsym))
            else:
                dead.add(index)
        return dead

    @staticmethod
    def callee(bsym: Any) -> str:
        """The name the generated program calls ``bsym`` by (for the default printer)."""
        try:
            return str(bsym.name_with_module())
        except Exception:  # noqa: BLE001 - a symbol whose module cannot be named
            return str(getattr(bsym.sym, "name", "?"))

    def callee_problem(self, bsym: Any) -> str | None:
        """Why the generated program cannot call ``bsym`` by its printed name (None: it can)."""
        sym = bsym.sym
        if getattr(sym, "python_printer", default_python_printer) is not default_python_printer:
            return None  # a printer of its own (unpack, return, del, comments) calls nothing by the symbol's name
        name = getattr(sym, "name", None)
        if not isinstance(name, str):
            return None
        call_ctx = getattr(bsym, "_call_ctx", None)
        if call_ctx is not None or getattr(sym, "module", None) is None:
            head = name.split(".", 1)[0]
            if name.isidentifier():
                if call_ctx is not None and name not in call_ctx:
                    return f"the generated program calls {name}, which its call context does not define (NameError)"
                return None
            if all(part.isidentifier() for part in name.split(".")) and head in self.context_names():
                return None  # a dotted path from a module the program imports (torch.ops.aten.x)
            return (
                f"bound symbol name {name!r} is not an identifier the generated program can call: it would call "
                f"{name}(...) and fail with NameError ({head!r} is not defined there)"
            )
        if not all(part.isidentifier() for part in name.split(".")):
            return f"bound symbol name {name!r} cannot be called by name in the generated program"
        return None

    def context_names(self) -> frozenset[str]:
        """The names the generated program's context defines: its imports, call and object contexts (computed once,
        when a dotted callee needs it)."""
        if self._context is None:
            names = {"torch", "thunder"}  # always imported by the program Thunder prints
            for bsym in self.trace.bound_symbols:
                try:
                    contexts = bsym.gather_ctxs()
                except Exception:  # noqa: BLE001 - a bound symbol whose context cannot be gathered adds nothing
                    continue
                for context in contexts:
                    names.update(context)
            self._context = frozenset(names)
        return self._context

    def saved_for_backward(self) -> list[list[Any]] | None:
        """The values a forward trace saves for its backward, per collection (None: not a forward with a backward)."""
        parts = self.saved_parts()
        return None if parts is None else [list(part) for part in parts]

    def saved_parts(self) -> tuple[Any, ...] | None:
        """The collections a forward trace returns for its backward, as the trace holds them (lists or tuples)."""
        args = return_args(self.trace)
        if args is None:
            return None
        if len(args) == 1 and isinstance(args[0], tuple | list) and len(args[0]) == 2:
            args = tuple(args[0])
        if len(args) != 2 or not isinstance(args[1], tuple | list):
            return None
        parts = args[1]
        if not all(isinstance(part, tuple | list) for part in parts):
            return None
        return tuple(parts)

    def is_joint(self) -> bool:
        """A joint forward-backward trace (:func:`safe_tracectx.traces.joint.is_joint`)."""
        return joint.is_joint(self.trace)

    def flat_inputs(self) -> list[Any] | None:
        """The flat inputs a forward trace returns for its backward to differentiate (``'flat_args'``)."""
        return return_flat_args(self.trace)

    def gradients(self) -> list[Any] | None:
        """What a backward trace returns: one gradient (or None) per flat input of its forward."""
        args = return_args(self.trace)
        if args is not None and len(args) == 1 and isinstance(args[0], tuple | list):
            return list(args[0])
        return None

    def unpacked_saved(self) -> list[list[Any] | None] | None:
        """What a backward trace unpacks its first parameter (``saved_for_backward``) into, per collection."""
        collections = self.saved_collections()
        return None if collections is None else [names for _, names in collections]

    def saved_collections(self) -> list[tuple[Any, list[Any] | None]] | None:
        """Per collection of a backward trace's ``saved_for_backward``: (its proxy, what it is unpacked into)."""
        info = _signature(self.trace)
        if info is None or not info.args or info.args[0][0] != "saved_for_backward":
            return None
        by_input: dict[str, Any] = {}
        for bsym in self.trace.bound_symbols:
            if getattr(bsym.sym, "id", None) == _UNPACK_SEQUENCE and bsym.args and isinstance(bsym.args[0], Proxy):
                by_input.setdefault(bsym.args[0].name, bsym)
        top = by_input.get("saved_for_backward")
        if top is None:
            return None
        parts: list[tuple[Any, list[Any] | None]] = []
        for collection in _as_list(top.output):
            inner = by_input.get(collection.name) if isinstance(collection, Proxy) else None
            parts.append((collection, None if inner is None else list(_as_list(inner.output))))
        return parts


def _produces(bsym: Any) -> list[Proxy]:
    reads = {p.name for p in proxy_args(bsym)}
    return [p for p in proxy_outs(bsym) if p.name not in reads]


def _as_list(output: Any) -> list[Any]:
    return list(output) if isinstance(output, tuple | list) else [output]


def _has_keep_tag(bsym: Any) -> bool:
    stack = [bsym]
    while stack:
        current = stack.pop()
        tags = getattr(current.sym, "tags", None) or ()
        if not _KEEP.isdisjoint(tags) or not _KEEP.isdisjoint(getattr(current, "tags", None) or ()):
            return True
        stack.extend(current.subsymbols)
    return False
