"""Policy: presets, per-block overrides, the environment variable, and each action."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading

import pytest

from safe_tracectx import (
    LENIENT,
    STRICT,
    MissingTraceError,
    Policy,
    TraceContextWarning,
    get_policy,
    require_trace,
    set_default_policy,
    use_policy,
)
from safe_tracectx._support import events
from safe_tracectx._support.events import Event
from safe_tracectx.context import TracelessTrace
from safe_tracectx.policy import PresetName


def test_strict_is_the_default_and_raises_every_trace_context_misuse() -> None:
    assert get_policy() is STRICT
    fields = {f: getattr(STRICT, f) for f in STRICT.__dataclass_fields__}
    # the two checks that foresee a clash rather than see one are off unless asked for
    assert fields.pop("checks") == (("unregistered-name", "off"), ("borrowed-namer", "off"))
    assert set(fields.values()) == {"raise"}  # a trace whose program would fail (broken_trace) included


def test_one_trace_check_gets_an_action_of_its_own() -> None:
    from safe_tracectx.errors import UseBeforeDefinitionError
    from safe_tracectx.policy.actions import action_for
    from safe_tracectx.policy import AUDIT, check_overrides

    error = UseBeforeDefinitionError("t0 is used before", fix="define it")
    error.kind = "use-before-definition"
    warned = STRICT.replace(use_before_definition="warn", unregistered_name="raise")
    assert action_for(error, warned) == "warn" and action_for(error, STRICT) == "raise"
    assert warned.action_of_check("unregistered-name") == "raise" and warned.action_of_check("defined-twice") is None
    assert warned.broken_trace == "raise"  # the category stays
    error.kind = None
    assert action_for(error, warned) == "raise"  # an error of no trace check: its category decides
    assert {f: getattr(AUDIT, f) for f in AUDIT.__dataclass_fields__ if f != "checks"} == dict.fromkeys(
        ("missing_trace", "unbalanced", "name_clash", "leaked_proxy", "read_only", "broken_trace"), "ignore"
    )
    assert check_overrides(["defined-twice=warn", " generated_code = log "], option="--check") == {
        "defined_twice": "warn", "generated_code": "log"
    }
    with pytest.raises(ValueError, match="--check defined-twice: give CHECK=ACTION, e.g. --check use-before-definition=warn"):
        check_overrides(["defined-twice"], option="--check")
    with pytest.raises(ValueError, match="unknown policy check\\(s\\) defined_twise; .* the trace checks: use_before_definition"):
        STRICT.replace(defined_twise="warn")
    with pytest.raises(ValueError, match="Policy.checks: defined-twice='loud' is not a valid action; use one of: raise, warn, log, ignore, off"):
        STRICT.replace(defined_twice="loud")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Policy.checks: 'nonsense' is not a trace check"):
        Policy(checks=(("nonsense", "warn"),))
    with pytest.raises(TypeError, match="Policy.checks takes a tuple of"):
        Policy(checks=[("defined-twice", "warn")])  # type: ignore[arg-type]


def test_lenient_makes_missing_traces_traceless_and_warns_the_rest() -> None:
    assert LENIENT.missing_trace == "traceless"
    assert {LENIENT.unbalanced, LENIENT.name_clash, LENIENT.leaked_proxy, LENIENT.read_only, LENIENT.broken_trace} == {"warn"}


def test_policy_is_frozen() -> None:
    with pytest.raises(AttributeError):
        STRICT.unbalanced = "ignore"  # type: ignore[misc]


def test_bad_action_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="Policy.unbalanced='explode' is not a valid action; use one of: raise, warn, log, ignore"):
        Policy(unbalanced="explode")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="use one of: raise, warn, log, ignore$"):
        Policy(read_only="traceless")  # type: ignore[arg-type]
    assert Policy(missing_trace="traceless").missing_trace == "traceless"


def test_bad_preset_and_unknown_event_are_value_errors() -> None:
    with pytest.raises(ValueError, match="'paranoid' is not a policy preset; use one of: strict, lenient, audit"):
        use_policy("paranoid")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown policy check\\(s\\) typo; the checks are"):
        use_policy("strict", typo="raise")
    with pytest.raises(TypeError, match="takes a Policy or a preset name"):
        use_policy(3)  # type: ignore[arg-type]
    assert get_policy() is STRICT


def test_use_policy_nests_restores_and_applies_overrides() -> None:
    with use_policy("lenient") as outer:
        assert get_policy() is outer is LENIENT
        with use_policy(LENIENT, missing_trace="raise") as inner:
            assert inner.missing_trace == "raise" and inner.unbalanced == "warn"
            assert get_policy() is inner
        assert get_policy() is LENIENT
    assert get_policy() is STRICT


def test_use_policy_instance_cannot_be_entered_twice() -> None:
    block = use_policy("lenient")
    with block:
        with pytest.raises(TypeError, match="already entered"):
            block.__enter__()
    assert get_policy() is STRICT


def test_use_policy_as_decorator_and_per_thread() -> None:
    @use_policy("lenient")
    def inside() -> Policy:
        return get_policy()

    assert inside() is LENIENT and get_policy() is STRICT
    seen: list[Policy] = []
    with use_policy("lenient"):
        thread = threading.Thread(target=lambda: seen.append(get_policy()))
        thread.start()
        thread.join()
    assert seen == [STRICT]  # a new thread starts from the default

    async def task(policy: PresetName) -> Policy:
        with use_policy(policy):
            await asyncio.sleep(0)
            return get_policy()

    async def both() -> list[Policy]:
        return list(await asyncio.gather(task("strict"), task("lenient")))

    assert asyncio.run(both()) == [STRICT, LENIENT]


def test_set_default_policy_and_back() -> None:
    assert set_default_policy("lenient", read_only="raise") == LENIENT.replace(read_only="raise")
    assert get_policy().read_only == "raise" and get_policy().missing_trace == "traceless"
    with use_policy("strict"):
        assert get_policy() is STRICT
    set_default_policy(None)
    assert get_policy() is STRICT


def test_environment_variable_selects_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAFE_TRACECTX_POLICY", "Lenient")
    assert get_policy() is LENIENT
    monkeypatch.setenv("SAFE_TRACECTX_POLICY", "nope")
    with pytest.raises(ValueError, match="environment variable SAFE_TRACECTX_POLICY='nope' .* strict, lenient"):
        get_policy()


def test_a_bad_environment_variable_is_refused_by_install_before_any_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    from safe_tracectx import install
    from safe_tracectx.hooks.installer import running_installations

    monkeypatch.setenv("SAFE_TRACECTX_POLICY", "bogus")
    with pytest.raises(ValueError, match="SAFE_TRACECTX_POLICY='bogus' is not a policy preset"):
        install()
    assert running_installations() == ()  # nothing left to uninstall
    install("lenient").end()  # a policy given outright does not read the variable


def test_environment_variable_in_a_fresh_process() -> None:
    code = "import safe_tracectx as s; print(s.get_policy() is s.LENIENT)"
    env = {**__import__("os").environ, "SAFE_TRACECTX_POLICY": "lenient"}
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "True", out.stderr


def test_require_trace_applies_each_missing_trace_action(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(MissingTraceError) as info:
        require_trace("naming a proxy")
    message = str(info.value)
    assert "naming a proxy needs an active trace" in message
    assert __file__ in message
    assert "tracectx(trace)" in message and "scratch_trace" in message and "traceless()" in message

    with use_policy("strict", missing_trace="traceless"):
        assert isinstance(require_trace("x"), TracelessTrace)
    with use_policy("strict", missing_trace="warn"):
        with pytest.warns(TraceContextWarning, match="x needs an active trace"):
            assert require_trace("x") is None
    with use_policy("strict", missing_trace="log"), caplog.at_level(logging.WARNING, "safe_tracectx"):
        assert require_trace("y") is None
    assert any("y needs an active trace" in r.getMessage() for r in caplog.records)
    with use_policy("strict", missing_trace="ignore"):
        assert require_trace("z") is None


def test_warnings_can_be_turned_into_errors_by_category() -> None:
    with use_policy("strict", missing_trace="warn"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error", TraceContextWarning)
            with pytest.raises(TraceContextWarning):
                require_trace("x")


def test_act_emits_a_violation_event_with_the_action() -> None:
    seen: list[Event] = []
    events.sinks.append(seen.append)
    try:
        with use_policy("strict", missing_trace="ignore"):
            require_trace("x")
    finally:
        events.sinks.pop()
    assert [(e.kind, e.detail["code"], e.detail["action"]) for e in seen] == [("violation", "MissingTraceError", "ignore")]
    assert seen[0].site is not None and seen[0].site.filename == __file__


# ---- use_policy's exits, and a bad policy variable under a KeyboardInterrupt ------------------------

import contextvars  # noqa: E402

import thunder.core.trace as tt  # noqa: E402
from thunder.core.trace import TraceCtx  # noqa: E402

from safe_tracectx import UnbalancedContextError, tracectx  # noqa: E402


def test_use_policy_reports_out_of_order_and_foreign_exits_like_a_block() -> None:
    first, second = use_policy("lenient"), use_policy("strict", missing_trace="warn")
    first.__enter__()
    second.__enter__()
    with pytest.raises(UnbalancedContextError, match="still open"):  # judged by the policy in force after it
        first.__exit__(None, None, None)
    second.__exit__(None, None, None)  # silent, and re-activates nothing
    assert get_policy() is STRICT

    third = use_policy("lenient")
    third.__enter__()
    with pytest.warns(TraceContextWarning, match="another thread or Context"):  # lenient is in force there
        contextvars.copy_context().run(third.__exit__, None, None, None)
    assert get_policy() is LENIENT
    third.__exit__(None, None, None)  # the owner can still exit
    assert get_policy() is STRICT


def test_a_keyboard_interrupt_stays_and_names_the_typo_when_the_policy_variable_is_misspelt(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAFE_TRACECTX_POLICY", "lenent")
    with pytest.raises(KeyboardInterrupt) as info:
        with tracectx(TraceCtx()):
            token = tt.set_tracectx(TraceCtx())
            del token
            raise KeyboardInterrupt
    assert any("lenent" in note for note in info.value.__notes__)
