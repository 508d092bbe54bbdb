from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Iterator

import pytest

# Skip inductor's per-process vector-ISA self-test (six fresh Python processes, about 12 s here);
# the ISA is still chosen from /proc/cpuinfo.
os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder  # noqa: F401  (imported once, quietly)

from thunder.core.trace import TraceCtx, get_tracectx

import safe_tracectx.policy as policy_module

pytest_plugins = ["pytester"]
# Files mypy checks (tests/test_typing.py); some must not even type-check, so pytest never imports them.
collect_ignore = ["typing", "sweep_cases"]  # sweep_cases: programs the sweep runs, not tests


#: lightning-thunder before 0.2.6 does not rename recomputed outputs in the backward (the seed PR),
#: so its forward and backward traces define the same names: strict mode rejects them (docs/findings.md).
THUNDER_RENAMES_RECOMPUTE = tuple(int(p) for p in thunder.__version__.split(".")[:3]) >= (0, 2, 6)


@pytest.fixture(autouse=True)
def _clean_trace_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test starts and must end with no active trace, no hooks and the default policy."""
    from safe_tracectx.hooks import running_installations

    monkeypatch.delenv(policy_module.ENV_VAR, raising=False)
    policy_module.swap_default_policy(None)
    assert get_tracectx() is None
    yield
    leaked = running_installations()
    if leaked:
        try:
            leaked[0].end()
        except Exception:  # noqa: BLE001 - the assertion below reports the leak
            pass
    policy_module.swap_default_policy(None)
    assert not leaked, f"a test left installations running: {leaked}"
    assert get_tracectx() is None, "a test left a trace active"
    assert policy_module.POLICY_VAR.get() is None, "a test left a use_policy() block open"


@pytest.fixture
def default_recursion_limit() -> Iterator[None]:
    """Python's default recursion limit (1000) for the test: torch's inductor raises it for good (to 2000) the
    first time it compiles in this process, and a test of what the linter does on a RecursionError needs it."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


@pytest.fixture
def make_trace() -> Callable[..., TraceCtx]:
    """A factory of real, empty Thunder traces, optionally with some names."""

    def make(*names: str) -> TraceCtx:
        trace = TraceCtx()
        trace.names.update(names)
        return trace

    return make


# Hypothesis: a healthy budget in the suite; `--hypothesis-profile=long` for long runs.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "suite", max_examples=75, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long", max_examples=5000, stateful_step_count=80, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
# `make soak`: 25,000 examples x 40 steps = 10^6 steps of the state machine.
settings.register_profile(
    "soak", max_examples=25000, stateful_step_count=40, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.load_profile("suite")
