"""The interpretation's binding of a trace's inputs, watched for the tags it adds to proxies it is only given.

Thunder's ``bind_inputs`` records an unpacking symbol in a trace for each proxy it is given, proxies that other
traces define (the epilogue reads the computation trace's outputs). The unpacking symbol returns its argument,
so whatever ``Symbol.__call__`` does to a call's outputs it does to the given proxy: called with grad disabled,
it tags it ``DETACHED_AUTOGRAD_GRAPH`` in every trace that has it (Thunder #2479). The wrapper compares each
given proxy's tags before and after, and records on the compilation what the binding added, so that a check
that finds the tag charges the binding, not the symbol that made the proxy. It costs one set copy per input::

    >>> from safe_tracectx._support.pass_catalog import PASSES
    >>> [spec.attribute for spec in PASSES if spec.hook == "binding"]
    ['bind_inputs']
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from thunder.core.compile_data import get_compile_data
from thunder.core.proxies import Proxy

from safe_tracectx._support.pass_catalog import PassSpec
from safe_tracectx.hooks import compilation as compilations
from safe_tracectx.hooks.reporting import internal_error
from safe_tracectx.traces.grad_mode import Retagging

__all__ = ["given_proxies", "wrap_binding"]


def given_proxies(values: Iterable[Any]) -> list[Proxy]:
    """The proxies among ``values`` and in the lists and tuples among them (one level: what a binding is given)."""
    found: list[Proxy] = []
    for value in values:
        if isinstance(value, Proxy):
            found.append(value)
        elif isinstance(value, list | tuple):
            found += [item for item in value if isinstance(item, Proxy)]
    return found


def _into(values: Iterable[Any]) -> str:
    """What the binding binds into: its first string argument (``bind_inputs("epilogue", ...)``), else "bound"."""
    return next((value for value in values if isinstance(value, str)), "bound")


def wrap_binding(spec: PassSpec, original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` watched for the tags it adds to the proxies it is given (recorded on the compilation)."""

    @functools.wraps(original)
    def watched_binding(*args: Any, **kwargs: Any) -> Any:
        compilation = compilations.current()
        if compilation is None:
            return original(*args, **kwargs)
        values = (*args, *kwargs.values())
        try:
            before = [(p, frozenset(tags)) for p in given_proxies(values) if isinstance(tags := p.tags, set)]
        except Exception as bug:  # noqa: BLE001 - a bug of ours never stops the user's program
            internal_error(f"the proxies given to {spec.qualname}", bug)
            return original(*args, **kwargs)
        try:
            return original(*args, **kwargs)
        finally:  # what it tagged before it raised, too
            _record(compilation, spec, values, before)

    watched_binding.__safe_tracectx_pass__ = spec  # type: ignore[attr-defined]
    return watched_binding


def _record(
    compilation: compilations.Compilation, spec: PassSpec, values: tuple[Any, ...], before: list[tuple[Proxy, frozenset[Any]]]
) -> None:
    """Record on ``compilation`` the tags the binding added to each proxy it was given."""
    try:
        data = get_compile_data()
        grad_enabled = getattr(data, "is_grad_enabled", None)
        mode = grad_enabled if type(grad_enabled) is bool else None
        for proxy, tags in before:
            if added := frozenset(proxy.tags) - tags:
                retagging = Retagging(added, (spec.label, spec.qualname), _into(values), mode)
                compilation.record_retagging(proxy, retagging)
    except Exception as bug:  # noqa: BLE001 - a bug of ours never stops the user's program
        internal_error(f"the tags {spec.qualname} added", bug)
