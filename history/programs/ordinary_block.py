"""An ordinary program: a pre-LayerNorm transformer block, forward and backward, checked against eager PyTorch."""

from __future__ import annotations

import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import executors, same_forward_and_backward  # noqa: E402

import thunder  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.ln2 = torch.nn.LayerNorm(dim)
        self.fc = torch.nn.Linear(dim, 4 * dim)
        self.out = torch.nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        attention = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (attention @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x))))


def main() -> None:
    torch.manual_seed(0)
    model = Block()
    jitted = thunder.jit(model, executors=executors())
    x = torch.randn(2, 8, 32, requires_grad=True)
    same_forward_and_backward(model, jitted, x)
    print("ok")


if __name__ == "__main__":
    main()
