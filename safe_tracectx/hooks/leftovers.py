"""What a test (or any unit of work) leaves behind: taken at its start, checked and cleaned up after it.

The pytest plugin charges a test with what is still open after its teardown:
installations it left running, blocks and raw sets it left open in its thread
(closed), sets left open in threads, asyncio tasks or Contexts that have ended, a ``use_policy`` block or a
process default policy it changed (put back). Blocks opened while a fixture of a
wider scope (module, session) was set up belong to that fixture, not the test::

    >>> from safe_tracectx.auditlog.log import AuditLog
    >>> from safe_tracectx.hooks.leftovers import Leftovers
    >>> with AuditLog() as log:
    ...     watch = Leftovers(log)
    >>> watch.check()
    []
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from safe_tracectx.auditlog.log import AuditLog
from safe_tracectx.context.blocks import Block, open_blocks
from safe_tracectx.context.policy_block import use_policy
from safe_tracectx.errors import FIXES, TraceContextError, UnbalancedContextError
from safe_tracectx.hooks import running_installations
from safe_tracectx.hooks.guard import RawBlock, abandoned_sets, next_serial
from safe_tracectx.policy import default_policy, swap_default_policy

__all__ = ["Leftovers"]


def _open_here() -> list[Block[Any]]:
    """Trace blocks and policy blocks open in this context, innermost first."""
    return [*open_blocks(), *open_blocks(use_policy.owner_var)]


class Leftovers:
    """The state at a test's start, and what :meth:`check` finds left after it."""

    def __init__(self, log: AuditLog) -> None:
        self.log = log
        self.depth = len(running_installations())
        self.since = next_serial()  # the test's own sets are made from here on
        self.known = {id(b) for b in _open_here()}
        self.exempt: tuple[range, ...] = ()  # the serials of sets made in exempted blocks, wherever made
        self.default = default_policy()

    @contextmanager
    def exempting(self) -> Iterator[None]:
        """Blocks opened in this block (a wider-scoped fixture's setup, in this Context or another it keeps to
        reset them in at its teardown) are not the test's."""
        before, first = {id(b) for b in _open_here()}, next_serial()
        try:
            yield
        finally:
            self.known |= {id(b) for b in _open_here()} - before
            self.exempt += (range(first, next_serial()),)

    def check(self) -> list[TraceContextError]:
        """Report and undo what was left; the errors to act on (empty: nothing was left)."""
        return [*self._installations(), *self._blocks(), *self._other_threads(), *self._policies()]

    def _installations(self) -> list[TraceContextError]:
        running = running_installations()
        if len(running) <= self.depth:
            return []
        left = running[self.depth :]
        with self.log.stopped():
            try:
                left[0].end()  # ends the ones inside it too
            except Exception:  # noqa: BLE001 - what it found is reported as this one violation
                pass
        return [
            UnbalancedContextError(
                f"the test left {len(left)} installation(s) running: {', '.join(map(repr, left))}; they were ended",
                fix=FIXES["install"],
                site=left[0].site,
            )
        ]

    def _blocks(self) -> list[TraceContextError]:
        left = [b for b in _open_here() if id(b) not in self.known]
        if not left:
            return []
        with self.log.stopped():
            for block in reversed(left):  # outermost first: closing it closes the ones above it too
                if block.is_open:
                    block.close_as_cleanup()
        raw = [b for b in left if isinstance(b, RawBlock)]
        what = f"{len(raw)} set_tracectx() never reset" if len(raw) == len(left) else f"{len(left)} block(s) open"
        return [
            UnbalancedContextError(
                f"the test ended with {what} (closed now): {'; '.join(b.label() for b in reversed(left))}",
                fix=FIXES["raw_set"] if raw else FIXES["unbalanced"],
                site=raw[0].site if raw else None,
            )
        ]

    def _other_threads(self) -> list[TraceContextError]:
        # A running thread or task may still reset its set; one that has ended never will.
        return [
            UnbalancedContextError(
                f"{block.label()} was never reset: it was made in {block.where()}, which no longer runs",
                fix=FIXES["raw_set"],
                site=block.site,
            )
            for block in abandoned_sets(since=self.since, exempt=self.exempt)
        ]

    def _policies(self) -> list[TraceContextError]:
        errors: list[TraceContextError] = []
        if default_policy() is not self.default:
            changed = default_policy()
            swap_default_policy(self.default)
            errors.append(
                UnbalancedContextError(
                    f"the test changed the process default policy to {changed!r} and did not put it back (put back now)",
                    fix="use `with use_policy(...):` for a test's own policy, or restore set_default_policy() in a finally",
                )
            )
        return errors
