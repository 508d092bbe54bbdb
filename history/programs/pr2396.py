"""#2396 (issue #2365): dead-code elimination replaces an unused output of a kept symbol by None (the mean of
var_mean); the fusion pass's rematerialization then treats that None as one of the producer fusion's variables
(find_cut: AttributeError: 'NoneType' object has no attribute 'name').

CPU adaptation: torch.compile's fusion executor stands in for nvFuser, and an operator executor of our own (a negation
it does not fuse) splits the program into a producer fusion and a consumer fusion, as the unfusable operations of the
issue's program did."""

from __future__ import annotations

import torch

import thunder
import thunder.torch as ltorch
from thunder.core.proxies import TensorProxy
from thunder.executors.torch_compile import torch_compile_ex
from thunder.extend import OperatorExecutor, register_executor

splitter = OperatorExecutor("unfused_neg_ex")
register_executor(splitter)
unfused_neg = splitter.register_operator("unfused_neg", meta=lambda a: TensorProxy(like=a), fn=torch.neg)
splitter.register_implementation(ltorch.neg, unfused_neg)


def f(x):
    a = x.cos()
    v, m = torch.var_mean(a, dim=-1, keepdim=True)  # m is not used
    b = a * v
    s = -b  # not fused: the fusion before it is the producer, the one after it the consumer
    return (s + b).exp()


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    jitted = thunder.jit(f, executors=[splitter, torch_compile_ex])
    torch.testing.assert_close(jitted(x), f(x))
    print("ok")


if __name__ == "__main__":
    main()
