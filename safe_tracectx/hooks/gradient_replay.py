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
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple, cast

import torch
from thunder.core import pytree

from safe_tracectx.hooks.call_values import call_values
from safe_tracectx.hooks.decomposed_gradients import decompositions_at_fault, describe
from safe_tracectx.hooks.eager_ops import eager_executor
from safe_tracectx.hooks.gradient_compare import beyond_rounding, how_far, in_float64, low_precision, random_cotangent
from safe_tracectx.hooks.gradient_scope import judged_inputs
from safe_tracectx.hooks.replay import executable, own_work, random_inputs
from safe_tracectx.traces.grad_mode import tensor_outs
from safe_tracectx.traces.violations import Violation

__all__ = ["Replayed", "pair_gradients", "replay", "wrong_gradients"]

#: Thunder's flattening (optree's key order for dicts), as the split flattens the program's output.
_flatten: Final = cast(Callable[[Any], tuple[list[Any], Any]], pytree.tree_flatten)
#: A replay that could not run on these inputs, or whose reference gradients are not finite there.
_FAILED: Final = "failed"
#: What the replay gives: each input's gradient by name (None: no gradient), or None when it could not run.
Gradients = dict[str, torch.Tensor | None]


class Replayed(NamedTuple):
    """What one replay gave: autograd's gradients of the program and the pair's, by input name, on ``inputs`` with
    ``cotangents`` (one per flat output), the reference's symbols run by ``eager`` first when it is not None."""

    expected: Gradients
    got: Gradients
    inputs: Mapping[str, Any]
    cotangents: list[Any]
    eager: Any


def wrong_gradients(program: Any, forward: Any, backward: Any, make: Callable[[Any], Callable[..., Any]] | None = None,
                    call_inputs: Mapping[str, Any] | None = None, *, locate: bool = False) -> list[Violation]:
    """Each input of ``program`` (the trace the split differentiates) that requires grad and that the pair
    ``forward``/``backward`` (traces about to run) gives another gradient than PyTorch's autograd of ``program``,
    both on the same inputs (``call_inputs``: the call's own, by name; else random) and random cotangents, beyond
    float32's rounding there (``gradient_compare.beyond_rounding``); nothing when either cannot be replayed (a random
    op, an input that is not a CPU tensor or a number, a program that fails on its inputs, a pair of another form).
    ``make`` makes a trace of the pair callable (default: as Thunder compiled it); ``locate``: a wrong gradient is
    charged to the symbol whose decomposition gives it, if one does."""
    replayed = replay(program, forward, backward, make, call_inputs)
    if replayed is None:
        return []
    low = low_precision(program)
    exact: list[Gradients | None] = []  # autograd's gradients in float64, made once when first needed

    def exactly(name: str) -> torch.Tensor | None:
        if not exact:
            exact.append(own_work(_exact_gradients, program, replayed))
        return None if exact[0] is None else exact[0].get(name)

    found: list[Violation] = []
    not_finite: dict[str, bool] = {}
    for name, want in replayed.expected.items():
        have = replayed.got.get(name)
        if want is None and have is None:
            continue
        reference = want if want is not None else torch.zeros_like(have)  # type: ignore[arg-type]
        given = have.to(reference.dtype) if have is not None else torch.zeros_like(reference)
        how = how_far(given, reference, low=low)
        if how is not None and have is not None and bool(torch.isfinite(given).all()):
            how = beyond_rounding(given, reference, exactly(name), low=low)
        if how is not None:
            not_finite[name] = not bool(torch.isfinite(given).all())
            found.append(Violation(
                "gradient-wrong-value", name,
                f"replayed on the same inputs and random cotangents, the forward and backward about to run give "
                f"{name} another gradient than PyTorch's autograd gives the program the split differentiates "
                f"({how}{'; Thunder gives none' if have is None else ''}): the caller's {name}.grad is not "
                "eager's, silently",
                f"input {name}",
            ))
    if found and locate:
        return _charged_to_decompositions(found, program, replayed.inputs, not_finite, low=low)
    return found


