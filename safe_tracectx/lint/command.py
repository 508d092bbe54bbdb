"""``safe-tracectx lint``: its options and what it does (the CLI only dispatches here).

    >>> from safe_tracectx.lint.command import main
    >>> main(["--select", "STC999", "."])
    2
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from safe_tracectx.exitcodes import ExitStatus
from safe_tracectx.lint.formatters import FORMATTERS
from safe_tracectx.lint.runner import lint_paths, parse_codes, select_codes

__all__ = ["add_arguments", "main", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every option of ``safe-tracectx lint``."""
    parser.add_argument("paths", nargs="*", default=["."], metavar="PATH", help="files or folders (default: .)")
    parser.add_argument("--select", metavar="CODES", help="only these codes or prefixes, comma-separated")
    parser.add_argument("--ignore", metavar="CODES", default="", help="skip these codes or prefixes")
    parser.add_argument(
        "--list-proxy-sites", action="store_true", help="also list every proxy-creating call (STC100)"
    )
    parser.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    parser.add_argument("--output", metavar="FILE", help="write the report here instead of stdout")


def _usage_error(parser: argparse.ArgumentParser, message: str) -> int:
    parser.print_usage(sys.stderr)
    print(f"{parser.prog}: error: {message}", file=sys.stderr)
    return ExitStatus.USAGE_ERROR


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Lint ``args.paths``; the exit status (0 clean, 1 findings, 2 usage or I/O error)."""
    try:
        select = parse_codes(args.select) if args.select else None
        codes = select_codes(select, parse_codes(args.ignore), audit=args.list_proxy_sites)
    except ValueError as error:
        return _usage_error(parser, str(error))
    try:
        result = lint_paths(args.paths, codes=codes)
    except OSError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return ExitStatus.USAGE_ERROR
    report = FORMATTERS[args.format](result)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as out:
                out.write(report + "\n")
        except OSError as error:
            print(f"{parser.prog}: error: cannot write {args.output}: {error}", file=sys.stderr)
            return ExitStatus.USAGE_ERROR
    else:
        print(report)
    return ExitStatus.FINDINGS if result.findings else ExitStatus.OK


def main(argv: Sequence[str] | None = None) -> int:
    """``safe-tracectx lint`` on its own."""
    parser = argparse.ArgumentParser(prog="safe-tracectx lint")
    add_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return run(args, parser)
