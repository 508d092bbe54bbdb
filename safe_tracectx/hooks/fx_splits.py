"""What the ThunderFX splitter made of each FX graph, and which split module a Thunder compilation compiles.

``torch.compile(backend=ThunderCompiler())`` (and ``thunderfx``) hands each FX
graph Dynamo captures to Thunder's splitter, which cuts it into ``thunder_N``
modules (each a ``thunder.jit`` of its own, compiled at its first call) and
``inductor_N`` modules for what Thunder does not support (compiled by
``torch._inductor``, or run eagerly when that fails). The split is recorded
here when the splitter returns (``record``); the interpretation pass that
starts a compilation looks its function up (``compiled_by``) so that its
``pass_run`` says which FX graph and split module it is, why the splitter
split and what ran in PyTorch. It imports no Thunder module, and torch only to read a split.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any, Final

__all__ = ["backend_number", "compiled_by", "record"]

#: The GraphModule a ``thunder_N`` module compiles -> the record of its split (weak: it goes with the module).
_splits: Final[weakref.WeakKeyDictionary[Any, dict[str, Any]]] = weakref.WeakKeyDictionary()
#: Each ThunderCompiler seen -> its number in this process (1, 2, ...), as reports name it.
_backends: Final[weakref.WeakKeyDictionary[Any, int]] = weakref.WeakKeyDictionary()
_numbers: Final = itertools.count(1)


def backend_number(backend: object) -> int:
    """The number of a ThunderCompiler in this process (the first seen is 1)."""
    number = _backends.get(backend)
    if number is None:
        number = _backends[backend] = next(_numbers)
    return number


def _op_name(node: Any) -> str:
    """``torch.sinc``, ``Tensor.sin`` or the module's name: what an FX node runs."""
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.op == "call_function":
        from torch.fx.node import _get_qualified_name

        try:
            return str(_get_qualified_name(node.target))
        except Exception:  # noqa: BLE001 - a target torch.fx cannot name: its own text
            return str(node.target)
    return str(node.target)


def _ran_in_pytorch(name: str, module: Any) -> dict[str, Any]:
    """A module of the split that does not run in Thunder: who runs it, and its ops."""
    import torch.fx

    # The splitter wraps what torch._inductor compiled; its eager fallback is the FX module itself.
    by = "eager (fallback)" if isinstance(module, torch.fx.GraphModule) else "inductor"
    graph = getattr(module, "graph", None)
    nodes = [] if graph is None else [n for n in graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    return {"module": name, "by": by, "ops": list(dict.fromkeys(map(_op_name, nodes)))}


def _sets_grad_mode(module: Any) -> bool:
    """Whether a module of the split leaves the grad mode its ``_set_grad_enabled`` nodes set to the modules after it
    (unknown counts as yes). A Thunder module or PyTorch's eager fallback does; what torch._inductor compiled
    restores the mode it was called in."""
    import torch
    import torch.fx

    graph = getattr(module, "graph", None)
    if graph is None:
        return True
    sets = any(n.op == "call_function" and n.target is torch._C._set_grad_enabled for n in graph.nodes)
    compiled = getattr(module, "_model", None) is None and not isinstance(module, torch.fx.GraphModule)
    return sets and not compiled


def _reason(reason: Any) -> dict[str, Any]:
    kind = getattr(reason, "reason_type", None)
    return {
        "type": getattr(kind, "name", str(kind)),
        "info": getattr(reason, "info", None),
        "exception": getattr(reason, "exception", None),
    }


def record(result: Any, *, backend: int | None, graph: int | None) -> dict[str, Any] | None:
    """The split the splitter returned (``(split module, SubgraphInfo)``), remembered for its Thunder modules'
    compilations: ``backend`` (the ThunderCompiler's number), ``graph`` (its FX graph's index in that
    compiler's ``subgraph_infos``), ``modules`` (the split's, in order), ``mode_setters`` (those that leave the grad
    mode they set to the modules after them), ``reasons``, ``pytorch``, ``split``
    (None here; a compilation's record names its module). None for a result of another shape."""
    if not (isinstance(result, tuple) and len(result) == 2 and hasattr(result[0], "named_children")):
        return None
    split_module, info = result
    children = [(name, m) for name, m in split_module.named_children() if name.startswith(("thunder_", "inductor_"))]
    shared = {
        "backend": backend,
        "graph": graph,
        "modules": [name for name, _ in children],
        "mode_setters": [name for name, module in children if _sets_grad_mode(module)],
        "reasons": [_reason(r) for r in (getattr(info, "split_reasons", None) or [])],
        "pytorch": [_ran_in_pytorch(name, m) for name, m in children if not name.startswith("thunder_")],
    }
    for name, module in children:
        compiled = getattr(module, "_model", None)  # a ThunderModule compiles the split's GraphModule
        if name.startswith("thunder_") and compiled is not None:
            try:
                _splits[compiled] = {**shared, "split": name}
            except TypeError:  # not weakly referenceable: nothing to look up later
                pass
    return {**shared, "split": None}


def compiled_by(function: object) -> dict[str, Any] | None:
    """The record of the split module whose compilation interprets ``function``, if the splitter made it."""
    try:
        found = _splits.get(function)
    except TypeError:  # not weakly referenceable: not a module
        return None
    return None if found is None else dict(found)
