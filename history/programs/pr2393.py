"""#2393 (issue #2365): a backward symbol whose output holds None (the gradient of a non-tensor argument) inside a
fusion makes the fusion pass's rematerialization crash in find_cut (AttributeError: 'NoneType' object has no attribute
'name') when the producer and consumer fusions belong to different fusion executors.

torch.logcumsumexp has no Thunder implementation: it is registered automatically as a fallback operator whose backward
symbol, logcumsumexp_vjp, returns one gradient per argument, None for the dimension. In the joint trace that backward
symbol is `(grad_a, None) = logcumsumexp_vjp(...)`. When the fusion pair's executors differ, find_cut takes every output
of the producer's subsymbols the consumer's executor cannot fuse as a required producer variable, None included.

CPU adaptation: issue #2365 came from ThunderFX with nvFuser and torch.compile's fusion executors. Here two fusion
executors of the torch.compile kind stand in: one of our own that fuses only a few elementwise prims, and Thunder's
torch_compile_ex for the rest (with fullgraph off, so Dynamo may graph-break inside the fallback operator).
"""

from __future__ import annotations

import torch

import thunder
import thunder.core.prims as prims
from thunder.executors.torch_compile import TorchCompileExecutor, torch_compile_ex
from thunder.executors.torchex import ex as pytorch_ex
from thunder.extend import ImplInfo, register_executor

elementwise_ex = TorchCompileExecutor(name="torchcompile_elementwise")
_ELEMENTWISE = {prims.add.id, prims.mul.id, prims.exp.id, prims.neg.id, prims.sin.id, prims.cos.id,
                prims.broadcast_in_dim.id, prims.convert_element_type.id}
elementwise_ex._implmap = {op: ImplInfo() for op in pytorch_ex.implmap if op in _ELEMENTWISE}
register_executor(elementwise_ex)


def f(x: torch.Tensor) -> torch.Tensor:
    a = x.cos()
    m = torch.logcumsumexp(a, -1)  # a fallback operator: its backward's output for the dimension is None
    return (a * m).exp()


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(3, 4, requires_grad=True)
    jitted = thunder.jit(f, executors=[elementwise_ex, torch_compile_ex], torch_compile_fullgraph=False)
    got = jitted(x)
    expected = f(x)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(torch.autograd.grad(got.sum(), x), torch.autograd.grad(expected.sum(), x))
    print("ok")


if __name__ == "__main__":
    main()
