"""The Thunder passes this package audits, and how reports label them (a leaf module: no Thunder import).

    >>> from safe_tracectx.pass_catalog import phase_label
    >>> phase_label("autodiff grad transform", "InsertRecomputationsProcessor.__call__")
    'backward recompute'
"""

from __future__ import annotations

import dataclasses
from typing import Final

__all__ = ["FUSION_METHODS", "KINDS", "PASSES", "TRANSFORM_METHODS", "PassSpec", "phase_label"]


@dataclasses.dataclass(frozen=True)
class PassSpec:
    """A pass entry point: the module that defines it, its name, and how reports call it."""

    module: str
    attribute: str
    label: str
    returns_pair: bool = False
    #: (function-name fragment, label): proxies made in such a function are reported under that phase.
    phases: tuple[tuple[str, str], ...] = ()
    #: What kind of work it is (``pass_run`` events and the report's phases): see :data:`KINDS`.
    kind: str = "remat"

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
    PassSpec("thunder.core.jit_ext", "thunder_general_jit", "interpretation/tracing", kind="tracing"),
    PassSpec(
        "thunder.executors.passes", "_transform_for_operator_executor_execution", "operator executors", kind="execution"
    ),
    PassSpec("thunder.executors.passes", "transform_for_execution", "transform for execution", kind="execution"),
    PassSpec("thunder.core.rematerialization", "rematerialize", "fusion remat"),
    PassSpec(
        "thunder.transforms.autodiff",
        "grad_transform_on_trace",
        "autodiff grad transform",
        phases=(("InsertRecomputationsProcessor", "backward recompute"),),
        kind="autodiff",
    ),
    PassSpec(
        "thunder.transforms.autodiff",
        "split_into_forward_and_backward",
        "forward/backward split",
        returns_pair=True,
        kind="split",
    ),
    PassSpec(
        "thunder.core.rematerialization", "rematerialize_forward_and_backward", "forward/backward remat", returns_pair=True
    ),
    PassSpec(
        "thunder.core.transforms",
        "recompute_saved_for_backward",
        "recompute saved for backward",
        returns_pair=True,
        kind="autodiff",
    ),
)

#: The kinds of pass a ``pass_run`` event names.
KINDS: Final = ("tracing", "transform", "autodiff", "execution", "split", "fusion", "remat", "user")

#: Methods of ``thunder.Transform`` subclasses run as passes (kind "transform"): True if every call is
#: recorded, False if only calls that touch a trace are (read or return one, or make proxies).
TRANSFORM_METHODS: Final[dict[str, bool]] = {
    "transform_traces_pre_prologue": True,
    "transform_module": True,
    "transform_trace_post_optimization": True,
    "transform_state_dict_for_submodule": False,
    "reverse_transform_state_dict_for_submodule": False,
}
#: Methods of ``thunder.extend.FusionExecutor`` subclasses run as passes (kind "fusion").
FUSION_METHODS: Final[dict[str, bool]] = {"fusion_pass": True}

_BY_LABEL: Final = {spec.label: spec for spec in PASSES}


def phase_label(pass_label: str | None, function: str) -> str | None:
    """The pass (or phase of it) a proxy made in ``function`` during ``pass_label`` belongs to."""
    spec = _BY_LABEL.get(pass_label) if pass_label is not None else None
    return pass_label if spec is None else spec.phase_of(function)
