"""One compile of Thunder's 4-layer test nanoGPT (default executors, forward + backward), under each installation.

A fresh ``thunder.jit`` per compile (Thunder caches per jitted object), so
every compile in the process traces, transforms and splits again; the time is
the process's CPU time (other workers' load on the shared cores does not count
in it), the wall time is kept beside it::

    >>> model, idx = make_model()
    >>> result = compile_once(model, idx)
    >>> result.misses, result.cpu > result.gc > 0
    (1, True)
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, Final, NamedTuple, TypeVar

import thunder
import torch
from compile_probes import gc_seconds, pass_timer

from safe_tracectx._support.pass_catalog import FUSION_METHODS, TRANSFORM_METHODS
from safe_tracectx.hooks import install, is_installed, uninstall
from safe_tracectx.hooks import patching

__all__ = [
    "CONFIG", "HOOKED_PASSES", "STACK_CHUNK_WORDS", "VARIANTS", "Compile", "alignment", "compile_once", "hooked_objects",
    "make_model", "measure", "pass_hooks_off", "snapshot", "under_frame",
]

T = TypeVar("T")

#: Thunder's tests build nanoGPT configs from GPTConfig(dropout=0, ...); small widths keep the compile ~10 s.
CONFIG: Final[dict[str, Any]] = {"dropout": 0.0, "block_size": 64, "vocab_size": 256, "n_layer": 4, "n_head": 4, "n_embd": 64}
BATCH: Final = (2, 32)


def make_model() -> tuple[torch.nn.Module, torch.Tensor]:
    """The model (fixed seed) and a batch of token ids used as input and targets."""
    nanogpt: Any = importlib.import_module("thunder.tests.nanogpt_model")
    torch.manual_seed(0)
    model: torch.nn.Module = nanogpt.GPT(nanogpt.GPTConfig(**CONFIG))
    idx = torch.randint(0, CONFIG["vocab_size"], BATCH, generator=torch.Generator().manual_seed(0))
    return model, idx


class Compile(NamedTuple):
    """One compile: CPU, wall and garbage-collector seconds; Thunder's cache misses (1: it compiled)."""

    cpu: float
    wall: float
    gc: float
    misses: int


def compile_once(model: torch.nn.Module, idx: torch.Tensor) -> Compile:
    """A fresh ``thunder.jit`` of ``model``, forward and backward (the backward compiles at the first one)."""
    model.zero_grad(set_to_none=True)
    gc.collect()
    cpu, wall, collected = time.process_time(), time.perf_counter(), gc_seconds()
    jitted = thunder.jit(model)
    _, loss = jitted(idx, idx)
    loss.backward()
    cpu, wall, collected = time.process_time() - cpu, time.perf_counter() - wall, gc_seconds() - collected
    misses = int(thunder.cache_misses(jitted))
    del jitted, loss
    return Compile(cpu, wall, collected, misses)


@contextlib.contextmanager
def pass_hooks_off() -> Iterator[None]:
    """Benchmark only: an ``install()`` started inside hooks set/reset and proxy naming, no pass at all."""
    plan, hook_classes = patching.plan, getattr(patching, "hook_classes")

    def without_passes() -> list[patching.Patch]:
        return [p for p in plan() if not hasattr(p.replacement, "__safe_tracectx_pass__")]

    setattr(patching, "plan", without_passes)
    setattr(patching, "hook_classes", lambda: None)
    try:
        yield
    finally:
        setattr(patching, "plan", plan)
        setattr(patching, "hook_classes", hook_classes)


@contextlib.contextmanager
def installation(variant: str) -> Iterator[None]:
    """The installation of ``variant`` around a block (nothing for "plain")."""
    if variant == "plain":
        yield
        return
    if variant == "strict, pass hooks off":
        with pass_hooks_off():
            install("strict")
    else:
        install("strict", audit=variant == "strict+audit")
    try:
        yield
    finally:
        uninstall()


#: The variants of the compile benchmark, baseline first, and those with every pass hooked.
VARIANTS: Final = ("plain", "strict, pass hooks off", "strict", "strict+audit")
HOOKED_PASSES: Final = ("strict", "strict+audit")


