"""What each pass run was given: the traces named by its ``input_ids``, found among the states the data file recorded.

A state is recorded by the run that returned it (``output_ids`` beside
``fingerprints``) or, for a trace no recorded run returned, by the run given it
(``input_fingerprints``). A data file of an older safe-tracectx has no
``input_ids``: its runs' inputs are not recorded (None), never guessed from run order::

    >>> runs = [{"label": "a", "fingerprints": [[["sin", ["t0"]]]], "output_ids": [1], "input_ids": []},
    ...         {"label": "b", "fingerprints": [[["cos", ["t1"]]]], "output_ids": [2], "input_ids": [1]},
    ...         {"label": "old", "fingerprints": [[]]}]
    >>> given = inputs_of(runs)
    >>> [g.producer["label"] for g in given[id(runs[1])]], given[id(runs[0])], given[id(runs[2])]
    (['a'], [], None)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from safe_tracectx.auditlog.document_types import Fingerprint, PassRun

__all__ = ["Given", "inputs_of"]


@dataclasses.dataclass(frozen=True)
class Given:
    """One trace a run was given: its fingerprint (None: not recorded) and the run that returned it (None: none did)."""

    fingerprint: Fingerprint | None
    producer: PassRun | None


def _number(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def inputs_of(runs: list[PassRun]) -> dict[int, list[Given] | None]:
    """Per run (by ``id``): the traces it was given, in order; None when the data file does not say."""
    states: dict[int, Fingerprint] = {}
    producers: dict[int, PassRun] = {}
    for run in runs:
        for number, fingerprint in zip(run.get("output_ids") or [], run.get("fingerprints") or []):
            if (key := _number(number)) is not None:
                states[key], producers[key] = fingerprint, run
        for text, fingerprint in (run.get("input_fingerprints") or {}).items():
            if (key := _number(text)) is not None:
                states.setdefault(key, fingerprint)
    found: dict[int, list[Given] | None] = {}
    for run in runs:
        numbers = run.get("input_ids")
        if not isinstance(numbers, list):
            found[id(run)] = None
            continue
        keys = [_number(n) for n in numbers]
        found[id(run)] = [Given(None, None) if k is None else Given(states.get(k), producers.get(k)) for k in keys]
    return found
