"""The Thunder passes this package audits, and how reports label them (a leaf module: no Thunder import).

    >>> from safe_tracectx._support.pass_catalog import phase_label
    >>> phase_label("autodiff grad transform", "InsertRecomputationsProcessor.__call__")
    'backward recompute'
"""

from __future__ import annotations

import dataclasses
import re
from typing import Final, Literal, get_args

__all__ = [
    "FUSION_METHODS",
    "HookKind",
    "KINDS",
    "PASSES",
    "STEPS",
    "TRANSFORM_METHODS",
    "USER_KINDS",
    "PassKind",
    "PassSpec",
    "phase_label",
    "step_label",
]

#: What kind of work a pass is (``pass_run`` events, the report's phases).
PassKind = Literal["thunderfx", "tracing", "transform", "autodiff", "execution", "split", "fusion", "remat", "user"]
#: How a catalogued function is hooked: run as a pass; as the ThunderFX splitter (a pass that also records the
#: split, see ``hooks.thunderfx``); or as a phase of the pass that calls it (its proxies are reported under its
#: label, with no run of its own: a function called once per FX node would flood the pass runs); or as a binding
#: of a trace's inputs, watched for the tags it adds to the proxies it is given (``hooks.bindings``).
HookKind = Literal["pass", "splitter", "phase", "binding"]
#: What a pass needs of the traces it is given, checked when it starts (``hooks.runs``): no name computed in two
#: fusion regions (rematerialization takes a name to mean one value); every backward of the program's own taken
#: by the grad rule lookup (a custom ``torch.autograd.Function``'s); no alias handed on past an in-place update whose
#: gradient would skip it (``update_aliases``' grad rule).
Precondition = Literal["unique-region-names", "custom-backwards", "updates-differentiated"]


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
    kind: PassKind = "remat"
    #: A run of it begins a new compilation (the interpretation of a ``thunder.jit`` compile).
    starts_compilation: bool = False
    #: What its inputs are checked for when it starts (:data:`Precondition`).
    preconditions: tuple[Precondition, ...] = ()
    hook: HookKind = "pass"

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
    PassSpec(
        "thunder.core.jit_ext", "thunder_general_jit", "interpretation/tracing", kind="tracing", starts_compilation=True
    ),
    PassSpec("thunder.core.jit_ext", "bind_inputs", "input binding", kind="tracing", hook="binding"),
    PassSpec(
        "thunder.executors.passes", "_transform_for_operator_executor_execution", "operator executors", kind="execution"
    ),
    PassSpec("thunder.executors.passes", "transform_for_execution", "transform for execution", kind="execution"),
    # How in-place updates are made functional: functionalization until #2052 made alias updating the default.
    PassSpec("thunder.core.functionalization", "functionalize_inplace_ops", "functionalization", kind="transform"),
    PassSpec("thunder.core.update_aliases", "insert_alias_updates", "alias updates", kind="transform"),
    PassSpec("thunder.core.rematerialization", "rematerialize", "fusion remat", preconditions=("unique-region-names",)),
    PassSpec(
        "thunder.transforms.autodiff",
        "grad_transform_on_trace",
        "autodiff grad transform",
        phases=(("InsertRecomputationsProcessor", "backward recompute"),),
        kind="autodiff",
        preconditions=("custom-backwards", "updates-differentiated"),
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
        "thunder.executors.torch_autograd",
        "split_forward_backward",
        "forward/backward split (torch autograd)",
        returns_pair=True,
        kind="split",
    ),
    PassSpec(
        "thunder.core.transforms",
        "forward_and_backward_from_trace",
        "augmented forward and backward",
        returns_pair=True,
        kind="autodiff",
        preconditions=("custom-backwards", "updates-differentiated"),
    ),
    PassSpec(
        "thunder.core.transforms",
        "recompute_saved_for_backward",
        "recompute saved for backward",
        returns_pair=True,
        kind="autodiff",
    ),
    # ThunderFX (torch.compile with Thunder as its backend): the splitter, and its support checks, which run the
    # meta function of each FX node on proxies (about half of the proxies of a run).
    PassSpec("thunder.dynamo.splitter", "_splitter", "ThunderFX splitter", kind="thunderfx", hook="splitter"),
    PassSpec(
        "thunder.dynamo.utils",
        "is_node_supported_by_thunder",
        "ThunderFX splitter (support checks)",
        kind="thunderfx",
        hook="phase",
    ),
)

#: The kinds of pass a ``pass_run`` event names.
KINDS: Final[tuple[PassKind, ...]] = get_args(PassKind)
#: The kinds ``audited_pass`` takes: every kind but the interpretation, which starts a compilation, and the
#: ThunderFX splitter's.
USER_KINDS: Final[tuple[PassKind, ...]] = tuple(k for k in KINDS if k not in ("tracing", "thunderfx"))

#: The trace-to-trace steps Thunder runs between (and inside) the audited passes, by the function that makes
#: the trace (its qualified name) or by the start of the provenance Thunder gives it: the label reports use.
#: A step not listed here is named by Thunder's provenance, else by the function that made the trace.
STEPS: Final[dict[str, str]] = {
    "Update aliases for in-place ops": "alias updates",
    "Duplicate alias args": "alias argument duplication",
    "Dead Code Elimination": "dead-code elimination",
    "Common Subexpression Elimination": "common-subexpression elimination",
    "Remove context manager prims": "removal of context-manager prims",
    "Return arguments to track copies onto them": "returning copied arguments",
    "Unwrap the actual return value": "unwrapping the return value",
    "Delete Last Used": "del last used",
    "Update Call Context": "fusion call-context update",
    "Transform for operator executor execution": "operator executors",
    "Transform for execution": "transform for execution",
    "Rematerialization": "fusion remat",
    "Fusion": "fusion",
    "Grad transform pass": "autodiff grad transform",
    "Augmented forward pass": "augmented forward",
    "Backward pass": "backward pass",
    "Functionalize in-place ops": "functionalization",
    "Constant Folding pass": "constant folding",
    "thunder.executors.torch_autograd.rename_bwd_trace_outputs": "rename backward outputs",
    "thunder.transforms.autodiff.grad_transform_on_trace": "autodiff grad transform",
    "thunder.transforms.autodiff.split_into_forward_and_backward": "forward/backward split",
    "thunder.executors.passes._transform_for_operator_executor_execution": "operator executors",
    "thunder.core.rematerialization.rematerialize_forward_and_backward": "forward/backward remat",
    "thunder.core.transform_common.functionalize_inplace_ops": "functionalization",
    "thunder.core.functionalization.functionalize_inplace_ops": "functionalization",
}

_TOOK: Final = re.compile(r"\s*\(took [^)]*\)\s*$")


def step_label(provenance: object | None, qualname: str, function: str | None = None) -> str:
    """The label of a step: the catalogue's, else Thunder's provenance text, else the function that made the trace
    (``function``: its name without the module, as pass labels are).

        >>> step_label("Dead Code Elimination (took 3 milliseconds)", "thunder.core.transform_common.dce")
        'dead-code elimination'
        >>> step_label(None, "mymodule.MyTransform.run", "MyTransform.run")
        'MyTransform.run'
    """
    text = getattr(provenance, "pss", provenance)
    if isinstance(text, str) and text.strip():
        text = _TOOK.sub("", text.strip())
        for start, label in STEPS.items():
            if text.startswith(start):
                return label
        return text
    return STEPS.get(qualname, function or qualname)


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
