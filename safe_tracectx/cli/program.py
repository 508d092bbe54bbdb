"""The program ``run`` and ``sweep`` are given, found one way for both: a script, or ``-m MODULE``, and its arguments.

The command's own options end at the script (or after ``-m MODULE``); which of them take a value is read
from the command's parser, so an option added there is never taken for the script::

    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> _ = parser.add_argument("-m", dest="module")
    >>> _ = parser.add_argument("--top")
    >>> split_program(["run", "--top", "3", "-m", "pkg.train", "--lr", "0.1"], parser)
    (['run', '--top', '3', '-m', 'pkg.train'], ['--lr', '0.1'])
    >>> split_program(["run", "train.py", "--top", "3"], parser)
    (['run'], ['train.py', '--top', '3'])
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import pkgutil
import runpy
import sys
import types
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Final

from safe_tracectx._support.callsite import is_own_file
from safe_tracectx.exitcodes import UsageError

__all__ = [
    "NoSuchModule", "Program", "options_taking_a_value", "program_frames", "resolve_program", "run_module",
    "run_script", "split_program",
]  # fmt: skip


class NoSuchModule(Exception):
    """``-m NAME`` names no module that can be run (raised before any of its code ran): a usage error."""


def options_taking_a_value(parser: argparse.ArgumentParser) -> frozenset[str]:
    """The option strings of ``parser`` that take a value (``--top N``; not ``--fail-on-violation``)."""
    return frozenset(flag for action in parser._actions if action.nargs != 0 for flag in action.option_strings)


def split_program(argv: list[str], parser: argparse.ArgumentParser) -> tuple[list[str], list[str]]:
    """The command's own arguments (``argv[0]`` is the command), and the program's: the script and what follows
    it, or what follows ``-m MODULE``; ``--`` ends the command's options too."""
    with_value = options_taking_a_value(parser)
    module = {flag for action in parser._actions if action.dest == "module" for flag in action.option_strings}
    index = 1
    while index < len(argv):
        token = argv[index]
        if token == "--":
            return argv[:index], argv[index + 1 :]
        if not token.startswith("-") or token == "-":
            return argv[:index], argv[index:]
        flag, attached = _flag(token)
        step = 1 if attached or flag not in with_value else 2
        if flag in module:
            return argv[: index + step], argv[index + step :]
        index += step
    return argv, []


def _flag(token: str) -> tuple[str, bool]:
    """The option a token names, and whether its value is attached (``--top=3``, ``-mpkg``)."""
    if token.startswith("--"):
        flag, equals, _ = token.partition("=")
        return flag, bool(equals)
    return token[:2], len(token) > 2


#: Where the frames of the machinery that runs a program come from, besides this package: runpy, importlib's bootstrap.
_MACHINERY: Final = frozenset(
    {runpy.__file__, "<frozen runpy>"} | {f"<frozen importlib.{name}>" for name in ("_bootstrap", "_bootstrap_external")}
)


def program_frames(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` without its leading frames of the machinery: what ``python prog.py`` would show."""
    while tb is not None and (is_own_file(name := tb.tb_frame.f_code.co_filename) or name in _MACHINERY):
        tb = tb.tb_next
    return tb


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
            if program_frames(error.__traceback__) is None:  # runpy's own: finding the module failed, none of it ran
                raise NoSuchModule(_not_runnable(name, error)) from None
            raise
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path

    return body


@dataclasses.dataclass(frozen=True)
class Program:
    """What to run, and how reports name it: the script as typed, or ``-m MODULE``."""

    body: Callable[[], None]
    name: str


def resolve_program(command: str, module: str | None, program: list[str]) -> Program:
    """The program of ``run`` or ``sweep``: ``-m MODULE`` with ``program`` as its arguments, else the script
    ``program[0]``; :class:`UsageError` if there is none, or no such script."""
    if module is not None:
        return Program(run_module(module, program), f"-m {module}")
    if not program:
        raise UsageError(f"{command} needs a script (safe-tracectx {command} script.py [args]) or -m MODULE")
    script, *args = program
    if os.path.isdir(script):
        inside = os.path.join(script, "__main__.py")
        hint = f"give its {inside}" if os.path.isfile(inside) else "give a script in it"
        raise UsageError(f"{script} is a directory, not a script: {hint}, or run a package with -m PACKAGE")
    if not os.path.isfile(script):
        raise UsageError(f"no such script: {script}")
    return Program(run_script(script, args), script)
