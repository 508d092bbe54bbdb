"""A stateful property-based model of trace contexts (hypothesis RuleBasedStateMachine).

The model is a stack of open entries. Entering pushes. Exiting an entry that is
on the stack closes it and everything above it; exiting one that is not changes
nothing. The active trace is the top entry's trace (None when empty). After
every step the real active trace must be the model's, no ended block's trace may
be active, and each misuse must be reported per the policy in force.

Raw ``set_tracectx`` tokens made while *not* installed are plain ContextVar tokens,
which nothing can guard: the machine resets those only in order and never closes
a block over one (that is what ``install()`` is for). Everything else may happen
in any order.

Run longer:  pytest tests/test_state_machine.py --hypothesis-profile=long
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, get_tracectx, reset_tracectx, set_tracectx
from thunder.core.trace import tracectx as thunder_tracectx

import safe_tracectx.policy as policy_module
from safe_tracectx import Policy, TraceContextError, TraceContextWarning, scratch_trace, traceless, tracectx
from safe_tracectx.hooks import install, is_installed, uninstall

ACTIONS = ("raise", "warn", "log", "ignore")


@dataclasses.dataclass(eq=False)
class Entry:
    """One enter: what made it, its trace, how to exit it, and whether it has been exited."""

    kind: str  # tracectx, read_only, scratch, traceless, raw, thunder
    trace: Any
    exit: Any
    guarded: bool  # raw entries only: made while installed (guarded) or not (a plain Token)
    used: bool = False  # its own exit has been called
    names_added: bool = False


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class TraceContextMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[Entry] = []
        self.entries: list[Entry] = []
        self.ended_traces: list[Any] = []
        self.action = "ignore"
        policy_module.swap_default_policy(Policy(unbalanced="ignore", read_only="ignore"))
        self.logs = _Records()
        logging.getLogger("safe_tracectx").addHandler(self.logs)

    # ---- helpers ---------------------------------------------------------------------

    def _push(self, entry: Entry) -> None:
        self.stack.append(entry)
        self.entries.append(entry)

    def _close(self, entry: Entry, *, raising: bool = False) -> None:
        """Exit ``entry`` through its real exit and check it against the model."""
        expected = 0
        if entry.used:
            expected += 1  # exited a second time (only our blocks can be; a token is used once)
        elif entry in self.stack:
            position = self.stack.index(entry)
            if position != len(self.stack) - 1:
                expected += 1  # blocks (or raw sets) still open above it: closed with it
            for gone in self.stack[position:]:
                self.ended_traces.append(gone.trace)
            del self.stack[position:]
        # else: closed earlier with an enclosing entry; its own exit is silent and changes nothing
        if entry.kind == "read_only" and not entry.used and entry.names_added:
            expected += 1
        entry.used = True
        self._expect_reports(expected, lambda: entry.exit(raising))

    def _expect_reports(self, expected: int, call: Any) -> None:
        before_logs = len(self.logs.records)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                call()
                raised: BaseException | None = None
            except TraceContextError as error:
                raised = error
            except KeyError as error:  # the exception raised inside the block
                raised = error if self.action == "raise" and expected else None
        ours = [w for w in caught if issubclass(w.category, TraceContextWarning)]
        logged = len(self.logs.records) - before_logs
        if self.action == "raise":
            assert (raised is not None and isinstance(raised, TraceContextError)) == bool(expected), (raised, expected)
        elif self.action == "warn":
            assert len(ours) == expected, (ours, expected)
        elif self.action == "log":
            assert logged == expected, (logged, expected)
        else:
            assert not ours and logged == 0

    # ---- rules: entering ---------------------------------------------------------------

    @rule(kind=st.sampled_from(["tracectx", "read_only", "scratch", "traceless"]))
    def enter_block(self, kind: str) -> None:
        manager: Any
        if kind == "scratch":
            manager = scratch_trace(*[e.trace for e in self.stack if isinstance(e.trace, TraceCtx)][-2:])
        elif kind == "traceless":
            manager = traceless()
        else:
            manager = tracectx(TraceCtx(), read_only=kind == "read_only")
        trace = manager.__enter__()

        def exit_(raising: bool) -> None:
            if raising:
                try:
                    raise KeyError("inside")
                except KeyError as error:
                    if manager.__exit__(KeyError, error, None) is not True:
                        raise
            else:
                manager.__exit__(None, None, None)

        self._push(Entry(kind, trace, exit_, guarded=True))
        self.manager_of_last = manager

    @rule()
    def raw_set(self) -> None:
        trace = TraceCtx()
        token = set_tracectx(trace)
        self._push(Entry("raw", trace, lambda raising: reset_tracectx(token), guarded=is_installed()))

    @rule()
    def thunder_tracectx_enter(self) -> None:
        trace = TraceCtx()
        manager = thunder_tracectx(trace)
        manager.__enter__()
        self._push(Entry("raw", trace, lambda raising: manager.__exit__(None, None, None), guarded=is_installed()))

    @precondition(lambda self: hasattr(self, "manager_of_last"))
    @rule()
    def enter_an_entered_instance_again(self) -> None:
        before = get_tracectx()
        with pytest.raises(TypeError, match="already entered"):
            self.manager_of_last.__enter__()
        assert get_tracectx() is before

    # ---- rules: exiting ----------------------------------------------------------------

    def _exitable(self) -> list[Entry]:
        """Entries a rule may exit: raw tokens once each, plain (unguarded) ones only in order."""
        allowed = []
        for entry in self.entries:
            if entry.kind == "raw":
                if entry.used:
                    continue  # a token is used once
                if not (entry.guarded and is_installed()) and not (self.stack and self.stack[-1] is entry):
                    continue  # a plain token reset out of order is what nothing can guard
            if entry in self.stack:
                above = self.stack[self.stack.index(entry) + 1 :]
                if any(e.kind == "raw" and not e.guarded for e in above):
                    # Closing over a plain token orphans it, and its owner's later reset (or a
                    # suspended generator's finalizer, at GC time) restores a stale value: unguardable.
                    continue
            allowed.append(entry)
        return allowed

    @precondition(lambda self: bool(self._exitable()))
    @rule(data=st.data(), raising=st.booleans())
    def exit_some_entry(self, data: st.DataObject, raising: bool) -> None:
        entry = data.draw(st.sampled_from(self._exitable()))
        self._close(entry, raising=raising and entry.kind != "raw")

    @precondition(lambda self: bool(self.stack) and self.stack[-1] in self._exitable())
    @rule()
    def exit_top(self) -> None:
        self._close(self.stack[-1])

    # ---- rules: policy, proxies, install -------------------------------------------------

    @rule(action=st.sampled_from(ACTIONS))
    def switch_policy(self, action: str) -> None:
        self.action = action
        policy_module.swap_default_policy(Policy(unbalanced=action, read_only=action))  # type: ignore[arg-type]

    @precondition(lambda self: bool(self.stack))
    @rule()
    def create_a_proxy(self) -> None:
        proxy = TensorProxy(shape=(1,), device=cpu, dtype=float32)
        top = self.stack[-1]
        if top.kind != "traceless":
            assert proxy.name in top.trace.names
        for entry in self.stack:
            if entry.kind == "read_only" and entry.trace is top.trace:
                entry.names_added = True

    @rule()
    def install_hooks(self) -> None:
        install()

    @precondition(lambda self: not any(e.kind == "raw" and e.guarded and not e.used for e in self.entries))
    @rule()
    def uninstall_hooks(self) -> None:
        uninstall()

    # ---- invariants ---------------------------------------------------------------------

    @invariant()
    def the_active_trace_is_the_models(self) -> None:
        expected = self.stack[-1].trace if self.stack else None
        assert get_tracectx() is expected, (get_tracectx(), expected, [e.kind for e in self.stack])

    @invariant()
    def no_ended_blocks_trace_is_active(self) -> None:
        active = get_tracectx()
        assert active is None or all(active is not t for t in self.ended_traces)

    def teardown(self) -> None:
        try:
            if not is_installed():
                install()  # so that guarded raw sets are closed by their guard
            policy_module.swap_default_policy(Policy(unbalanced="ignore", read_only="ignore"))
            for entry in [*reversed(self.stack), *self.entries]:
                if not entry.used:
                    entry.used = True
                    entry.exit(False)
            assert get_tracectx() is None, ("teardown left", get_tracectx(), [(e.kind, e.guarded, e.used) for e in self.entries])
        finally:
            uninstall()
            policy_module.swap_default_policy(None)
            logging.getLogger("safe_tracectx").removeHandler(self.logs)
        assert get_tracectx() is None


TestTraceContextMachine = TraceContextMachine.TestCase
