"""The ``safe-tracectx`` command line: ``demo``, ``run`` and ``lint``.

    $ safe-tracectx demo            # the main job on the built-in model
    $ safe-tracectx demo --tour     # a guided tour of the three managers
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="safe-tracectx",
        description="Make Lightning Thunder's trace context safe: audit, demo and lint.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = commands.add_parser("demo", help="run the built-in demo on real Thunder objects")
    demo.add_argument("--tour", action="store_true", help="only the guided tour of the three managers")

    lint = commands.add_parser(
        "lint",
        help="statically check trace-context safety (exit 0: clean, 1: findings, 2: usage or I/O error)",
    )
    lint.add_argument("paths", nargs="*", default=["."], metavar="PATH", help="files or folders (default: .)")
    lint.add_argument("--select", metavar="CODES", help="only these codes or prefixes, comma-separated")
    lint.add_argument("--ignore", metavar="CODES", default="", help="skip these codes or prefixes")
    lint.add_argument("--audit", action="store_true", help="also list every proxy-creating call (STC100)")
    lint.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    lint.add_argument("--output", metavar="FILE", help="write the report here instead of stdout")
    return parser


def _lint(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from safe_tracectx.lint import FORMATTERS, lint_paths, parse_codes, select_codes

    try:
        select = parse_codes(args.select) if args.select else None
        codes = select_codes(select, parse_codes(args.ignore), audit=args.audit)
    except ValueError as error:
        parser.error(str(error))
    try:
        result = lint_paths(args.paths, codes=codes)
    except OSError as error:
        print(f"safe-tracectx lint: error: {error}", file=sys.stderr)
        return 2
    report = FORMATTERS[args.format](result)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as out:
                out.write(report + "\n")
        except OSError as error:
            print(f"safe-tracectx lint: error: cannot write {args.output}: {error}", file=sys.stderr)
            return 2
    else:
        print(report)
    return 1 if result.findings else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``safe-tracectx`` console script."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command == "lint":
        return _lint(args, parser)
    if args.command == "demo":
        import warnings

        warnings.filterwarnings("ignore", message="transformer_engine module not found")
        from safe_tracectx.tour import run_tour

        return run_tour(sys.stdout)
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
