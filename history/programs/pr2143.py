"""#2143 (commit 97b6a9d9): thunder.transforms.autodiff.forward_and_backward_from_trace without torch_autograd.

With ``torch_autograd=False`` (its default) the function hands over to the VJP-based
``thunder.core.transforms.forward_and_backward_from_trace`` by the qualified name
``thunder.core.transforms...``; #2147 had removed ``import thunder`` from
``thunder/transforms/autodiff.py``, so at the parent the call fails with
``NameError: name 'thunder' is not defined`` before any trace is made. The fix imports
the function. The program splits a small trace with it, runs the forward and the
backward it returns, and compares them with eager PyTorch.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402,F401  (the corpus's shared helpers; the executors option is not used here)

import thunder  # noqa: E402
from thunder.core.transform_common import wrap_return_value_together_with_arguments  # noqa: E402
from thunder.executors.passes import transform_for_execution  # noqa: E402
from thunder.transforms.autodiff import forward_and_backward_from_trace  # noqa: E402


def func(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    d = a + b
    return torch.sin(d * a) + torch.cos(d * b)


def executable(trace):
    return transform_for_execution(trace, executors_list=(*thunder.get_default_executors(), *thunder.get_always_executors())).python_callable()


def main() -> None:
    torch.manual_seed(0)
    a = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    jitted = thunder.jit(func)
    jitted(a.detach(), b.detach())  # no input requires grad: the computation trace is not split
    initial = thunder.last_traces(jitted)[0]
    fw_trace, bw_trace = forward_and_backward_from_trace(wrap_return_value_together_with_arguments(initial))
    fw_out, saved = executable(fw_trace)(a.detach(), b.detach())

    expected = func(a, b)
    (out,) = fw_out["output"]
    torch.testing.assert_close(out, expected)
    expected_grads = torch.autograd.grad(expected, (a, b), torch.ones_like(expected))

    grads = executable(bw_trace)(saved, (torch.ones_like(expected),))
    torch.testing.assert_close(tuple(grads), expected_grads)
    print("ok")


if __name__ == "__main__":
    main()
