"""Error and warning classes.

Every error says what happened, where (the user's ``file:line``), and how to
fix it::

    >>> from safe_tracectx.errors import MissingTraceError
    >>> err = MissingTraceError("no trace is active", fix="wrap it in scratch_trace()")
    >>> print(err)
    no trace is active
      fix: wrap it in scratch_trace()
"""

from __future__ import annotations

from typing import ClassVar, Final, Literal, get_args

from safe_tracectx._support.callsite import CallSite

__all__ = [
    "BrokenTraceError",
    "CheckName",
    "TRACE_CHECKS",
    "TraceCheck",
    "FIXES",
    "LeakedProxyError",
    "MissingTraceError",
    "NameClashError",
    "ReadOnlyTraceError",
    "SymbolOutsideTraceError",
    "TraceContextError",
    "TraceContextWarning",
    "TracelessRecordingError",
    "UnbalancedContextError",
    "UseBeforeDefinitionError",
]

#: The policy's checks: each names one field of :class:`safe_tracectx.Policy`.
CheckName = Literal["missing_trace", "unbalanced", "name_clash", "leaked_proxy", "read_only", "broken_trace"]

#: The trace checks (``safe_tracectx.traces.checks``), each of which a policy can give an action of its own
#: (``use_policy("strict", defined_twice="warn")``, ``--check defined-twice=warn``).
TraceCheck = Literal[
    "use-before-definition",
    "defined-twice",
    "unregistered-name",
    "fusion-name-clash",
    "traceless-proxy",
    "handover-mismatch",
    "handover-emptied",
    "forward-reads-backward",
    "stale-after-in-place",
    "flat-args-mismatch",
    "stale-proxy-after-swap",
    "detached-under-grad",
    "generated-code",
    "untranslated-value",
    "gradient-mismatch",
    "custom-backward-ignored",
    "dtype-changed-by-substitution",
    "borrowed-namer",
    "replaced-name",
    "name-taken",
    "symbol-outside-trace",
    "unreturned-output",
    "grad-mode-lost",
    "grad-mode-unrecorded",
    "gradient-dropped",
    "gradient-skips-update",
    "leaf-updated-in-place",
    "update-dropped",
    "update-grad-mode",
    "update-wrong-value",
    "gradient-wrong-value",
    "gained-requires-grad",
    "cache-entry-reused",
    "output-aliases-input",
    "output-wrong-value",
    "metadata-mismatch",
]
TRACE_CHECKS: Final[tuple[str, ...]] = get_args(TraceCheck)

