"""update-wrong-value: a step makes the program leave other values in an input it updates in place.

The interpretation's trace and the trace about to run are replayed on the same random
inputs (``hooks.replay``). Before #2052 functionalization wrote the update of a transposed
view back into its base by ``reshape`` (history case pr2052-transpose); here a Transform
breaks a write-back of Thunder 0.2.6 (each ``copy_`` writes its destination into itself,
so the update is lost though the write is still there), and eager PyTorch is the oracle.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import Any, Final, Literal

import pytest
import torch

from copy_rewrites import RewritesCopies

from safe_tracectx import STRICT, BrokenTraceError, use_policy
from safe_tracectx.hooks import audit, installed, program_updates
from safe_tracectx.hooks import replay
from safe_tracectx.hooks.replay import differs, own_work
from safe_tracectx._support import events
from safe_tracectx.policy import AUDIT

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    from thunder.core.transform_common import Transform

T = torch.Tensor
KIND = "update-wrong-value"


class WritesBackNothing(RewritesCopies):
    """Each ``copy_`` of the forward copies its destination into itself: the write stays, the update is lost."""

    def rewrite(self, copy: Any) -> Any:
        return copy.from_bsym(args=(copy.args[1], *copy.args[1:]))


def scaled(x: T) -> T:
    x.mul_(2)
    return x + 1


def transposed(x: T) -> T:
    x.t().mul_(2)
    return x.sum(0)


def row(x: T) -> T:
    x[0].add_(1)
    return x * 3


def cache_row(cache: T, k: T) -> T:
    cache[1].copy_(k[0])
    return cache.sum(1)


def index_copied(x: T) -> T:
    x.index_copy_(0, torch.tensor([1]), torch.ones(1, 3))
    return x.exp()


def swapped(x: T) -> T:
    y = x.swapaxes(0, 1)
    y.sub_(1)
    return x + 1


def noisy(x: T) -> T:
    x.add_(torch.rand_like(x))  # random: two replays would differ, so it is not judged
    return x * 2


PROGRAMS: list[Callable[..., T]] = [scaled, transposed, row, cache_row, index_copied, swapped]


def _inputs(function: Callable[..., T]) -> tuple[T, ...]:
    generator = torch.Generator().manual_seed(1)
    if function is cache_row:
        return torch.zeros(3, 3), torch.randn(2, 3, generator=generator)
    return (torch.randn(2, 3, generator=generator),)


def _ours(log: Any) -> list[Any]:
    return [v for v in log.to_dict()["violations"] if v["kind"] == KIND]


@pytest.mark.parametrize("function", PROGRAMS, ids=lambda f: f.__name__)
def test_silent_where_thunder_updates_the_input_as_eager(function: Callable[..., T]) -> None:
    eager, plain, audited = _inputs(function), _inputs(function), _inputs(function)
    function(*eager)
    thunder.jit(function)(*plain)
    assert all(torch.allclose(a, b) for a, b in zip(eager, plain))
    with audit() as log, use_policy(AUDIT):
        thunder.jit(function)(*audited)
    assert _ours(log) == []


@pytest.mark.parametrize("function", PROGRAMS, ids=lambda f: f.__name__)
def test_strict_raises_before_the_program_runs_where_a_step_loses_the_update(function: Callable[..., T]) -> None:
    eager, plain = _inputs(function), _inputs(function)
    function(*eager)
    thunder.jit(function, transforms=[WritesBackNothing()])(*plain)
    assert not torch.allclose(eager[0], plain[0])  # plain Thunder leaves the caller's input as it was, silently
    given = _inputs(function)
    before = given[0].clone()
    with installed(), use_policy(STRICT), pytest.raises(BrokenTraceError) as raised:
        thunder.jit(function, transforms=[WritesBackNothing()])(*given)
    error = raised.value
    assert error.kind == KIND and error.names == (function.__code__.co_varnames[0],)  # the parameter's name
    assert "replayed on the same random inputs" in str(error) and "elements differ" in str(error)
    assert "write an update of a view back through the view itself" in str(error)
    assert error.culprit is not None and "RewritesCopies.transform_trace_post_optimization" in error.culprit[1]
    assert torch.equal(given[0], before)  # reported before the program ran: the input untouched


def langevin(p: T, g: T) -> T:
    with torch.no_grad():
        p.add_(g, alpha=-0.1).add_(torch.randn_like(p), alpha=0.01)  # prims.randn carries no RANDOM_OP tag
    return p


def counted(x: T, n: T) -> T:
    n.add_(n)  # integers: replayed as zeros, it would change nothing
    x.logical_xor_(x.roll(1)) if x.dtype == torch.bool else x.mul_(2)
    return n * 2


@pytest.mark.parametrize("function", [noisy, langevin], ids=lambda f: f.__name__)
def test_a_program_that_draws_random_numbers_is_not_judged_and_the_users_generator_is_untouched(
    function: Callable[..., T],
) -> None:
    arguments = (torch.zeros(2, 3), torch.ones(2, 3))[: function.__code__.co_argcount]
    choices: list[list[Transform]] = [[], [WritesBackNothing()]]
    for transforms in choices:
        torch.manual_seed(0)
        thunder.jit(function, transforms=transforms)(*(a.clone() for a in arguments))
        plain_next = torch.rand(1)
        torch.manual_seed(0)
        with audit() as log, use_policy(AUDIT):
            thunder.jit(function, transforms=transforms)(*(a.clone() for a in arguments))
        assert torch.equal(torch.rand(1), plain_next)  # the replay drew nothing from the user's generator
        assert _ours(log) == []


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_integer_and_bool_inputs_are_replayed_with_values_that_tell(dtype: torch.dtype) -> None:
    x, n = torch.ones(2, 3).to(dtype), torch.zeros(3, dtype=torch.int64)
    with installed(), use_policy(STRICT), pytest.raises(BrokenTraceError, match="replayed on the same random inputs"):
        thunder.jit(counted, transforms=[WritesBackNothing()])(x, n)


def test_judged_under_no_grad_with_a_parameter_that_requires_grad() -> None:
    def accumulate(x: T, w: T, buf: T) -> T:
        y = x @ w
        buf.add_(y.sum(0))
        return y

    x, w, buf = torch.randn(2, 3), torch.randn(3, 3, requires_grad=True), torch.zeros(3)
    with torch.no_grad(), installed(), use_policy(STRICT), pytest.raises(BrokenTraceError, match="replayed on the same random inputs"):
        thunder.jit(accumulate, transforms=[WritesBackNothing()])(x, w, buf)


def test_judged_with_the_symbolic_values_cache() -> None:
    def scaled_by(x: T, a: float) -> T:
        x.mul_(a)
        return x + 1

    with installed(), use_policy(STRICT), pytest.raises(BrokenTraceError, match="replayed on the same random inputs"):
        thunder.jit(scaled_by, cache="symbolic values", transforms=[WritesBackNothing()])(torch.ones(3), 2.0)


def test_inputs_the_replay_cannot_make_or_over_the_budget_are_not_judged_and_warn_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def scaled_beside(x: T, s: T) -> T:
        x.mul_(2)
        return s.float() + 1

    given = [(torch.ones(4), torch.ones(4).to(torch.float8_e4m3fn)), (torch.ones(4), torch.ones(4))]
    monkeypatch.setattr(replay, "BUDGET_BYTES", 16)  # the second program's inputs take 32 bytes
    for x, s in given:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no "could not check" from us
            with audit() as log, use_policy(AUDIT):
                thunder.jit(scaled_beside, transforms=[WritesBackNothing()])(x, s)
        assert _ours(log) == []


def test_inputs_sharing_storage_are_not_judged() -> None:
    def both(a: T, b: T) -> T:
        a.mul_(2)
        return b + 1

    x = torch.randn(2, 3)
    with audit() as log, use_policy(AUDIT):
        thunder.jit(both, transforms=[WritesBackNothing()])(x, x)
    assert _ours(log) == []


def test_the_replay_is_not_in_the_audit(monkeypatch: pytest.MonkeyPatch) -> None:
    def passes_run(replaying: bool) -> list[str]:
        if not replaying:
            monkeypatch.setattr(program_updates, "_program_update_values", lambda *a, **k: [])
        with audit() as log, use_policy(AUDIT):
            thunder.jit(transposed)(torch.randn(2, 3))
        monkeypatch.undo()
        document = log.to_dict()
        return [run["label"] for run in document["pass_runs"]]

    assert passes_run(True) == passes_run(False)


def test_own_work_emits_nothing_and_leaves_the_context_as_it_was() -> None:
    seen: list[Any] = []
    events.sinks.append(seen.append)
    try:
        own_work(lambda: events.emit("trace_set", trace=None))
        assert seen == [] and events.own_work.get() is False
        events.emit("trace_set", trace=None)
        assert len(seen) == 1
    finally:
        events.sinks.remove(seen.append)


#: The checks that replay the program (and so run its executors' implementations once more), by replay: the
#: replay of what the program returns reports three kinds, and runs while one of them is on.
REPLAYS = (("update_wrong_value",), ("output_wrong_value", "output_aliases_input", "metadata_mismatch"),
           ("gradient_wrong_value",))
REPLAYED_CHECKS = tuple(check for replay in REPLAYS for check in replay)
OFF: Final[Literal["off"]] = "off"


def _calls_of_a_counting_executor(policy: Any, *, updates: bool = True) -> int:
    """How often a user's executor's implementation of cos runs for a program that is differentiated, compiled and
    called once: one that ``updates`` its input (the gradient replay leaves it to the update replay), or not."""
    from thunder.core import prims
    from thunder.extend import OperatorExecutor

    calls = []

    def counting_cos(a: T) -> T:
        calls.append(a)
        return torch.cos(a)

    executor = OperatorExecutor("test_counting_cos", version="1")
    counted = executor.register_operator("counted_cos", like=prims.cos, fn=counting_cos)
    executor.register_implementation(prims.cos, counted)

    def program(x: T, buffer: T) -> T:
        if updates:
            buffer.add_(1)
        return x.cos() * buffer

    jitted = thunder.jit(program, executors=[executor, *thunder.get_default_executors()])
    with installed(policy) if policy is not None else contextlib.nullcontext():
        jitted(torch.randn(3, requires_grad=True), torch.ones(3)).sum().backward()
    return len(calls)


@pytest.mark.parametrize("updates", [True, False])
def test_checks_switched_off_run_no_replay_the_users_executor_runs_as_often_as_plain(updates: bool) -> None:
    plain = _calls_of_a_counting_executor(None, updates=updates)
    assert _calls_of_a_counting_executor(STRICT, updates=updates) > plain  # the replays run it (README)
    off = STRICT.replace(**dict.fromkeys(REPLAYED_CHECKS, OFF))
    assert _calls_of_a_counting_executor(off, updates=updates) == plain


@pytest.mark.parametrize("checks", REPLAYS, ids=lambda checks: checks[0])
def test_each_replay_switched_off_runs_the_users_executor_less(checks: tuple[str, ...]) -> None:
    updates = checks != ("gradient_wrong_value",)
    assert _calls_of_a_counting_executor(STRICT.replace(**dict.fromkeys(checks, OFF)), updates=updates) \
        < _calls_of_a_counting_executor(STRICT, updates=updates)


def test_differs_allows_rounding_and_nan_alike() -> None:
    a = torch.tensor([1.0, float("nan")])
    assert not differs(a, a + 1e-6) and differs(a, a + 1) and differs(a, a.double())
    assert not differs(torch.tensor([1, 2]), torch.tensor([1, 2])) and differs(torch.tensor([1]), torch.tensor([2]))


def test_integers_rounded_to_a_neighbour_are_rounding_not_a_wrong_value() -> None:
    a = torch.arange(1000)
    nudged = a.clone()
    nudged[:3] += 1  # three of a thousand, by one: a fusion's rounding before .to(int)
    assert not differs(nudged, a)
    assert differs(a + 2 * (a == 0), a)  # one element by two
    assert differs(a + (a % 2), a)  # half of them


def test_attention_after_a_cache_write_is_replayed_its_dropout_of_zero_draws_nothing() -> None:
    def attend(cache: T, k: T, q: T) -> T:
        cache[:, 1].copy_(k)
        return torch.nn.functional.scaled_dot_product_attention(q, cache, cache)

    cache, k, q = torch.zeros(2, 4, 8), torch.randn(2, 8), torch.randn(2, 3, 8)
    with audit() as log, use_policy(AUDIT):
        thunder.jit(attend)(cache.clone(), k, q)
    assert _ours(log) == []
    with installed(), use_policy(STRICT), pytest.raises(BrokenTraceError, match="replayed on the same random inputs"):
        thunder.jit(attend, transforms=[WritesBackNothing()])(cache.clone(), k, q)
