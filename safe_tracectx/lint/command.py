"""``safe-tracectx lint``: the options, and the run that turns them into an exit status.

``safe-tracectx`` adds these options to its ``lint`` subcommand with :func:`add_arguments` and
calls :func:`run`; :func:`main` is the same command with a parser of its own::

    >>> from safe_tracectx.lint.command import main
    >>> from safe_tracectx.exitcodes import ExitStatus
    >>> main(["--select", ","]) == ExitStatus.USAGE_ERROR  # the message goes to standard error
    True

Exit statuses (``safe_tracectx.exitcodes.ExitStatus``): ``OK`` (0) clean, ``FINDINGS`` (1),
``USAGE_ERROR`` (2) for bad options or an unreadable path or unwritable output, ``INTERRUPTED`` (130).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from safe_tracectx.exitcodes import ExitStatus

__all__ = ["LintArgumentParser", "UsageError", "add_arguments", "main", "run"]

PROG = "safe-tracectx lint"


class UsageError(Exception):
    """A bad option value: reported with the lint usage, exit status ``USAGE_ERROR``."""


class LintArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise :class:`UsageError` instead of exiting the process."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every lint option, on ``parser`` (the ``lint`` subparser of ``safe-tracectx``, or main's own)."""
    parser.add_argument(
        "paths", nargs="*", metavar="PATH", help="files or folders to check (default: .); - reads standard input"
    )
    parser.add_argument("--select", metavar="CODES", help="only these codes or prefixes, comma-separated")
    parser.add_argument("--ignore", metavar="CODES", help="skip these codes or prefixes, comma-separated")
    parser.add_argument("--format", choices=("text", "json", "sarif"), default="text", help="default: text")
    parser.add_argument("--output", metavar="FILE", help="write the report here instead of standard output")
    parser.set_defaults(lint_format_usage=parser.format_usage)


def _usage_error(args: argparse.Namespace, message: str) -> int:
    usage = getattr(args, "lint_format_usage", None)
    print(usage() if callable(usage) else f"usage: {PROG} [options] [PATH ...]\n", end="", file=sys.stderr)
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return ExitStatus.USAGE_ERROR


def run(args: argparse.Namespace) -> int:
    """Lint as ``args`` say; returns an ``ExitStatus`` value (bad option values are ``USAGE_ERROR``)."""
    try:
        return _run(args)
    except UsageError as error:
        return _usage_error(args, str(error))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return ExitStatus.INTERRUPTED


def _run(args: argparse.Namespace) -> int:
    from safe_tracectx.lint import FORMATTERS, lint_paths, parse_codes, select_codes

    try:
        select = parse_codes(args.select, option="--select") if args.select is not None else None
        ignore = parse_codes(args.ignore, option="--ignore") if args.ignore is not None else frozenset()
    except ValueError as error:
        raise UsageError(str(error)) from None
    codes = select_codes(select, ignore)
    try:
        result = lint_paths(args.paths or ["."], codes=codes)
    except OSError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return ExitStatus.USAGE_ERROR
    for skip in result.skipped:
        print(f"{PROG}: {skip.path}: {skip.reason}", file=sys.stderr)
    report = FORMATTERS[args.format](result)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as out:
                out.write(report + "\n")
        except OSError as error:
            print(f"{PROG}: error: cannot write {args.output}: {error.strerror or error}", file=sys.stderr)
            return ExitStatus.USAGE_ERROR
    else:
        print(report)
    return ExitStatus.FINDINGS if result.failures else ExitStatus.OK


def main(argv: Sequence[str] | None = None) -> int:
    """``safe-tracectx lint`` with a parser of its own; returns the exit status instead of exiting."""
    parser = LintArgumentParser(prog=PROG, description="Statically check trace-context safety (STC rules).")
    add_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except UsageError as error:
        return _usage_error(argparse.Namespace(lint_format_usage=parser.format_usage), str(error))
    except SystemExit as done:  # --help
        return int(done.code or 0)
    return run(args)
