"""#2258: getitem with ``None`` before an advanced index: the trace's shape puts the new axis after the indexed one.

``a[None, idx]`` (a f32[5, 5, 7], idx a 1-D index tensor of 3) is (1, 3, 5, 7) in eager PyTorch; at the parent
``ltorch.getitem``'s decomposition (clang's advanced indexing) gives (3, 1, 5, 7). The torch executor runs
``Tensor.__getitem__`` (right at run time), but a reshape computed from the trace's shape,
``y.reshape(y.shape[0], -1)``, becomes ``reshape(y, (3, 35))``: the jitted function returns f32[3, 35] where eager
returns f32[1, 105]. The fix (split getitem into basic and purely advanced indexing) places the advanced index's
dimensions as PyTorch does (and removes getitem's xfail from the runtime/trace parity check).
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import same_as_eager  # noqa: E402

import thunder  # noqa: E402


def pick_rows(a: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    y = a[None, idx]
    return y.reshape(y.shape[0], -1)


def main() -> None:
    a = torch.arange(175.0).reshape(5, 5, 7)
    same_as_eager(pick_rows, thunder.jit(pick_rows), a, torch.tensor([0, 2, 4]))
    print("ok")


if __name__ == "__main__":
    main()
