"""A backward that is part of the program, replaced by another rule (``custom-backward-ignored``).

A custom ``torch.autograd.Function`` means what its ``backward`` says, not what
differentiating its forward gives (a straight-through estimator, a scaled or
clipped gradient). ``thunder.jit``'s lookaside records such a call as one symbol
of the jit's temporary executor, with the Function's backward as that
executor's grad transform for it. The grad transform takes the rule of the first
executor that can execute or fuse a symbol (``_get_gradfn_and_executor``); if
that is another executor with no rule for the symbol, the symbol is
differentiated through its decomposition and the backward computes something
else (Thunder #1569). This asks Thunder's own rule lookup, with the executors of
the compilation, for each symbol that has such a backward::

    >>> from thunder.core.trace import TraceCtx
    >>> ignored_custom_backwards(TraceCtx(), executors=())
    []
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.grad_rules")

import importlib
from collections.abc import Sequence
from typing import Any, Final

from safe_tracectx.traces.bound_proxies import proxy_outs
from safe_tracectx.traces.violations import Violation, bsym_label

__all__ = ["ignored_custom_backwards"]

#: The executor ``thunder.jit`` makes per compilation for the symbols it registers itself (custom Functions):
#: ``TemporaryExecutor``, ``AdHocExecutor`` before it was renamed.
_EXTEND: Final[Any] = importlib.import_module("thunder.extend")
_TEMPORARY: Final[tuple[type, ...]] = tuple(
    kind for kind in (getattr(_EXTEND, name, None) for name in ("TemporaryExecutor", "AdHocExecutor"))
    if isinstance(kind, type)
)
_LOOKUP: Final = "thunder.core.transforms._get_gradfn_and_executor"


def _rule_lookup() -> Any:
    """Thunder's ``_get_gradfn_and_executor`` (None on a Thunder without it)."""
    import thunder.core.transforms as transforms

    return getattr(transforms, "_get_gradfn_and_executor", None)


def _name(executor: Any) -> str:
    return str(getattr(executor, "name", type(executor).__name__))


def ignored_custom_backwards(trace: Any, *, executors: Sequence[Any]) -> list[Violation]:
    """Each top-level symbol of ``trace`` that has a backward of the program's own (a grad transform registered
    with a temporary executor among ``executors``) for which Thunder's rule lookup returns another rule; reads
    only."""
    holders: list[Any] = [ex for ex in executors if isinstance(ex, _TEMPORARY)]
    lookup = _rule_lookup() if holders else None
    if lookup is None:
        return []
    found: list[Violation] = []
    for index, bsym in enumerate(trace.bound_symbols):
        holder = next((ex for ex in holders if ex.get_grad_transform(bsym.sym) is not None), None)
        if holder is None:
            continue
        rule, chosen = lookup(bsym, executors_list=executors)
        if chosen is holder:
            continue
        first = next((ex for ex in executors if ex.can_execute_or_fuse(bsym)), None)
        outputs = [p.name for p in proxy_outs(bsym)]
        name = outputs[0] if outputs else str(bsym.sym.name)
        if chosen is not None:
            taken = f"the rule of {_name(chosen)}"
        elif rule is not None:
            taken = "Thunder's default rule for the symbol's id"
        else:
            taken = "no rule (the symbol is differentiated through its decomposition)"
        why = "" if first is None or first is holder else (
            f": {_name(first)}, ahead of {_name(holder)} among the executors, can execute or fuse the symbol, "
            "so the lookup stops there")
        found.append(Violation(
            "custom-backward-ignored", name,
            f"{bsym_label(index, bsym)}"
            + (f", which defines {', '.join(outputs)}," if outputs else "")
            + f" has a backward of the program's own (a custom torch.autograd.Function's, registered with "
            f"{_name(holder)}), but the grad transform takes {taken}{why}: the backward computes something else "
            "than the program's",
            bsym_label(index, bsym), also=tuple(outputs[1:]),
            culprit=("_get_gradfn_and_executor", _LOOKUP),
        ))
    return found
