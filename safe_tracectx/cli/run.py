"""``safe-tracectx run`` and ``report``: run a program under the hooks and report, like ``coverage run``.

``run_audited`` is the one place that installs, runs, keeps the program's exit
status, and prints the report; ``run`` and ``demo`` both use it::

    >>> from safe_tracectx.cli.run import split_program
    >>> split_program(["run", "--top", "3", "-m", "pkg.train", "--lr", "0.1"])
    (['run', '--top', '3', '-m', 'pkg.train'], ['--lr', '0.1'])
    >>> split_program(["run", "train.py", "--top", "3"])
    (['run'], ['train.py', '--top', '3'])
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import runpy
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from safe_tracectx.cli.options import AUDIT_OPTIONS_WITH_VALUE, check_writable, usage_error
from safe_tracectx.exitcodes import ExitStatus

__all__ = ["report_command", "run_audited", "run_command", "run_module", "run_script", "split_program"]


def split_program(argv: list[str]) -> tuple[list[str], list[str]]:
    """``run``'s own arguments, and the program's: the script and what follows it, or what follows ``-m MODULE``."""
    index = 1
    while index < len(argv):
        token = argv[index]
        if token == "--":
            return argv[:index], argv[index + 1 :]
        if token == "-m" or (token.startswith("-m") and not token.startswith("--")):
            end = index + (2 if token == "-m" else 1)
            return argv[:end], argv[end:]
        if token.startswith("-"):
            takes_value = token in AUDIT_OPTIONS_WITH_VALUE
            index += 2 if takes_value else 1
            continue
        return argv[:index], argv[index:]
    return argv, []


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
    owner: str = "safe-tracectx run",
) -> int:
    """Run ``body`` under an auditing installation; print the report; return the exit status.

    The status is the program's own (0, its ``sys.exit`` code, 1 if it raised,
    130 for Ctrl-C), unless ``fail_on_violation`` is set and there were
    violations (a set never reset is one): then 1 if it was 0.
    """
    from safe_tracectx.errors import TraceContextError
    from safe_tracectx.hooks import begin

    stream = out if out is not None else sys.stdout
    cwd = os.getcwd()  # reports and --json are relative to where the run started, whatever the program does
    installation = begin(owner, policy, audit=True)
    log = installation.audit_log
    assert log is not None
    status = 0
    try:
        body()
    except SystemExit as exit_:
        status = _exit_status(exit_.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        status = ExitStatus.INTERRUPTED
    except BaseException:  # noqa: BLE001 - the program's error is reported like Python would
        traceback.print_exc()
        status = 1
    finally:
        try:
            installation.end()  # also ends installations the program left running, and closes its leaked sets
        except TraceContextError:
            pass  # recorded as a violation: the report below shows it
        with contextlib.suppress(OSError):
            os.chdir(cwd)
    print(file=stream)
    print(log.report(top=top), file=stream, flush=True)
    if json_path is not None:
        Path(json_path).write_text(log.to_json() + "\n", encoding="utf-8")
        print(f"\naudit log written to {json_path}", file=stream)
    if fail_on_violation and log.violations and status == 0:
        status = ExitStatus.VIOLATIONS
    return status


def run_script(path: str, args: Sequence[str]) -> Callable[[], None]:
    """A body that runs ``path`` as ``__main__`` with ``sys.argv = [path, *args]``, its folder first on sys.path."""

    def body() -> None:
        saved_argv, saved_path = sys.argv[:], sys.path[:]
        sys.argv = [path, *args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        try:
            runpy.run_path(path, run_name="__main__")
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path

    return body


def run_module(name: str, args: Sequence[str]) -> Callable[[], None]:
    """A body that runs module ``name`` as ``__main__`` like ``python -m name args`` (current folder first on sys.path)."""

    def body() -> None:
        saved_argv, saved_path = sys.argv[:], sys.path[:]
        sys.argv = [name, *args]
        sys.path.insert(0, os.getcwd())
        try:
            runpy.run_module(name, run_name="__main__", alter_sys=True)
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path

    return body


def run_command(args: argparse.Namespace, program: list[str], parser: argparse.ArgumentParser) -> int:
    """``safe-tracectx run``: check the arguments before anything runs, then run and report."""
    if args.json is not None and (problem := check_writable(args.json)) is not None:
        return usage_error(parser, f"--json: {problem}")
    if args.json is not None:
        args.json = os.path.abspath(args.json)
    if args.module is not None:
        body = run_module(args.module, program)
    elif program:
        script, *script_args = program
        if not os.path.isfile(script):
            return usage_error(parser, f"no such script: {script}")
        body = run_script(os.path.abspath(script), script_args)
    else:
        return usage_error(parser, "run needs a script (safe-tracectx run script.py [args]) or -m MODULE")
    import warnings

    warnings.filterwarnings("ignore", message="transformer_engine module not found")
    return run_audited(
        body, policy=args.policy, json_path=args.json, top=args.top, fail_on_violation=args.fail_on_violation
    )


_REQUIRED: dict[str, type] = {
    "counts": dict,
    "dropped": int,
    "passes": dict,
    "proxies_by_pass": dict,
    "call_sites": list,
    "leaked_sets": list,
    "violations": list,
}


def _malformed(document: dict[str, object]) -> str | None:
    """What is wrong with an audit document's body (None: it can be rendered)."""
    from safe_tracectx.auditlog import JSON_VERSION

    if document.get("version") != JSON_VERSION:
        return f"version {document.get('version')!r}, this safe-tracectx reads version {JSON_VERSION}"
    for key, kind in _REQUIRED.items():
        if not isinstance(document.get(key), kind):
            return f"{key!r} is missing or not a {kind.__name__}"
    counts = document["counts"]
    assert isinstance(counts, dict)
    if not all(isinstance(value, int) for value in counts.values()):
        return "'counts' holds something other than integers"
    return None


def report_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """``safe-tracectx report DATA.json``: a saved audit's report again (text, or ``--json``)."""
    from safe_tracectx.auditlog import JSON_SCHEMA
    from safe_tracectx.report import render_text

    if args.top < 0:
        return usage_error(parser, "--top must be >= 0")
    try:
        document = json.loads(Path(args.data_file).read_text(encoding="utf-8"))
    except (OSError, UnicodeError, ValueError) as error:
        return usage_error(parser, f"cannot read {args.data_file}: {error}")
    try:
        text = render_text(document, top=args.top) if isinstance(document, dict) else ""
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        text = ""
        damaged: str | None = f"cannot render it ({type(error).__name__}: {error})"
    else:
        damaged = None
    if not isinstance(document, dict) or document.get("schema") != JSON_SCHEMA:
        return usage_error(
            parser, f"{args.data_file} is not a safe-tracectx audit (schema {JSON_SCHEMA}); write one with run --json FILE"
        )
    problem = _malformed(document) or damaged
    if problem is not None:
        return usage_error(parser, f"{args.data_file} is a damaged safe-tracectx audit: {problem}")
    print(json.dumps(document, indent=2) if args.json else text)
    return ExitStatus.OK
