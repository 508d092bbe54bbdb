"""#2007: with ``cache="symbolic values"``, the gradient of a function that reads an input's shape fails while Thunder
builds the forward (RuntimeError: Detected a cycle while swapping; the cycle includes {i0}).

``f(x) = (x * x.shape[0]).sum()`` with x requiring grad: the shape is an IntegerProxy i0 of the computation trace.
The augmented forward pass (augmented_forward_pass_trace, thunder/core/transforms.py) interprets the trace with
interpret_trace_to_trace (thunder/core/trace_interpreter.py), whose swap map ends up mapping i0 to i0 itself, and
BoundSymbol.from_bsym_swap_proxies (thunder/core/symbol.py) follows the map from i0 to i0 and takes the repeated visit
for a cycle. Fixed by 83bd630f ("add trace checking to jit"), whose change to from_bsym_swap_proxies stops at an entry
that maps a proxy to itself."""

from __future__ import annotations

import torch

import thunder


def f(x: torch.Tensor) -> torch.Tensor:
    return (x * x.shape[0]).sum()


def main() -> None:
    torch.manual_seed(0)
    jitted = thunder.jit(f, cache="symbolic values")
    for size in (2, 5):  # the second size reuses the symbolic-values cache entry
        x = torch.randn(size, requires_grad=True)
        actual = jitted(x)
        expected_x = x.detach().clone().requires_grad_()
        expected = f(expected_x)
        torch.testing.assert_close(actual, expected)
        actual.backward()
        expected.backward()
        torch.testing.assert_close(x.grad, expected_x.grad)
    print("ok")


if __name__ == "__main__":
    main()
