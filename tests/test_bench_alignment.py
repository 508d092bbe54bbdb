"""The compile benchmark's stack padding (benchmarks/nanogpt_compile.py): each round's depth on CPython's data stack.

A ratio measured at one depth measures where Thunder's calls fall against a
16 KiB chunk as much as the hooks (benchmarks/NOTES.md), so the rounds move the
depth over a whole chunk, in frames small enough never to get a chunk of their own.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def compile_bench() -> Any:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module("nanogpt_compile")
    finally:
        sys.path.remove(str(BENCHMARKS))


def _padding_frames() -> list[FrameType]:
    frame: FrameType | None = sys._getframe(1)
    found = []
    while frame is not None:
        if frame.f_code.co_name == "call" and frame.f_code.co_filename == "<string>":
            found.append(frame)
        frame = frame.f_back
    return found


@pytest.mark.parametrize("words", [0, 1, 511, 512, 513, 1037, 2047])
def test_the_padding_holds_exactly_the_words_asked_for_in_frames_of_at_most_512(compile_bench: Any, words: int) -> None:
    frames = compile_bench.under_frame(words, _padding_frames)
    locals_ = [f.f_code.co_nlocals - 1 for f in frames]  # each frame's own locals, less its parameter fn
    assert sum(locals_) == words and max(locals_) <= 512, locals_


def test_the_rounds_spread_over_one_chunk(compile_bench: Any) -> None:
    words = [compile_bench.alignment(r) for r in range(16)]
    assert words[0] == 0 and all(0 <= w < compile_bench.STACK_CHUNK_WORDS for w in words)
    eighths = {w * 8 // compile_bench.STACK_CHUNK_WORDS for w in words}
    assert eighths == set(range(8)), words  # 16 rounds reach every eighth of the chunk


def test_the_padding_returns_what_the_call_returns_and_lets_its_errors_through(compile_bench: Any) -> None:
    assert compile_bench.under_frame(1500, lambda: "compiled") == "compiled"

    def fails() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        compile_bench.under_frame(1500, fails)
