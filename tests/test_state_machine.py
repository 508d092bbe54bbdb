"""A stateful property-based model of trace contexts (hypothesis RuleBasedStateMachine).

The model is a stack of open entries in the machine's own thread and Context.
Entering pushes. Exiting an entry that is on the stack closes it and everything
above it; exiting one that is not changes nothing. The active trace is the top
entry's trace (None when empty). Besides the plain enters and exits it drives:

- exits attempted from another thread and from a copied Context (reported, nothing changes);
- entries made inside generators, finished or finalized later (``GeneratorExit`` in flight);
- ``KeyError`` and ``KeyboardInterrupt`` through exits (a BaseException is never replaced);
- raw ``set_tracectx`` tokens reset twice;
- nested ``install()`` / ``installed()`` with blocks and guarded sets open across their end;
- read-only traces whose ``names`` a trace made inside with ``from_trace`` shares;
- all four policy actions.

After every step the real active trace must be the model's, no ended block's
trace may be active, and each misuse must be reported per the policy, exactly
as often as the model says. Raw tokens made while *not* installed are plain
ContextVar tokens, which nothing can guard: the machine resets those only in
order and never closes a block over one (that is what ``install()`` is for).

Run longer:  pytest tests/test_state_machine.py --hypothesis-profile=long
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import threading
import warnings
from collections.abc import Callable, Generator
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, from_trace, get_tracectx, reset_tracectx, set_tracectx
from thunder.core.trace import tracectx as thunder_tracectx

import safe_tracectx.policy as policy_module
from safe_tracectx import Policy, TraceContextError, TraceContextWarning, scratch_trace, traceless, tracectx
from safe_tracectx.context.blocks import open_blocks
from safe_tracectx.hooks import install, installed, is_installed, running_installations, uninstall

ACTIONS = ("raise", "warn", "log", "ignore")
HOWS = ("normal", "raise", "interrupt")  # how an exit happens: plainly, with KeyError or KeyboardInterrupt in flight
RAW_KINDS = ("raw", "thunder", "gen_thunder")
OUR_KINDS = ("tracectx", "read_only", "scratch", "traceless", "gen_ours")


@dataclasses.dataclass(eq=False)
class Entry:
    """One enter: what made it, its trace, how to exit it, and what has happened to it."""

    kind: str  # tracectx, read_only, scratch, traceless, gen_ours, raw, thunder, gen_thunder
    trace: Any
    exit: Callable[[str], None]
    inst: int  # installation depth when made (raw kinds; 0: a plain, unguarded token)
    manager: Any = None
    used: bool = False  # its own exit has been called
    spent: bool = False  # a guarded set closed by another exit or an installation's end: its token is spent
    released: bool = False  # ... and every installation has ended since
    names_added: bool = False

    @property
    def guarded(self) -> bool:
        return self.kind in RAW_KINDS and self.inst > 0


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _raising(how: str) -> BaseException | None:
    return {"normal": None, "raise": KeyError("inside"), "interrupt": KeyboardInterrupt()}[how]


def _exiting(manager: Any) -> Callable[[str], None]:
    """How a context manager is exited, plainly or with an exception in flight, as a with-statement does."""

    def exit_(how: str) -> None:
        error = _raising(how)
        if error is None:
            manager.__exit__(None, None, None)
            return
        try:
            raise error
        except BaseException as caught:  # noqa: BLE001 - handed to __exit__ like a with-statement does
            if not manager.__exit__(type(caught), caught, None):
                raise

    return exit_


class TraceContextMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[Entry] = []
        self.entries: list[Entry] = []
        self.ended_traces: list[Any] = []
        self.shared: list[tuple[TraceCtx, str]] = []  # (trace made inside a read-only block, a name it registered)
        self.installs: list[tuple[str, Any]] = []  # ("bare", None) or ("block", the installed() manager)
        self.action = "ignore"
        policy_module.swap_default_policy(Policy(unbalanced="ignore", read_only="ignore"))
        self.logs = _Records()
        logging.getLogger("safe_tracectx").addHandler(self.logs)

    # ---- the model ---------------------------------------------------------------------

    def _push(self, entry: Entry) -> None:
        self.stack.append(entry)
        self.entries.append(entry)

    def _remove_from(self, position: int) -> int:
        """Close stack[position:] (the bottom one by its own exit or a clean-up); return read-only reports."""
        reports = 0
        for index, gone in enumerate(self.stack[position:]):
            self.ended_traces.append(gone.trace)
            if index > 0 and gone.kind == "read_only" and gone.names_added:
                reports += 1  # a read-only block closed with an enclosing one is checked then
            if index > 0 and gone.guarded:
                gone.spent = True
        del self.stack[position:]
        return reports

    def _expected_for_exit(self, entry: Entry) -> tuple[int, bool]:
        """(reports, whether Python raises RuntimeError for a spent token) for exiting ``entry`` now."""
        if entry.used:
            return 1, False  # exited a second time (our blocks; raw tokens are never reused by this rule)
        if entry in self.stack:
            position = self.stack.index(entry)
            reports = 1 if position != len(self.stack) - 1 else 0
            if entry.kind == "read_only" and entry.names_added:
                reports += 1
            return reports + self._remove_from(position), False
        if entry.guarded and entry.spent:
            if entry.released:
                return (1, False) if self.installs else (0, True)
            return 0, False
        return 0, False  # closed earlier with an enclosing entry: silent

    def _run(self, expected: int, call: Callable[[], None], *, base: bool = False, runtime: bool = False) -> None:
        """Run ``call`` and check it reported ``expected`` misuses per the action.

        ``base``: a BaseException that is not an Exception is in flight, so reports become log records
        (never a raise or a warning that would replace it). ``runtime``: Python's own RuntimeError for a
        spent token is expected instead of any report.
        """
        before_logs = len(self.logs.records)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            raised: BaseException | None = None
            try:
                call()
            except (TraceContextError, KeyError, KeyboardInterrupt, RuntimeError) as error:
                raised = error
        ours = [w for w in caught if issubclass(w.category, TraceContextWarning)]
        logged = len(self.logs.records) - before_logs
        if runtime:
            assert isinstance(raised, RuntimeError) and not isinstance(raised, TraceContextError), raised
            return
        if isinstance(raised, RuntimeError) and not isinstance(raised, TraceContextError):
            raise AssertionError(f"unexpected RuntimeError: {raised}")
        if base:
            assert raised is None or isinstance(raised, KeyboardInterrupt), raised  # never replaced
            assert not ours
            assert logged == (expected if self.action != "ignore" else 0), (logged, expected, self.action)
            return
        if self.action == "raise":
            assert isinstance(raised, TraceContextError) == bool(expected), (raised, expected)
        else:
            assert not isinstance(raised, TraceContextError), raised
            if self.action == "warn":
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
        self._push(Entry(kind, trace, _exiting(manager), inst=0, manager=manager))

    @rule()
    def raw_set(self) -> None:
        trace = TraceCtx()
        token = set_tracectx(trace)

        def exit_(how: str) -> None:
            error = _raising(how)
            if error is None:
                reset_tracectx(token)
                return
            try:
                raise error
            finally:
                reset_tracectx(token)

        self._push(Entry("raw", trace, exit_, inst=len(self.installs)))

    @rule()
    def thunder_tracectx_enter(self) -> None:
        trace = TraceCtx()
        manager = thunder_tracectx(trace)
        manager.__enter__()
        self._push(Entry("thunder", trace, _exiting(manager), inst=len(self.installs)))

    @rule(ours=st.booleans())
    def enter_in_a_generator(self, ours: bool) -> None:
        trace = TraceCtx()

        def body() -> Generator[None, None, None]:
            with tracectx(trace) if ours else thunder_tracectx(trace):
                yield

        gen = body()
        next(gen)

        def exit_(how: str) -> None:
            if how == "normal":
                next(gen, None)  # runs to the end: a plain exit
            else:
                gen.close()  # GeneratorExit through the block

        self._push(Entry("gen_ours" if ours else "gen_thunder", trace, exit_, inst=0 if ours else len(self.installs)))

    @precondition(lambda self: bool(self.stack) and self.stack[-1].kind == "read_only")
    @rule()
    def from_trace_inside_a_read_only_block(self) -> None:
        """Thunder's from_trace shares `names`: the new trace must keep its names after the restore."""
        top = self.stack[-1]
        made = from_trace(top.trace)
        name = f"shared{len(self.shared)}"
        made.add_name(name)
        top.names_added = True
        self.shared.append((made, name))

    # ---- rules: exiting ----------------------------------------------------------------

    def _exitable(self) -> list[Entry]:
        """Entries a rule may exit: raw tokens once each, plain (unguarded) ones only in order."""
        allowed = []
        for entry in self.entries:
            if entry.kind in RAW_KINDS:
                if entry.used:
                    continue  # a token is used once (resetting one twice is its own rule)
                if not entry.guarded and not (self.stack and self.stack[-1] is entry):
                    continue  # a plain token reset out of order is what nothing can guard
            if entry.kind.startswith("gen_") and entry.used:
                continue  # a finished generator is gone
            if entry in self.stack:
                above = self.stack[self.stack.index(entry) + 1 :]
                if any(e.kind in RAW_KINDS and not e.guarded for e in above):
                    # Closing over a plain token orphans it, and its owner's later reset (or a
                    # suspended generator's finalizer, at GC time) restores a stale value: unguardable.
                    continue
            allowed.append(entry)
        return allowed

    @precondition(lambda self: bool(self._exitable()))
    @rule(data=st.data(), how=st.sampled_from(HOWS))
    def exit_some_entry(self, data: st.DataObject, how: str) -> None:
        entry = data.draw(st.sampled_from(self._exitable()))
        if entry.kind.startswith("gen_"):
            how = "normal" if how == "normal" else "close"
        reports, runtime = self._expected_for_exit(entry)
        if runtime:
            how = "normal"  # a spent token's reset: Python's RuntimeError, whatever is in flight
        entry.used = True
        base = how in ("interrupt", "close")
        self._run(reports, lambda: entry.exit(how), base=base, runtime=runtime)

    @precondition(lambda self: bool(self.stack) and self.stack[-1] in self._exitable())
    @rule()
    def exit_top(self) -> None:
        entry = self.stack[-1]
        reports, runtime = self._expected_for_exit(entry)
        entry.used = True
        self._run(reports, lambda: entry.exit("normal"), runtime=runtime)

    def _foreign_exitable(self) -> list[Entry]:
        return [e for e in self.stack if e.manager is not None or e.guarded and is_installed() and e.kind == "raw"]

    @precondition(lambda self: bool(self._foreign_exitable()))
    @rule(data=st.data(), where=st.sampled_from(["thread", "context"]))
    def exit_from_the_wrong_thread_or_context(self, data: st.DataObject, where: str) -> None:
        entry = data.draw(st.sampled_from(self._foreign_exitable()))
        errors: list[BaseException] = []

        def attempt() -> None:
            try:
                if entry.manager is not None:
                    entry.manager.__exit__(None, None, None)
                else:
                    entry.exit("normal")
            except BaseException as error:  # noqa: BLE001 - handed to the main thread
                errors.append(error)

        def call() -> None:
            if where == "context":
                contextvars.copy_context().run(attempt)
            else:
                thread = threading.Thread(target=attempt)
                thread.start()
                thread.join()
            if errors:
                raise errors[0]

        self._run(1, call)  # reported, and nothing changes (the model is untouched)

    @precondition(lambda self: any(e.kind == "raw" and e.used and e.guarded for e in self.entries))
    @rule(data=st.data())
    def reset_a_raw_token_twice(self, data: st.DataObject) -> None:
        entry = data.draw(st.sampled_from([e for e in self.entries if e.kind == "raw" and e.used and e.guarded]))
        if self.installs:
            self._run(1, lambda: entry.exit("normal"))  # "already reset": reported, nothing re-activated
        else:
            self._run(0, lambda: entry.exit("normal"), runtime=True)

    # ---- rules: policy, proxies, installations ---------------------------------------------

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

    @rule(as_block=st.booleans())
    def install_hooks(self, as_block: bool) -> None:
        if as_block:
            manager = installed()
            manager.__enter__()
            self.installs.append(("block", manager))
        else:
            install()
            self.installs.append(("bare", None))

    def _end_installations(self, target: int) -> int:
        """The model of ending installation ``target`` (an index): the inner ones first; return the reports."""
        reports = 0
        while len(self.installs) > target:
            depth = len(self.installs)
            reports += 1 if depth - 1 != target else 0  # an inner one still running
            leaked = [i for i, e in enumerate(self.stack) if e.guarded and e.inst == depth]
            if leaked:
                self.stack[leaked[0]].spent = True  # force-closed: its owner's late reset finds a spent token
                reports += 1 + self._remove_from(leaked[0])
            self.installs.pop()
        if not self.installs:
            for entry in self.entries:
                if entry.guarded and entry.spent and not entry.used:
                    entry.released = True
        return reports

    @precondition(lambda self: bool(self.installs))
    @rule()
    def uninstall_hooks(self) -> None:
        if self.installs[-1][0] == "block":
            before = get_tracectx()
            try:
                uninstall()
            except TraceContextError as error:  # always raised: a misuse of the API, not a policy matter
                assert "no matching install()" in str(error)
            else:
                raise AssertionError("uninstall() ended an installation made by installed()")
            assert get_tracectx() is before
            return
        reports = self._end_installations(len(self.installs) - 1)
        self._run(reports, uninstall)

    @precondition(lambda self: any(kind == "block" for kind, _ in self.installs))
    @rule(data=st.data())
    def end_an_installed_block(self, data: st.DataObject) -> None:
        index = data.draw(st.sampled_from([i for i, (kind, _) in enumerate(self.installs) if kind == "block"]))
        manager = self.installs[index][1]
        reports = self._end_installations(index)
        self._run(reports, lambda: manager.__exit__(None, None, None))

    @precondition(lambda self: not self.installs)
    @rule()
    def uninstall_with_nothing_installed(self) -> None:
        try:
            uninstall()
        except TraceContextError as error:
            assert "nothing installed" in str(error)
        else:
            raise AssertionError("an unbalanced uninstall() must be an error")

    # ---- invariants ---------------------------------------------------------------------

    @invariant()
    def the_active_trace_is_the_models(self) -> None:
        expected = self.stack[-1].trace if self.stack else None
        assert get_tracectx() is expected, (get_tracectx(), expected, [e.kind for e in self.stack])

    @invariant()
    def no_ended_blocks_trace_is_active(self) -> None:
        active = get_tracectx()
        assert active is None or all(active is not t for t in self.ended_traces)

    @invariant()
    def traces_made_inside_read_only_blocks_keep_their_names(self) -> None:
        assert all(name in made.names for made, name in self.shared)

    @invariant()
    def open_blocks_are_the_models(self) -> None:
        """The chain of open blocks (each found through the one it displaced) is the model's stack."""
        expected = [e.trace for e in reversed(self.stack) if e.kind in OUR_KINDS or (e.guarded and not e.released)]
        assert [block._value for block in open_blocks()] == expected, [e.kind for e in self.stack]

    @invariant()
    def installations_are_the_models(self) -> None:
        assert len(running_installations()) == len(self.installs)

    def teardown(self) -> None:
        try:
            policy_module.swap_default_policy(Policy(unbalanced="ignore", read_only="ignore"))
            self.action = "ignore"
            for entry in reversed(self.stack):
                if not entry.used:
                    entry.used = True
                    with contextlib.suppress(RuntimeError):
                        entry.exit("normal")
            while running_installations():
                with contextlib.suppress(TraceContextError):
                    running_installations()[0].end()
            for entry in self.entries:  # generators finalized now, not by a later test's garbage collection
                if (entry.kind.startswith("gen_") or entry.kind == "thunder") and not entry.used:
                    entry.used = True
                    with contextlib.suppress(RuntimeError, TraceContextError):
                        entry.exit("close" if entry.kind.startswith("gen_") else "normal")
            assert get_tracectx() is None, ("teardown left", get_tracectx(), [(e.kind, e.inst, e.used) for e in self.entries])
        finally:
            while running_installations():
                with contextlib.suppress(TraceContextError):
                    running_installations()[0].end()
            policy_module.swap_default_policy(None)
            logging.getLogger("safe_tracectx").removeHandler(self.logs)
        assert get_tracectx() is None


TestTraceContextMachine = TraceContextMachine.TestCase
