"""Shared settings of the benchmarks (not part of the test suite): `make bench`.

Every comparison runs as interleaved rounds of its variants in one process;
benchmarks/report.py turns the pytest-benchmark JSON into per-round ratios
and their 95% bootstrap intervals. Each setting can be changed from the
environment (``BENCH_...``).
"""

from __future__ import annotations

import os
import warnings

os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder  # noqa: F401


def _setting(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


#: Rounds of the pytest-parametrized comparisons (check_trace scaling).
ROUNDS = int(_setting("BENCH_ROUNDS", 5))
#: Rounds of the micro benchmarks timed with timeit (enter/exit, get_tracectx).
MICRO_ROUNDS = int(_setting("BENCH_MICRO_ROUNDS", 30))
#: Rounds of lint against ast.parse (seconds each).
LINT_ROUNDS = int(_setting("BENCH_LINT_ROUNDS", 6))
#: The compile: at least this many rounds after the warm-up, then until every interval is narrow or a cap.
COMPILE_MIN_ROUNDS = int(_setting("BENCH_COMPILE_MIN_ROUNDS", 8))
COMPILE_MAX_ROUNDS = int(_setting("BENCH_COMPILE_MAX_ROUNDS", 60))
COMPILE_MAX_MINUTES = _setting("BENCH_COMPILE_MAX_MINUTES", 22)
#: The half-width of the 95% interval of each compile ratio to reach (0.01: ±1%).
HALF_WIDTH = _setting("BENCH_COMPILE_HALF_WIDTH", 0.01)
#: Rounds of the per-call costs of the accounting.
COST_ROUNDS = int(_setting("BENCH_COST_ROUNDS", 10))
