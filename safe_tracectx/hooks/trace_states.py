"""Which trace a pass was given: a number for each state of a trace that a recorded pass run returned.

A recorded pass run gives each trace it returns a new number (``output_ids``,
beside its ``fingerprints``). A pass given that trace, unchanged since, names
that number (``input_ids``); a trace no recorded run returned, or one changed
since (the first trace of a compilation, one built by hand), gets a number of
its own and its fingerprint is recorded with the run (``input_fingerprints``).
A report then shows each pass beside the very trace it was given, whatever ran
in between (another compilation, the other side of the pair, a nested pass)::

    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx.hooks.trace_states import given, returned
    >>> trace = TraceCtx()
    >>> number = returned(trace)
    >>> given(trace) == number
    True
    >>> trace.bound_symbols.append(None)  # changed since: not the state that was returned
    >>> given(trace) is None
    True
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any, Final

from safe_tracectx.traces.fingerprint import packed_fingerprint

__all__ = ["given", "inputs_given", "new_number", "returned"]

_numbers: Final = itertools.count(1)
#: id(trace) -> (weak reference, number of the state returned last, the bound symbols it had then).
_latest: Final[dict[int, tuple[weakref.ref[Any], int, tuple[int, ...]]]] = {}


def _symbols(trace: Any) -> tuple[int, ...]:
    return tuple(map(id, trace.bound_symbols))


def new_number() -> int:
    """A number no trace state of this process had."""
    return next(_numbers)


def returned(trace: Any) -> int:
    """``trace`` was returned by a recorded pass run: the number of its state now."""
    number, key = new_number(), id(trace)

    def forget(ref: weakref.ref[Any]) -> None:
        if _latest.get(key, (None,))[0] is ref:
            del _latest[key]

    _latest[key] = (weakref.ref(trace, forget), number, _symbols(trace))
    return number


def given(trace: Any) -> int | None:
    """The number of the state ``trace`` is in, if a recorded pass run returned it so; else None."""
    entry = _latest.get(id(trace))
    if entry is None or entry[0]() is not trace or entry[2] != _symbols(trace):
        return None
    return entry[1]


def inputs_given(inputs: list[Any]) -> tuple[list[int], dict[str, str]]:
    """The number of each input's state, and the (packed) fingerprint of each one no recorded pass run returned so."""
    numbers: list[int] = []
    prints: dict[str, str] = {}
    for trace in inputs:
        number = given(trace)
        if number is None:
            number = new_number()
            prints[str(number)] = packed_fingerprint(trace)
        numbers.append(number)
    return numbers, prints
