"""``safe-tracectx lint``: the options, and the run that turns them into an exit status.

``safe-tracectx`` adds these options to its ``lint`` subcommand with :func:`add_arguments` and
calls :func:`run` (bad option values found by ``run`` print the subcommand's usage and return
``USAGE_ERROR``; pass ``parser_class=LintArgumentParser`` to ``add_subparsers`` for argparse's own
errors to do the same instead of exiting)::

    lint = commands.add_parser("lint", help="statically check trace-context safety")
    add_arguments(lint)
    ...
    if args.command == "lint":
        return run(args)

:func:`main` is the same command with a parser of its own:

    >>> from safe_tracectx.lint.command import main
    >>> from safe_tracectx.exitcodes import ExitStatus
    >>> main(["--select", ","]) == ExitStatus.USAGE_ERROR  # the message goes to standard error
    True

Exit statuses (``safe_tracectx.exitcodes.ExitStatus``): ``OK`` (0) clean, ``FINDINGS`` (1),
``USAGE_ERROR`` (2) for bad options or an unreadable path or unwritable output, ``INTERRUPTED`` (130).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from safe_tracectx.exitcodes import ArgumentParser, ExitStatus, UsageError, usage_error
from safe_tracectx.lint.config import Settings, load_settings, parse_per_file_ignores
from safe_tracectx.lint.files import DEFAULT_EXCLUDE, not_excluded
from safe_tracectx.lint.formatters import FORMATTERS, with_statistics, write_report
from safe_tracectx.lint.rules import AUDIT_CODES, RULES, explain
from safe_tracectx.lint.runner import (
    FileFinding,
    LintResult,
    PerFileIgnore,
    codes_for,
    lint_bytes,
    lint_paths,
    parse_codes,
    select_codes,
)

__all__ = ["LintArgumentParser", "UsageError", "add_arguments", "main", "run"]

PROG = "safe-tracectx lint"


#: The parser class whose errors raise :class:`UsageError` (the command's one usage-error path, in ``exitcodes``).
LintArgumentParser = ArgumentParser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every lint option, on ``parser`` (the ``lint`` subparser of ``safe-tracectx``, or main's own)."""
    parser.add_argument(
        "paths", nargs="*", metavar="PATH", help="files or folders to check (default: .); - reads standard input"
    )
    rules = parser.add_argument_group("rules")
    rules.add_argument("--select", metavar="CODES", help="only these codes or prefixes, comma-separated")
    rules.add_argument("--ignore", metavar="CODES", help="skip these codes or prefixes, comma-separated")
    rules.add_argument(
        "--per-file-ignores",
        action="append",
        metavar="GLOB:CODES",
        help='skip codes in matching files, e.g. "tests/*:STC001" (space-separated entries, or repeat the option)',
    )
    rules.add_argument(
        "--list-proxy-sites",
        action="store_true",
        help="also list every proxy-creating call (STC100); unguarded ones are findings, guarded ones informational",
    )
    rules.add_argument("--audit", action="store_true", help=argparse.SUPPRESS)  # renamed --list-proxy-sites
    rules.add_argument("--explain", metavar="CODE", help="print what a rule reports, why, an example and the fix; exit")
    files = parser.add_argument_group("files")
    files.add_argument("--exclude", metavar="GLOBS", help="comma-separated globs to skip, replacing the defaults")
    files.add_argument("--extend-exclude", metavar="GLOBS", help="comma-separated globs to skip, added to the defaults")
    files.add_argument(
        "--force-exclude",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="apply the excludes to the files and folders named on the command line too, as ruff does "
        "(on in the pre-commit hook, which names every staged file; standard input is always read)",
    )
    files.add_argument("--stdin-filename", metavar="NAME", help="the name to report (and match globs) for - (standard input)")
    files.add_argument("--isolated", action="store_true", help="ignore [tool.safe-tracectx] in pyproject.toml")
    output = parser.add_argument_group("output")
    output.add_argument("--format", choices=("text", "json", "sarif"), default="text", help="the report's format (default: text)")
    output.add_argument("--output", metavar="FILE", help="write the report here instead of standard output")
    output.add_argument("--statistics", action="store_true", help="also count the findings of each code")
    output.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    fixing = parser.add_argument_group("fixing (needs libcst)")
    fixing.add_argument(
        "--fix", action="store_true", help="rewrite the files where a fix of STC001/STC002/STC003 is certainly right"
    )
    fixing.add_argument("--diff", action="store_true", help="print those fixes as a unified diff; change nothing")
    parser.set_defaults(lint_parser=parser)


def _parser() -> ArgumentParser:
    parser = ArgumentParser(prog=PROG, description="Statically check trace-context safety (STC rules).")
    add_arguments(parser)
    return parser


def _usage_error(args: argparse.Namespace, message: str) -> int:
    """The usage error of the parser that made ``args`` (lint's own when ``args`` were made by hand)."""
    parser = getattr(args, "lint_parser", None)
    return usage_error(parser if isinstance(parser, argparse.ArgumentParser) else _parser(), message)


