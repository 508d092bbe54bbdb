"""The decorator form of every manager: a fresh block per call (per generator or coroutine, in its own Context).

A generator or coroutine runs in a Context of its own, so the block is active
while the body runs and not while it is suspended: it never leaks into the
caller between resumptions, and the body may hold inner blocks across them::

    >>> from thunder.core.trace import TraceCtx, get_tracectx
    >>> from safe_tracectx import tracectx
    >>> trace = TraceCtx()
    >>> @tracectx(trace)
    ... def names():
    ...     yield get_tracectx() is trace
    ...     yield get_tracectx() is trace
    >>> it = names()
    >>> next(it), get_tracectx() is None, next(it)
    (True, True, True)
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import types
from collections.abc import Callable, Coroutine, Generator
from contextlib import AbstractContextManager
from typing import Any, TypeVar

__all__ = ["decorate"]

_F = TypeVar("_F", bound=Callable[..., Any])
_Make = Callable[[], AbstractContextManager[Any]]


@types.coroutine
def _drive(body: Generator[Any, Any, Any] | Coroutine[Any, Any, Any], make: _Make) -> Generator[Any, Any, Any]:
    """Run ``body`` (a generator or coroutine) inside one ``make()`` block, in a Context of its own.

    Each step runs in that Context, so the block (and any block the body holds
    across a ``yield`` or ``await``) is active while the body runs and invisible to
    the caller between steps, as an asyncio task's context is.
    """
    context = contextvars.copy_context()
    manager = make()
    context.run(manager.__enter__)
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        try:
            if thrown is not None:
                error, thrown = thrown, None
                value = context.run(body.throw, error)
            else:
                value = context.run(body.send, sent)
        except StopIteration as stop:
            context.run(manager.__exit__, None, None, None)
            return stop.value
        except BaseException as error:  # noqa: BLE001 - the block sees it leave, then it propagates
            context.run(manager.__exit__, type(error), error, error.__traceback__)
            raise
        try:
            sent = yield value
        except GeneratorExit as closing:
            try:
                context.run(body.close)
            finally:
                context.run(manager.__exit__, GeneratorExit, closing, None)
            raise
        except BaseException as error:  # noqa: BLE001 - handed to the body, as a plain generator would
            thrown, sent = error, None


def decorate(func: _F, make: _Make, *, what: str) -> _F:
    """``func`` run inside ``make()``: per call, or per resumption for generators and coroutines."""
    if not callable(func):
        raise TypeError(f"{what} decorates a function, got {type(func).__name__} ({func!r:.60})")
    if inspect.isasyncgenfunction(func):
        raise TypeError(
            f"{what} cannot decorate the async generator {func.__qualname__}: "
            f"use `with {what}:` inside its body around the code that needs it"
        )
    if inspect.isgeneratorfunction(func):

        @functools.wraps(func)
        def generator(*args: Any, **kwargs: Any) -> Any:
            return (yield from _drive(func(*args, **kwargs), make))

        return generator  # type: ignore[return-value]
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def coroutine(*args: Any, **kwargs: Any) -> Any:
            return await _drive(func(*args, **kwargs), make)

        return coroutine  # type: ignore[return-value]

    @functools.wraps(func)
    def function(*args: Any, **kwargs: Any) -> Any:
        with make():
            return func(*args, **kwargs)

    return function  # type: ignore[return-value]
