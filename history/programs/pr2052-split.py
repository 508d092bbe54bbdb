"""#2052 (probe): the forward/backward split moves the write-back of an input's update into the backward.

``x.view(-1).mul_(2)`` updates the input ``x`` (which does not require grad) through a view; the result ``x * w`` needs
a backward because ``w`` requires grad. Functionalization writes the update back with ``prims.copy_(t, x)`` at the end
of the computation trace; since #1956 (ba561bf7, 2025-05-20) ``split_into_forward_and_backward`` keeps a ``copy_`` in
the forward only when its destination is already known to the forward when the copy is reached (walking the joint
trace backwards), and ``x`` is not (functionalization has replaced it among the returned arguments), so the copy goes
into the backward. The call returns the right values and leaves the caller's ``x`` as it was; the update happens only
if and when the backward runs. Eager PyTorch updates ``x`` during the forward. #2052 makes alias updating the default,
whose trace writes into ``x`` in the forward.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import executors  # noqa: E402

import thunder  # noqa: E402


def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    x.view(-1).mul_(2)  # x does not require grad: eager updates it here
    return x * w


def main() -> None:
    torch.manual_seed(0)
    x, w = torch.randn(3, 4), torch.randn(3, 4, requires_grad=True)
    x_eager, w_eager = x.clone(), w.detach().clone().requires_grad_(True)
    expected = f(x_eager, w_eager)
    got = thunder.jit(f, executors=executors())(x, w)
    torch.testing.assert_close(
        x, x_eager, msg=lambda m: f"after the forward the caller's tensor differs from eager's: {m}"
    )
    torch.testing.assert_close(got, expected)
    got.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(w.grad, w_eager.grad)
    torch.testing.assert_close(x, x_eager, msg=lambda m: f"after the backward the caller's tensor differs: {m}")
    print("ok")


if __name__ == "__main__":
    main()
