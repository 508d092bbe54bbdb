"""#1282: a ``torch.no_grad()`` region compiled by ThunderFX (torch.compile with Thunder as its backend).

Dynamo's graph of ``func`` is ``_set_grad_enabled(False); y = x @ x; _set_grad_enabled(True); y + x``. At the
parent the splitter hands the whole graph to Thunder, whose ``torch._C._set_grad_enabled`` only warns that it has
no effect under thunder.jit: the matmul is traced and differentiated as if grad were enabled, so the gradient of x
gets the matmul's contribution, which eager PyTorch (where ``y`` is a constant) does not have. Fixed by cc7335cc,
where the splitter sends the nodes inside a no_grad region (and ``_set_grad_enabled`` itself) to inductor.

Thunder's regression test (test_no_grad_ctx_manager) also asserts the new split reason, and wraps the matmul in
``torch.autocast("cuda")``; this program keeps only the no_grad region and compares with eager PyTorch.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import same_as_eager  # noqa: E402

import thunder  # noqa: E402,F401
from thunder.dynamo import ThunderCompiler  # noqa: E402


def func(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        y = x @ x
    return y + x


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(3, 3, requires_grad=True)
    same_as_eager(func, torch.compile(func, backend=ThunderCompiler()), x)
    print("ok")


if __name__ == "__main__":
    main()
