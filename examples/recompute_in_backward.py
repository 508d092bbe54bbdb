"""A Thunder transform that recomputes chosen activations in the backward pass.

Every tensor the forward saves for the backward that one of ``symbols``
produced from other saved tensors is recomputed in the backward instead of
read back. The recomputed outputs get fresh ``bw_`` names through
``safe_tracectx.proxies.rename_outputs``, so no name of the forward trace is
defined again in the backward (the precondition of fusion rematerialization).

Run it:  python examples/recompute_in_backward.py
         python examples/recompute_in_backward.py --no-rename   # the clash: NameClashError under strict
         safe-tracectx run examples/recompute_in_backward.py --no-rename --unguarded   # reported, attributed
"""

from __future__ import annotations

import warnings
from collections.abc import Collection
from typing import Any

import torch

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
from thunder.core.proxies import Variable, variableify
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import TraceCtx, TraceProvenance, from_trace
from thunder.core.transform_common import Transform

from safe_tracectx.proxies import rename_outputs

__all__ = ["RecomputeInBackward", "mlp"]


def _received(backward: TraceCtx) -> set[str]:
    """Names the backward unpacks from its inputs (the saved-for-backward hand-over)."""
    return {p.name for b in backward.bound_symbols if b.sym.name.startswith("unpack") for p in b.flat_proxy_outs}


class RecomputeInBackward(Transform):
    """Recompute saved outputs of ``symbols`` (by symbol name) in the backward pass.

    ``rename=False`` keeps the forward names, to show the clash the renaming prevents.
    """

    def __init__(self, symbols: Collection[str] = ("mul",), *, rename: bool = True) -> None:
        self.symbols = frozenset(symbols)
        self.rename = rename
        self.recomputed: list[str] = []
        self._forward: TraceCtx | None = None

    def transform_trace_post_optimization(self, computation_trace: TraceCtx, **kwargs: Any) -> TraceCtx:
        # Thunder calls this with the forward trace, then with the backward trace.
        if computation_trace.siginfo().name != "backward_fn":
            self._forward = computation_trace
            return computation_trace
        forward, self._forward = self._forward, None
        return computation_trace if forward is None else self._recompute(forward, computation_trace)

    def _recompute(self, forward: TraceCtx, backward: TraceCtx) -> TraceCtx:
        received = _received(backward)
        chosen = [
            b
            for b in forward.bound_symbols
            if b.sym.name in self.symbols
            and b.flat_proxy_outs
            and {p.name for p in b.flat_proxy_outs} <= received
            and {p.name for p in b.flat_proxy_args} <= received
        ]
        if not chosen:
            return backward
        new_backward = from_trace(backward)
        new_backward.names = set(backward.names)  # from_trace shares the set; this pass owns its own
        swap_map: dict[Variable, Any] = {}
        if self.rename:
            swap_map = rename_outputs(chosen, trace=new_backward, prefix="bw_")
        recomputations = [b.from_bsym_swap_proxies(swap_map, skip_inputs=True) for b in chosen]
        recomputed_names = {variableify(p) for b in chosen for p in b.flat_proxy_outs}

        bsyms: list[BoundSymbol] = []
        inserted = False
        for bsym in backward.bound_symbols:
            uses = not inserted and any(variableify(p) in recomputed_names for p in bsym.flat_proxy_args)
            if uses and not bsym.sym.name.startswith("unpack"):
                bsyms.extend(recomputations)
                inserted = True
            bsyms.append(bsym.from_bsym_swap_proxies(swap_map, skip_output=True) if inserted else bsym)
        new_backward.bound_symbols = bsyms
        self.recomputed = [p.name for b in recomputations for p in b.flat_proxy_outs]
        new_backward.set_provenance(TraceProvenance(f"Recompute {sorted(self.symbols)} in backward"))
        return new_backward


def mlp(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """A gelu MLP: gelu's output is saved for the backward but can be recomputed from its inputs."""
    hidden = torch.nn.functional.gelu(torch.nn.functional.linear(x, w1))
    return torch.nn.functional.linear(hidden, w2).sum()


def _gradients(transforms: list[Transform]) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    args = [torch.randn(4, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)]
    thunder.jit(mlp, transforms=transforms)(*args).backward()
    return tuple(a.grad for a in args if a.grad is not None)


def main(argv: list[str] | None = None) -> None:
    """``--no-rename``: keep the forward names (the clash); ``--unguarded``: no ``installed(STRICT)`` of its own."""
    import contextlib
    import sys

    from safe_tracectx import STRICT
    from safe_tracectx.hooks import installed

    flags = set(sys.argv[1:] if argv is None else argv)
    plain = _gradients([])
    transform = RecomputeInBackward(rename="--no-rename" not in flags)
    with contextlib.nullcontext() if "--unguarded" in flags else installed(STRICT):
        recomputed = _gradients([transform])
    same = all(torch.allclose(a, b) for a, b in zip(plain, recomputed, strict=True))
    print(f"recomputed in the backward as {transform.recomputed}; gradients equal plain Thunder's: {same}")


if __name__ == "__main__":
    main()
