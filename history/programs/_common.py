"""What every program of the corpus shares: the executors option, and the check against eager PyTorch."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

import torch


def executors(argv: Sequence[str] | None = None) -> list[Any] | None:
    """``--executor default|torch_compile|torch_compile_first``: Thunder's default executors, torch.compile's
    alone, or torch.compile's ahead of the default ones."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--executor", choices=("default", "torch_compile", "torch_compile_first"), default="default")
    chosen = parser.parse_args(argv).executor
    if chosen == "default":
        return None
    from thunder.executors.torch_compile import torch_compile_ex

    if chosen == "torch_compile_first":
        from thunder.extend import get_default_executors

        return [torch_compile_ex, *get_default_executors()]
    return [torch_compile_ex]


def same_forward_and_backward(
    module: torch.nn.Module, jitted: Callable[..., torch.Tensor], *inputs: torch.Tensor, atol: float = 1e-5
) -> None:
    """Thunder's output and gradients equal eager PyTorch's (AssertionError otherwise)."""
    eager_inputs = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
    expected = module(*eager_inputs)
    expected.sum().backward()
    expected_grads = [p.grad.clone() for p in module.parameters()]
    module.zero_grad()
    got = jitted(*inputs)
    torch.testing.assert_close(got, expected, atol=atol, rtol=1e-4)
    got.sum().backward()
    for (name, parameter), grad in zip(module.named_parameters(), expected_grads):
        assert parameter.grad is not None, f"no gradient for {name}"
        torch.testing.assert_close(parameter.grad, grad, atol=atol, rtol=1e-4, msg=f"gradient of {name}")
    for x, eager in zip(inputs, eager_inputs):
        if x.requires_grad:
            torch.testing.assert_close(x.grad, eager.grad, atol=atol, rtol=1e-4)