#: The fix of each kind of misuse, in one place (every message that needs one takes it from here).
FIXES: Final[dict[str, str]] = {
    "missing_trace": (
        "make the owning trace active with `with tracectx(trace):`; to only borrow a namer, "
        "use `with scratch_trace(*traces_to_avoid) as scratch:`; for a proxy owned by no trace, "
        "opt in with `with traceless():` or traceless_tensorproxy(...)"
    ),
    "unbalanced": (
        "enter and exit trace contexts in nested order in one thread/task: use `with tracectx(...)` "
        "(or try/finally around set_tracectx/reset_tracectx), and exit each block exactly once"
    ),
    "raw_set": (
        "reset every set_tracectx() in a `finally` (or use `with tracectx(trace):`); "
        "`safe-tracectx lint` finds the unguarded sets"
    ),
    "read_only": (
        "do not make a trace active just to borrow its namer: name new proxies in "
        "`with scratch_trace(trace) as scratch:` and commit them with scratch.commit_names(into=...) "
        "(thunder.core.trace.from_trace shares the `names` set, so it modifies the original too)"
    ),
    "traceless_recording": (
        "use `with scratch_trace() as trace:` to record operations in a throwaway trace, "
        "or call the meta function directly (for example prims.add.meta(a, b))"
    ),
    "install": (
        "pair every install() with one uninstall() (or use `with installed(...):`); "
        "an installation made by installed(), audit(), `safe-tracectx run` or the pytest plugin is ended by its owner"
    ),
    # the trace checks (safe_tracectx.traces.violations), by kind
    "use-before-definition": "define the proxy before its first use, or reorder the bound symbols",
    "defined-twice": "give the new proxy a fresh name (safe_tracectx.proxies.rename with the owning trace)",
    "unregistered-name": "name proxies while their trace is active (or commit scratch names with commit_names(into=trace))",
    "fusion-name-clash": "one name must mean one value across the fusion regions of a trace given to "
    "rematerialization: rename one of them (rename_outputs(bsyms, trace=trace, prefix='bw_'))",
    "traceless-proxy": "traceless proxies must never enter a trace: recreate it inside `with tracectx(trace):`",
    "handover-mismatch": "the backward must unpack exactly what the forward saves, in the same order "
    "(update both sides together)",
    "handover-emptied": "hand the saved-for-backward values over as tuples (the forward's return), which the "
    "backward cannot empty, or make the backward leave what it is handed as it was: autograd hands the same objects "
    "to every backward over one graph (retain_graph=True)",
    "forward-reads-backward": "keep what reads a cotangent out of every symbol the forward needs: never fuse or "
    "merge a backward computation into a symbol with a forward output (give it BoundSymbolTag.BACKWARD)",
    "stale-after-in-place": "make every later reader of an updated tensor read the in-place symbol's output "
    "(thunder.core.update_aliases.insert_alias_updates does this for a trace: run it on a trace before its symbols "
    "are traced into another, as a grad rule's augmented forward)",
    "flat-args-mismatch": "a pass that changes a computation trace's arguments changes its return's flat_args "
    "with them, one entry per flattened argument in the same order (new_return['flat_args'] = "
    "list(new_trace.args), as thunder.transforms.quantization does)",
    "stale-proxy-after-swap": "swap a proxy in every use, nested arguments, keyword arguments and subsymbols "
    "included (bsym.from_bsym_swap_proxies(swap_map) with the map keyed by variableify(proxy)), or trace the "
    "symbols again on the new proxy so that their outputs are computed for it; a pass that changes a proxy's "
    "shape or dtype in place must swap every symbol computed before it that reads it",
    "detached-under-grad": "remove the DETACHED_AUTOGRAD_GRAPH tag from a symbol's outputs when the call is made "
    "with grad enabled, whatever the grad mode inside its meta (a higher-order function's forward with a "
    "torch.no_grad() region): wrap the meta in thunder.torch.call_higher_order_function_and_consider_outer_autograd_"
    "setting, as Thunder's torch.ops.higher_order.autograd_function_apply lookaside does (its torch.autograd."
    "Function lookaside does not, on Thunder 0.2.6)",
    "dtype-changed-by-substitution": "make what stands in for a traced value (a grad rule's forward, an executor's "
    "implementation) compute it with the dtype it was traced with, e.g. fwd = prims.div(a, b) rather than a / b in "
    "the grad rule of prims.div (#2626), or mark the symbol nondifferentiable",
    "generated-code": "a bound symbol's name is what the generated program calls: give it an identifier that its "
    "call context (bsym._call_ctx) defines",
    "untranslated-value": "translate Thunder's dtypes and devices to torch's in every symbol of a trace that Python "
    "runs itself before the trace runs: thunder.common.transform_to_torch_types(trace, translate_all=True), as "
    "thunder.jit does for the epilogue since #2669 (a pass that adds such a symbol after that step translates its "
    "arguments itself: thunder.dtypes.to_torch_dtype, thunder.devices.to_torch_device)",
    "gradient-mismatch": "make the grad rule return each gradient with its primal's dtype and shape (convert it: "
    "prims.convert_element_type(grad, x.dtype); reduce or reshape a broadcast one to x.shape), as "
    "grad_chooser_backward does since #1878",
    "custom-backward-ignored": "let the executor that holds the symbol's backward decide its grad rule: put it "
    "ahead of every executor that can execute or fuse the symbol (thunder.jit puts its temporary executor first "
    "since #1569), or give that executor the symbol's grad transform too",
    "borrowed-namer": "name the proxy with the trace it goes into (tracectx(bw)), or in scratch_trace(fw, bw) and "
    "commit_names(into=bw)",
    "replaced-name": "ask for a name the trace does not hold yet (or none), and use the name the proxy got",
    "name-taken": "one name must mean one proxy: ask for a fresh name (no name=), or rename the other proxy",
    "unreturned-output": "give a bound symbol only the outputs its symbol's call returns: a pass that adds an output to "
    "a bound symbol (bsym.from_bsym(output=...)) must use a symbol that returns it (an in-place symbol returns its "
    "result, as ltorch.setitem_ does since #2397's fix), or leave the output to the subsymbol that computes it",
    "grad-mode-lost": "make the jitted call return with PyTorch's grad mode as its program left it, on every call: "
    "apply the compile data's mode when the call returns (torch.set_grad_enabled(cd.is_grad_enabled), Thunder's fix "
    "of #2499) and keep the mode a program leaves with its cache entry, which a call served from the cache does "
    "not update; in your own code, restore the mode inside the jitted function (`with torch.no_grad():` rather "
    "than torch.set_grad_enabled(False))",
    "leaf-updated-in-place": "refuse an in-place update of a leaf that requires grad, or of a view of one, with "
    "grad enabled, as eager PyTorch does (Thunder's fix of #1652 records the grad mode on prims.copy_ and the "
    "torch executor raises eager's error); in your own code, update such a tensor under `with torch.no_grad():`, "
    "or update a copy (`x = x.clone()`)",
    "update-dropped": "keep every in-place update of a program input in the forward: a step that removes or moves "
    "symbols (dead-code elimination, the forward/backward split, which builds the forward from what the outputs and "
    "the backward need) must keep a copy_ into an input, or into a view of one, in the forward even when nothing "
    "reads its result, since its effect is on the caller's tensor; until Thunder is fixed, update the input itself "
    "(`x.add_(...)`), or read the updated view's result in what the function returns",
    "update-grad-mode": "write an update back with the grad mode of the copy_ it replaces (a copy_ made under "
    "torch.no_grad() keeps grad_enabled=False: Thunder's alias updating, #2052, keeps the update's own copy_); "
    "until Thunder is fixed, make the update outside the jitted function (where an update of a view is what is "
    "written back, updating the leaf itself keeps the update's copy_)",
    "update-wrong-value": "write an update of a view back through the view itself, or through the inverse of "
    "the view chain (a transpose back; reshape undoes only view, reshape and flatten), as Thunder's alias updating "
    "does from #2052 on; until Thunder is fixed, update the input itself, not a view of it",
    "gradient-wrong-value": "make the grad rule (an executor's grad transform, a registered VJP, Thunder's own rule) "
    "compute the derivative of what its forward computes, and keep every step after the split from changing what "
    "the backward reads; check a rule against torch.autograd.gradcheck or eager PyTorch's gradient",
    "gained-requires-grad": "give each output the gradient history eager PyTorch gives it: mark the outputs Dynamo's "
    "example values give no grad_fn non-differentiable (ctx.mark_non_differentiable in ThunderFunction.forward, "
    "Thunder's fix of #2348); in your own code, detach the value before returning or storing it",
    "grad-mode-unrecorded": "record each grad-mode change the program makes in the trace: Thunder's mapping of "
    "torch._C._set_grad_enabled must be a symbol that records a set_grad_enabled marker (as Thunder's is since the "
    "no_grad regions were supported), and a pass must keep the markers until the forward/backward split reads them; "
    "a ThunderFX splitter must not hand Thunder a grad-mode region it cannot record (Thunder's fix of #1282 sends it "
    "to inductor)",
    "gradient-dropped": "give every input the program differentiates its gradient: a grad rule (and the adapter that "
    "runs it) must return a gradient for each differentiable argument, matched to that argument; a decomposition must "
    "not compute a new tensor through an in-place prim whose rule gives its source none (Thunder's fix of #1787 "
    "clones); a step after the split must keep the backward's gradients. A program that means to stop a gradient says "
    "so (detach, torch.no_grad); until Thunder is fixed, compute the value another way (index_put's values through "
    "scatter or a differentiable mask, an in-place update of an input as an out-of-place op)",
    "gradient-skips-update": "do not read an alias taken before an in-place update after it: take the view again after the update (`a.mul_(2); b = a.view(3)`); when the update goes through a view and the base is read (`F.relu(h[:, :2], inplace=True); return h`), compute the base out of place (`h = torch.cat([F.relu(h[:, :2]), h[:, 2:]], 1)`). Thunder's grad rule of update_aliases gives each alias's gradient to the alias it was handed (docs/findings.md, 18), so until it follows the update, no alias taken before an in-place update may be read or returned after it on a path the program differentiates",
    "cache-entry-reused": "make the prologue check every value the program bakes in: a torch.dtype argument needs "
    "the check_literal_like guard JitCtx.proxify gives a torch.device one, so that a call with another dtype "
    "compiles a cache entry of its own; until Thunder is fixed, do not pass a dtype as an argument of the jitted "
    "function: convert outside the jitted call (`jf(x.to(dt))`), pass a tensor of that dtype and read its dtype "
    "(`x.to(like.dtype)`), which the prologue checks, or jit one function per dtype, each dtype fixed for good (a "
    "module attribute or global the jitted function reads is not checked either)",
    "output-aliases-input": "make the symbol's meta return a new tensor wherever eager PyTorch's function does: "
    "a symbol whose output is its own input proxy says the result is the caller's tensor (Thunder's fix of #1775 "
    "makes to(copy=True) allocate and copy into a new tensor); until Thunder is fixed, clone the result "
    "(`a.clone()` instead of `a.to(copy=True)`)",
    "output-wrong-value": "make every step after the interpretation keep what the program returns: a pass must not "
    "change a value it does not mean to (dead-code elimination, fusion, common-subexpression elimination), and an "
    "executor's implementation of a symbol (or a decomposition a fusion compiles) must compute the op's own value, "
    "overflow included; until Thunder is fixed, leave that symbol to the torch executor (thunder.jit(f, "
    "executors=...) without the executor the culprit names) or compute the value another way",
    "metadata-mismatch": "make the symbol's meta compute the shape and dtype its torch function gives (type "
    "promotion, indexing, a default dtype), so that the symbols traced after it are traced for the tensor the program "
    "has; until Thunder is fixed, compute that value another way or make the shape and dtype explicit (`x.to(dtype)`, "
    "`reshape` by the eager shape)",
    "symbol-outside-trace": "call a symbol only while the trace it records into is active (`with tracectx(trace):`, "
    "or `with scratch_trace():` for a throwaway result); to read a proxy's properties outside a trace, compute them "
    "without a symbol (its shape, `_numel()`), or call the meta function directly (prims.add.meta(a, b))",
}


