"""``safe-tracectx run``: run a program under the hooks and report, like ``coverage run``.

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
import os
import runpy
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TextIO

from safe_tracectx.cli.options import AUDIT_OPTIONS_WITH_VALUE, check_outputs, chosen_policy, usage_error
from safe_tracectx.policy import Policy
from safe_tracectx.exitcodes import ExitStatus

__all__ = ["run_audited", "run_command", "run_module", "run_script", "split_program"]


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
    policy: str | Policy = "strict",
    json_path: str | None = None,
    top: int = 15,
    fail_on_violation: bool = False,
    out: TextIO | None = None,
    owner: str = "safe-tracectx run",
    data_file: str | None = None,
    html_dir: str | None = None,
) -> int:
    """Run ``body`` under an auditing installation; print the report; return the exit status.

    The status is the program's own (0, its ``sys.exit`` code, 1 if it raised,
    130 for Ctrl-C), unless ``fail_on_violation`` is set and there were
    violations (a set never reset is one): then 1 if it was 0. Under a
    ``torch.distributed`` launch each rank writes its own data file and prints
    a short summary (``cli.outputs.finish_run``).
    """
    from safe_tracectx.cli.outputs import finish_run
    from safe_tracectx.errors import TraceContextError
    from safe_tracectx.hooks import begin
    from safe_tracectx.jit_traces import JitRecorder
    from safe_tracectx.ranks import RankEnvironmentError, rank_info

    stream = out if out is not None else sys.stdout
    cwd = os.getcwd()  # reports and output paths are relative to where the run started, whatever the program does
    try:  # read before the program runs: a launcher sets these then; a program's own os.environ.setdefault does not launch it
        info = rank_info()
    except RankEnvironmentError as error:  # run and demo refuse it before; a direct caller is told
        print(f"safe-tracectx: {error}; this process is reported as a single-process run", file=sys.stderr)
        info = None
    installation = begin(owner, policy, audit=True)
    log = installation.audit_log
    assert log is not None
    status = 0
    recorder = JitRecorder()
    try:
        with recorder:
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
    document = log.to_dict()
    with log.stopped():
        document["jit_traces"] = recorder.runs()
    finish_run(
        document, info=info, json_path=json_path, data_file=data_file, html_dir=html_dir, top=top, stream=stream
    )
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
    if (problem := check_outputs(args)) is not None:
        return usage_error(parser, problem)
    try:
        policy = chosen_policy(args)
    except ValueError as error:
        return usage_error(parser, str(error))
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
        body,
        policy=policy,
        json_path=args.json,
        top=args.top,
        fail_on_violation=args.fail_on_violation,
        data_file=args.data_file,
        html_dir=args.html,
    )
