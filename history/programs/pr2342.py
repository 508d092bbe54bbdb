"""#2342: ``torch.randint`` without a dtype gives a float32 tensor under Thunder (eager: int64).

``ltorch.randint`` takes its default dtype from ``maybe_get_default_dtype`` (the default float dtype), so
``torch.randint(0, 5, (2, 3))`` is traced as ``prims.randint(..., dtype=float32)`` and the jitted function returns
float32 integers where eager PyTorch returns int64. The fix defaults to torch.int64. The values are random, so the
program compares the dtype, the shape and the range (its own form of the fix's test_randint_default_dtype).
"""

from __future__ import annotations

import torch

import thunder


def draw() -> torch.Tensor:
    return torch.randint(0, 5, (2, 3))


def main() -> None:
    expected = draw()
    got = thunder.jit(draw)()
    assert got.dtype == expected.dtype, f"dtype {got.dtype}, eager {expected.dtype}"
    assert got.shape == expected.shape, f"shape {tuple(got.shape)}, eager {tuple(expected.shape)}"
    assert bool(((got >= 0) & (got < 5)).all()), "values outside [0, 5)"
    print("ok")


if __name__ == "__main__":
    main()
