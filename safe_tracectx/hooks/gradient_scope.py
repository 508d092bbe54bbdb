"""Which programs the gradient replay judges, and which of their inputs: what autograd of the program can stand for.

The replay's reference is PyTorch's autograd of the program the split differentiates.
It stands for eager PyTorch only where the program computes everything with grad
enabled, draws no random numbers, carries no backward of its own, and can be run
again within the budget; and a pair that runs regions ``torch.compile`` compiled is
not run again (its guards would compile them once more for the user's call)::

    >>> import torch, thunder
    >>> from safe_tracectx.hooks.gradient_scope import judged_inputs
    >>> jitted = thunder.jit(lambda x, w: (x @ w).sum())
    >>> _ = jitted(torch.ones(2, 2, requires_grad=True), torch.ones(2, 2))
    >>> judged_inputs(thunder.last_traces(jitted)[0], thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1])
    ['x']
"""

from __future__ import annotations

from typing import Any

import torch
from thunder.core.proxies import ProxyTag, TensorProxy

from safe_tracectx.hooks.gradient_compare import floating
from safe_tracectx.hooks.replay import BUDGET_BYTES, draws_random
from safe_tracectx.traces.bound_proxies import proxy_outs

__all__ = ["judged_inputs"]


def judged_inputs(program: Any, forward: Any, backward: Any) -> list[str] | None:
    """The floating inputs of ``program`` that require grad, whose gradients the pair ``forward``/``backward`` must
    give as autograd of ``program`` does; None when the program is not judged (see the module's docstring)."""
    if draws_random(program) or draws_random(forward) or draws_random(backward) or _grad_mode_changes(program):
        return None
    if _dynamo_regions(forward) or _dynamo_regions(backward):
        return None
    if _defines_a_backward(program.bound_symbols):  # autograd would differentiate its forward, not use its backward
        return None
    if _computed_bytes(program) > BUDGET_BYTES:  # the replay computes it all twice more, and differentiates it
        return None
    wanted = [a.name for a in getattr(program, "args", None) or ()
              if isinstance(a, TensorProxy) and getattr(a, "requires_grad", False) and floating(a)]
    return wanted or None


def _grad_mode_changes(program: Any) -> bool:
    """Whether ``program`` computes a part with grad disabled (its outputs tagged as detached from the autograd
    graph, or a grad-mode marker): its executable form runs all of it with grad enabled, so it is not judged."""
    detached = getattr(ProxyTag, "DETACHED_AUTOGRAD_GRAPH", None)
    for bsym in program.bound_symbols:
        if "set_grad_enabled" in str(getattr(bsym.sym, "name", "")):
            return True
        if detached is not None and any(detached in getattr(p, "tags", ()) for p in proxy_outs(bsym)):
            return True
    return False


def _dynamo_regions(trace: Any) -> bool:
    """Whether ``trace`` runs a region ``torch.compile`` compiled (``torch_compile_ex``'s fusions and its kind)."""
    for bsym in trace.bound_symbols:
        executor = getattr(bsym.sym, "executor", None)
        if "torchcompile" in str(getattr(executor, "name", "")) and bsym.sym.name.startswith("TorchCompile"):
            return True
    return False


def _defines_a_backward(bsyms: Any) -> bool:
    """Whether a symbol of ``bsyms`` (at any depth) carries the program's own backward: a custom
    ``autograd.Function`` (an ad hoc executor's symbol, or ``autograd_function_apply``) or custom op."""
    for bsym in bsyms:
        executor = str(getattr(getattr(bsym.sym, "executor", None), "name", ""))
        name = f"{getattr(bsym.sym, 'name', '')} {getattr(bsym.sym, 'id', '')}"
        if executor.startswith("__ad_hoc_executor") or "custom_op" in executor or "autograd_function" in name:
            return True
        if _defines_a_backward(getattr(bsym, "subsymbols", ()) or ()):
            return True
    return False


def _computed_bytes(program: Any) -> int:
    """The bytes of the tensors ``program``'s top-level symbols compute (a symbolic shape counts as over budget)."""
    total = 0
    for bsym in program.bound_symbols:
        for proxy in proxy_outs(bsym):
            if isinstance(proxy, TensorProxy):
                try:
                    total += int(torch.Size(int(d) for d in proxy.shape).numel()) * int(proxy.dtype.bytes)
                except (TypeError, ValueError):
                    return BUDGET_BYTES + 1
    return total
