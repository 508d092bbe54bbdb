"""hooks/eager_ops.py: which symbols the replays' reference runs as eager's own op, and the memo of what torch's
functions take (asked twice per symbol in a compile, and of the same shapes by a model's layers)."""

from __future__ import annotations

import gc
import warnings
import weakref
from typing import Any

import pytest
import torch

from safe_tracectx.hooks import eager_ops

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from thunder.core import dtypes
    from thunder.core.devices import cpu
    from thunder.core.proxies import TensorProxy
    from thunder.core.trace import TraceCtx, tracectx


def _proxy(shape: tuple[int, ...], dtype: Any = dtypes.float32) -> TensorProxy:
    with tracectx(TraceCtx()):
        return TensorProxy(shape=shape, device=cpu, dtype=dtype, requires_grad=False)


@pytest.fixture(autouse=True)
def _fresh_memo() -> Any:
    eager_ops._TAKEN.clear()
    yield
    eager_ops._TAKEN.clear()


def test_a_function_that_takes_the_arguments_is_told_apart_from_one_that_does_not() -> None:
    x = _proxy((2, 3))
    assert eager_ops._takes(torch.sum, x, 1)
    assert not eager_ops._takes(torch.max, x, None, False)  # Thunder's binding of max(w): torch refuses it


def test_the_answer_is_asked_of_torch_once_per_function_and_signature() -> None:
    calls: list[tuple[Any, ...]] = []

    def counted(*args: Any) -> Any:
        calls.append(args)
        return torch.sum(*args)

    first, second = _proxy((4, 5)), _proxy((4, 5))  # two proxies of one shape and dtype: one question
    assert eager_ops._takes(counted, first, 0) and eager_ops._takes(counted, second, 0)
    assert len(calls) == 1
    assert eager_ops._takes(counted, _proxy((4, 6)), 0)  # another shape: asked again
    assert len(calls) == 2


def test_an_int_and_a_float_of_one_value_are_different_arguments() -> None:
    """``1 == 1.0`` and their hashes agree, but torch takes one and refuses the other."""
    x = _proxy((3,))
    assert eager_ops._takes(torch.narrow, x, 0, 0, 1)
    assert not eager_ops._takes(torch.narrow, x, 0, 0, 1.0)
    assert eager_ops._takes(torch.narrow, x, 0, 0, 1)


def test_the_dtype_is_part_of_the_signature() -> None:
    def integers_only(t: torch.Tensor) -> torch.Tensor:
        if t.dtype != torch.int64:
            raise TypeError("integers only")
        return t

    assert eager_ops._takes(integers_only, _proxy((2,), dtypes.int64))
    assert not eager_ops._takes(integers_only, _proxy((2,), dtypes.float32))


def test_an_argument_that_cannot_be_a_key_is_asked_every_time() -> None:
    calls: list[Any] = []

    def counted(x: Any, index: Any) -> Any:
        calls.append(index)
        return x[index]

    x = _proxy((4,))
    assert eager_ops._takes(counted, x, [[0, 1]]) and eager_ops._takes(counted, x, [[0, 1]])  # lists are keyed
    assert eager_ops._takes(counted, x, slice(0, 2)) and eager_ops._takes(counted, x, slice(0, 2))  # by its bounds
    assert len(calls) == 2
    assert not eager_ops._takes(counted, x, {0}) and not eager_ops._takes(counted, x, {0})  # a set: no key
    assert len(calls) == 4
    index = torch.tensor([0, 1])  # hashable by identity: never a key (the memo would keep the tensor alive)
    assert eager_ops._takes(counted, x, index) and eager_ops._takes(counted, x, index)
    assert len(calls) == 6
    alive = weakref.ref(index)
    del index
    calls.clear()
    gc.collect()
    assert alive() is None


def test_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eager_ops, "_MOST_TAKEN", 3)
    for size in range(1, 8):
        assert eager_ops._takes(torch.sum, _proxy((size,)))
        assert len(eager_ops._TAKEN) <= 3
