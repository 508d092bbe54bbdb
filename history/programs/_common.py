"""What every program of the corpus shares: the executors option, and the check against eager PyTorch."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_leaves


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


def same_as_eager(function: Callable[..., Any], jitted: Callable[..., Any], *inputs: Any, atol: float = 1e-5) -> Any:
    """Thunder's outputs equal eager PyTorch's on copies of ``inputs``, and, where eager's outputs require grad, so do
    Thunder's and the gradients of every input that requires grad (of the outputs' sum): AssertionError otherwise."""
    eager_inputs = [x.detach().clone().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x
                    for x in inputs]
    expected = function(*eager_inputs)
    got = jitted(*inputs)
    torch.testing.assert_close(got, expected, atol=atol, rtol=1e-4)
    differentiable = [(g, e) for g, e in zip(tree_leaves(got), tree_leaves(expected))
                      if isinstance(e, torch.Tensor) and e.requires_grad]
    if not differentiable:
        return got
    assert all(g.requires_grad for g, _ in differentiable), "an output does not require grad (eager's does)"
    sum(g.sum() for g, _ in differentiable).backward()
    sum(e.sum() for _, e in differentiable).backward()
    for index, (x, eager) in enumerate(zip(inputs, eager_inputs)):
        if isinstance(x, torch.Tensor) and x.requires_grad:
            torch.testing.assert_close(x.grad, eager.grad, atol=atol, rtol=1e-4, msg=f"gradient of input {index}")
    return got


def runtime_error(function: Callable[..., Any], *args: Any) -> str | None:
    """The message of the RuntimeError ``function(*args)`` raises (eager's refusals are RuntimeErrors), or None."""
    try:
        function(*args)
    except RuntimeError as error:
        return str(error)
    return None
