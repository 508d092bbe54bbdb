"""#2617: DebugTransform names its debug symbols after the symbol they wrap; a dotted name
(``torch.ops.aten.log_sigmoid_backward`` in the backward of logsigmoid) makes generated code that calls an
undefined name (``debug_pre_torch``)."""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import same_forward_and_backward  # noqa: E402

import thunder  # noqa: E402
from thunder.dev_utils.debug_transform import debug_execution_trace  # noqa: E402


def main() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LogSigmoid())
    jitted = debug_execution_trace(thunder.jit(model), pre_callback=lambda bsym, *args, **kwargs: f"pre {bsym.sym.name}")
    x = torch.randn(3, 4, requires_grad=True)
    same_forward_and_backward(model, jitted, x)
    print("ok")


if __name__ == "__main__":
    main()
