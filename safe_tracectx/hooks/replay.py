"""What a program leaves in the inputs it updates in place, replayed against the trace the interpretation made.

The interpretation's trace is the program as the user wrote it, in-place updates and
views included. A later step may rewrite how an update reaches the input (functionalization
wrote a transposed view's update back into its base by ``reshape``, #2052), and every name
can still be defined: only the values tell. So, for a program that updates its inputs, the
trace about to run and the interpretation's trace (made executable by Thunder's own
``transform_for_execution`` with the torch and Python executors) are run on the same random
inputs, and each updated input must end alike (``update-wrong-value``). The replay is this
package's own work: the hooks let it pass (``events.own_work``), and nothing of it is
reported, counted or audited::

    >>> import torch
    >>> from safe_tracectx.hooks.replay import differs
    >>> differs(torch.ones(3), torch.ones(3)), differs(torch.ones(3), torch.zeros(3))
    (False, True)
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

import torch
from thunder.core.prims import OpTags
from thunder.core.proxies import NumberProxy, TensorProxy

from safe_tracectx._support import events
from safe_tracectx.hooks import compilation as compilations
from safe_tracectx.hooks.runs import current_run
from safe_tracectx.traces.bound_proxies import proxy_args, proxy_outs
from safe_tracectx.traces.violations import Violation

__all__ = [
    "copyable", "differs", "draws_random", "exact_copy", "executable", "own_work", "random_inputs", "wrong_elements", "wrong_update_values",
]

R = TypeVar("R")
_RANDOM: Final = getattr(OpTags, "RANDOM_OP", None)
#: Symbols that draw random numbers, by name (Thunder tags some, not all: prims.randn has no tag).
_DRAWING: Final = ("rand", "uniform", "normal", "bernoulli", "multinomial", "dropout", "philox", "exponential",
                   "poisson", "geometric", "cauchy", "random")
#: The most the replay allocates for a program's inputs (it makes each once more, and clones the updated ones):
#: a larger program (a model's weights beside its KV cache) is not judged.
BUDGET_BYTES: Final = 256 * 2**20
#: (rtol, atol) by dtype: a fusion may round otherwise than the torch executor; a wrong write-back is far off.
_LOW_PRECISION: Final = (torch.float16, torch.bfloat16)


def own_work(function: Callable[..., R], *args: Any) -> R:
    """``function(*args)`` in a copy of this context where this package runs Thunder for itself: no compilation,
    pass or event of the user's, and nothing reported."""
    def run() -> R:
        events.own_work.set(True)
        events.current_pass.set(None)
        current_run.set(None)
        compilations.leave_all()
        return function(*args)

    return contextvars.copy_context().run(run)


def wrong_update_values(
    program: Any, trace: Any, function: Callable[..., Any] | None, updated: Mapping[str, Any],
) -> list[Violation]:
    """Each input of ``updated`` (the program's in-place updates, by input name) that ``trace`` (run as
    ``function``, or made executable here) leaves other than ``program`` (the interpretation's trace) does, both
    replayed on the same random inputs; nothing when either cannot be replayed (a random op, an input that is
    not a CPU tensor or a number, a program that fails on random values)."""
    if draws_random(program) or draws_random(trace):
        return []
    with torch.random.fork_rng(devices=[]):  # the user's random numbers stay the user's
        inputs = random_inputs(program)
        if inputs is None:
            return []
        expected = own_work(_replay, program, None, inputs, updated)
        got = own_work(_replay, trace, function, inputs, updated) if expected is not None else None
    if expected is None or got is None:
        return []
    found = []
    for name in sorted(updated):
        if name in expected and name in got and differs(got[name], expected[name]):
            a, b = got[name], expected[name]
            wrong = wrong_elements(a, b)
            found.append(Violation(
                "update-wrong-value", name,
                f"replayed on the same random inputs, it leaves other values in the program's input {name}, which "
                f"the program updates in place, than the trace the interpretation made does ({wrong} of "
                f"{b.numel()} elements differ): the call leaves the caller's {name} other than eager PyTorch "
                "does, silently",
                f"input {name}",
            ))
    return found


def copyable(value: Any) -> bool:
    """``value`` is a tensor the replays can copy exactly and compare: dense (strided) on the CPU, of PyTorch's own
    class (a sparse or nested tensor has no storage to copy, and a subclass's copy would not be of its class)::

        >>> copyable(torch.ones(2)), copyable(torch.ones(2).to_sparse()), copyable(2.0)
        (True, False, False)
    """
    return (type(value) in (torch.Tensor, torch.nn.Parameter) and value.layout is torch.strided
            and value.device.type == "cpu" and not value.is_nested)


def exact_copy(tensor: torch.Tensor, storages: dict[int, Any] | None = None) -> torch.Tensor:
    """A copy of ``tensor`` (detached) with its very strides and offset, gaps and expanded dimensions included (a
    clone makes those contiguous, and a compiled region guards on strides), over a copy of its whole storage: one
    copy per storage in ``storages`` (by the original's identity), so that inputs that share storage at the call
    share the copy (a program compiled for ``x`` and ``x.unsqueeze(1)`` sees an update of one in the other)."""
    detached = tensor.detach()
    original = detached.untyped_storage()
    storages = {} if storages is None else storages
    storage = storages.get(original._cdata)
    if storage is None:
        storage = storages[original._cdata] = original.clone()  # type: ignore[no-untyped-call]
    copy = torch.empty(0, dtype=detached.dtype, device=detached.device).set_(
        storage, detached.storage_offset(), detached.size(), detached.stride())
    # The lazy conjugate and negation bits are the view's, not the storage's: `x.conj()` reads its storage conjugated.
    copy = copy.conj() if detached.is_conj() else copy
    return torch._neg_view(copy) if detached.is_neg() else copy


