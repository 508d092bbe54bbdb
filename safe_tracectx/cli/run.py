"""``safe-tracectx run``: run a program under the hooks and report, like ``coverage run``.

``run_audited`` is the one place that installs, runs, keeps the program's exit
status, and prints the report; ``run`` and ``demo`` both use it. The program
(a script or ``-m MODULE``) is found by ``cli.program``, as for ``sweep``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from safe_tracectx.cli.options import add_audit_options, check_outputs, chosen_policy
from safe_tracectx.cli.program import NoSuchModule, program_frames, resolve_program
from safe_tracectx.exitcodes import ExitStatus, UsageError, usage_error
from safe_tracectx.policy import Policy

if TYPE_CHECKING:
    from safe_tracectx.auditlog.document_types import AuditDocument

__all__ = ["add_arguments", "run_audited", "run_command"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``run`` (the program and its arguments come last: ``cli.program.split_program``)."""
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run a module, like python -m")
    add_audit_options(parser)


def _print_program_error(error: BaseException) -> None:
    """Print the program's uncaught exception as ``python`` does: through ``sys.excepthook``, with only the
    program's frames (a ``SyntaxError`` in the script itself: no traceback, just where it is)."""
    tb = program_frames(error.__traceback__)
    error.__traceback__ = tb
    try:
        sys.excepthook(type(error), error, tb)
    except Exception as hook_error:  # noqa: BLE001 - Python's own words for a failing hook
        print("Error in sys.excepthook:", file=sys.stderr)
        sys.__excepthook__(type(hook_error), hook_error, hook_error.__traceback__)
        print("\nOriginal exception was:", file=sys.stderr)
        sys.__excepthook__(type(error), error, tb)
    with contextlib.suppress(Exception):
        sys.stderr.flush()


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
    from safe_tracectx.hooks.children import ChildAuditing
    from safe_tracectx.cli.outputs import finish_run
    from safe_tracectx.errors import TraceContextError
    from safe_tracectx.hooks import begin
    from safe_tracectx.auditlog.jit_traces import JitRecorder
    from safe_tracectx.auditlog.ranks import RankEnvironmentError, rank_info

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
    children = ChildAuditing(installation.policy)
    try:
        with recorder, children:
            body()
    except SystemExit as exit_:
        status = _exit_status(exit_.code)
    except NoSuchModule:
        children.collect()  # removes its folder
        raise  # a usage error, no report: nothing of the program ran
    except KeyboardInterrupt as interrupt:
        _print_program_error(interrupt)
        status = ExitStatus.INTERRUPTED
    except BaseException as error:  # noqa: BLE001 - the program's error is reported like Python would
        _print_program_error(error)
        status = 1
    finally:
        try:
            # also ends installations the program left running, and closes its leaked sets: the program has
            # ended, so nothing is raised into it; the report below shows them
            installation.end(raising=False)
        except TraceContextError:
            pass  # ended already (by the program): recorded as a violation
        with contextlib.suppress(OSError):
            os.chdir(cwd)
    document = log.to_dict()
    with log.stopped():
        document["jit_traces"] = recorder.runs()
    if (found := children.collect()) is not None:
        document["child_processes"] = found
    finish_run(
        document, info=info, json_path=json_path, data_file=data_file, html_dir=html_dir, top=top, stream=stream
    )
    if fail_on_violation and status == 0 and (log.violations or _child_violations(document)):
        status = ExitStatus.FINDINGS
    return status


def _child_violations(document: AuditDocument) -> int:
    """Violations (a set never reset is one) of the audited child processes."""
    children = document.get("child_processes")
    return 0 if children is None else sum(len(member["audit"].get("violations", [])) for member in children["audited"])


def run_command(args: argparse.Namespace, program: list[str], parser: argparse.ArgumentParser) -> int:
    """``safe-tracectx run``: check the arguments before anything runs, then run and report."""
    if (problem := check_outputs(args)) is not None:
        return usage_error(parser, problem)
    try:
        policy = chosen_policy(args)
    except ValueError as error:
        return usage_error(parser, str(error))
    try:
        body = resolve_program("run", args.module, program).body
    except UsageError as error:
        return usage_error(parser, str(error))
    import warnings

    warnings.filterwarnings("ignore", message="transformer_engine module not found")
    try:
        return run_audited(
            body,
            policy=policy,
            json_path=args.json,
            top=args.top,
            fail_on_violation=args.fail_on_violation,
            data_file=args.data_file,
            html_dir=args.html,
        )
    except NoSuchModule as error:  # as for a missing script: one line, the usage, status 2
        return usage_error(parser, str(error))
