"""``# noqa`` is a comment on the line Python counts: not text in a string, whatever odd line breaks precede it."""

from __future__ import annotations

import pytest

from safe_tracectx.lint import lint_source

BODY = "def f(t):\n    tok = set_tracectx(t)  # noqa: STC001\n    g()\n    reset_tracectx(tok)\n"


@pytest.mark.parametrize("before", ["x = 1 \f\n", "# a comment \u2028 with LS\n", "s = 'a\u2029b\x0bc\x1cd\x85'\n", "x = 1\r\n"])
def test_noqa_after_characters_str_splitlines_breaks_on(before: str) -> None:
    assert lint_source(before + BODY) == []


def test_noqa_with_carriage_return_line_endings() -> None:
    assert lint_source((("x = 1\n" + BODY).replace("\n", "\r"))) == []


def test_noqa_in_a_string_is_no_comment() -> None:
    found = lint_source('def f(t):\n    set_tracectx("# noqa")\n    set_tracectx(t)  # type: ignore # noqa: STC001\n')
    assert [(f.line, f.code) for f in found] == [(2, "STC001")]


def test_noqa_in_a_file_that_does_not_tokenize() -> None:
    assert [f.code for f in lint_source("def broken(:  # noqa\n")] == []
    assert [f.code for f in lint_source("def broken(:\n")] == ["STC901"]