def differs(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` holds other values than ``b`` beyond rounding (NaN where the other has NaN is alike; integers
    and bools computed from floats may round to a neighbour: one element in a hundred, by one, is rounding)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return True
    a, b = a.detach(), b.detach()
    if a.is_floating_point() or a.is_complex():
        return wrong_elements(a, b) > 0
    return bool(((a.long() - b.long()).abs() > 1).any()) or wrong_elements(a, b) > a.numel() // 100


def wrong_elements(a: torch.Tensor, b: torch.Tensor) -> int:
    """How many elements of ``a`` are not ``b``'s (floats beyond rounding)."""
    if a.shape != b.shape:
        return a.numel()
    if a.is_floating_point() or a.is_complex():
        rtol, atol = (1e-2, 1e-2) if a.dtype in _LOW_PRECISION else (1e-4, 1e-4)
        return int((~torch.isclose(a, b, rtol, atol, equal_nan=True)).sum())
    return int((a != b).sum())


def random_inputs(program: Any, *, positive: bool = False) -> dict[str, Any] | None:
    """A value for each argument of ``program`` by name (floating and bool tensors random, integers 0 or 1, so
    that they index any dimension of two or more; ``positive``: floats in [0, 1)), or None: not all can be made, or
    they exceed the budget."""
    generator = torch.Generator().manual_seed(0)
    values: dict[str, Any] = {}
    size = 0
    for arg in getattr(program, "args", None) or ():
        if isinstance(arg, TensorProxy):
            if str(arg.device.type) != "cpu":
                return None
            try:
                shape = tuple(int(d) for d in arg.shape)
                dtype = _torch_dtype(arg.dtype)
                size += torch.Size(shape).numel() * dtype.itemsize
                if size > BUDGET_BYTES:
                    return None
                values[arg.name] = _random_tensor(shape, dtype, generator, positive=positive)
            except (TypeError, ValueError, RuntimeError, NotImplementedError):  # a symbolic shape, float8's randn
                return None
        elif isinstance(arg, NumberProxy):
            value = getattr(arg, "value", None)
            if value is None:
                return None
            values[arg.name] = value
        else:
            return None
    return values


def _random_tensor(
    shape: tuple[int, ...], dtype: torch.dtype, generator: torch.Generator, *, positive: bool = False
) -> torch.Tensor:
    if dtype.is_floating_point or dtype.is_complex:
        draw = torch.rand if positive else torch.randn
        return draw(shape, generator=generator, dtype=dtype)
    return torch.randint(0, 2, shape, generator=generator).to(dtype)


def _torch_dtype(dtype: Any) -> torch.dtype:
    from thunder.core.dtypes import to_torch_dtype

    result = to_torch_dtype(dtype)
    if result is None:
        raise TypeError(f"no torch dtype for {dtype}")
    return result


def draws_random(trace: Any) -> bool:
    """Whether ``trace`` draws random numbers (at any depth): replays would differ."""
    def draws(bsym: Any) -> bool:
        tags = getattr(bsym.sym, "tags", None) or ()
        if _RANDOM is not None and _RANDOM in tags:
            return True
        subsymbols = getattr(bsym, "subsymbols", ()) or ()
        if subsymbols:  # a composite draws where its parts do (attention's dropout of p=0, normalize: none)
            return any(draws(s) for s in subsymbols)
        name = str(getattr(bsym.sym, "name", "")).lower()
        passes_through = {p.name for p in proxy_outs(bsym)} <= {p.name for p in proxy_args(bsym)}
        return any(word in name for word in _DRAWING) and not passes_through
    return any(draws(b) for b in trace.bound_symbols)


def _replay(
    trace: Any, function: Callable[..., Any] | None, inputs: Mapping[str, Any], updated: Mapping[str, Any]
) -> dict[str, Any] | None:
    """Each ``updated`` argument of ``trace`` as running it (``function``, or its torch execution) leaves it, by
    name (the others are shared, not copied); None if it cannot run."""
    names = [str(getattr(a, "name", "")) for a in getattr(trace, "args", None) or ()]
    if any(n not in inputs for n in names):
        return None
    given = [inputs[n].clone() if n in updated and isinstance(inputs[n], torch.Tensor) else inputs[n] for n in names]
    try:
        run = function if function is not None else executable(trace)
        with torch.no_grad():
            run(*given)
    except Exception:  # noqa: BLE001 - a program that fails on random values, or a form Thunder cannot execute
        return None
    return {n: v for n, v in zip(names, given) if n in updated and isinstance(v, torch.Tensor)}


def executable(trace: Any, *, decorated: bool = True, first: Any = None) -> Callable[..., Any]:
    """``trace`` as Thunder runs it with the torch and Python executors only, after ``first`` if given
    (``decorated``: under Thunder's ``torch.no_grad``, as Thunder runs it; else as autograd can differentiate it)."""
    from thunder.executors.passes import transform_for_execution
    from thunder.extend import get_executor

    executors = [e for e in (first, get_executor("torch"), get_executor("python")) if e is not None]
    executed = transform_for_execution(trace, executors)
    if isinstance(executed, list | tuple):
        executed = executed[-1]
    function: Callable[..., Any] = executed.python_callable(include_decorators=decorated)
    return function
