"""gained-requires-grad: a ThunderFX split module returns a value requiring grad where eager PyTorch's does not (#2348's class).

Dynamo's example values are eager's record. Thunder 0.2.6 returns what they say for every
program here (checked against eager first), so nothing is reported; the corpus case pr2348
runs the check against the Thunder that had the bug. The check itself is also given a
split module's real call with an output that gained a gradient history.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.utils import _pytree

from safe_tracectx import BrokenTraceError, use_policy
from safe_tracectx.hooks import audit
from safe_tracectx.hooks.call_ends import Call
from safe_tracectx.hooks.fx_outputs import KIND, _Outputs, eager_requires_grad
from safe_tracectx.policy import AUDIT

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from thunder.dynamo import thunderfx

T = torch.Tensor


def factories(x: T) -> tuple[T, ...]:
    return x * 2, torch.ones(2), x.detach() + 1, torch.zeros_like(x)


def no_grad_region(x: T) -> tuple[T, T]:
    with torch.no_grad():
        y = x * 2
    return y, x.sin()


def shape_times_ones(x: T) -> tuple[T, T]:
    return x.sin(), x.shape[0] * torch.ones(1)


class StoresABuffer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)
        self.buf: T | None = None

    def forward(self, x: T) -> T:
        self.buf = torch.ones(1, 2)
        out: T = self.fc(x) + self.buf
        return out


def _flags(value: Any) -> list[bool]:
    return [t.requires_grad for t in _pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


@pytest.mark.parametrize("function", [factories, no_grad_region, shape_times_ones], ids=lambda f: f.__name__)
def test_silent_where_thunderfx_gives_eagers_gradient_history(function: Callable[[T], Any]) -> None:
    x = torch.randn(2, requires_grad=True)
    with audit() as log, use_policy(AUDIT):
        got = thunderfx(function)(x)
    assert _flags(got) == _flags(function(x))  # Thunder 0.2.6 is right here
    assert [v for v in log.to_dict()["violations"] if v["kind"] == KIND] == []


def test_a_stored_buffer_twice_called_is_silent_and_has_no_gradient_history() -> None:
    module = StoresABuffer()
    compiled = thunderfx(module)
    with audit() as log, use_policy(AUDIT):
        for _ in range(2):
            compiled(torch.randn(1, 2)).sum().backward()
    assert module.buf is not None and not module.buf.requires_grad
    assert [v for v in log.to_dict()["violations"] if v["kind"] == KIND] == []


def mixed(x: T) -> tuple[T, T]:
    return x * 2, x.detach() + 1


def _split_module() -> torch.fx.GraphModule:
    """A GraphModule a ThunderFX ``thunder_N`` module compiles for ``mixed``, with an output eager gives no
    gradient history (``x.detach() + 1``)."""
    compiled: Any = thunderfx(mixed)
    compiled(torch.randn(2, requires_grad=True))
    modules = [m._model for info in compiled._backend.subgraph_infos
               for name, m in info.split_graph_module.named_children() if name.startswith("thunder_")]
    found = [m for m in modules if False in [flag for _, flag in eager_requires_grad(m) or []]]
    assert found and isinstance(found[0], torch.fx.GraphModule)
    return found[0]


def test_eager_requires_grad_reads_the_output_nodes_example_values() -> None:
    module = _split_module()
    flags = eager_requires_grad(module)
    assert flags is not None and all(isinstance(name, str) for name, _ in flags)
    outputs = next(n for n in module.graph.nodes if n.op == "output")
    nodes = _pytree.tree_leaves(outputs.args[0])
    assert [flag for _, flag in flags] == [n.meta["example_value"].requires_grad for n in nodes]
    assert eager_requires_grad(torch.nn.Linear(2, 2)) is None


def test_an_output_that_gained_a_gradient_history_is_reported_naming_its_node() -> None:
    module = _split_module()
    flags = eager_requires_grad(module) or []
    right = tuple(torch.ones(2, requires_grad=bool(flag)) for _, flag in flags)  # eager's gradient history
    wrong = tuple(torch.ones(2, requires_grad=True) for _ in flags)  # every output marked differentiable
    check = _Outputs("thunder_0")
    assert check(Call(None, None, module, (), right)) is None
    assert check(Call(None, None, module, (), wrong[:-1])) is None  # not one for one: not compared
    error = check(Call(None, None, module, (), wrong))
    assert isinstance(error, BrokenTraceError) and error.kind == KIND
    assert error.names == tuple(name for name, flag in flags if flag is False)
    assert "thunder_0 returns" in str(error) and "requiring grad" in str(error)
    assert error.culprit is not None and "connect_to_autograd" in error.culprit[1]


def test_one_call_whose_outputs_match_eagers_answers_for_its_cache_entry() -> None:
    module = _split_module()
    flags = eager_requires_grad(module) or []
    check = _Outputs("thunder_0")
    assert not check.reported
    check(Call(None, None, module, (), tuple(torch.ones(2, requires_grad=bool(flag)) for _, flag in flags)))
    assert check.reported  # call_ends asks a reported check no more: later calls cost nothing
    unmatched = _Outputs("thunder_0")
    unmatched(Call(None, None, module, (), tuple(torch.ones(2) for _ in flags[:-1])))
    assert not unmatched.reported  # outputs not one for one answer nothing
