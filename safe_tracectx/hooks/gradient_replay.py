"""The gradients a forward/backward pair computes, replayed against PyTorch's autograd of the program it splits.

The split, the grad rules it applies and every step after it (rematerialization,
fusion, the hand-over of saved values) may give an input another gradient than the
program has, and every name can still be defined: only the values tell. So, once the
forward and the backward are about to run, the program the split was given (made
executable by Thunder's own ``transform_for_execution`` with the torch and Python
executors, without Thunder's ``no_grad``) is differentiated by PyTorch's autograd, the
pair is run as Thunder runs it, both on the same random inputs and cotangents, and each
input that requires grad must get alike gradients (``gradient-wrong-value``). Like
``hooks.replay``, it is this package's own work: nothing of it is reported or audited::

    >>> import torch, thunder
    >>> from safe_tracectx.hooks.gradient_replay import wrong_gradients
    >>> jitted = thunder.jit(lambda x: (x.sin() * 2).sum())
    >>> _ = jitted(torch.ones(3, requires_grad=True))
    >>> program = thunder.last_traces(jitted)[0]
    >>> wrong_gradients(program, thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1])
    []
"""

from __future__ import annotations

import dataclasses

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, cast

import torch
from thunder.core.proxies import ProxyTag, TensorProxy
from thunder.core import pytree

from safe_tracectx.hooks.call_values import call_values
from safe_tracectx.hooks.decomposed_gradients import decomposition_at_fault, describe
from safe_tracectx.hooks.eager_ops import eager_executor
from safe_tracectx.hooks.gradient_compare import floating, how_far, low_precision, random_cotangent
from safe_tracectx.hooks.replay import BUDGET_BYTES, draws_random, executable, own_work, random_inputs
from safe_tracectx.traces.bound_proxies import proxy_outs
from safe_tracectx.traces.grad_mode import tensor_outs
from safe_tracectx.traces.violations import Violation

__all__ = ["pair_gradients", "wrong_gradients"]

#: Thunder's flattening (optree's key order for dicts), as the split flattens the program's output.
_flatten: Final = cast(Callable[[Any], tuple[list[Any], Any]], pytree.tree_flatten)
#: A replay that could not run on these inputs, or whose reference gradients are not finite there.
_FAILED: Final = "failed"
#: What the replay gives: each input's gradient by name (None: no gradient), or None when it could not run.
Gradients = dict[str, torch.Tensor | None]


def wrong_gradients(program: Any, forward: Any, backward: Any, make: Callable[[Any], Callable[..., Any]] | None = None,
                    call_inputs: Mapping[str, Any] | None = None, *, locate: bool = False) -> list[Violation]:
    """Each input of ``program`` (the trace the split differentiates) that requires grad and that the pair
    ``forward``/``backward`` (traces about to run) gives another gradient than PyTorch's autograd of ``program``,
    both on the same inputs (``call_inputs``: the call's own, by name; else random) and random cotangents; nothing when
    either cannot be replayed (a random op, an input that is not a CPU tensor or a number, a program that fails on
    its inputs, a pair of another form). ``make`` makes a trace of the pair callable (default: as Thunder compiled
    it); ``locate``: a wrong gradient is charged to the symbol whose decomposition gives it, if one does."""
    found: list[Violation] = []
    replayed = replay(program, forward, backward, make, call_inputs)
    if replayed is None:
        return []
    expected, got, inputs = replayed
    low = low_precision(program)
    for name in expected:
        want, have = expected[name], got.get(name)
        if want is None and have is None:
            continue
        reference = want if want is not None else torch.zeros_like(have)  # type: ignore[arg-type]
        given = have.to(reference.dtype) if have is not None else torch.zeros_like(reference)
        how = how_far(given, reference, low=low)
        if how is not None:
            found.append(Violation(
                "gradient-wrong-value", name,
                f"replayed on the same inputs and random cotangents, the forward and backward about to run give "
                f"{name} another gradient than PyTorch's autograd gives the program the split differentiates "
                f"({how}{'; Thunder gives none' if have is None else ''}): the caller's {name}.grad is not "
                "eager's, silently",
                f"input {name}",
            ))
    if found and locate:
        return _charged_to_a_decomposition(found, program, inputs, low=low)
    return found


def _charged_to_a_decomposition(found: list[Violation], program: Any, inputs: Mapping[str, Any], *,
                                low: bool) -> list[Violation]:
    """``found``, charged to the symbol whose decomposition, differentiated for want of a grad rule, gives a wrong
    gradient at the values it gets from ``inputs`` (the violation path only); as they are if none does."""
    at = own_work(lambda: decomposition_at_fault(program, inputs, low=low))
    if at is None:
        return found
    said, culprit = describe(at)
    advice = (f"give {at[1].sym.id} a grad rule (thunder.core.transforms.register_grad, or an executor's grad "
              "transform) that computes the op's own derivative: the chain rule through its decomposition is not it")
    return [dataclasses.replace(v, message=f"{v.message}: {said}", also=(*v.also, *(p.name for p in tensor_outs(at[1]))),
                                culprit=culprit, advice=advice) for v in found]


