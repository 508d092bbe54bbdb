"""The example transform: recompute in backward with the typed wrappers, clean under install(STRICT)."""

from __future__ import annotations

import warnings

import torch
from thunder.core.transform_common import Transform

from safe_tracectx import STRICT
from safe_tracectx.hooks import installed
from safe_tracectx.traces.checks import check_forward_backward, check_trace
from example_modules import load_example

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder


example = load_example("recompute_in_backward")


def _run(transforms: list[Transform]) -> tuple[tuple[torch.Tensor, ...], object]:
    torch.manual_seed(0)
    args = [torch.randn(4, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)]
    jitted = thunder.jit(example.mlp, transforms=transforms)
    jitted(*args).backward()
    grads = tuple(a.grad for a in args if a.grad is not None)
    assert len(grads) == len(args)
    return grads, jitted


def test_recomputes_with_fresh_names_and_same_gradients_under_strict() -> None:
    plain, _ = _run([])
    transform = example.RecomputeInBackward()
    with installed(STRICT):
        grads, jitted = _run([transform])
    assert transform.recomputed and all(name.startswith("bw_") for name in transform.recomputed)
    for a, b in zip(plain, grads, strict=True):
        assert torch.allclose(a, b)
    fw, bw = thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1]
    assert "Recompute" in str(bw.get_provenance())
    assert check_trace(bw) == [] and check_forward_backward(fw, bw) == []


def test_without_renaming_the_backward_defines_a_saved_name_again() -> None:
    transform = example.RecomputeInBackward(rename=False)
    _, jitted = _run([transform])
    fw, bw = thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1]
    # The backward unpacks the saved forward value under its name, then the recomputation defines it again.
    assert {(v.kind, v.name) for v in check_trace(bw)} == {("defined-twice", name) for name in transform.recomputed}
    assert check_forward_backward(fw, bw) == []  # the hand-over itself is intact
