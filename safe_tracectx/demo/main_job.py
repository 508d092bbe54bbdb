"""The main job: a small GPT compiled with thunder.jit and the torch.compile executor, audited.

One forward and backward step on the CPU under the strict policy. The blocks
are checkpointed, so Thunder's backward recompute renames outputs (``bw_``),
and the torch.compile executor runs fusion rematerialization.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import TextIO


def demo_step(out: TextIO, started: float | None = None) -> None:
    """Build, compile and run one training step, printing progress (seconds since ``started``) to ``out``."""
    # Inductor's per-process vector-ISA self-test starts six Python processes (~12 s on 2 cores);
    # skipping it keeps the ISA choice from /proc/cpuinfo.
    os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")
    started = time.perf_counter() if started is None else started

    def progress(message: str) -> None:
        print(f"[{time.perf_counter() - started:5.1f}s] {message}", file=out, flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import thunder
        import torch
        from thunder.executors.torch_compile import torch_compile_ex

    from safe_tracectx.demo.model import GPTConfig, tiny_gpt

    config = GPTConfig()
    progress(
        f"building a GPT ({config.n_layer} checkpointed block, n_embd={config.n_embd}, "
        f"block_size={config.block_size}) on the CPU"
    )
    model = tiny_gpt(seed=0)
    generator = torch.Generator().manual_seed(0)
    idx = torch.randint(0, config.vocab_size, (2, config.block_size), generator=generator)
    targets = torch.randint(0, config.vocab_size, (2, config.block_size), generator=generator)
    jitted = thunder.jit(model, executors=[torch_compile_ex])
    progress("forward: tracing, autodiff, fusion + remat, torch.compile of the fusions (the slow part) ...")
    _, loss = jitted(idx, targets)
    progress(f"forward done, loss {loss.item():.4f}; backward ...")
    loss.backward()
    progress("backward done")


if __name__ == "__main__":  # python -m safe_tracectx.demo.main_job (what `safe-tracectx sweep -m` runs)
    import sys

    demo_step(sys.stdout)
