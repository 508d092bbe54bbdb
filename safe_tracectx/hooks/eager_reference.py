"""Every tensor the interpretation's trace computes, run with eager PyTorch's own ops: the forward's reference.

The interpretation's trace is made executable with each top-level symbol run as the
torch function its id names, where that function takes Thunder's arguments
(``hooks.eager_ops``, ``every=True``), else as the torch executor runs it, and returns
every tensor its symbols compute, by name. Two checks read it. ``metadata-mismatch``:
a symbol whose output the trace records with another shape or dtype than eager's
function gives it there (#1970: ``maximum`` of bfloat16 and a 0-dim float32 tensor
recorded as float32), so every later symbol was traced for a tensor the program does
not have; and ``output-wrong-value`` compares what the program about to run returns with
these values (``hooks.output_replay``)::

    >>> import torch, thunder
    >>> from safe_tracectx.hooks.eager_reference import every_value, wrong_metadata
    >>> jitted = thunder.jit(lambda x: (x * 2).sum(0))
    >>> _ = jitted(torch.ones(2, 3))
    >>> program = thunder.last_traces(jitted)[0]
    >>> values = every_value(program, {program.args[0].name: torch.ones(2, 3)})
    >>> sorted(v.shape for v in values.values()), wrong_metadata(program, values)
    ([torch.Size([2, 3]), torch.Size([2, 3]), torch.Size([3])], [])
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Final

import torch
from thunder.core.proxies import TensorProxy

from safe_tracectx.hooks.eager_ops import eager_executor, runs_as_eager
from safe_tracectx.hooks.replay import exact_copy, executable
from safe_tracectx.traces import returns
from safe_tracectx.traces.bound_proxies import proxy_args, proxy_outs
from safe_tracectx.traces.grad_mode import meta_definer
from safe_tracectx.traces.violations import Violation, bsym_label

__all__ = ["METADATA", "MOST_BYTES", "every_value", "first_differing_symbol", "wrong_metadata"]

METADATA: Final = "metadata-mismatch"
#: The most the reference keeps of every tensor a program computes at once: beyond it (a large model's
#: activations), only what the program returns is kept, and only that is judged.
MOST_BYTES: Final = 512 * 2**20


def every_value(program: Any, inputs: Mapping[str, Any], *, eager: bool = True) -> dict[str, Any] | None:
    """Each tensor ``program``'s top-level symbols compute, and each input as the run leaves it, by name (the last
    definition of a name; of the computed ones, only those it returns when all would take more than
    :data:`MOST_BYTES`), run on ``inputs`` (by name; copies where a symbol writes in place) with eager's own ops
    first (``eager``), else as the torch executor runs them; None if it cannot run so."""
    from thunder.core.prims import python_return
    from thunder.core.trace import from_trace

    from safe_tracectx.traces.updated_inputs import writes_in_place

    arguments = [str(getattr(a, "name", "")) for a in getattr(program, "args", None) or ()]
    if any(n not in inputs for n in arguments) or any(getattr(b.sym, "executor", None) is not None
                                                      for b in program.bound_symbols):
        return None  # (an executor's own operator, called by the program: eager has no op for it, and binding it
        # again may have effects of its own, a stateful executor's state)
    body = returns.body(program)
    computed = {o.name: o for b in body for o in proxy_outs(b) if isinstance(o, TensorProxy) and o.name not in arguments}
    if sum(map(_bytes, computed.values())) > MOST_BYTES:  # what the program returns, then: not every activation
        held = returns.every_returned_name(program)  # (read once, not once per name)
        computed = {n: p for n, p in computed.items() if n in held}
    try:
        probe = from_trace(program)
        probe.bound_symbols = [*body, python_return.bind(tuple(computed.values()), output=None)]
        first = eager_executor(program, every=True) if eager else None
        writes = any(map(writes_in_place, body))  # (copies only where a symbol might write into what it is given)
        storages: dict[int, Any] = {}
        given = [(exact_copy(inputs[n], storages) if writes else inputs[n].detach())
                 if isinstance(inputs[n], torch.Tensor) else inputs[n] for n in arguments]
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the program's own warnings are said by its own run, not by this one
            values = executable(probe, first=first)(*given)
    except Exception:  # noqa: BLE001 - a program that fails on these values, or a form Thunder cannot execute
        return None
    if not isinstance(values, tuple | list) or len(values) != len(computed):
        return None
    # An input the program returns is what the run left in it (`x.add_(1); return x`).
    inputs_after = {n: v for n, v in zip(arguments, given) if isinstance(v, torch.Tensor)}
    return {**inputs_after, **dict(zip(computed, values))}


def _bytes(proxy: TensorProxy) -> int:
    from thunder.core.dtypes import to_torch_dtype

    try:
        dtype = to_torch_dtype(proxy.dtype)
        return torch.Size(tuple(int(d) for d in proxy.shape)).numel() * (dtype.itemsize if dtype is not None else 8)
    except (TypeError, ValueError):  # a symbolic shape: counted as large
        return MOST_BYTES


def wrong_metadata(program: Any, values: Mapping[str, Any]) -> list[Violation]:
    """The first top-level symbol of ``program`` computed by eager's own op (``eager_ops.runs_as_eager``: not a prim,
    nor one the torch executor ran) whose tensor output the trace records with another shape or dtype than ``values``
    (eager's, by name) has: each such output, named with the outputs of the symbols that read it."""
    from thunder.core.dtypes import to_torch_dtype

    for index, bsym in enumerate(program.bound_symbols):
        if not runs_as_eager(bsym):
            continue
        found = []
        for proxy in proxy_outs(bsym):
            value = values.get(proxy.name) if isinstance(proxy, TensorProxy) else None
            if not isinstance(value, torch.Tensor):
                continue
            try:
                recorded = (tuple(int(d) for d in proxy.shape), to_torch_dtype(proxy.dtype))
            except (TypeError, ValueError):  # a symbolic shape: judged at run time by Thunder's own checks
                continue
            if recorded != (tuple(value.shape), value.dtype):
                readers = [o.name for b in program.bound_symbols[index + 1:] if proxy.name in {p.name for p in proxy_args(b)}
                           for o in proxy_outs(b) if isinstance(o, TensorProxy)]
                found.append(Violation(
                    METADATA, proxy.name,
                    f"{bsym_label(index, bsym)} records {proxy.name} as {_shown(*recorded)}, but eager PyTorch's "
                    f"{bsym.sym.id} gives {_shown(tuple(value.shape), value.dtype)} there: every later symbol was "
                    "traced for a tensor the program does not have" + (f" ({', '.join(readers[:4])} read it)" if readers else ""),
                    bsym_label(index, bsym),
                    also=tuple(dict.fromkeys(readers[:4])),
                    culprit=meta_definer(bsym),
                ))
        if found:
            return found
    return []


def _shown(shape: tuple[int, ...], dtype: Any) -> str:
    return f"{str(dtype).removeprefix('torch.')}{list(shape)}"


def first_differing_symbol(program: Any, inputs: Mapping[str, Any]) -> Any | None:
    """The first top-level symbol of ``program`` whose output the torch executor's form computes otherwise than
    eager's own op, on ``inputs`` (violation path only: what the interpretation's trace already gets wrong)."""
    from safe_tracectx.hooks.gradient_compare import how_far

    from safe_tracectx.traces.updated_inputs import writes_in_place

    eager, ours = every_value(program, inputs), every_value(program, inputs, eager=False)
    if eager is None or ours is None:
        return None
    symbols = program.bound_symbols
    for index, bsym in enumerate(symbols):
        for proxy in proxy_outs(bsym):
            if any(writes_in_place(b) and proxy.name in {p.name for p in proxy_args(b)} for b in symbols[index + 1:]):
                continue  # its value at the end is what a later update left in it
            want, have = eager.get(proxy.name), ours.get(proxy.name)
            if isinstance(want, torch.Tensor) and isinstance(have, torch.Tensor) and (
                    have.dtype != want.dtype or how_far(have, want, low=False, against="eager") is not None):
                return bsym
    return None