class TraceContextError(RuntimeError):
    """Base class: a misuse of Thunder's trace context.

    ``message`` says what happened, ``site`` where, ``fix`` what to do about it.
    """

    #: The policy check (a field of Policy) that decides what happens to this error (None: always raised).
    check: ClassVar[CheckName | None] = None
    #: The trace check that found it (a ``safe_tracectx.traces.checks`` kind, e.g. ``use-before-definition``), if one did:
    #: ``Policy.checks`` can give it an action of its own.
    kind: str | None = None
    #: The names it is about.
    names: tuple[str, ...] = ()
    #: The pass or step that made the trace it was found in (label, qualified name), when known.
    culprit: tuple[str, str] | None = None

    def __init__(self, message: str, *, fix: str, site: CallSite | None = None) -> None:
        self.message = message
        self.fix = fix
        self.site = site
        super().__init__(self._render())

    def _render(self) -> str:
        where = f"\n  at {self.site}" if self.site is not None else ""
        return f"{self.message}{where}\n  fix: {self.fix}"


class MissingTraceError(TraceContextError):
    """A proxy or a name was requested while no trace is active."""

    check = "missing_trace"


class SymbolOutsideTraceError(MissingTraceError, NotImplementedError):
    """A Thunder symbol was called while no trace is active: ``Symbol.__call__`` raises NotImplementedError there.

    It is that error (``except NotImplementedError`` still catches it, and its
    message starts with Thunder's words), raised with the proxies the symbol was
    given and the code that called it.
    """