def run(args: argparse.Namespace) -> int:
    """Lint as ``args`` say; returns an ``ExitStatus`` value (bad option values are ``USAGE_ERROR``)."""
    try:
        return _run(args)
    except UsageError as error:
        return _usage_error(args, str(error))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return ExitStatus.INTERRUPTED
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly, as ruff and flake8 do
        _silence_stdout()
        return ExitStatus.FINDINGS


def _silence_stdout() -> None:
    """Point standard output at devnull so that the flush at exit raises no second BrokenPipeError."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass


def _globs(text: str, option: str) -> tuple[str, ...]:
    globs = tuple(g.strip() for g in text.split(",") if g.strip())
    if not globs:
        raise UsageError(f"{option} {text!r} names no glob; give comma-separated globs such as build,tests/data/*")
    return globs


def _options(args: argparse.Namespace) -> tuple[frozenset[str], tuple[str, ...], tuple[PerFileIgnore, ...], Path | None]:
    """The codes, excludes, per-file ignores and glob root: the command line over pyproject.toml."""
    try:
        settings = Settings() if args.isolated else load_settings()
        select = parse_codes(args.select, option="--select") if args.select is not None else settings.select
        ignore = parse_codes(args.ignore, option="--ignore") if args.ignore is not None else settings.ignore
        per_file = parse_per_file_ignores(args.per_file_ignores) if args.per_file_ignores else settings.per_file_ignores
    except ValueError as error:  # ConfigError too
        raise UsageError(str(error)) from None
    codes = select_codes(select, ignore or (), audit=args.list_proxy_sites)
    if args.list_proxy_sites and select is not None:
        codes |= AUDIT_CODES - (ignore or frozenset())
    exclude = settings.exclude if settings.exclude is not None else DEFAULT_EXCLUDE  # `exclude = []` excludes nothing
    if args.exclude is not None:
        exclude = _globs(args.exclude, "--exclude")
    extend = _globs(args.extend_exclude, "--extend-exclude") if args.extend_exclude is not None else settings.extend_exclude
    return codes, (*exclude, *(extend or ())), per_file or (), settings.root


def _run(args: argparse.Namespace) -> int:
    if args.audit:
        raise UsageError('--audit is now --list-proxy-sites ("audit" names the audit log and the pytest plugin mode)')
    if args.explain is not None:
        code = args.explain.strip().upper()
        if code not in RULES:
            raise UsageError(f"--explain: unknown rule code {args.explain!r}; the codes are: {', '.join(RULES)}")
        print(explain(code))
        return ExitStatus.OK
    if args.statistics and args.format == "sarif":
        raise UsageError("--statistics works with --format text or json (SARIF has no place for it)")
    codes, exclude, per_file, root = _options(args)
    paths = list(args.paths) or (["-"] if args.stdin_filename else ["."])
    if paths.count("-") > 1:
        raise UsageError("- (standard input) can be given once")
    if args.force_exclude:
        paths = not_excluded(paths, exclude, root=root)
    unwritable = False
    if args.fix or args.diff:
        from safe_tracectx.lint.fixcommand import run_fix

        fixed = run_fix(args, paths, codes, exclude, per_file, root)
        if fixed.status is not None:  # --diff, or --fix of standard input: nothing more to report
            return fixed.status
        unwritable = fixed.unwritable
    try:
        result = lint_paths([p for p in paths if p != "-"], codes=codes, exclude=exclude, per_file_ignores=per_file, root=root)
    except OSError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return ExitStatus.USAGE_ERROR
    if "-" in paths:
        name = args.stdin_filename or "-"
        data = sys.stdin.buffer.read() if sys.stdin is not None else b""
        found = lint_bytes(data, name, codes=codes_for(name, codes, per_file, root))
        result = LintResult([*result.findings, *(FileFinding(name, f) for f in found)], result.files_checked + 1, result.skipped)
    for skip in result.skipped:
        print(f"{PROG}: {skip.path}: {skip.reason}", file=sys.stderr)
    report = FORMATTERS[args.format](result)
    if args.statistics:
        report = with_statistics(report, result, args.format)
    problem = write_report(report + "\n", args.output)
    if problem:
        print(f"{PROG}: error: {problem}", file=sys.stderr)
        return ExitStatus.USAGE_ERROR
    if unwritable:
        return ExitStatus.USAGE_ERROR
    return ExitStatus.FINDINGS if result.failures and not args.exit_zero else ExitStatus.OK


def main(argv: Sequence[str] | None = None) -> int:
    """``safe-tracectx lint`` with a parser of its own; returns the exit status instead of exiting."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as error:
        return usage_error(error.parser or parser, str(error))
    except SystemExit as done:  # --help
        return int(done.code or 0)
    return run(args)
