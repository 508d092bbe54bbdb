"""The messages of STC001 say what skips the reset: an early return, raise, break or continue."""

from __future__ import annotations

from pathlib import Path

import pytest

from safe_tracectx.lint import lint_paths

CASE = Path(__file__).resolve().parent / "lint_cases" / "stc001_early_exit.py"


@pytest.fixture(scope="module")
def messages() -> dict[int, str]:
    return {f.finding.line: f.finding.message for f in lint_paths([str(CASE)]).findings}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (7, "an early return at line 9 skips reset_tracectx(tok) (line 10)"),
        (14, "a raise at line 16 skips reset_tracectx(tok) (line 17)"),
        (22, "a break at line 24 skips reset_tracectx(tok) (line 25)"),
        (30, "a continue at line 32 skips reset_tracectx(tok) (line 33)"),
        (37, "its reset_tracectx(tok) (line 41) is skipped if anything in between raises"),
        (45, "its reset_tracectx(tok) (line 49, 51) is skipped if anything in between raises"),
        (55, "its reset_tracectx(tok) (line 59) runs only in `except`; the normal path never resets"),
        (65, "its reset_tracectx(tok) (line 67) is skipped if anything in between raises"),
    ],
)
def test_the_message_names_what_skips_the_reset(messages: dict[int, str], line: int, message: str) -> None:
    assert messages[line] == f"set_tracectx() not guaranteed to be reset: {message}"


def test_a_stored_token_without_reset_says_where_it_is_stored(messages: dict[int, str]) -> None:
    assert messages[72] == "set_tracectx() token is stored in `self._token` where no reset_tracectx() can be seen"
    assert messages[77] == messages[72]


def test_several_exits_are_counted() -> None:
    from safe_tracectx.lint import lint_source

    source = "def f(t):\n    tok = set_tracectx(t)\n    if a:\n        return 1\n    if b:\n        raise E\n    reset_tracectx(tok)\n"
    (finding,) = lint_source(source)
    assert finding.message.endswith("an early return at line 4 (and 1 more: line 6) skips reset_tracectx(tok) (line 7)")


def test_a_returned_token_is_named_as_such() -> None:
    from safe_tracectx.lint import lint_source

    (finding,) = lint_source("def f(t):\n    tok = set_tracectx(t)\n    return True, tok\n")
    assert finding.message.endswith("no reset_tracectx(tok) in this function; the token is returned (line 3) for a caller to reset")
