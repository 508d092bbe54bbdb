"""The Thunder passes this package audits, and how reports label them (a leaf module: no Thunder import).

    >>> from safe_tracectx.pass_catalog import phase_label
    >>> phase_label("autodiff grad transform", "InsertRecomputationsProcessor.__call__")
    'backward recompute'
"""

from __future__ import annotations

import dataclasses
from typing import Final

__all__ = ["PASSES", "PassSpec", "phase_label"]


@dataclasses.dataclass(frozen=True)
class PassSpec:
    """A pass entry point: the module that defines it, its name, and how reports call it."""

    module: str
    attribute: str
    label: str
    returns_pair: bool = False
    #: (function-name fragment, label): proxies made in such a function are reported under that phase.
    phases: tuple[tuple[str, str], ...] = ()

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.attribute}"

    def phase_of(self, function: str) -> str:
        """The label to report a proxy made in ``function`` under (a phase's, else the pass's)."""
        for fragment, label in self.phases:
            if fragment in function:
                return label
        return self.label


#: Every pass this package knows; those missing from a Thunder version are skipped and reported.
PASSES: Final[tuple[PassSpec, ...]] = (
    PassSpec("thunder.core.rematerialization", "rematerialize", "fusion remat"),
    PassSpec(
        "thunder.transforms.autodiff",
        "grad_transform_on_trace",
        "autodiff grad transform",
        phases=(("InsertRecomputationsProcessor", "backward recompute"),),
    ),
    PassSpec("thunder.transforms.autodiff", "split_into_forward_and_backward", "forward/backward split", returns_pair=True),
    PassSpec(
        "thunder.core.rematerialization", "rematerialize_forward_and_backward", "forward/backward remat", returns_pair=True
    ),
    PassSpec("thunder.core.transforms", "recompute_saved_for_backward", "recompute saved for backward", returns_pair=True),
)

_BY_LABEL: Final = {spec.label: spec for spec in PASSES}


def phase_label(pass_label: str | None, function: str) -> str | None:
    """The pass (or phase of it) a proxy made in ``function`` during ``pass_label`` belongs to."""
    spec = _BY_LABEL.get(pass_label) if pass_label is not None else None
    return pass_label if spec is None else spec.phase_of(function)
