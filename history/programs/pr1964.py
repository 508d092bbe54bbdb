"""#1964: the FSDP transform swaps a parameter for its all-gathered copy only where it is a top-level positional argument.

Two ranks (gloo, CPU). The model concatenates its two parameters, ``torch.cat([self.w1, self.w2])``:
the parameters sit inside a list, so after the FSDP pass ``cat`` still reads the sharded ``t_w1`` and
``t_w2`` (one row each) while the all-gathered copies go unused, and the product with the input cannot
broadcast. Rank 0 runs in this process (so it can be audited), rank 1 in a spawned one; forward and
backward are checked against eager PyTorch on rank 0.
"""

from __future__ import annotations

import datetime
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2


class Concat(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(2, 3))
        self.w2 = torch.nn.Parameter(torch.randn(2, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.cat([self.w1, self.w2], 0)


def run(rank: int, init_file: str) -> None:
    import thunder
    from thunder.distributed import fsdp

    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD,
        timeout=datetime.timedelta(seconds=120),
    )
    try:
        torch.manual_seed(0)
        model = Concat()
        reference = Concat()
        reference.load_state_dict(model.state_dict())
        jitted = fsdp(thunder.jit(model), device=torch.device("cpu"))
        x = torch.randn(4, 3)
        out = jitted(x)
        expected = reference(x)
        torch.testing.assert_close(out, expected)
        out.sum().backward()
        expected.sum().backward()
        if rank == 0:
            # each rank holds the first rows of its shard of w1 and w2 (sharded along dim 0)
            for name, p in jitted.named_parameters():
                full = dict(reference.named_parameters())[name.split(".")[-1]].grad
                assert p.grad is not None, f"no gradient for {name}"
                torch.testing.assert_close(p.grad, full.chunk(WORLD)[rank], msg=f"gradient of {name}")
    finally:
        dist.destroy_process_group()


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        init_file = os.path.join(scratch, "init")
        other = mp.get_context("spawn").Process(target=run, args=(1, init_file))
        other.start()
        try:
            run(0, init_file)
        finally:
            other.join(60)
            if other.is_alive():
                other.terminate()
        if other.exitcode != 0:
            sys.exit(f"rank 1 failed (exit {other.exitcode})")
    print("ok")


if __name__ == "__main__":
    main()