def _exact_gradients(program: Any, replayed: Replayed) -> Gradients | None:
    """Autograd's gradients of ``program`` on the replay's inputs and cotangents in float64 (None if it fails there)."""
    wanted = list(replayed.expected)
    try:
        inputs = {n: in_float64(v) for n, v in replayed.inputs.items()}
        reference = _reference(program, inputs, wanted, replayed.eager, [in_float64(c) for c in replayed.cotangents])
    except Exception:  # noqa: BLE001 - a program that does not run in float64: judged in its own precision
        return None
    return None if isinstance(reference, str) or reference is None else reference[0]


def _charged_to_decompositions(found: list[Violation], program: Any, inputs: Mapping[str, Any],
                               not_finite: Mapping[str, bool], *, low: bool) -> list[Violation]:
    """``found``, each charged to the symbol on its input's path whose decomposition, differentiated for want of a
    grad rule, gives a wrong gradient at the values it gets from ``inputs`` (the violation path only); a violation
    no such symbol explains is left as it is."""
    at_fault = own_work(lambda: decompositions_at_fault(program, inputs, not_finite, low=low))
    charged = []
    for violation in found:
        at = at_fault.get(violation.name)
        if at is None:
            charged.append(violation)
            continue
        said, culprit = describe(at)
        advice = (f"give {at[1].sym.id} a grad rule (thunder.core.transforms.register_grad, or an executor's grad "
                  "transform) that computes the op's own derivative: the chain rule through its decomposition is not it")
        charged.append(dataclasses.replace(
            violation, message=f"{violation.message}: {said}", culprit=culprit, advice=advice,
            also=(*violation.also, *(p.name for p in tensor_outs(at[1])))))
    return charged


def replay(program: Any, forward: Any, backward: Any, make: Callable[[Any], Callable[..., Any]] | None = None,
           call_inputs: Mapping[str, Any] | None = None) -> Replayed | None:
    """Autograd's gradients of ``program`` and the pair's, on the same inputs: ``call_inputs`` (the call's own) when
    the program runs on them with finite gradients, else random ones; None when neither runs or the program is not
    judged (``gradient_scope``). ``make`` makes a trace of the pair callable (default: as Thunder compiled it)."""
    wanted = judged_inputs(program, forward, backward)
    if wanted is None:
        return None
    names = [str(getattr(a, "name", "")) for a in program.args]
    own = dict(call_inputs) if call_inputs is not None and all(n in call_inputs for n in names) else None
    with torch.random.fork_rng(devices=[]):  # the user's random numbers stay the user's
        # The call's own values first (where the user's program goes), against the torch executor's form of the
        # program, then against eager's own ops where that form is a decomposition with no finite gradient there;
        # then random values, and values a loss or a log accepts (targets in [0, 1)) when randn's are not.
        # An input whose reference gradient is not finite on the call's own values (in either form) is not judged
        # there; the others keep their judgement, and random values are tried only when none has one.
        partial: Replayed | None = None
        for kind in ("own", "own, eager ops", "normal", "positive"):
            if partial is not None and not kind.startswith("own"):
                return partial
            inputs = own if kind.startswith("own") else random_inputs(program, positive=kind == "positive")
            eager = own_work(eager_executor, program) if kind == "own, eager ops" and inputs is not None else None
            if inputs is None or (kind == "own, eager ops" and eager is None):
                continue
            replayed = own_work(_replay, program, forward, backward, inputs, wanted, make, eager)
            if isinstance(replayed, str):  # no input judged on these values
                continue
            if replayed is None:  # nothing to judge
                return partial
            if partial is not None:  # the same values and cotangents: the inputs judged before keep their judgement
                replayed = replayed._replace(expected={**replayed.expected, **partial.expected})
            if len(replayed.expected) == len(wanted) or not kind.startswith("own"):
                return replayed
            partial = replayed
    return partial


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
            make: Callable[[Any], Callable[..., Any]] | None, eager: Any = None) -> Replayed | str | None:
    """The replay on ``inputs`` (the reference's symbols run by ``eager`` first, when given: ``hooks.eager_ops``);
    None: nothing to judge; ``_FAILED``: not on these inputs."""
    try:
        reference = _reference(program, inputs, wanted, eager)
        if reference is None or isinstance(reference, str):
            return reference
        expected, cotangents = reference
        # Thunder's compiled forward sees the flags the call's tensors had (a fusion's guards check them).
        given = {n: _detached(v).requires_grad_(n in wanted) if isinstance(v, torch.Tensor) else v
                 for n, v in inputs.items()}
        with torch.no_grad():
            got = pair_gradients(forward, backward, given, cotangents, make)
    except Exception:  # noqa: BLE001 - a program that fails on these values, or a form this replay does not know
        return _FAILED
    return None if got is None else Replayed(expected, got, inputs, cotangents, eager)


