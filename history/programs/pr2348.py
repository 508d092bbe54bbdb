"""#2348: a ThunderFX module that creates a buffer (``torch.ones``) and returns it beside its result.

Dynamo's graph of ``forward`` returns ``(add, ones)``: ``ones`` is the new buffer, which eager PyTorch makes with no
grad_fn and ``requires_grad=False``. At the parent Thunder's ThunderFunction (thunder/executors/torch_autograd.py,
connect_to_autograd) marks every output of the split's Thunder module differentiable, so the buffer comes back
requiring grad, attached to the module's autograd node. The next call reads that buffer as an input that requires
grad, and its backward goes through the first call's graph again: RuntimeError "Trying to backward through the
graph a second time". Fixed by f7a29015, where the splitter tells thunder.jit which outputs of the FX graph have no
grad_fn (``is_differentiable_outputs``) and ThunderFunction marks them non-differentiable.

Thunder's regression test (test_thunderfx_with_intermediate_output_marked_as_non_differentiable) needs CUDA only
for its device; here the same module runs on the CPU.
"""

from __future__ import annotations

import copy

import torch

import thunder  # noqa: F401
from thunder.dynamo import thunderfx


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)
        self.register_buffer("buf", None, False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.buf is None:
            self.buf = torch.ones(1, 2, device=x.device)
        return self.fc(x) + self.buf


def main() -> None:
    torch.manual_seed(0)
    eager = Model()
    module = copy.deepcopy(eager)
    jitted = thunderfx(module)
    for _ in range(2):
        x = torch.randn(2, 2)
        expected = eager(x).sum()
        actual = jitted(x).sum()
        torch.testing.assert_close(actual, expected)
        actual.backward()
        expected.backward()
        torch.testing.assert_close(module.fc.weight.grad, eager.fc.weight.grad)
        torch.testing.assert_close(module.fc.bias.grad, eager.fc.bias.grad)
    assert module.buf.requires_grad == eager.buf.requires_grad, "the buffer requires grad (eager's does not)"
    print("ok")


if __name__ == "__main__":
    main()
