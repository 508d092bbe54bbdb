"""A 0-dim value's gradient given the full shape, read where only its sum would be right (``stale-proxy-after-swap``).

Thunder lets a CPU scalar tensor (0-dim) mix with full-shape tensors in elementwise prims, and its grad rules give
such an operand the other operand's cotangent, full shape: an elementwise prim records a 0-dim output and reads a
[3, 4] tensor. That value stands for the sum of its elements. For an input it is right: torch autograd sums a
returned gradient back to its input's shape. Anywhere else it is right only through operations that commute with
the sum (negation, a dtype conversion, scaling by a value that is not itself such a sum, adding two of them); the
grad transform of Thunder 0.2.6 and main also hands it to the rules that read the value's gradient (``sum``'s
broadcasts it as if it were 0-dim), and ``x + x.sum()`` gets a wrong gradient with no error (docs/findings.md,
finding 12).

:func:`lazy_sum_reads` follows such values through the prims of a joint trace (one that has ``get_grad``) and
reports the first prim of each chain that reads one where its sum is not what it computes (the trace checks run
it on the traces the grad transform makes; tests/test_checks_swap.py has ``x + x.sum()``)::

    >>> from thunder.core.trace import TraceCtx
    >>> lazy_sum_reads(TraceCtx())
    []
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.lazy_gradients")

import math
from collections.abc import Iterator
from typing import Any, Final, NamedTuple

from thunder.core.prims import PrimIDs
from thunder.core.proxies import TensorProxy

from safe_tracectx.traces.bound_proxies import proxy_args, proxy_outs
from safe_tracectx.traces.returns import return_args
from safe_tracectx.traces.swaps import is_elementwise, on_cpu, tensor_metadata

__all__ = ["LazyRead", "describe", "lazy_sum_reads"]

#: Unary prims that commute with a sum: a value standing for a sum stays one through them.
_UNARY_LINEAR: Final = frozenset(filter(None, (PrimIDs.NEG, PrimIDs.CONVERT_ELEMENT_TYPE, getattr(PrimIDs, "SHALLOW_COPY", None))))
#: Prims that read a value without computing from it (the return hands an input's gradient to torch autograd,
#: which sums it back; ``put_grad`` says whose gradient it is).
_NOT_COMPUTING: Final = frozenset({PrimIDs.RETURN, PrimIDs.DEL, PrimIDs.PUT_GRAD})


class LazyRead(NamedTuple):
    """A prim (of the top-level bound symbol at ``position``) that reads ``name``, a value recorded as
    0-dim that holds a tensor of ``shape`` standing for its sum, where the sum is not what it computes."""

    position: int
    name: str
    prim: str
    shape: tuple[int, ...]
    why: str


def _leaves(bsym: Any) -> Iterator[Any]:
    """The prims ``bsym`` runs, in order (a symbol with no decomposition counts as one)."""
    if getattr(bsym.sym, "is_prim", False) or not bsym.subsymbols:
        yield bsym
        return
    for sub in bsym.subsymbols:
        yield from _leaves(sub)


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def _is_zero(value: Any, zeros: set[str]) -> bool:
    return isinstance(value, int | float) and value == 0 or getattr(value, "name", None) in zeros


def _unsafe(prim: Any, held: tuple[int, ...], lazy: dict[str, tuple[int, ...]], zeros: set[str]) -> str | None:
    """Why ``prim`` (elementwise, with a 0-dim output holding a ``held`` tensor, which stands for its sum) does not
    give that sum, or None. Its inputs: such values (``lazy``), tensors of the ``held`` shape, 0-dim values and
    numbers; ``zeros``: names known to hold zeros, which adding or selecting leaves the sum as it is."""

    def is_lazy(value: Any) -> bool:
        return getattr(value, "name", None) in lazy

    def full(value: Any) -> bool:
        metadata = tensor_metadata(value)
        return is_lazy(value) or metadata is not None and metadata[0] == held

    pid = prim.sym.id
    args = prim.args
    lazies = [a for a in args if is_lazy(a)]
    if pid in _UNARY_LINEAR:
        return None
    if pid == PrimIDs.MUL:  # a sum times a 0-dim value or a number is the sum of the products
        if not lazies or len(lazies) == 1 and sum(map(full, args)) == 1:
            return None
        return "multiplies such a sum by another full-shape value"
    if pid == PrimIDs.DIV:
        if not lazies or is_lazy(args[0]) and not full(args[1]):
            return None
        return "divides by such a sum, or such a sum by a full-shape value"
    if pid == PrimIDs.WHERE:
        condition, *values = args
        if not is_lazy(condition) and all(full(v) or _is_zero(v, zeros) for v in values):
            return None
        return "selects between such a sum and a value that is not one (summed back, it counts once per element)"
    if pid in (PrimIDs.ADD, PrimIDs.SUB):
        if all(full(a) or _is_zero(a, zeros) for a in args):
            return None
        return "adds a 0-dim value to such a sum (summed back, it counts once per element)"
    if not lazies:
        return None  # a prim of the full-shape values: the seed of such a sum
    return f"is not linear ({prim.sym.name} of a sum is not the sum of {prim.sym.name})"


def lazy_sum_reads(trace: Any) -> list[LazyRead]:
    """Each prim of ``trace`` that reads a full-shape gradient recorded as 0-dim where its sum is not what it
    computes (first read of each chain); reads only."""
    lazy: dict[str, tuple[int, ...]] = {}  # name -> the shape it holds (recorded 0-dim, standing for its sum)
    zeros: set[str] = set()  # names of tensors filled with zeros (a gradient that is 0 by a rule)
    found: list[LazyRead] = []
    for index, top in enumerate(trace.bound_symbols):
        for prim in _leaves(top):
            pid = prim.sym.id
            if pid == PrimIDs.FULL and len(prim.args) > 1 and _is_zero(prim.args[1], zeros) or \
                    pid in _UNARY_LINEAR and prim.args and _is_zero(prim.args[0], zeros):
                zeros.add(getattr(prim.output, "name", ""))
            out = prim.output
            zero_dim = isinstance(out, TensorProxy) and isinstance(shape := getattr(out, "_shape", None), tuple | list) \
                and not shape
            if not lazy and not zero_dim:
                continue  # the common case, decided without reading the arguments: nothing to follow, no seed
            tensors = [a for a in proxy_args(prim) if isinstance(a, TensorProxy)]
            read = [a for a in tensors if a.name in lazy]
            elementwise = pid in _UNARY_LINEAR or pid == PrimIDs.WHERE or is_elementwise(prim.sym)
            if elementwise and zero_dim and on_cpu(out):
                shapes = [lazy.get(a.name) or (m[0] if (m := tensor_metadata(a)) is not None else ()) for a in tensors]
                held = max(shapes, key=_numel, default=())
                if _numel(held) > 1:
                    why = _unsafe(prim, held, lazy, zeros)
                    if why is None:
                        lazy[out.name] = held
                        continue
                    shaped = [a for a in tensors if (m := tensor_metadata(a)) is not None and m[0] == held]
                    name = (read or shaped or tensors)[0].name
                    found.append(LazyRead(index, name, prim.sym.name, held, why))
                    for a in read:  # one report per chain
                        lazy.pop(a.name, None)
                    continue
            if not read:
                continue
            if prim.sym.id in _NOT_COMPUTING or not getattr(prim.sym, "is_prim", False):
                continue  # an input's gradient handed back (summed by autograd), or a symbol we cannot read
            why = ("reads its elements as a full-shape tensor" if elementwise else
                   "is not elementwise: it reads the tensor's shape and elements, not their sum")
            found.append(LazyRead(index, read[0].name, prim.sym.name, lazy[read[0].name], why))
            for a in read:  # one report per chain
                lazy.pop(a.name, None)
    found.extend(_returned_sums(trace, lazy, zeros))
    return found


def _returned_sums(trace: Any, lazy: dict[str, tuple[int, ...]], zeros: set[str]) -> list[LazyRead]:
    """The gradient the joint trace returns for a 0-dim CPU input, full shape (torch autograd sums it back): made
    by adding a 0-dim value to a full-shape one, that value counts once per element of the sum."""
    args = return_args(trace)
    result = args[0] if args else None
    if not isinstance(result, dict) or not isinstance(result.get("output"), tuple | list):
        return []
    grads, inputs = result["output"], result.get("flat_args")
    if not isinstance(inputs, tuple | list) or len(inputs) != len(grads):
        return []
    summed_back = []  # (gradient, its shape, input): a full-shape gradient of a 0-dim CPU input
    for grad, primal in zip(grads, inputs, strict=True):
        made, wanted = tensor_metadata(grad), tensor_metadata(primal)
        if made is not None and wanted is not None and wanted[0] == () and _numel(made[0]) > 1 and on_cpu(primal):
            summed_back.append((grad, made, primal))
    if not summed_back:
        return []
    producers = {}
    for index, top in enumerate(trace.bound_symbols):
        for prim in _leaves(top):
            for out in proxy_outs(prim):
                if isinstance(out, TensorProxy):
                    producers[out.name] = (index, prim)
    found = []
    for grad, made, primal in summed_back:
        broadcast = _broadcast_term(grad.name, made[0], producers, lazy | dict.fromkeys(zeros, ()))
        if broadcast is not None:
            index, prim, term = broadcast
            found.append(LazyRead(index, term, prim.sym.name, made[0],
                                  f"adds the 0-dim {term} to it, and the gradient of the 0-dim input {primal.name} is "
                                  f"this tensor summed back, so {term} counts {_numel(made[0])} times"))
    return found


def _broadcast_term(name: str, shape: tuple[int, ...], producers: dict[str, tuple[int, Any]],
                    lazy: dict[str, tuple[int, ...]], depth: int = 8) -> tuple[int, Any, str] | None:
    """A 0-dim value added into the full-shape ``name`` (through linear prims), which a sum back counts once per
    element: (its top-level index, the adding prim, its name), or None."""
    found = producers.get(name)
    if found is None or depth == 0:
        return None
    index, prim = found
    pid = prim.sym.id
    tensors = [a for a in prim.args if isinstance(a, TensorProxy)]
    if pid in (PrimIDs.ADD, PrimIDs.SUB):
        for operand in tensors:
            metadata = tensor_metadata(operand)
            if metadata is not None and metadata[0] == () and operand.name not in lazy:
                return index, prim, operand.name
        follow = tensors
    elif pid in _UNARY_LINEAR or pid in (PrimIDs.MUL, PrimIDs.DIV):
        follow = [a for a in tensors if (m := tensor_metadata(a)) is not None and m[0] == shape][:1]
    else:
        return None
    for operand in follow:
        if (hit := _broadcast_term(operand.name, shape, producers, lazy, depth - 1)) is not None:
            return hit
    return None


def describe(read: LazyRead, where: str) -> str:
    """The message of a :class:`LazyRead` (``where``: how reports name its top-level bound symbol)."""
    return (
        f"{where}, its prim {read.prim}, reads {read.name}, recorded as a 0-dim value but holding a [{', '.join(map(str, read.shape))}] "
        "tensor that stands "
        f"for its sum: the grad transform gave a 0-dim value the full-shape gradient of the operation it was "
        f"broadcast into (right only for a CPU scalar input, whose gradient torch autograd sums back), and "
        f"{read.prim} {read.why}, so the gradient computed from it is wrong"
    )