def _reference(program: Any, inputs: Mapping[str, Any], wanted: list[str], eager: Any,
               cotangents: list[Any] | None = None) -> tuple[Gradients, list[Any]] | str | None:
    """Autograd's gradients of ``program`` on ``inputs`` for ``cotangents`` (seeded random ones when None) of the
    inputs whose gradients are finite there, and the cotangents; None: no output to differentiate; ``_FAILED``: no
    gradient is finite there."""
    leaves = {n: v.detach().clone().requires_grad_(n in wanted) if isinstance(v, torch.Tensor) else v
              for n, v in inputs.items()}
    names = [str(getattr(a, "name", "")) for a in program.args]
    with torch.set_grad_enabled(True), torch.autocast("cpu", enabled=False):  # as Thunder's no_autocast
        result = _differentiable(program, eager)(*[leaves[n] for n in names])
    outputs = _flatten(result["output"] if isinstance(result, dict) and "output" in result else result)[0]
    if cotangents is None:
        generator = torch.Generator().manual_seed(1)
        cotangents = [random_cotangent(o, generator) for o in outputs]
    pairs = [(o, c) for o, c in zip(outputs, cotangents)
             if isinstance(o, torch.Tensor) and o.requires_grad and c is not None]
    if not pairs:
        return None
    grads = torch.autograd.grad([o for o, _ in pairs], [leaves[n] for n in wanted], [c.to(o.dtype) for o, c in pairs],
                                allow_unused=True)
    finite: Gradients = {n: g for n, g in zip(wanted, grads) if g is None or bool(torch.isfinite(g).all())}
    return (finite, cotangents) if finite else _FAILED  # an input whose gradient is not finite here is not judged


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
    another gradient than autograd does (violation path only), or None. One sweep of the steps serves every name
    of the pair (a model whose every parameter is wrong replays each form once, not once per parameter)."""
    fw, bw = compilation.handed_over
    if compilation.differentiates is None or fw is None or bw is None:
        return None
    key = (id(fw), id(bw))
    swept = _culprits.get(compilation)
    if swept is None or swept[0] != key:
        swept = _culprits[compilation] = (key, _sweep(compilation, fw, bw))
    return swept[1].get(name)


#: Per compilation: (its forward and backward, the first step that gives each wrong name) once swept.
_culprits: weakref.WeakKeyDictionary[Any, tuple[tuple[int, int], dict[str, Any]]] = weakref.WeakKeyDictionary()


def _sweep(compilation: Any, fw: Any, bw: Any) -> dict[str, Any]:
    """For each name some form of the pair gives a wrong gradient, the first step after which it does: the split's
    own pair charges the split (and the rules it applies), a later form the step that made it."""
    from safe_tracectx.hooks.compilation import is_backward
    from safe_tracectx.hooks.step_record import Step

    program, given = compilation.differentiates, call_values(compilation)
    latest: dict[bool, Any] = {}
    first, found = True, {}
    for step in compilation.steps:
        trace = step.ref()
        if trace is None or (trace.names is not fw.names and trace.names is not bw.names):
            continue
        latest[is_backward(trace)] = trace
        if len(latest) < 2:
            continue
        for violation in wrong_gradients(program, latest[False], latest[True], executable, given):
            if violation.name not in found:
                split = first and step.pass_function is not None  # the split and the rules it applies
                found[violation.name] = Step(trace, step.within or step.label, step.pass_function, None) if split else step
        first = False
    return found
