"""An ordinary program: a two-layer GELU MLP, forward and backward, checked against eager PyTorch."""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import executors, same_forward_and_backward  # noqa: E402

import thunder  # noqa: E402


def main() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    jitted = thunder.jit(model, executors=executors())
    x = torch.randn(4, 16, requires_grad=True)
    same_forward_and_backward(model, jitted, x)
    print("ok")


if __name__ == "__main__":
    main()
