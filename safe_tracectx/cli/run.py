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
import io
import os
import pkgutil
import runpy
import sys
import types
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, TextIO

from safe_tracectx.cli.options import AUDIT_OPTIONS_WITH_VALUE, check_outputs, chosen_policy, usage_error
from safe_tracectx.exitcodes import ExitStatus
from safe_tracectx.policy import Policy

if TYPE_CHECKING:
    from safe_tracectx.auditlog.document_types import AuditDocument

__all__ = ["NoSuchModule", "run_audited", "run_command", "run_module", "run_script", "split_program"]


class NoSuchModule(Exception):
    """``-m NAME`` names no module that can be run (raised before any of its code ran): a usage error."""


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


#: Where the frames of the machinery that runs a program come from: this module, runpy, importlib's bootstrap.
_MACHINERY: Final = frozenset(
    {split_program.__code__.co_filename, runpy.__file__, "<frozen runpy>"}
    | {f"<frozen importlib.{name}>" for name in ("_bootstrap", "_bootstrap_external")}
)


def _program_frames(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` without its leading frames of the machinery: what ``python prog.py`` would show."""
    while tb is not None and tb.tb_frame.f_code.co_filename in _MACHINERY:
        tb = tb.tb_next
    return tb


def _print_program_error(error: BaseException) -> None:
    """Print the program's uncaught exception as ``python`` does: through ``sys.excepthook``, with only the
    program's frames (a ``SyntaxError`` in the script itself: no traceback, just where it is)."""
    tb = _program_frames(error.__traceback__)
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
        status = ExitStatus.VIOLATIONS
    return status


def _child_violations(document: AuditDocument) -> int:
    """Violations (a set never reset is one) of the audited child processes."""
    children = document.get("child_processes")
    return 0 if children is None else sum(len(member["audit"].get("violations", [])) for member in children["audited"])


def _run_path(absolute: str) -> None:
    """``runpy.run_path(absolute, run_name="__main__")``, but ``sys.argv[0]`` stays as typed (runpy makes it the path
    it was given, and so ``__file__`` and the traceback's file names: python makes only those absolute)."""
    if pkgutil.get_importer(absolute) is not None:  # a zip file or folder with a __main__.py: runpy's
        runpy.run_path(absolute, run_name="__main__")
        return
    with io.open_code(absolute) as source:
        code = pkgutil.read_code(source)  # a compiled file (.pyc), else None
    if code is None:
        with io.open_code(absolute) as source:
            code = compile(source.read(), absolute, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=absolute, __cached__=None, __loader__=None, __package__="", __spec__=None)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main  # as runpy does, for the program's own ``import __main__`` and pickles
    try:
        exec(code, main.__dict__)
    finally:
        if saved is None:
            sys.modules.pop("__main__", None)
        else:
            sys.modules["__main__"] = saved


def run_script(path: str, args: Sequence[str]) -> Callable[[], None]:
    """A body that runs ``path`` as ``__main__`` like ``python path args``: ``sys.argv = [path, *args]`` as typed,
    ``__file__`` absolute, the script's folder first on sys.path."""
    absolute = os.path.abspath(path)  # now: the program may change the current folder, and a sweep reruns it

    def body() -> None:
        saved_argv, saved_path = sys.argv[:], sys.path[:]
        sys.argv = [path, *args]
        sys.path.insert(0, os.path.dirname(absolute))
        try:
            _run_path(absolute)
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path

    return body


def _not_runnable(name: str, error: ImportError) -> str:
    """The usage error for ``-m name`` that runpy could not find or run."""
    detail = str(error)
    # -m train.py: runpy's own message, which says to try -m train
    missing = isinstance(error.__cause__, ModuleNotFoundError) and not name.endswith(".py")
    if detail == f"No module named {name}" or missing:
        return f"no such module: {name}"
    return f"cannot run -m {name}: {detail}"


def run_module(name: str, args: Sequence[str]) -> Callable[[], None]:
    """A body that runs module ``name`` as ``__main__`` like ``python -m name args`` (current folder first on sys.path,
    ``sys.argv[0]`` the module's file); :class:`NoSuchModule` if there is no such module to run."""

    def body() -> None:
        saved_argv, saved_path = sys.argv[:], sys.path[:]
        sys.argv = [name, *args]  # runpy makes sys.argv[0] the module's full path, as python -m does
        sys.path.insert(0, os.getcwd())
        try:
            runpy.run_module(name, run_name="__main__", alter_sys=True)
        except ImportError as error:
            if _program_frames(error.__traceback__) is None:  # runpy's own: finding the module failed, none of it ran
                raise NoSuchModule(_not_runnable(name, error)) from None
            raise
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
        body = run_script(script, script_args)
    else:
        return usage_error(parser, "run needs a script (safe-tracectx run script.py [args]) or -m MODULE")
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