def replay(program: Any, forward: Any, backward: Any, make: Callable[[Any], Callable[..., Any]] | None = None,
           call_inputs: Mapping[str, Any] | None = None) -> tuple[Gradients, Gradients, Mapping[str, Any]] | None:
    """(autograd's gradients of ``program``, the pair's gradients, the inputs) by input name, on the same inputs:
    ``call_inputs`` (the call's own) when the program runs on them with finite gradients, else random ones; None
    when neither runs.
    ``make`` makes a trace of the pair callable (default: as Thunder compiled it)."""
    if draws_random(program) or draws_random(forward) or draws_random(backward) or _grad_mode_changes(program):
        return None
    if _dynamo_regions(forward) or _dynamo_regions(backward):  # torch.compile guards on strides and flags it
        return None                                               # would compile its regions again for the user
    if _defines_a_backward(program.bound_symbols):  # autograd would differentiate its forward, not use its backward
        return None
    if _computed_bytes(program) > BUDGET_BYTES:  # the replay computes it all twice more, and differentiates it
        return None
    wanted = [a.name for a in getattr(program, "args", None) or ()
              if isinstance(a, TensorProxy) and getattr(a, "requires_grad", False) and floating(a)]
    if not wanted:
        return None
    names = [str(getattr(a, "name", "")) for a in program.args]
    own = dict(call_inputs) if call_inputs is not None and all(n in call_inputs for n in names) else None
    with torch.random.fork_rng(devices=[]):  # the user's random numbers stay the user's
        # The call's own values first (where the user's program goes), against the torch executor's form of the
        # program, then against eager's own ops where that form is a decomposition with no finite gradient there;
        # then random values, and values a loss or a log accepts (targets in [0, 1)) when randn's are not.
        for kind in ("own", "own, eager ops", "normal", "positive"):
            inputs = own if kind.startswith("own") else random_inputs(program, positive=kind == "positive")
            if inputs is None:
                if kind.startswith("own"):
                    continue
                return None
            eager = own_work(eager_executor, program) if kind == "own, eager ops" else None
            if kind == "own, eager ops" and eager is None:
                continue
            replayed = own_work(_replay, program, forward, backward, inputs, wanted, make, eager)
            if not isinstance(replayed, str):  # judged, or nothing to judge
                return None if replayed is None else (*replayed, inputs)
    return None


def pair_gradients(forward: Any, backward: Any, inputs: Mapping[str, Any], cotangents: Sequence[Any],
                   make: Callable[[Any], Callable[..., Any]] | None = None) -> Gradients | None:
    """The gradients the pair ``forward``/``backward`` gives its inputs (``inputs`` by name) for ``cotangents`` (one
    per flat output), run as Thunder's autograd glue runs them; None for a pair of another form."""
    make = make or (lambda trace: trace.python_callable())
    names = [str(getattr(a, "name", "")) for a in getattr(forward, "args", None) or ()]
    if any(n not in inputs for n in names):
        return None
    given = [inputs[n] for n in names]
    result = make(forward)(*given)
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], dict)):
        return None
    data, saved = result
    flat_args, flat_output = data.get("flat_args"), data.get("flat_output")
    if flat_args is None or flat_output is None or len(flat_output) != len(cotangents):
        return None
    by_id = {id(v): n for n, v in zip(names, given) if isinstance(v, torch.Tensor)}
    # An input returned as it is reaches the caller as itself: autograd hands its cotangent to the input directly,
    # and the backward gets zeros for that output.
    handed = [torch.zeros_like(c) if id(o) in by_id and isinstance(c, torch.Tensor) else c
              for o, c in zip(flat_output, cotangents)]
    saved_tensors, saved_other = saved
    grads = make(backward)([list(saved_tensors), list(saved_other)], handed)
    found: Gradients = {}
    for arg, grad in zip(flat_args, grads):
        name = by_id.get(id(arg))
        if name is not None:
            found[name] = _as_autograd_hands_it(grad, arg)
    for output, cotangent in zip(flat_output, cotangents):  # an input returned as it is: autograd hands it the
        name = by_id.get(id(output))                          # output's gradient directly
        if name is not None and isinstance(cotangent, torch.Tensor):
            earlier = found.get(name)
            found[name] = cotangent if earlier is None else earlier + cotangent
    return found


def _as_autograd_hands_it(grad: Any, arg: torch.Tensor) -> torch.Tensor | None:
    """``grad`` as PyTorch's autograd hands it to ``arg``'s ``.grad``: summed to the input's shape where it expands
    to it (a 0-dim input gets its full-shape gradient summed back), in the input's dtype."""
    if not isinstance(grad, torch.Tensor):
        return None
    given: torch.Tensor = grad
    if given.shape != arg.shape:
        try:
            given = given.sum_to_size(arg.shape)
        except RuntimeError:  # not expandable: autograd refuses it too, and the comparison says so
            return given
    return given.to(arg.dtype)


