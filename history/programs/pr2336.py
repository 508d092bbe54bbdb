"""#2336: the operator-executor pass descends into a backward symbol (an in-place scatter_add_ inside a custom
autograd.Function's backward) without giving its subsymbols the BACKWARD tag; the fusion pass then treats them as
forward symbols, and the forward trace uses a cotangent (a backward value) it never defines.

CPU adaptation of Thunder's CUDA test test_complex_backward_custom_autograd: torch.compile's fusion executor stands in
for nvFuser, restricted to nvFuser's coverage at the time (no update_aliases, randn, randint, scatter_add), with the
test's dataflow fusion."""

from __future__ import annotations

import torch

import thunder
import thunder.core.prims as prims
import thunder.torch as ltorch
from thunder.executors.torch_compile import TorchCompileExecutor
from thunder.executors.torchex import ex as pytorch_ex
from thunder.extend import ImplInfo

NOT_FUSED = {
    prims.update_aliases.id,
    prims.randn.id,
    prims.randint.id,
    prims.uniform.id,
    prims.scatter_add.id,
    ltorch.randn.id,
    ltorch.randn_like.id,
    ltorch.randint.id,
    ltorch.scatter_add.id,
}
fuser = TorchCompileExecutor(name="torchcompile_nvfuser_like")
fuser._implmap = {op: ImplInfo() for op in pytorch_ex.implmap if op not in NOT_FUSED}


class CustomBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1  # the test returns x itself, which eager PyTorch forbids to compare against after x.add_

    @staticmethod
    def backward(ctx, grad_at_output):
        x = torch.randn_like(grad_at_output)
        index = torch.randint(0, 1, (0, x.shape[-1]), dtype=torch.int64)
        # the descent into scatter_add_'s subsymbols happens in the operator-executor pass
        x.scatter_add_(index=index, src=grad_at_output, dim=-1)
        return grad_at_output * x


def f(a):
    x = a * 1  # not a leaf: torch.compile refuses an in-place update of a leaf that requires grad
    y = CustomBackward.apply(x)
    x.add_(1)  # the in-place op breaks the fusion
    z = x + x
    return y, z


def main() -> None:
    jitted = thunder.jit(f, executors=[fuser], fusion_type="dataflow")
    a = torch.ones(2, 3, requires_grad=True)
    a_eager = a.detach().clone().requires_grad_(True)
    y, z = jitted(a)
    y_eager, z_eager = f(a_eager)
    torch.testing.assert_close(y, y_eager)
    torch.testing.assert_close(z, z_eager)
    torch.manual_seed(0)
    (y.sum() + z.sum()).backward()
    torch.manual_seed(0)
    (y_eager.sum() + z_eager.sum()).backward()
    torch.testing.assert_close(a.grad, a_eager.grad)
    print("ok")


if __name__ == "__main__":
    main()
