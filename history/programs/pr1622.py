"""#1622: forward/backward rematerialization joins the traces while the backward's recomputed values keep forward names.

A Linear-GELU-Linear MLP with torch.compile's fusion executor and the compile
option ``use_forward_backward_rematerialization=True`` (at the parent the joint
rematerialization ran only with it; the fix made it the default, where the kwarg
is an unused compile option). The backward recomputes the GELU's intermediates
from the saved ``linear`` output under their forward names; at the parent
``rematerialize_forward_and_backward`` joins forward and backward into one trace
without renaming them, so each is defined twice and the min-cut leaves the
backward fusion using two of them that nothing in the backward defines (run
with ``--executor torch_compile``: ``name 't15' is not defined``). Fixed by
19f3d5cde, which renames the backward's values ``bw_*`` in the joint trace.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import executors, same_forward_and_backward  # noqa: E402

import thunder  # noqa: E402


def main() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    jitted = thunder.jit(model, executors=executors(), use_forward_backward_rematerialization=True)
    x = torch.randn(4, 16, requires_grad=True)
    same_forward_and_backward(model, jitted, x)
    print("ok")


if __name__ == "__main__":
    main()