def _replay(program: Any, forward: Any, backward: Any, inputs: Mapping[str, Any], wanted: list[str],
            make: Callable[[Any], Callable[..., Any]] | None, eager: Any = None) -> tuple[Gradients, Gradients] | str | None:
    """(autograd's gradients, the pair's) on ``inputs`` (the reference's symbols run by ``eager`` first, when
    given: ``hooks.eager_ops``); None: nothing to judge; ``_FAILED``: not on these inputs."""
    try:
        leaves = {n: v.detach().clone().requires_grad_(n in wanted) if isinstance(v, torch.Tensor) else v
                  for n, v in inputs.items()}
        names = [str(getattr(a, "name", "")) for a in program.args]
        with torch.set_grad_enabled(True), torch.autocast("cpu", enabled=False):  # as Thunder's no_autocast
            result = _differentiable(program, eager)(*[leaves[n] for n in names])
        outputs = _flatten(result["output"] if isinstance(result, dict) and "output" in result else result)[0]
        generator = torch.Generator().manual_seed(1)
        cotangents = [random_cotangent(o, generator) for o in outputs]
        pairs = [(o, c) for o, c in zip(outputs, cotangents)
                 if isinstance(o, torch.Tensor) and o.requires_grad and c is not None]
        if not pairs:
            return None
        grads = torch.autograd.grad([o for o, _ in pairs], [leaves[n] for n in wanted], [c for _, c in pairs],
                                    allow_unused=True)
        if any(g is not None and not bool(torch.isfinite(g).all()) for g in grads):
            return _FAILED
        expected: Gradients = dict(zip(wanted, grads))
        # Thunder's compiled forward sees the flags the call's tensors had (a fusion's guards check them).
        given = {n: _detached(v).requires_grad_(n in wanted) if isinstance(v, torch.Tensor) else v
                 for n, v in inputs.items()}
        with torch.no_grad():
            got = pair_gradients(forward, backward, given, cotangents, make)
    except Exception:  # noqa: BLE001 - a program that fails on these values, or a form this replay does not know
        return _FAILED
    return None if got is None else (expected, got)


def _differentiable(program: Any, eager: Any = None) -> Callable[..., Any]:
    """``program`` as a function autograd can differentiate: as it is when its symbols are already those of
    executors (Thunder 0.2.4 on splits the execution trace), else made executable with the torch and Python ones
    (after ``eager``, when given)."""
    from thunder.extend import FusionExecutor

    executors = [getattr(b.sym, "executor", None) for b in program.bound_symbols]
    if eager is None and all(e is not None or getattr(b.sym, "is_prim", False) for e, b in zip(executors, program.bound_symbols)) \
            and not any(isinstance(e, FusionExecutor) for e in executors):  # a fusion's compiled region: never
        # called with grad enabled here (torch.compile would compile it again for the user's call)
        function: Callable[..., Any] = program.python_callable(include_decorators=False)
        return function
    return executable(program, decorated=False, first=eager)




def _detached(value: Any) -> Any:
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


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






def gradients_about_to_run(compilation: Any, forward: tuple[Any, Any], backward: tuple[Any, Any], *,
                           judged: set[str]) -> list[Violation]:
    """``wrong_gradients`` of the pair about to run ((trace, the callable Thunder compiled of it or None) each)
    against the program ``compilation``'s split differentiates, for inputs ``judged`` by no other report; not for a
    program that updates its inputs (``update-wrong-value`` replays it). Inputs that share storage at the call (tied
    weights) are replayed as separate tensors: without an update, the gradient of each is the same formula."""
    program = compilation.differentiates
    if program is None or (compilation.updates is not None and compilation.updates[1]):
        return []
    compiled = {id(trace): function for trace, function in (forward, backward) if function is not None}

    def make(trace: Any) -> Callable[..., Any]:
        function: Callable[..., Any] = compiled.get(id(trace)) or trace.python_callable()
        return function

    given = call_values(compilation)
    return [v for v in wrong_gradients(program, forward[0], backward[0], make, given, locate=True)
            if v.name not in judged]


def wrong_gradient_culprit(compilation: Any, name: str) -> Any:
    """The first step after which the compilation's forward and backward (each side's latest form) give ``name``
    another gradient than autograd does (violation path only), or None."""
    fw, bw = compilation.handed_over
    program = compilation.differentiates
    if program is None or fw is None or bw is None:
        return None
    from safe_tracectx.hooks.compilation import is_backward

    from safe_tracectx.hooks.step_record import Step

    latest: dict[bool, Any] = {}
    first, given = True, call_values(compilation)
    for step in compilation.steps:
        trace = step.ref()
        if trace is None or (trace.names is not fw.names and trace.names is not bw.names):
            continue
        latest[is_backward(trace)] = trace
        if len(latest) < 2:
            continue
        if any(v.name == name for v in wrong_gradients(program, latest[False], latest[True], executable, given)):
            if first and step.pass_function is not None:  # the split's own pair: the split and the rules it applies
                return Step(trace, step.within or step.label, step.pass_function, None)
            return step
        first = False
    return None

