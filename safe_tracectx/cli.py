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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``safe-tracectx`` console script."""
    args = _build_parser().parse_args(argv)
    if args.command == "demo":
        from safe_tracectx.tour import run_tour

        return run_tour(sys.stdout)
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
