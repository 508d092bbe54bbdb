"""Shared settings of the benchmarks (not part of the test suite): `make bench`.

Every comparison is parametrized as rounds x variants, so pytest runs A B A B ...
in one process (or one subprocess per measurement where Thunder caches), and
benchmarks/report.py turns the pytest-benchmark JSON into per-round ratios.
"""

from __future__ import annotations

import os
import warnings

os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder  # noqa: F401

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
