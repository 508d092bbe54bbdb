"""What the replays add to a compile, side by side: update-wrong-value's, gradient-wrong-value's, output-wrong-value's.

Each round compiles and calls each program twice under strict, once as shipped and once with
the replays switched off (``program_updates._program_update_values`` answering nothing, and
``gradient_wrong_value="off"``, ``output_wrong_value="off"``), in alternating order, and prints the ratio of the two times per
program (median and range over the rounds: these machines are shared, so only the ratio of
neighbours means much). The first three programs update their inputs (update-wrong-value); the
next two have a backward (gradient-wrong-value and output-wrong-value, replayed on the call's own
inputs); the last two only a forward (output-wrong-value)::

    python benchmarks/replay_cost.py [rounds]
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder

from safe_tracectx import STRICT, use_policy
from safe_tracectx.hooks import installed, program_updates

T = torch.Tensor


def optimizer_step(p0: T, p1: T, p2: T, g0: T, g1: T, g2: T) -> None:
    with torch.no_grad():
        for p, g in ((p0, g0), (p1, g1), (p2, g2)):
            p.add_(g, alpha=-0.1)


def kv_cache(cache: T, k: T, x: T) -> T:
    cache[:, 3].copy_(k)
    return (cache * x).sum(-1)


class Normed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(8)

    def forward(self, x: T) -> T:
        out: T = self.norm(self.conv(x)).relu()
        return out


class Block(torch.nn.Module):
    """A pre-LayerNorm transformer block: attention and a GELU MLP."""

    def __init__(self, width: int = 256, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width))

    def forward(self, x: T) -> T:
        batch, length, width = x.shape
        q, k, v = (t.reshape(batch, length, self.heads, -1).transpose(1, 2) for t in self.qkv(self.norm1(x)).chunk(3, -1))
        attended = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, width))
        out: T = x + self.mlp(self.norm2(x))
        return out


def _programs() -> dict[str, tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]]:
    mlp = _mlp()
    return {
        "optimizer step (3 x 512x512)": (optimizer_step, lambda: tuple(torch.randn(512, 512) for _ in range(6))),
        "KV cache row": (kv_cache, lambda: (torch.zeros(4, 64, 128), torch.randn(4, 128), torch.randn(4, 64, 128))),
        "Conv+BatchNorm, train": (Normed(), lambda: (torch.randn(4, 8, 16, 16),)),
        "MLP 512-2048-512, backward": (mlp, lambda: (torch.randn(64, 512, requires_grad=True),)),
        "transformer block 256, backward": (Block(), lambda: (torch.randn(8, 64, 256, requires_grad=True),)),
        "MLP 512-2048-512, inference": (_inference(_mlp()), lambda: (torch.randn(64, 512),)),
        "transformer block 256, inference": (_inference(Block()), lambda: (torch.randn(8, 64, 256),)),
    }


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512))


def _inference(module: torch.nn.Module) -> torch.nn.Module:
    for parameter in module.parameters():
        parameter.requires_grad_(False)
    return module


def _compile_and_call(function: Callable[..., Any], make: Callable[[], tuple[Any, ...]], replay: bool) -> float:
    original = program_updates._program_update_values
    if not replay:
        program_updates._program_update_values = lambda *a, **k: []
    try:
        arguments = make()
        start = time.perf_counter()
        with installed(), use_policy(STRICT if replay else STRICT.replace(gradient_wrong_value="off", output_wrong_value="off")):
            thunder.jit(function)(*arguments)
        return time.perf_counter() - start
    finally:
        program_updates._program_update_values = original


def main(rounds: int = 7) -> None:
    ratios: dict[str, list[float]] = {name: [] for name in _programs()}
    for index in range(rounds):
        for name, (function, make) in _programs().items():
            order = (True, False) if index % 2 == 0 else (False, True)
            times = {replay: _compile_and_call(function, make, replay) for replay in order}
            ratios[name].append(times[True] / times[False])
    for name, values in ratios.items():
        print(f"{name:32s} replay/off median {statistics.median(values):.2f} "
              f"[{min(values):.2f}-{max(values):.2f}] over {rounds} rounds")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
