"""Every block: its slots set by ``__init__``, its enter and exit from the one fast path of its ContextVar pair."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from types import TracebackType
from typing import Any

import pytest
from thunder.core.trace import TraceCtx, get_tracectx

import safe_tracectx
from safe_tracectx import UnbalancedContextError, scratch_trace, traceless, tracectx, use_policy
from safe_tracectx.context.blocks import OWNER_VAR, TRACE_VAR, Block, fast_path
from safe_tracectx.hooks.guard import RawBlock

#: Each block class of the package, and ways to construct it with valid arguments.
SAMPLES: dict[type[Block[Any]], list[Callable[[], Block[Any]]]] = {
    Block: [lambda: Block(TraceCtx())],
    tracectx: [lambda: tracectx(TraceCtx()), lambda: tracectx(TraceCtx(), read_only=True), lambda: tracectx(None)],
    scratch_trace: [scratch_trace, lambda: scratch_trace(TraceCtx(), names=["t0"])],
    traceless: [traceless],
    use_policy: [lambda: use_policy("strict"), lambda: use_policy("lenient", read_only="warn")],
    RawBlock: [lambda: RawBlock(TraceCtx(), None)],
}


def _package_block_classes() -> set[type[Block[Any]]]:
    """Block and its subclasses defined in the package (every module imported first, so none is missed)."""
    for module in pkgutil.walk_packages(safe_tracectx.__path__, "safe_tracectx."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)

    def walk(cls: type[Block[Any]]) -> Iterator[type[Block[Any]]]:
        yield cls
        for subclass in cls.__subclasses__():
            yield from walk(subclass)

    return {cls for cls in walk(Block) if cls.__module__.startswith("safe_tracectx.")}


def _slots(cls: type) -> set[str]:
    return {name for klass in cls.__mro__ for name in getattr(klass, "__slots__", ())}


def test_every_block_class_of_the_package_has_samples() -> None:
    missing = _package_block_classes() - set(SAMPLES)
    assert missing == set(), f"add a way to construct {sorted(c.__qualname__ for c in missing)} to SAMPLES"


@pytest.mark.parametrize("cls", SAMPLES, ids=lambda cls: cls.__qualname__)
def test_init_sets_every_slot_but_those_set_at_enter(cls: type[Block[Any]]) -> None:
    slots = _slots(cls)
    assert cls.set_at_enter <= slots, "set_at_enter names a slot the class does not have"
    for make in SAMPLES[cls]:
        block = make()
        assert type(block) is cls
        assert sorted(name for name in slots - cls.set_at_enter if not hasattr(block, name)) == []


@pytest.mark.parametrize("cls", SAMPLES, ids=lambda cls: cls.__qualname__)
def test_every_block_enters_and_exits_through_the_one_fast_path(cls: type[Block[Any]]) -> None:
    made = fast_path(ContextVar("any value"), ContextVar("any owner"))
    assert cls.__enter__.__code__ is made["__enter__"].__code__
    assert cls.__exit__.__code__ is made["__exit__"].__code__


def _flag_vars() -> tuple[ContextVar[Any], ContextVar[Any]]:
    return ContextVar("flag", default=None), ContextVar("flag.owner", default=None)


def test_a_block_on_its_own_pair_of_contextvars_sets_and_checks_those() -> None:
    class Flag(Block[str]):
        __slots__ = ()
        value_var, owner_var = _flag_vars()

    trace_block = tracectx(TraceCtx())
    with trace_block as trace:
        outer, inner = Flag("outer"), Flag("inner")
        assert outer.__enter__() == "outer" and inner.__enter__() == "inner"
        assert Flag.value_var.get() == "inner" and Flag.owner_var.get() is inner
        assert get_tracectx() is trace and OWNER_VAR.get() is trace_block
        with pytest.raises(UnbalancedContextError, match=r"Flag\(.*still open: Flag\("):
            outer.__exit__(None, None, None)
        assert Flag.value_var.get() is None and Flag.owner_var.get() is None
        inner.__exit__(None, None, None)  # closed with outer: silent
        assert get_tracectx() is trace and OWNER_VAR.get() is trace_block


def test_a_block_keeps_an_enter_or_exit_it_defines_itself() -> None:
    exits: list[str] = []

    class Counted(Block[str]):
        __slots__ = ()
        value_var, owner_var = _flag_vars()

        def __exit__(
            self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
        ) -> None:
            exits.append(self._value)

    assert Counted.__enter__.__code__ is Block.__enter__.__code__ and Counted.__enter__ is not Block.__enter__
    block = Counted("on")
    with block:
        assert Counted.value_var.get() == "on" and TRACE_VAR.get(None) is None
    assert exits == ["on"] and Counted.value_var.get() == "on"  # its own exit ran, and reset nothing
    assert block._close() == [] and Counted.value_var.get() is None


@pytest.mark.parametrize("own", ["value_var", "owner_var"])
def test_a_block_naming_half_a_pair_of_contextvars_is_refused_when_defined(own: str) -> None:
    """With its own value but the trace blocks' owner, a block entered inside ``tracectx`` and exited after it
    would be 'closed' by its exit and leave its value set for good: refused at the class statement."""
    with pytest.raises(TypeError, match=rf"^Half names its own {own} but inherits \w+: a block's value and owner "
                                        r"ContextVars are a pair; name both"):
        type("Half", (Block,), {"__slots__": (), own: ContextVar("half", default=None)})
