"""#1885: the forward saves a tensor for the backward that the backward no longer unpacks.

``x + frozen.sin()`` with ``frozen`` not requiring grad: the forward still saves
``frozen`` (sin's backward would need it), but the backward's gradient for it is
dead, so dead-code elimination drops the backward's ``frozen, = C0`` unpacking.
At the parent ``match_fw_and_bw_saved_for_bw_proxies`` (run by
``rematerialize_forward_and_backward``) pairs the forward's saved list with what
the backward's unpack_sequence symbols produce: one against none, and its
length assertion fails. Fixed by 150d7e0be, which pairs it with the backward's
``saved_for_backward`` argument instead.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import executors, same_forward_and_backward  # noqa: E402

import thunder  # noqa: E402


class AddFrozen(torch.nn.Module):
    def forward(self, frozen: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return x + frozen.sin()


def main() -> None:
    torch.manual_seed(0)
    model = AddFrozen()
    jitted = thunder.jit(model, executors=executors())
    frozen = torch.randn(2)
    x = torch.randn(3, 2, requires_grad=True)
    same_forward_and_backward(model, jitted, frozen, x)
    print("ok")


if __name__ == "__main__":
    main()
