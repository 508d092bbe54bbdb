"""A ThunderFX split module whose output requires grad where eager PyTorch's does not (``gained-requires-grad``).

Dynamo runs each FX graph on fake tensors under eager PyTorch's autograd rules and keeps
each node's result as its ``example_value``: whether eager gives the value a gradient
history. A ``thunder_N`` module of the ThunderFX split must return what its graph's output
nodes say; before Thunder's fix of #2348 (f7a29015) ``connect_to_autograd`` marked every
output differentiable, so a new buffer the module returned (``self.buf = torch.ones(...)``)
came back requiring grad, and the next call's backward ran into the first call's freed
graph. Checked when each call of a split module ends (:mod:`safe_tracectx.hooks.call_ends`),
once per program and installation; only ThunderFX's modules (plain ``thunder.jit`` has no
eager record of its outputs)::

    >>> from safe_tracectx.hooks.fx_outputs import eager_requires_grad
    >>> eager_requires_grad(object()) is None  # not an FX GraphModule
    True
"""

from __future__ import annotations

from typing import Any, Final

import torch
from torch.utils import _pytree

from safe_tracectx.errors import TraceContextError
from safe_tracectx.hooks import call_ends
from safe_tracectx.hooks.call_ends import Call, user_site
from safe_tracectx.traces.violations import Violation

__all__ = ["KIND", "eager_requires_grad", "watch"]

KIND: Final = "gained-requires-grad"
#: Charged: Thunder's connection of the forward to PyTorch's autograd, which decides each output's grad history.
_CULPRIT: Final = ("connect to autograd", "thunder.executors.torch_autograd.connect_to_autograd")


def eager_requires_grad(module: Any) -> list[tuple[str, bool | None]] | None:
    """For each leaf of what the FX GraphModule ``module`` returns, in order: (its node's name, whether its
    example value requires grad; None for no tensor example). None if ``module`` is no GraphModule with them."""
    graph = getattr(module, "graph", None)
    if not isinstance(module, torch.fx.GraphModule) or graph is None:
        return None
    output = next((n for n in reversed(graph.nodes) if n.op == "output"), None)
    if output is None or not output.args:
        return None
    found: list[tuple[str, bool | None]] = []
    for leaf in _pytree.tree_leaves(output.args[0]):
        if not isinstance(leaf, torch.fx.Node):
            found.append((repr(leaf), None))
            continue
        example = leaf.meta.get("example_value")
        found.append((leaf.name, bool(example.requires_grad) if isinstance(example, torch.Tensor) else None))
    return found


class _Outputs:
    """A split module's outputs, checked against eager's requires_grad (read from the module at its first call)."""

    __slots__ = ("split", "eager", "reported")

    def __init__(self, split: str) -> None:
        self.split = split
        self.eager: list[tuple[str, bool | None]] | None = None
        self.reported = False

    def __call__(self, call: Call) -> TraceContextError | None:
        if self.eager is None:
            self.eager = eager_requires_grad(call.function) or []
        results = _pytree.tree_leaves(call.result)
        if len(results) != len(self.eager):
            return None  # not the graph's own outputs, one for one: nothing to compare
        gained = [name for (name, eager), value in zip(self.eager, results)
                  if eager is False and isinstance(value, torch.Tensor) and value.requires_grad]
        if not gained:
            # The cache entry's prologue checks the inputs' requires_grad and the grad mode, so its later calls
            # return alike: one call that matches eager's answers for them (not asked again).
            self.reported = True
            return None
        violation = Violation(
            KIND, gained[0],
            f"the ThunderFX split module {self.split} returns {', '.join(gained)} requiring grad, where eager PyTorch "
            "(Dynamo's example value of the graph's output node) gives no gradient history: Thunder connected the "
            "output to autograd as differentiable, so what the caller does with it next differs from eager (a "
            "buffer it stores is read by the next call as a tensor that requires grad, and that call's backward "
            "runs into this call's graph)",
            "when the jitted call returns", culprit=_CULPRIT,
        )
        error = violation.to_error(user_site())
        error.names = tuple(gained)
        return error


def watch(interpreted: list[Any], thunderfx: dict[str, Any] | None) -> None:
    """The interpretation made the computation traces ``interpreted`` for a jitted function: if the ThunderFX
    splitter made it (``thunderfx``, its split record), judge what each call of the last returns against its
    graph's example values."""
    if interpreted and thunderfx is not None:
        call_ends.watch(interpreted[-1], call_ends.compiling()[1], _Outputs(str(thunderfx.get("split"))))
