"""#2203: the fusion pass runs on the joint forward-backward trace, and dataflow fusion (fusion_type="dataflow") merges
a forward symbol with a backward one that happens to be ready at the same time; the forward/backward split then puts
the merged fusion, which produces a forward output, in the forward, where it reads a cotangent only the backward has.

CPU adaptation: torch.compile's fusion executor stands in for nvFuser, and an operator executor of our own (a negation
it does not fuse) delays the forward symbol exp until the backward's first symbols are ready."""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import same_as_eager  # noqa: E402

import thunder  # noqa: E402
import thunder.core.prims as prims
import thunder.torch as ltorch
from thunder.core.proxies import TensorProxy
from thunder.executors.torch_compile import torch_compile_ex
from thunder.extend import OperatorExecutor, register_executor

splitter = OperatorExecutor("unfused_neg_ex")
register_executor(splitter)
unfused_neg = splitter.register_operator("unfused_neg", meta=lambda a: TensorProxy(like=a), fn=torch.neg)
splitter.register_implementation(ltorch.neg, unfused_neg)
splitter.register_implementation(prims.neg, unfused_neg)


def f(x, w):
    y = x.sin()  # its backward, cos(x) * grad(y), is ready as soon as grad(y) is
    z = (-w).exp()  # exp waits for the unfused negation
    return y, z


def main() -> None:
    torch.manual_seed(0)
    jitted = thunder.jit(f, executors=[splitter, torch_compile_ex], fusion_type="dataflow")
    same_as_eager(f, jitted, torch.randn(3, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True))
    print("ok")


if __name__ == "__main__":
    main()
