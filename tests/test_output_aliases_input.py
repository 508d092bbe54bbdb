"""output-aliases-input: a symbol gives back the caller's tensor where eager PyTorch returns a new one (#1775's class).

Eager PyTorch is the oracle twice over: each working program below is run eagerly and by
plain Thunder, and the result must alias the caller's tensor in both or in neither (so a
Thunder that changed its passthroughs fails here loudly rather than leaving the check to
false-alarm). The bug is made on the installed Thunder by diverting ``torch.clone`` to a
symbol whose meta returns its input, as ``ltorch.to(copy=True)`` did before #1775's fix.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from safe_tracectx import STRICT, BrokenTraceError, use_policy
from safe_tracectx.hooks import audit, installed, passthrough_outputs
from safe_tracectx.hooks.passthrough_outputs import KIND, aliased_outputs, shares_storage
from safe_tracectx.policy import AUDIT

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    import thunder.core.jit_ext as jit_ext
    from thunder.core.langctxs import Languages, langctx
    from thunder.core.symbol import Symbol

T = torch.Tensor

#: Programs whose result Thunder gives back as the caller's tensor, or a view of it, exactly when eager does.
WORKING: dict[str, Callable[[T], T]] = {
    "to the same dtype": lambda a: a.to(torch.float32),
    "to(copy=True)": lambda a: a.to(copy=True),
    "contiguous": lambda a: a.contiguous(),
    "float": lambda a: a.float(),
    "reshape to its shape": lambda a: a.reshape(a.shape),
    "flatten of 1-D": lambda a: a.flatten(),
    "squeeze of nothing": lambda a: a.squeeze(),
    "type_as": lambda a: a.type_as(a),
    "detach": lambda a: a.detach(),
    "dropout p=0": lambda a: F.dropout(a, 0.0),
    "dropout in eval": lambda a: F.dropout(a, 0.5, training=False),
    "clone": lambda a: a.clone(),
    "a[:]": lambda a: a[:],
}


@langctx(Languages.TORCH)
def _clone_returning_input(a: T, *, memory_format: torch.memory_format = torch.preserve_format) -> T:
    return a


#: ``torch.clone`` as a symbol whose meta hands back its input (eager's clone returns a new tensor).
_BAD_CLONE = Symbol(name="clone", meta=_clone_returning_input, id="torch.clone", is_prim=False)


def _divert_clone(monkeypatch: pytest.MonkeyPatch, symbol: Symbol) -> None:
    """``torch.clone`` traced as ``symbol``, wrapped as Thunder wraps the lookasides of its torch symbols."""
    wrapped = jit_ext.record_source_loc_in_symbol_header(symbol)  # type: ignore[no-untyped-call]
    lookaside = jit_ext.ensure_recursive_proxies(jit_ext.interpreter_needs_wrap(wrapped))  # type: ignore[no-untyped-call,attr-defined]
    monkeypatch.setitem(jit_ext._general_jit_lookaside_map, torch.clone, lookaside)


@pytest.fixture
def clone_gives_input(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    _divert_clone(monkeypatch, _BAD_CLONE)
    yield


def _ours(log: Any) -> list[Any]:
    return [v for v in log.to_dict()["violations"] if v["kind"] == KIND]


def _aliases(result: object, a: T) -> bool:
    return isinstance(result, T) and shares_storage(result, a)


@pytest.mark.parametrize("name", list(WORKING))
def test_a_passthrough_eager_also_makes_is_not_reported(name: str) -> None:
    program = WORKING[name]
    a = torch.randn(3)
    eager = _aliases(program(a), a)
    assert _aliases(thunder.jit(program)(a), a) == eager, "plain Thunder no longer aliases as eager: the oracle moved"
    with audit() as log, use_policy(STRICT):
        result = thunder.jit(program)(a)
    assert _aliases(result, a) == eager
    assert _ours(log) == []


#: Live on Thunder 0.2.6 and main (docs/findings.md 27): the result shares the caller's storage, eager's does not.
LIVE: dict[str, tuple[Callable[[T], T], bool]] = {
    "flip of no dims, requiring grad": (lambda a: torch.flip(a, ()), True),
    "a view of that flip": (lambda a: torch.flip(a, ()).view(3), True),
    "repeat_interleave by 1": (lambda a: torch.repeat_interleave(a, 1), False),
    "repeat by 1, requiring grad": (lambda a: a.repeat(1), True),
}


@pytest.mark.parametrize("name", list(LIVE))
def test_thunders_own_aliases_of_the_callers_tensor_are_reported(name: str) -> None:
    program, grad = LIVE[name]
    a = torch.randn(3, requires_grad=grad)
    assert not _aliases(program(a), a)
    assert _aliases(thunder.jit(program)(a), a), "Thunder no longer aliases here: move it to WORKING"
    with audit() as log, use_policy(AUDIT):
        thunder.jit(program)(a)
    assert [v["names"][-1] for v in _ours(log)] == ["a"]


@pytest.mark.parametrize("program", [
    pytest.param(lambda a: torch.floor(a), id="floor of integers"),
    pytest.param(lambda a: torch.round(a), id="round of integers"),
    pytest.param(lambda a: torch.flip(a, ()), id="flip without grad"),
    pytest.param(lambda a: a.float().contiguous(memory_format=torch.channels_last), id="channels-last of channels-last"),
])
def test_a_symbol_whose_meta_returns_its_input_but_runs_as_a_copy_is_not_reported(program: Callable[[T], T]) -> None:
    """The interpretation's trace says alias (the meta returns its input, kept as a shallow copy); the torch
    executor runs the op itself, a new tensor as eager's: only what the program about to run hands back counts."""
    a = torch.arange(3) if "channels_last" not in program.__code__.co_names else torch.zeros(
        2, 3, 4, 5).to(memory_format=torch.channels_last)
    assert _aliases(thunder.jit(program)(a), a) == _aliases(program(a), a)
    with audit() as log, use_policy(STRICT):
        thunder.jit(program)(a)
    assert _ours(log) == []


