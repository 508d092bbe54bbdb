"""Where the report goes: --output with file names that are not UTF-8, a closed pipe, --diff --output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from safe_tracectx.exitcodes import ExitStatus
from safe_tracectx.lint.command import main

BAD = "def f(t):\n    tok = set_tracectx(t)\n    g()\n    reset_tracectx(tok)\n"


@pytest.mark.skipif(sys.platform == "win32" or sys.getfilesystemencoding() != "utf-8", reason="needs byte file names")
@pytest.mark.parametrize("format", ["text", "json", "sarif"])
def test_output_of_a_file_name_that_is_not_utf8(format: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with open(os.path.join(os.fsencode(tmp_path), b"x\xff.py"), "w") as handle:
        handle.write(BAD)
    out = tmp_path / "report.txt"
    assert main(["--isolated", "--format", format, "--output", str(out), str(tmp_path)]) == ExitStatus.FINDINGS
    assert "Traceback" not in capsys.readouterr().err
    text = out.read_text(encoding="utf-8")
    assert "x\\udcff.py" in text or "x\\\\udcff.py" in text


def test_a_closed_pipe_is_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "many.py").write_text("".join(f"def f{i}(t):\n    tok = set_tracectx(t)\n    g()\n    reset_tracectx(tok)\n" for i in range(3000)))
    code = "import sys; from safe_tracectx.lint.command import main; sys.exit(main(sys.argv[1:]))"
    process = subprocess.Popen([sys.executable, "-c", code, "--isolated", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()
    err = process.stderr.read()
    process.wait(timeout=60)
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err


def test_diff_honours_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "a.py"
    path.write_text(BAD)
    out = tmp_path / "patch.diff"
    assert main(["--isolated", "--diff", "--output", str(out), str(path)]) == ExitStatus.FINDINGS
    assert capsys.readouterr().out == ""
    assert "+    try:\n" in out.read_text(encoding="utf-8")
    assert path.read_text() == BAD
