"""The decorator form of every manager: a fresh block per call, per resumption of a generator or coroutine.

The block is active while the body runs and not while a generator or
coroutine is suspended, so it never leaks into the caller between resumptions::

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
    """Run ``body`` (a generator or coroutine) one step at a time, each step inside a fresh ``make()`` block."""
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        with make():
            try:
                if thrown is not None:
                    error, thrown = thrown, None
                    value = body.throw(error)
                else:
                    value = body.send(sent)
            except StopIteration as stop:
                return stop.value
        try:
            sent = yield value
        except GeneratorExit:
            with make():
                body.close()
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
