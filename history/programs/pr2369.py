"""#2369: the fusion pass's rematerialization updates its producer/consumer pairs one after another; once an earlier
pair has moved a producer's symbol into a consumer (t11 = tanh(x), recomputed in the last backward fusion), a later
pair has t11 both as an input of its producer fusion and as a value its consumer fusion computes itself, and find_cut
joins the same graph node to the source and to the sink (RuntimeError: Failed to compute the min-cut on the graph due
to a path with infinite capacity).

CPU adaptation: torch.compile's fusion executor stands in for nvFuser (its fusion pass runs the same rematerialize),
and an operator executor of our own (a negation it does not fuse) splits the backward of the subtractions into several
fusions, as unfusable operations do in the models where the bug was seen. The program was found by a random search
over small programs at the fix's parent.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import same_as_eager  # noqa: E402

import thunder  # noqa: E402
import thunder.torch as ltorch
from thunder.core.proxies import TensorProxy
from thunder.executors.torch_compile import torch_compile_ex
from thunder.extend import OperatorExecutor, register_executor

splitter = OperatorExecutor("unfused_neg_ex")
register_executor(splitter)
unfused_neg = splitter.register_operator("unfused_neg", meta=lambda a: TensorProxy(like=a), fn=torch.neg)
splitter.register_implementation(ltorch.neg, unfused_neg)


def f(x, y):
    a = y * y
    t = torch.tanh(x)
    b = t - y
    z = a - a
    c = t - z
    return z + b * c


def main() -> None:
    torch.manual_seed(0)
    jitted = thunder.jit(f, executors=[splitter, torch_compile_ex])
    same_as_eager(f, jitted, torch.randn(3, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True))
    print("ok")


if __name__ == "__main__":
    main()
