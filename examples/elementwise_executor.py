"""A small Thunder fusion executor: runs of elementwise operations become one region each.

The fusion pass groups the elementwise bound symbols Thunder's data-dependent
partitioner puts together, names each region with a ``scratch_trace`` that
reserves every name of the trace (so a region's name can never be a proxy's),
runs each region through PyTorch eagerly, and calls Thunder's ``rematerialize``.
It runs clean under ``install("strict")`` and ``safe-tracectx sweep``; the audit
lists its ``fusion_pass`` as a pass of kind ``fusion``.

Run it:  python examples/elementwise_executor.py
         safe-tracectx run examples/elementwise_executor.py
         safe-tracectx sweep --kinds set,pass examples/elementwise_executor.py
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
from thunder.core import prims, utils
from thunder.core.codeutils import SigInfo
from thunder.core.proxies import Proxy, unvariableify
from thunder.core.rematerialization import rematerialize
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import TraceCtx, TraceProvenance, from_trace, tracectx
from thunder.core.transform_common import dce
from thunder.executors.data_dependent_partition import Node, fuse_bound_symbols
from thunder.executors.passes import transform_for_execution, update_fusion_call_ctx
from thunder.executors.torchex import ex as pytorch_ex
from thunder.executors.utils import Region
from thunder.extend import FusionExecutor, ImplInfo

from safe_tracectx import scratch_trace

__all__ = ["ELEMENTWISE", "ElementwiseExecutor", "elementwise_ex", "mlp"]

#: The prims this executor fuses.
ELEMENTWISE = frozenset(
    p.id
    for p in (prims.add, prims.sub, prims.mul, prims.div, prims.neg, prims.exp, prims.tanh, prims.sin, prims.cos,
              prims.erf, prims.convert_element_type, prims.broadcast_in_dim)
)


def _region_callable(bsyms: list[BoundSymbol], inputs: list[Proxy], outputs: list[Proxy]) -> Callable[..., Any]:
    """A Python callable running ``bsyms`` with PyTorch (the region's own trace, executed by torchex)."""
    region = TraceCtx(None)
    region.args, region.kwargs = inputs, {}
    region.names = {a.name for a in inputs}
    with tracectx(region):
        for a in inputs:
            prims.unpack_trivial(a, name=a.name)
    region.bound_symbols += list(bsyms)
    region.bound_symbols.append(prims.python_return.bind(outputs, output=None))
    for bsym in bsyms:
        for out in bsym.flat_outs:
            if out is not None and out.name not in region.names:
                region.add_name(out.name)
    siginfo: Any = SigInfo("elementwise_region")  # type: ignore[no-untyped-call]
    siginfo.args = [(a.name, None) for a in inputs]
    setattr(region, "_siginfo", siginfo)
    run = transform_for_execution(region, executors_list=(pytorch_ex,)).python_callable(include_decorators=False)
    return torch.no_grad()(run)


class ElementwiseExecutor(FusionExecutor):
    """Fuses runs of elementwise prims into regions run eagerly by PyTorch."""

    def __init__(self, name: str = "elementwise") -> None:
        super().__init__(name, version="0.1")
        self._implmap = {op: ImplInfo() for op in ELEMENTWISE}
        self.regions: list[str] = []

    def fuse(self, region: Region, fusion_counter: int) -> BoundSymbol:
        """Thunder's entry point (it re-fuses regions after the forward/backward split)."""
        return self.fuse_as(region, f"Elementwise{fusion_counter}")

    def fuse_as(self, region: Region, name: str) -> BoundSymbol:
        """The region as one fusion bound symbol called ``name``."""
        inputs = [unvariableify(x) for x in region.inputs]
        outputs = [unvariableify(x) for x in region.outputs]
        ctx = {name: _region_callable(region.bound_symbols, inputs, outputs)}
        symbol = Symbol(name, meta=None, is_fusion=True, executor=self)
        make_bsym: Any = BoundSymbol  # its stub does not list the fusion fields
        bsym: BoundSymbol = make_bsym(symbol, inputs, {}, outputs, region.bound_symbols, _call_ctx=ctx)
        return bsym

    def fusion_pass(self, trace: TraceCtx) -> TraceCtx:
        fused = from_trace(trace)
        producers, consumers = utils.producers_and_consumers(trace)

        def can_fuse(a: Node, b: Node) -> bool:
            return all(len(n.group_bsyms) > 1 or self.can_fuse(n.group_bsyms[0]) for n in (a, b))

        bsyms: list[BoundSymbol] = []
        with scratch_trace(trace) as namer:  # region names that no proxy of the trace has
            for group in fuse_bound_symbols(trace, can_fuse):
                if len(group) == 1 and not self.can_fuse(group[0]):
                    bsyms.append(group[0])
                    continue
                name = namer.make_name(prefix="Elementwise")
                self.regions.append(name)
                bsyms.append(self.fuse_as(Region(producers, consumers, group), name))
        fused.bound_symbols = bsyms
        fused = dce(rematerialize(fused))
        fused = update_fusion_call_ctx(fused)
        fused.set_provenance(TraceProvenance(f"Elementwise fusion ({len(self.regions)} regions)"))
        return fused


elementwise_ex = ElementwiseExecutor()


def mlp(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """A small MLP with an elementwise tail in the hidden layer."""
    hidden = torch.tanh(torch.nn.functional.linear(x, w1)) * 2 + 1
    return torch.nn.functional.linear(hidden.sin(), w2).sum()


def _gradients(executors: list[Any] | None) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    args = [torch.randn(4, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)]
    jitted = thunder.jit(mlp) if executors is None else thunder.jit(mlp, executors=executors)
    jitted(*args).backward()
    return tuple(a.grad for a in args if a.grad is not None)


def main() -> None:
    from safe_tracectx import STRICT
    from safe_tracectx.hooks import installed

    plain = _gradients(None)
    with installed(STRICT):
        fused = _gradients([elementwise_ex])
    same = all(torch.allclose(a, b) for a, b in zip(plain, fused, strict=True))
    print(f"regions {elementwise_ex.regions}; gradients equal plain Thunder's: {same}")


if __name__ == "__main__":
    main()
