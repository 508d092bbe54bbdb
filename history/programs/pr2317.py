"""#2317: activation checkpointing where a recomputed value needs another recomputed value first.

Inside ``torch.utils.checkpoint`` the region ``b = sin(x); a = exp(b); sin(a * b)``
is recomputed in the backward. The first backward symbol needs ``a * b``, whose
recomputation needs ``a`` and ``b``; at the parent the recompute pass
(``InsertRecomputationsProcessor`` in ``grad_transform_on_trace``) inserts the
producers in reverse argument order, so ``bw_a = exp(bw_b)`` lands before
``bw_b = sin(x)`` and the backward fails (UnboundLocalError). Fixed by
db809bbcc, which sorts the recomputed symbols by their data flow.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.utils.checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import executors, same_forward_and_backward  # noqa: E402

import thunder  # noqa: E402


def region(x: torch.Tensor) -> torch.Tensor:
    b = x.sin()
    a = b.exp()  # a recomputed value that needs the recomputed b
    return (a * b).sin()  # the backward needs a * b first: its recomputation needs a and b


class Checkpointed(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.utils.checkpoint.checkpoint(region, x, use_reentrant=False)


def main() -> None:
    torch.manual_seed(0)
    model = Checkpointed()
    jitted = thunder.jit(model, executors=executors())
    x = torch.randn(3, 4, requires_grad=True)
    same_forward_and_backward(model, jitted, x)
    print("ok")


if __name__ == "__main__":
    main()
