"""The first form of the main job: the tour runs on real Thunder and every step holds."""

from __future__ import annotations

import io

from safe_tracectx.cli import main
from safe_tracectx.demo.tour import run_tour


def test_tour_shows_every_step() -> None:
    out = io.StringIO()
    assert run_tour(out) == 0
    text = out.getvalue()
    assert "AttributeError: 'NoneType' object has no attribute 'make_name'" in text
    assert "MissingTraceError" in text or "needs an active trace" in text
    assert "TracelessRecordingError" in text
    assert "with scratch_trace(fw, bw)" in text
    assert "ReadOnlyTraceError" in text and "were added" in text
    assert "[FAILED]" not in text and text.count("[ok]") >= 8


def test_cli_demo_tour_exit_status(capsys: object) -> None:
    assert main(["demo", "--tour"]) == 0
