"""Interleaved rounds, per-round ratios and their 95% bootstrap interval (numpy, fixed seed).

Each round measures every variant once, in an order rotated from round to
round; a ratio pairs a variant with the baseline of the same round, so a slow
stretch of the machine slows both sides of it::

    >>> interval = bootstrap_mean([1.0, 1.02, 0.98, 1.01])
    >>> round(interval.value, 4), interval.low < 1.0025 < interval.high
    (1.0025, True)

The median of the rounds is given beside the mean: one round slowed by other work
on the shared cores (a plain compile of 17 s among 10 s ones) moves the mean of
the ratios, not their median::

    >>> round(bootstrap_median([1.0, 1.02, 0.98, 1.01, 0.6]).value, 4)
    1.0
"""

from __future__ import annotations

import dataclasses
import math
import time
import timeit
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["Interval", "bootstrap_mean", "bootstrap_median", "cpu_timeit", "ratios", "rotated", "run_rounds"]

Samples = dict[str, list[float]]


@dataclasses.dataclass(frozen=True)
class Interval:
    """An estimate (the mean, or the median) of the per-round values and its 95% bootstrap percentile interval."""

    value: float
    low: float
    high: float
    rounds: int

    @property
    def half_width(self) -> float:
        """The larger distance from the estimate to an end of the interval."""
        return max(self.value - self.low, self.high - self.value)


def _bootstrap(values: Sequence[float], estimate: Callable[..., Any], level: float, resamples: int, seed: int) -> Interval:
    data = np.asarray(values, dtype=float)
    if len(data) < 2:
        value = float(estimate(data)) if len(data) else math.nan
        return Interval(value, -math.inf, math.inf, len(data))
    estimates = estimate(np.random.default_rng(seed).choice(data, size=(resamples, len(data)), replace=True), axis=1)
    low, high = np.quantile(estimates, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(estimate(data)), float(low), float(high), len(data))


def bootstrap_mean(values: Sequence[float], *, level: float = 0.95, resamples: int = 10_000, seed: int = 0) -> Interval:
    """The mean of ``values`` with a percentile bootstrap interval (the same seed: the same interval)."""
    return _bootstrap(values, np.mean, level, resamples, seed)


def bootstrap_median(values: Sequence[float], *, level: float = 0.95, resamples: int = 10_000, seed: int = 0) -> Interval:
    """The median of ``values`` with a percentile bootstrap interval (the same seed: the same interval)."""
    return _bootstrap(values, np.median, level, resamples, seed)


def ratios(samples: Mapping[str, Sequence[float]], variant: str, baseline: str) -> list[float]:
    """variant / baseline, round by round."""
    return [v / b for v, b in zip(samples[variant], samples[baseline], strict=True)]


def rotated(names: Sequence[str], round_: int) -> list[str]:
    """``names`` starting at position ``round_`` (each variant runs first, second, ... in turn)."""
    shift = round_ % len(names)
    return [*names[shift:], *names[:shift]]


def run_rounds(
    measure: Mapping[str, Callable[[], float]],
    *,
    rounds: int,
    max_rounds: int | None = None,
    max_seconds: float = math.inf,
    done: Callable[[Samples], bool] = lambda samples: True,
    before_round: Callable[[int], None] = lambda round_: None,
) -> tuple[Samples, str]:
    """At least ``rounds`` interleaved rounds, then more until ``done`` or a cap; the samples and why it stopped.

    ``before_round(i)`` runs before round ``i`` (to set what the round's variants share). The time cap stops
    before a round that would end after it (at the mean pace so far).
    """
    names = list(measure)
    samples: Samples = {name: [] for name in names}
    started = time.monotonic()
    limit = rounds if max_rounds is None else max_rounds
    for round_ in range(limit):
        if round_ >= rounds:
            if done(samples):
                return samples, f"every interval narrow enough after {round_} rounds"
            elapsed = time.monotonic() - started
            if elapsed * (round_ + 1) / round_ > max_seconds:  # one more round would pass the cap
                return samples, f"stopped by the time cap ({max_seconds / 60:g} min) after {round_} rounds"
        before_round(round_)
        for name in rotated(names, round_):
            samples[name].append(measure[name]())
    if max_rounds is None:
        return samples, f"{limit} rounds"
    if done(samples):
        return samples, f"every interval narrow enough after {limit} rounds"
    return samples, f"stopped by the round cap ({max_rounds} rounds)"


def cpu_timeit(stmt: str, namespace: dict[str, Any], *, number: int, repeat: int = 3) -> float:
    """Seconds of process CPU time per execution of ``stmt``: the best of ``repeat`` loops of ``number``.

    ``timeit`` compiles the statement into its loop (no function call per
    iteration) and pauses the garbage collector while it times.
    """
    timer = timeit.Timer(stmt, globals=namespace, timer=time.process_time)
    return min(timer.repeat(repeat=repeat, number=number)) / number
