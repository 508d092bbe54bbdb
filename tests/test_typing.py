"""mypy --strict on tests/typing: what must pass, what must be rejected (with its error code), revealed types."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest
from mypy import api

TYPING = Path(__file__).resolve().parent / "typing"
EXPECT = re.compile(r"#\s*(?P<kind>[EN]): (?P<text>.*)$")
REPORTED = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): (?P<kind>error|note): (?P<text>.*)$")


def _expected(path: Path) -> dict[int, list[str]]:
    found: dict[int, list[str]] = defaultdict(list)
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = EXPECT.search(line)
        if match and not line.lstrip().startswith("#"):
            found[number].append(f"{match['kind']}: {match['text'].strip()}")
    return found


@pytest.fixture(scope="module")
def reported() -> dict[tuple[str, int], list[str]]:
    files = [str(path) for path in sorted(TYPING.glob("*.py"))]
    # No config file: the project config excludes tests/typing from the main run.
    stdout, stderr, _ = api.run(["--config-file=", "--strict", "--no-error-summary", "--hide-error-context", *files])
    assert not stderr, stderr
    found: dict[tuple[str, int], list[str]] = defaultdict(list)
    for line in stdout.splitlines():
        match = REPORTED.match(line)
        assert match, f"unparsed mypy output: {line}"
        text = match["text"]
        if match["kind"] == "error":
            code = re.search(r"\[([a-z-]+)\]$", text)
            found[(Path(match["file"]).name, int(match["line"]))].append(f"E: [{code[1] if code else '?'}]")
        elif text.startswith("Revealed type is"):
            found[(Path(match["file"]).name, int(match["line"]))].append(f"N: {text}")
    return found


@pytest.mark.parametrize("name", ["accepted.py", "rejected.py"])
def test_mypy_reports_exactly_what_the_file_expects(name: str, reported: dict[tuple[str, int], list[str]]) -> None:
    expected = _expected(TYPING / name)
    actual = {line: sorted(messages) for (file, line), messages in reported.items() if file == name}
    assert actual == {line: sorted(messages) for line, messages in expected.items()}


def test_the_rejected_file_covers_the_promised_misuses() -> None:
    text = (TYPING / "rejected.py").read_text()
    for misuse in ('tracectx("not a trace")', "rename(proxy, 3, trace=trace)", 'Policy(missing_trace="explode")', "scratch_trace(reserve=trace)"):
        assert misuse in text
