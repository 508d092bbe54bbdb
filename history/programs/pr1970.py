"""#1970: a 0-dim tensor is not a weak dtype in Thunder's type promotion: bfloat16 with a float32 scalar tensor gives float32.

Eager PyTorch promotes ``torch.maximum(x_bf16, torch.tensor(0.1))`` to bfloat16 (a 0-dim tensor takes part in
promotion like a Python number); at the parent Thunder's proxies give a 0-dim tensor a strong dtype, so
``ltorch.maximum`` is traced as float32 (convert a to float32, prims.maximum). The torch executor runs
``torch.maximum`` (bfloat16 at run time), and the ``.float()`` that follows is a no-op in the trace and dropped: the
jitted function returns bfloat16 where eager returns float32. The fix gives 0-dim tensors a weak true dtype. (The
fix's test_ltorch_maximum_result_dtype_for_scalar_tensors returns the maximum itself and fails on the trace's dtype;
here the trace's dtype changes what the call returns.)
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import same_as_eager  # noqa: E402

import thunder  # noqa: E402


def floor_at(x: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    return torch.maximum(x, eps).float()


def main() -> None:
    x = torch.linspace(-1, 1, 8, dtype=torch.bfloat16).reshape(2, 4)
    same_as_eager(floor_at, thunder.jit(floor_at), x, torch.tensor(0.125))
    print("ok")


if __name__ == "__main__":
    main()