def snapshot() -> dict[tuple[str, str], Any]:
    """Every name the hooks may rebind, in every loaded module, and the hookable methods of every class."""
    from thunder.core.transform_common import Transform
    from thunder.extend import FusionExecutor

    names = {"set_tracectx", "reset_tracectx", "get_tracectx", "make_proxy_name"}
    names |= {spec.attribute for spec in importlib.import_module("safe_tracectx._support.pass_catalog").PASSES}
    found: dict[tuple[str, str], Any] = {}
    for module_name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", None) or {}
        for name in names & namespace.keys():
            found[(module_name, name)] = namespace[name]
    for base, methods in ((Transform, TRANSFORM_METHODS), (FusionExecutor, FUSION_METHODS)):
        classes: list[type] = [base]
        stack: list[type] = list(base.__subclasses__())
        while stack:
            cls = stack.pop()
            classes.append(cls)
            stack.extend(cls.__subclasses__())
        for cls in classes:
            for name in (*methods, "__init_subclass__"):
                found[(f"{cls.__module__}.{cls.__qualname__}@{id(cls)}", name)] = cls.__dict__.get(name)
    return found


def hooked_objects(now: dict[tuple[str, str], Any], before: dict[tuple[str, str], Any]) -> list[str]:
    """What differs from ``before`` (or is one of our hooks anywhere): empty once every original is back."""
    changed = [f"{m}.{n}" for (m, n), value in now.items() if (m, n) in before and before[(m, n)] is not value]
    ours = [
        f"{m}.{n}"
        for (m, n), value in now.items()
        if not m.startswith("safe_tracectx") and str(getattr(value, "__module__", "")).startswith("safe_tracectx")
    ]
    return sorted({*changed, *ours})


#: CPython 3.11 keeps frames on a data stack of 16 KiB chunks. A call that does not fit in the last chunk maps a
#: new one and its return unmaps it, so a loop calling there maps and unmaps on every call. Where Thunder's
#: busiest calls fall against a chunk's end depends on the caller's stack depth, to the word: one plain compile
#: maps 168,000 16 KiB chunks at one depth and 263,000 at another (the same count, compile after compile, at a
#: given depth), and its time moves by several per cent with them. Each of the hooks' frames moves that
#: alignment as well. So a ratio at one depth measures the alignment as much as the hooks; rounds move the depth
#: over the whole of a chunk (benchmarks/NOTES.md).
STACK_CHUNK_WORDS: Final = 16 * 1024 // 8
#: Words per padding frame: a frame that needs more than 16 KiB less CPython's 1,000-word margin (about 1,030
#: words) gets a 32 KiB chunk of its own, which would start the compile with more room than any caller leaves.
_PART: Final = 512
_GOLDEN: Final = (5**0.5 - 1) / 2


def alignment(round_: int) -> int:
    """The extra words of data stack for round ``round_``: spread over a chunk (the golden-ratio sequence)::

    >>> [alignment(r) for r in range(4)]
    [0, 1265, 483, 1749]
    """
    return int((round_ * _GOLDEN) % 1 * STACK_CHUNK_WORDS)


@functools.cache
def _frame_of(words: int) -> Callable[[Callable[[], Any]], Any]:
    assign = f"    {' = '.join(f'v{i}' for i in range(words))} = None\n" if words else ""
    namespace: dict[str, Any] = {}
    exec(f"def call(fn):\n{assign}    return fn()\n", namespace)  # a frame with `words` locals
    return namespace["call"]  # type: ignore[no-any-return]


def under_frame(words: int, fn: Callable[[], T]) -> T:
    """``fn()`` called from frames of ``words`` more words of data stack in all (their locals; a few more for each
    frame of ``_PART`` words past the first)::

    >>> under_frame(2047, lambda: 42)
    42
    """
    if words > _PART:
        return _frame_of(_PART)(lambda: under_frame(words - _PART, fn))  # type: ignore[no-any-return]
    return _frame_of(words)(fn)  # type: ignore[no-any-return]


def measure(
    variant: str, model: torch.nn.Module, idx: torch.Tensor, record: Callable[[Compile, float], None], *, words: int = 0
) -> float:
    """Compile once under ``variant`` (the pass hooks' own time probed), ``words`` deeper on the data stack; check
    it compiled and the hooks are gone.

    ``record`` gets the compile and the pass hooks' own seconds; returns the CPU seconds.
    """
    with installation(variant), pass_timer() as own:
        result = under_frame(words, lambda: compile_once(model, idx))
    if result.misses != 1 or is_installed() or (own["calls"] > 0) != (variant in HOOKED_PASSES):
        raise AssertionError(f"{variant}: {result.misses} cache misses, {own['calls']} pass runs, installed after: "
                             f"{is_installed()}")
    record(result, float(own["seconds"]))
    return result.cpu
