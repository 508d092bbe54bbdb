"""#1545: the torch.compile executor builds its region trace without the names of the subsymbols' outputs.

``sigmoid`` has no PyTorch-executor implementation of its own, so the torch.compile executor fuses it
whole and, when it re-traces the region for execution, descends into its subsymbols. The region trace
knows only the names of the top-level outputs, so the proxy made for the first subsymbol's result is
named ``t0`` again, the name the subsymbol's output already has, and the swap maps ``t0`` onto itself.
Checked against eager PyTorch (forward only: the fusion fails while compiling the forward).
"""

from __future__ import annotations

import torch

import thunder
from thunder.executors.torch_compile import torch_compile_ex


def gate(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x) * 2


def main() -> None:
    torch.manual_seed(0)
    jitted = thunder.jit(gate, executors=[torch_compile_ex])
    x = torch.randn(3)
    torch.testing.assert_close(jitted(x), gate(x))
    print("ok")


if __name__ == "__main__":
    main()
