"""Which symbol's decomposition gives a wrong gradient, when the split differentiates it for want of a grad rule.

For a symbol with no grad rule (no executor's grad transform, no registered VJP),
Thunder's split differentiates the symbols it decomposes into. The torch executor
still runs the forward as the op itself, so the values are right, but the backward
is the chain rule through the decomposition, which may differ from the op's own
derivative where it overflows (softplus's ``log1p(exp(a))`` at a = 100 gives NaN
where the op's derivative is 1: #1875; silu's ``1 / (1 + exp(-a))`` at a = -256:
#2624). Once the replay has found a wrong gradient, each such symbol of the
program is differentiated by PyTorch's autograd twice, on the values it gets from
the same inputs: as the op and as its decomposition. The first whose two
gradients differ is the symbol to charge: its decomposition is not fit to
differentiate, and it needs a grad rule::

    >>> import torch, thunder
    >>> from safe_tracectx.hooks.decomposed_gradients import decomposition_at_fault
    >>> jitted = thunder.jit(lambda x: torch.nn.functional.relu(x).sum())
    >>> x = torch.ones(3, requires_grad=True)
    >>> _ = jitted(x)
    >>> decomposition_at_fault(thunder.last_traces(jitted)[0], {"x": x}, low=False) is None
    True
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

import torch
from thunder.core import prims
from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_flatten
from thunder.core.trace import TraceCtx

from safe_tracectx.hooks.eager_ops import eager_executor
from safe_tracectx.hooks.gradient_compare import beyond_rounding, floating, in_float64, random_cotangent
from safe_tracectx.hooks.replay import executable
from safe_tracectx.traces.bound_proxies import proxy_args
from safe_tracectx.traces.grad_mode import tensor_outs
from safe_tracectx.traces.returns import body as returns_body, is_return
from safe_tracectx.traces.violations import bsym_label

__all__ = ["Decomposed", "decomposition_at_fault", "decompositions_at_fault", "describe"]

_log = logging.getLogger(__name__)

#: The most symbols tried per input (each costs two executable traces): the violation path only, never unbounded.
_MOST: Final = 256
#: How deep into decompositions the symbol at fault is looked for.
_DEEPEST: Final = 3
#: (where the symbol is, its bound symbol, how its decomposition's gradient differs from the op's).
Decomposed = tuple[str, Any, str]


def decompositions_at_fault(program: Any, inputs: Mapping[str, Any], names: Mapping[str, bool], *,
                            low: bool, depth: int = 0) -> dict[str, Decomposed]:
    """For each input of ``names`` (inputs of ``program`` whose gradient is wrong; True: not finite somewhere), the
    first symbol on its differentiated path (reading it or a value computed from it, its result reaching what the
    program returns through symbols with floating results) that has no grad rule, whose decomposition the split
    differentiates, and whose decomposition's gradient for the arguments computed from that input, at the values
    they get from ``inputs``, is not its op's in the same way (not finite where the input's gradient is not,
    beyond float32's rounding where it is finite); the innermost such symbol of its decomposition when one is
    (``glu``'s ``sigmoid``). A name no such symbol explains is left out."""
    flowing = {name: _requiring(program, {name}) for name in names}
    reaching = _reaching_outputs(program)
    decomposed = [(i, b, {p.name for p in proxy_args(b)}) for i, b in enumerate(program.bound_symbols)
                  if {p.name for p in tensor_outs(b)} & reaching and _differentiated_decomposition(b)]  # once, not per name
    paths = {name: [(i, b) for i, b, reads in decomposed if reads & flowing[name]][:_MOST] for name in names}
    union = {i: b for found in paths.values() for i, b in found}
    if not union:
        return {}
    try:
        values = _values_at(program, inputs, list({p.name: p for b in union.values() for p in _inputs(b)}.values()))
    except Exception:  # noqa: BLE001 - the program's prefix does not run on these values: nothing to say
        _log.debug("the program's prefix does not run", exc_info=True)
        return {}
    every = set().union(*flowing.values())
    differences: dict[int, dict[str, str]] = {}
    at_fault: dict[str, Decomposed] = {}
    for name, candidates in paths.items():
        for index, bsym in candidates:
            if index not in differences:
                differences[index] = _differences(program, bsym, values, every, low=low)
            how = next((f"for {arg}: {h}" for arg, h in differences[index].items()
                        if arg in flowing[name] and ("not finite" in h) == names[name]), None)
            if how is None:
                continue
            inner: dict[str, Decomposed] = {}
            if depth < _DEEPEST:  # a symbol of its decomposition may be the one at fault
                args = _inputs(bsym)
                mine = {a.name: names[name] for a in args if a.name in flowing[name]}
                inner = decompositions_at_fault(_region(program, args, list(bsym.subsymbols), bsym.output),
                                                {a.name: values[a.name] for a in args}, mine, low=low, depth=depth + 1)
            found = next(iter(inner.values()), None)
            at_fault[name] = ((f"{found[0]} in the decomposition of {bsym_label(index, bsym)}", *found[1:])
                              if found is not None else (bsym_label(index, bsym), bsym, how))
            break
    return at_fault


def decomposition_at_fault(program: Any, inputs: Mapping[str, Any], *, low: bool) -> Decomposed | None:
    """:func:`decompositions_at_fault` for the inputs of ``program`` whose proxies require grad, the first found."""
    names = {a.name: True for a in program.args if isinstance(a, TensorProxy) and getattr(a, "requires_grad", False)}
    found = decompositions_at_fault(program, inputs, names, low=low)
    return next(iter(found.values()), None)


def _requiring(program: Any, inputs: set[str]) -> set[str]:
    """``inputs`` and every floating value ``program`` computes from them (an intermediate's proxy may not say)."""
    requiring = set(inputs)
    for bsym in program.bound_symbols:
        if {p.name for p in proxy_args(bsym)} & requiring:
            requiring |= {p.name for p in tensor_outs(bsym) if floating(p)}
    return requiring


def _reaching_outputs(program: Any) -> set[str]:
    """The floating values from which a floating value the program returns is computed through symbols with
    floating results: a gradient reaches them (a comparison's boolean result stops it)."""
    reaching: set[str] = set()
    for bsym in reversed(program.bound_symbols):
        if is_return(bsym):
            reaching |= {p.name for p in proxy_args(bsym) if isinstance(p, TensorProxy) and floating(p)}
        elif {p.name for p in tensor_outs(bsym) if floating(p)} & reaching:
            reaching |= {p.name for p in proxy_args(bsym) if isinstance(p, TensorProxy) and floating(p)}
    return reaching


def describe(found: Decomposed) -> tuple[str, tuple[str, str]]:
    """What to say of ``found``, and the culprit (label, qualname): the function that defines the symbol."""
    from safe_tracectx.traces.grad_mode import meta_definer

    where, bsym, how = found
    definer = meta_definer(bsym) or (str(bsym.sym.name), str(bsym.sym.id))
    return (f"{where} has no grad rule in this Thunder ({bsym.sym.id}), so the split "
            f"differentiates its decomposition ({definer[1]}), whose gradient at the values it gets here is not "
            f"the op's ({how})"), definer


def _differentiated_decomposition(bsym: Any) -> bool:
    """Whether the split differentiates ``bsym``'s subsymbols (given it reads a tensor that requires grad): it has
    some, and neither an executor's grad transform nor a registered VJP covers its symbol."""
    from thunder.core import transforms

    subsymbols = getattr(bsym, "subsymbols", None) or ()
    if not subsymbols or getattr(bsym.sym, "is_prim", False):
        return False
    if len(subsymbols) == 1 and getattr(subsymbols[0].sym, "is_prim", False):  # the op is that prim: nothing to differ
        return False
    if bsym.sym.id in getattr(transforms, "augmented_forward_impls", {}):
        return False
    rule = getattr(transforms, "_get_gradfn_and_executor", None)
    return rule is None or rule(bsym)[0] is None


def _inputs(bsym: Any) -> list[Any]:
    return list({p.name: p for p in proxy_args(bsym)}.values())


def _region(program: Any, args: list[Any], bsyms: list[Any], returned: Any) -> Any:
    """A trace of ``program``'s kind taking ``args``, computing ``bsyms`` and returning ``returned``."""
    namespace: dict[str, Any] = {}
    exec(f"def region({', '.join(a.name for a in args)}):\n    pass", namespace)  # its signature: Thunder's codegen
    trace = TraceCtx(namespace["region"])
    trace.args, trace.kwargs = tuple(args), {}
    # The program's names: a proxy the executors make while claiming symbols is named apart from its own.
    trace.names, trace.name_ctr, trace.obj_name_ctr = program.names, program.name_ctr, program.obj_name_ctr
    trace.bound_symbols = [*bsyms, prims.python_return.bind(returned, output=None)]
    return trace


def _values_at(program: Any, inputs: Mapping[str, Any], needed: list[Any]) -> dict[str, Any]:
    """The value of each proxy of ``needed`` when ``program`` runs on ``inputs``."""
    body = returns_body(program)
    prefix = _region(program, list(program.args), body, tuple(needed))
    with torch.no_grad(), torch.autocast("cpu", enabled=False):
        result = executable(prefix, decorated=False)(*[inputs[a.name] for a in program.args])
    return dict(zip((p.name for p in needed), result))


def _differences(program: Any, bsym: Any, values: Mapping[str, Any], requiring: set[str], *,
                 low: bool) -> dict[str, str]:
    """For each argument of ``bsym`` named in ``requiring``, how its decomposition's gradient differs from its
    op's at ``values``, beyond float32's rounding there (the op's gradient in float64 decides); nothing when a
    form does not run (the symbol is not judged) or the op's gradient is not finite."""
    args = _inputs(bsym)
    op_region = _region(program, args, [bsym], bsym.output)  # as eager's own op, where the torch executor has none
    try:
        eager = eager_executor(op_region)
        op = _gradients(op_region, args, values, requiring, eager)
        decomposed = _gradients(_region(program, args, list(bsym.subsymbols), bsym.output), args, values, requiring)
    except Exception:  # noqa: BLE001 - one form does not run: this symbol is not judged
        _log.debug("%s is not judged", bsym.sym.name, exc_info=True)
        return {}
    if op is None or decomposed is None:
        return {}
    exact: list[dict[str, Any] | None] = []
    found = {}
    for name, want in op.items():
        have = decomposed.get(name)
        if want is None or have is None or not bool(torch.isfinite(want).all()):
            continue
        if not exact:
            try:
                exact.append(_gradients(op_region, args, {n: in_float64(v) for n, v in values.items()}, requiring, eager))
            except Exception:  # noqa: BLE001 - the op does not run in float64: judged in its own precision
                exact.append(None)
        how = beyond_rounding(have, want, None if exact[0] is None else exact[0].get(name), low=low)
        if how is not None:
            found[name] = how
    return found


def _gradients(region: Any, args: list[Any], values: Mapping[str, Any], requiring: set[str],
               first: Any = None) -> dict[str, Any] | None:
    """The gradient of each floating tensor argument of ``region`` named in ``requiring``, by PyTorch's autograd on
    ``values`` with seeded random cotangents; None when nothing of it is differentiated."""
    leaves = {a.name: _leaf(values[a.name], a.name in requiring) for a in args}
    wanted = [a.name for a in args if isinstance(leaves[a.name], torch.Tensor) and leaves[a.name].requires_grad]
    with torch.set_grad_enabled(True), torch.autocast("cpu", enabled=False):
        result = executable(region, decorated=False, first=first)(*[leaves[a.name] for a in args])
    outputs = tree_flatten((result,))[0]  # type: ignore[no-untyped-call]
    generator = torch.Generator().manual_seed(2)
    pairs = [(o, c) for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad
             for c in [random_cotangent(o, generator)] if c is not None]
    if not pairs or not wanted:
        return None
    grads = torch.autograd.grad([o for o, _ in pairs], [leaves[n] for n in wanted], [c for _, c in pairs],
                                allow_unused=True)
    return dict(zip(wanted, grads))


def _leaf(value: Any, requires_grad: bool) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(requires_grad and (value.is_floating_point() or value.is_complex()))
    return value