class UnbalancedContextError(TraceContextError):
    """A trace context was exited out of order, twice, elsewhere, or over a leaked set."""

    check = "unbalanced"


class NameClashError(TraceContextError):
    """One name stands for two different things (two proxies, or a taken name)."""

    check = "name_clash"


class LeakedProxyError(TraceContextError):
    """A traceless proxy appeared inside a real trace."""

    check = "leaked_proxy"


class ReadOnlyTraceError(TraceContextError):
    """Names or bound symbols were added to a trace entered with ``read_only=True``."""

    check = "read_only"


class BrokenTraceError(TraceContextError):
    """A pass produced a trace that is broken but not by its trace context (a proxy used before it is defined).

    Thunder's own ``DebugOptions(check_traces=True)`` is the tool for these; the
    pass audit only reports them, naming the pass (``Policy.broken_trace``).
    """

    check = "broken_trace"


class UseBeforeDefinitionError(BrokenTraceError, UnboundLocalError):
    """A pass produced a trace that reads a name before defining it: its program would raise UnboundLocalError.

    It is that error (``except UnboundLocalError`` still catches it), raised at
    the pass that made the trace instead of when the program runs.
    """


class TracelessRecordingError(TraceContextError):
    """A Thunder operation tried to record a bound symbol inside ``traceless()``."""


class TraceContextWarning(UserWarning):
    """Issued instead of raising when the policy's action for an event is ``"warn"``."""