def test_a_symbol_that_gives_back_the_callers_tensor_is_refused_before_the_program_runs(clone_gives_input: None) -> None:
    a = torch.randn(3)
    before = a.clone()
    assert thunder.jit(lambda a: torch.clone(a))(a) is a, "the diverted clone no longer gives back its input"
    with installed(), use_policy(STRICT), pytest.raises(BrokenTraceError) as raised:
        thunder.jit(lambda a: torch.clone(a))(a)
    error = raised.value
    assert error.kind == KIND
    assert "in the storage of the caller's own a" in str(error) and "eager's torch.clone gives a storage" in str(error)
    assert error.culprit is not None and error.culprit[0] == "_clone_returning_input"
    assert "clone the result" in error.fix
    assert torch.equal(a, before)


def test_the_report_names_the_input_output_and_the_meta_under_audit(clone_gives_input: None) -> None:
    a = torch.randn(3)
    with audit() as log, use_policy(AUDIT):
        result = thunder.jit(lambda a: torch.clone(a))(a)
    assert result is a  # reported, not changed: Thunder does what it does
    found = _ours(log)
    assert [v["names"] for v in found] == [["t0", "a"]]
    assert "_clone_returning_input" in str(found[0]["culprit"])


@pytest.mark.parametrize("program", [
    pytest.param(lambda a: torch.clone(a) * 2, id="result only read"),
    pytest.param(lambda a: torch.clone(a * 2), id="an intermediate, seen by nothing else"),
])
def test_an_alias_nothing_can_tell_from_a_copy_is_not_reported(clone_gives_input: None, program: Callable[[T], T]) -> None:
    a = torch.randn(3)
    with audit() as log, use_policy(STRICT):
        result = thunder.jit(program)(a)
    assert torch.allclose(result, a * 2)
    assert _ours(log) == []


def test_a_symbol_eager_cannot_call_with_its_arguments_is_not_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    unknown = Symbol(name="clone", meta=_clone_returning_input, id="torch.no_such_function", is_prim=False)
    _divert_clone(monkeypatch, unknown)
    a = torch.randn(3)
    with audit() as log, use_policy(STRICT):
        assert thunder.jit(lambda a: torch.clone(a))(a) is a
    assert _ours(log) == []


def test_inputs_larger_than_the_budget_are_not_judged(clone_gives_input: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(passthrough_outputs, "_MOST_ELEMENTS", 2)
    a = torch.randn(3)
    with audit() as log, use_policy(STRICT):
        assert thunder.jit(lambda a: torch.clone(a))(a) is a
    assert _ours(log) == []


def test_the_check_can_be_switched_off(clone_gives_input: None) -> None:
    a = torch.randn(3)
    with audit() as log, use_policy(STRICT.replace(output_aliases_input="off")):
        assert thunder.jit(lambda a: torch.clone(a))(a) is a
    assert _ours(log) == []


def test_the_path_back_from_a_returned_name_is_judged_symbol_by_symbol() -> None:
    import thunder.torch as ltorch
    from thunder.core.devices import cpu
    from thunder.core.dtypes import float32
    from thunder.core.prims import python_return
    from thunder.core.proxies import TensorProxy
    from thunder.core.trace import TraceCtx, tracectx

    trace = TraceCtx()
    with tracectx(trace):
        a, t0, t1, t2 = (TensorProxy(n, shape=(2,), device=cpu, dtype=float32) for n in ("a", "t0", "t1", "t2"))
    trace.args = (a,)
    given = {"a": torch.zeros(2)}

    def judged(*bsyms: Any, returned: Any = a) -> list[str]:
        trace.bound_symbols = [*bsyms, python_return.bind(returned, output=None)]
        printed = str(trace)
        found = [v.name for v in aliased_outputs(trace, [returned], [given["a"]], given)]
        assert str(trace) == printed  # read, never changed
        return found

    def to(copy: bool, out: Any = a) -> Any:
        return ltorch.to.bind(a, None, None, device=None, dtype=None, copy=copy, memory_format=None, output=out)

    assert judged(to(True)) == ["a"]  # Thunder before #1775: `a = to(a, copy=True); return a`
    assert judged(to(False)) == []
    assert judged(to(True, t0), returned=t0) == ["t0"]
    assert judged(to(True, t0), ltorch.reshape.bind(t0, (2,), output=t1), returned=t1) == ["t1"]  # a view of a copy
    assert judged() == []  # the input returned as it is: eager returns it too
    # A rebinding of a's own name that a later symbol reads: `return a` may mean the input itself.
    assert judged(to(True), ltorch.sum.bind(a, output=t2)) == []


def test_shares_storage() -> None:
    a = torch.zeros(4)
    assert shares_storage(a, a) and shares_storage(a[1:], a) and shares_storage(a.detach(), a)
    assert not shares_storage(a.clone(), a) and not shares_storage(None, a)
