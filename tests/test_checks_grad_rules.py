"""custom-backward-ignored: a custom torch.autograd.Function's backward that the grad rule lookup does not take.

``thunder.jit`` registers the Function's backward with its temporary executor;
Thunder's ``_get_gradfn_and_executor`` takes the rule of the first executor that
can execute or fuse the symbol. With a fusion executor ahead of the temporary
one (Thunder before #1569), the symbol is differentiated through its
decomposition and the gradient is another.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

from safe_tracectx import STRICT, BrokenTraceError
from safe_tracectx.errors import TRACE_CHECKS
from safe_tracectx.hooks import installed
from safe_tracectx.traces.grad_rules import ignored_custom_backwards
from custom_functions import Scaled

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    import thunder.core.transforms as transforms
    from thunder.executors.torch_compile import torch_compile_ex


def func(x: torch.Tensor) -> torch.Tensor:
    return Scaled.apply(x)  # type: ignore[no-untyped-call, no-any-return]


def _jitted() -> tuple[Any, Any]:
    jf = thunder.jit(func, executors=[torch_compile_ex])
    x = torch.ones(2, requires_grad=True)
    (grad,) = torch.autograd.grad(jf(x).sum(), x)
    return jf, grad


def test_silent_when_the_temporary_executor_comes_first_and_the_gradient_is_the_program_s() -> None:
    jf, grad = _jitted()
    assert torch.allclose(grad, torch.cos(torch.ones(2)) * 200)
    first = thunder.last_traces(jf)[0]
    custom = next(b for b in first.bound_symbols if b.sym.name.startswith("Scaled_"))
    executors = (custom.sym.executor, torch_compile_ex)
    assert ignored_custom_backwards(first, executors=executors) == []


def test_a_fusion_executor_ahead_of_the_temporary_one_is_reported() -> None:
    jf, _ = _jitted()
    first = thunder.last_traces(jf)[0]
    index, custom = next((i, b) for i, b in enumerate(first.bound_symbols) if b.sym.name.startswith("Scaled_"))
    (violation,) = ignored_custom_backwards(first, executors=(torch_compile_ex, custom.sym.executor))
    assert violation.kind == "custom-backward-ignored" and "custom-backward-ignored" in TRACE_CHECKS
    assert violation.name == custom.flat_proxy_outs[0].name and violation.where == f"bound symbol {index} ({custom.sym.name})"
    assert "torchcompile, ahead of" in violation.message and "differentiated through its decomposition" in violation.message
    assert violation.culprit == ("_get_gradfn_and_executor", "thunder.core.transforms._get_gradfn_and_executor")
    assert isinstance(violation.to_error(), BrokenTraceError)
    assert "put it ahead of every executor" in violation.fix


def test_no_custom_backward_no_finding() -> None:
    jf = thunder.jit(lambda x: x.sin() * 2)
    jf(torch.ones(2, requires_grad=True))
    assert ignored_custom_backwards(thunder.last_traces(jf)[0], executors=(torch_compile_ex,)) == []


def test_strict_stops_the_grad_transform_when_the_lookup_passes_the_custom_backward_by(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Thunder's lookup as it was before #1569 (the executor that can fuse the symbol decides, with no rule):
    the precondition of the autodiff passes reports the symbol before the backward is built."""

    def lookup_as_before_1569(bsym: Any, *, executors_list: Any = ()) -> tuple[None, None]:
        return None, None

    monkeypatch.setattr(transforms, "_get_gradfn_and_executor", lookup_as_before_1569)
    with installed(STRICT), pytest.raises(BrokenTraceError) as caught:
        _jitted()
    assert caught.value.kind == "custom-backward-ignored"
    assert "has a backward of the program's own" in str(caught.value)
    assert "no rule (the symbol is differentiated through its decomposition)" in str(caught.value)
    assert caught.value.culprit == ("_get_gradfn_and_executor", "thunder.core.transforms._get_gradfn_and_executor")
