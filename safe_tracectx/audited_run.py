"""Run a program under ``install(audit=True)`` and report, like ``coverage run``.

``run_audited`` is the one place that installs, runs, keeps the program's exit
status, and prints the report; ``safe-tracectx run`` and ``demo`` both use it.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

__all__ = ["run_audited", "run_module", "run_script"]


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints it and exits 1
    return 1


def run_audited(
    body: Callable[[], None],
    *,
    policy: str = "strict",
    json_path: str | None = None,
    top: int = 15,
    fail_on_violation: bool = False,
    out: TextIO | None = None,
) -> int:
    """Run ``body`` with the hooks installed and an audit running; print the report; return the exit status.

    The status is the program's own (0, its ``sys.exit`` code, or 1 if it raised),
    unless ``fail_on_violation`` is set and there were violations (then 1 if it was 0).
    """
    from safe_tracectx.hooks import close_raw_blocks, install, installed_audit_log, uninstall

    stream = out if out is not None else sys.stdout
    install(policy, audit=True)
    status = 0
    try:
        body()
    except SystemExit as exit_:
        status = _exit_status(exit_.code)
    except BaseException:  # noqa: BLE001 - the program's error is reported like Python would
        traceback.print_exc()
        status = 1
    finally:
        log = installed_audit_log()
        uninstall()  # stops the log: the clean-up below is not part of the report
        if log is not None:  # the program's leaked sets are reported below; undo them here
            close_raw_blocks({event.detail["block"] for event in log.leaked_sets})
    assert log is not None
    print(file=stream)
    print(log.report(top=top), file=stream, flush=True)
    if json_path is not None:
        Path(json_path).write_text(log.to_json() + "\n", encoding="utf-8")
        print(f"\naudit log written to {json_path}", file=stream)
    if fail_on_violation and log.violations and status == 0:
        status = 1
    return status


def run_script(path: str, args: Sequence[str]) -> Callable[[], None]:
    """A body that runs ``path`` as ``__main__`` with ``sys.argv = [path, *args]``."""

    def body() -> None:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no such script: {path}")
        saved_argv, saved_path = sys.argv[:], sys.path[:]
        sys.argv = [path, *args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        try:
            runpy.run_path(path, run_name="__main__")
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path

    return body


def run_module(name: str, args: Sequence[str]) -> Callable[[], None]:
    """A body that runs module ``name`` as ``__main__`` (``python -m name args``)."""

    def body() -> None:
        saved_argv = sys.argv[:]
        sys.argv = [name, *args]
        try:
            runpy.run_module(name, run_name="__main__", alter_sys=True)
        finally:
            sys.argv = saved_argv

    return body
