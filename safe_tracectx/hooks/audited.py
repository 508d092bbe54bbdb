"""``audited_pass``: any trace-to-trace function, or any block, as a pass of the audit.

For the passes Thunder does not call through a ``Transform`` or an executor.
While installed, each call (or block) is a pass run like Thunder's own: its
proxies counted, its output traces validated with ``check_trace`` (a pair also
with ``check_forward_backward``), a ``pass_run`` event, an injection point for
``safe-tracectx sweep``. Not installed, it only calls through::

    >>> from thunder.core.trace import TraceCtx
    >>> import safe_tracectx as stc
    >>> @stc.audited_pass("my remat")
    ... def my_remat(trace: TraceCtx) -> TraceCtx:
    ...     return trace
    >>> with stc.audit() as log:
    ...     _ = my_remat(TraceCtx())
    ...     with stc.audited_pass("by hand", inputs=(TraceCtx(),)) as p:
    ...         p.outputs(TraceCtx())
    >>> [(r["label"], r["kind"]) for r in log.pass_runs]
    [('my remat', 'user'), ('by hand', 'user')]
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, Final, Literal, ParamSpec, TypeVar

from thunder.core.trace import TraceCtx

from safe_tracectx._support.pass_catalog import USER_KINDS, PassKind
from safe_tracectx.hooks.installer import is_installed
from safe_tracectx.hooks.pass_values import pair_sides, traces_in
from safe_tracectx.hooks.runs import DECLARED as _declared
from safe_tracectx.hooks.runs import PassRun, run_pass

__all__ = ["PassRole", "audited_pass", "declared_passes"]

P = ParamSpec("P")
R = TypeVar("R")

#: Which side of the forward/backward pair an ``audited_pass`` works on (None: found from its input trace).
PassRole = Literal["forward", "backward"]
ROLES: Final = (None, "forward", "backward")
_TRACES: Final = "a TraceCtx, a tuple or list of them, or Thunder's TraceResults"


def declared_passes() -> dict[str, str]:
    """Every ``audited_pass`` label declared in this process, with its function (or ``block``)."""
    return dict(_declared)


def _given(value: object) -> str:
    if isinstance(value, TraceCtx):
        return "a single TraceCtx"  # its repr is the whole program
    return f"{type(value).__name__} ({value!r:.60})"


#: The kinds of Thunder's own passes that a pass of the user's cannot be.
_RESERVED_KINDS: Final = {
    "tracing": "the interpretation of a thunder.jit compile, which starts a compilation",
    "thunderfx": "the ThunderFX splitter's (torch.compile with Thunder as its backend)",
}


def _check_arguments(label: object, inputs: object, kind: object, role: object, pair: object) -> tuple[Any, ...]:
    """The arguments of ``audited_pass``, checked: a TypeError or ValueError naming the one that is wrong."""
    if not isinstance(label, str) or not label.strip():
        if callable(label):  # @audited_pass with no call: the function came as the label
            raise TypeError(
                f"audited_pass() takes its label as a non-empty str, got the function "
                f"{getattr(label, '__qualname__', label)!r}: call it with the label, "
                f"@audited_pass({getattr(label, '__name__', 'my pass')!r}), not bare @audited_pass"
            )
        raise TypeError(f"audited_pass() takes its label as a non-empty str, got {_given(label)}")
    where = f"audited_pass({label!r})"
    if isinstance(kind, str) and kind in _RESERVED_KINDS:
        raise ValueError(
            f"{where}: kind={kind!r} is {_RESERVED_KINDS[kind]}; a pass of yours is one of: {', '.join(USER_KINDS)}"
        )
    if not isinstance(kind, str) or kind not in USER_KINDS:
        raise ValueError(f"{where}: kind={kind!r:.60} is not a kind of pass; use one of: {', '.join(USER_KINDS)}")
    if role not in ROLES:
        raise ValueError(f"{where}: role={role!r:.60} is not a role; use None (found from the input), 'forward' or 'backward'")
    if not isinstance(pair, bool):
        raise TypeError(f"{where}: pair takes True or False, got {_given(pair)}")
    if pair and role is not None:
        raise ValueError(f"{where}: pair=True validates two outputs as (forward, backward), so role={role!r} cannot apply; drop role=")
    if isinstance(inputs, TraceCtx | str | bytes) or not isinstance(inputs, Iterable):
        raise TypeError(f"{where}: inputs takes an iterable of traces, e.g. inputs=(trace,), got {_given(inputs)}")
    found = tuple(inputs)
    for item in found:
        if item is not None and not traces_in(item):  # None: an optional trace that is absent
            raise TypeError(f"{where}: each of inputs must be {_TRACES} (or None), got {_given(item)}")
    return found


def _check_pair(where: str, value: Any) -> None:
    """A pair pass returns (forward, backward); either may be None (that side is absent, as without a backward)."""
    if pair_sides(value) is not None:  # p.outputs((fw, bw)) as well as p.outputs(fw, bw)
        return
    count = len(traces_in(value))
    raise ValueError(
        f"{where} has pair=True but produced {count} trace(s) in {_given(value)}; a pair pass produces "
        "(forward, backward), either of them None when absent"
    )


class audited_pass:
    """A decorator, or a with-block, that makes a pass of the audit.

    ``role`` is ``"forward"``/``"backward"`` if known (else found from the input
    trace once the pair exists); ``pair=True`` validates two outputs as
    (forward, backward). In a block, name the inputs with ``inputs=`` and the
    outputs with ``p.outputs(...)``. A bad argument is a TypeError or ValueError
    here; a generator or coroutine function is refused (a pass returns its traces).
    """

    __slots__ = ("label", "kind", "role", "pair", "_inputs", "_outputs", "_run")

    def __init__(
        self,
        label: str,
        *,
        inputs: Iterable[Any] = (),
        kind: PassKind = "user",
        role: PassRole | None = None,
        pair: bool = False,
    ) -> None:
        self._inputs = _check_arguments(label, inputs, kind, role, pair)
        self.label, self.kind, self.role, self.pair = label, kind, role, pair
        self._outputs: tuple[Any, ...] = ()
        self._run: PassRun | None = None

    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]:
        where = f"audited_pass({self.label!r})"
        _refuse(where, fn)
        if self._inputs:
            raise ValueError(f"{where}: inputs= is for a with-block; a decorated function's inputs are its arguments: drop inputs=")
        qualname = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"
        _declared.setdefault(self.label, qualname)
        label, kind, role, pair = self.label, self.kind, self.role, self.pair

        @functools.wraps(fn)
        def audited(*args: P.args, **kwargs: P.kwargs) -> R:
            if not is_installed():  # not installed: only a call through
                return fn(*args, **kwargs)
            result: R = run_pass(label, qualname, kind, fn, args, kwargs, role=role, pair=pair)
            if pair:
                _check_pair(f"{where} ({qualname})", result)
            return result

        return audited

    def outputs(self, *traces: Any) -> None:
        """The traces the block produced (validated when it ends)."""
        for value in traces:
            if value is not None and not traces_in(value):
                raise TypeError(f"audited_pass({self.label!r}).outputs() takes {_TRACES} (or None), got {_given(value)}")
        self._outputs = traces

    def __enter__(self) -> audited_pass:
        _declared.setdefault(self.label, "block")
        if self._run is not None:
            raise TypeError(f"audited_pass({self.label!r}) was already entered; create a new one for each with-block")
        if is_installed():
            self._run = PassRun(self.label, self.label, self.kind, self._inputs, role=self.role, pair=self.pair).enter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        run, self._run = self._run, None
        if run is not None:
            run.leave(self._outputs, failed=exc is not None)
            if self.pair and exc is None:
                _check_pair(f"the block audited_pass({self.label!r})", self._outputs)


def _refuse(where: str, fn: object) -> None:
    """A TypeError for what cannot be a pass: not callable, or run later (generator, coroutine)."""
    if isinstance(fn, staticmethod | classmethod):  # the plain function we return would be bound as a method
        what = type(fn).__name__
        raise TypeError(
            f"{where} decorates a function, got a {what} object ({getattr(fn, '__qualname__', fn)!r}): "
            f"put @{what} above @{where[:-1]})"
        )
    if not callable(fn):
        raise TypeError(f"{where} decorates a function, got {_given(fn)}")
    for test, what in (
        (inspect.isasyncgenfunction, "async generator"),
        (inspect.isgeneratorfunction, "generator"),
        (inspect.iscoroutinefunction, "coroutine"),
    ):
        if test(fn):
            raise TypeError(
                f"{where} cannot decorate the {what} function {getattr(fn, '__qualname__', fn)!r}: a call only "
                "makes the object that runs it later, so the pass would be over before its work starts. "
                "Decorate a plain function that takes and returns the traces, or put "
                f"`with {where[:-1]}, inputs=(...)) as p:` ... `p.outputs(...)` in its body around the work"
            )
