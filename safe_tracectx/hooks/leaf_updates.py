"""A jitted call that updated in place a leaf that requires grad, which eager PyTorch refuses (``leaf-updated-in-place``).

Eager PyTorch raises "a leaf Variable that requires grad is being used in an in-place
operation" for ``x.mul_(2)`` (or ``x[0] = 1``, or an update through ``x.view``) on a
leaf ``x`` that requires grad, with grad enabled. Before Thunder's fix of #1652
(682e0d13) a jitted function did it silently: it wrote into the caller's leaf and
differentiated the update as if ``x`` were an intermediate. Thunder 0.2.6 and main still
run ``x[0].add_(1)`` or ``x.diagonal().mul_(2)`` whose result is not used again (moving
the update into the backward), where eager raises. Whether an input is such a
leaf is known only at the call, and a Thunder that enforces the rule raises while the
program runs, so the check is made when the call has run
(:mod:`safe_tracectx.hooks.call_ends`), for a program that updates an input with grad
enabled (:func:`safe_tracectx.traces.updated_inputs.updated_under_grad`); once per
program and installation, charged to the step that recorded the update (the
interpretation, which records it without eager's rule). A program that updates no
input with grad enabled is not watched::

    >>> from safe_tracectx.hooks.leaf_updates import KIND
    >>> KIND
    'leaf-updated-in-place'
"""

from __future__ import annotations

from typing import Any, Final

from safe_tracectx.errors import TraceContextError
from safe_tracectx.hooks import call_ends
from safe_tracectx.hooks.call_ends import Call, user_site
from safe_tracectx.hooks.grad_mode_requests import markers_followed_until
from safe_tracectx.traces.updated_inputs import InputUpdate, updated_under_grad
from safe_tracectx.traces.violations import Violation, bsym_label

__all__ = ["KIND", "watch"]

KIND: Final = "leaf-updated-in-place"


class _LeafUpdates:
    """The inputs one compiled program updates with grad enabled, by their place among its arguments."""

    __slots__ = ("updates", "culprit", "reported")

    def __init__(self, updates: dict[int, InputUpdate], culprit: tuple[str, str]) -> None:
        self.updates, self.culprit = updates, culprit
        self.reported = False

    def __call__(self, call: Call) -> TraceContextError | None:
        leaves = [u for place, u in self.updates.items() if place < len(call.inputs) and _grad_leaf(call.inputs[place])]
        if not leaves:
            return None
        first = leaves[0]
        through = "" if first.written == first.input else f" through its view {first.written}"
        others = "".join(f"; {u.input} too, at {bsym_label(u.at, u.bsym)}" for u in leaves[1:])
        violation = Violation(
            KIND, first.input,
            f"the jitted program updates its input {first.input}{through} in place with grad enabled, at "
            f"{bsym_label(first.at, first.bsym)}, and {first.input} is a leaf tensor that requires grad, which "
            "eager PyTorch refuses (\"a leaf Variable that requires grad is being used in an in-place operation\"): "
            "the call returned where eager raises, with the update written into the caller's leaf or moved into the "
            f"backward (Thunder 0.2.6 moves one whose result is not used again), and a gradient through it computed as if "
            f"{first.input} were an intermediate{others}",
            "when the jitted call returns", culprit=self.culprit,
        )
        error = violation.to_error(user_site())
        error.names = tuple(dict.fromkeys(u.input for u in leaves))
        return error


def _grad_leaf(value: Any) -> bool:
    """A leaf that requires grad, or a view of one (eager refuses an update of either with grad enabled)."""
    if not getattr(value, "requires_grad", False):
        return False
    try:
        base = getattr(value, "_base", None)
        return bool(getattr(value, "is_leaf", False) or (base is not None and base.is_leaf and base.requires_grad))
    except RuntimeError:  # one of several views (unbind's) updated in place: eager refuses it with an error of its own
        return False


def watch(compilation: Any, interpreted: list[Any], culprit: tuple[str, str]) -> None:
    """The interpretation of ``compilation`` made the computation traces ``interpreted`` (the last is the one its
    cache entry keeps first): if it updates an input in place with grad enabled, judge each call that runs it at
    its end."""
    if not interpreted or compilation.grad_enabled is not True or compilation.inference:
        return  # eager allows the update with grad disabled, and in inference mode
    program = interpreted[-1]
    places = {p.name: i for i, p in enumerate(getattr(program, "args", None) or ())}
    until = markers_followed_until(interpreted)
    updates = {places[u.input]: u for u in updated_under_grad(program, grad_enabled=True, until=until)
               if u.input in places}
    if not updates:
        return
    call_ends.watch(program, call_ends.compiling()[1], _LeafUpdates(updates, culprit))
