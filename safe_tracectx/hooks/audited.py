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
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from safe_tracectx.hooks.installer import is_installed
from safe_tracectx.hooks.runs import DECLARED as _declared
from safe_tracectx.hooks.runs import PassRun, run_pass

__all__ = ["audited_pass", "declared_passes"]

P = ParamSpec("P")
R = TypeVar("R")

def declared_passes() -> dict[str, str]:
    """Every ``audited_pass`` label declared in this process, with its function (or ``block``)."""
    return dict(_declared)


class audited_pass:
    """A decorator, or a with-block, that makes a pass of the audit.

    ``role`` is ``"forward"``/``"backward"`` if known (else found from the input
    trace once the pair exists); ``pair=True`` validates two outputs as
    (forward, backward). In a block, name the outputs with ``p.outputs(...)``.
    """

    __slots__ = ("label", "kind", "role", "pair", "_inputs", "_outputs", "_run")

    def __init__(
        self, label: str, *, inputs: Iterable[Any] = (), kind: str = "user", role: str | None = None, pair: bool = False
    ) -> None:
        self.label, self.kind, self.role, self.pair = label, kind, role, pair
        self._inputs = tuple(inputs)
        self._outputs: tuple[Any, ...] = ()
        self._run: PassRun | None = None

    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]:
        qualname = f"{fn.__module__}.{fn.__qualname__}"
        _declared.setdefault(self.label, qualname)

        @functools.wraps(fn)
        def audited(*args: P.args, **kwargs: P.kwargs) -> R:
            if not is_installed():
                return fn(*args, **kwargs)
            result: R = run_pass(self.label, qualname, self.kind, fn, args, kwargs, role=self.role, pair=self.pair)
            return result

        return audited

    def outputs(self, *traces: Any) -> None:
        """The traces the block produced (validated when it ends)."""
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
