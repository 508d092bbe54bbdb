"""The ``safe-tracectx`` command line: ``demo``, ``run``, ``combine``, ``report``, ``sweep`` and ``lint`` (like coverage's ``cmdline``).

    $ safe-tracectx demo                        # the main job on the built-in model
    $ safe-tracectx demo --tour                 # a guided tour of the three managers
    $ safe-tracectx run train.py --lr 0.1       # any Thunder program, audited
    $ safe-tracectx run -m mypackage.train      # a module, like python -m
    $ safe-tracectx report audit.json           # a saved run's report again
    $ safe-tracectx combine                     # merge the per-rank data files of a torchrun launch
    $ safe-tracectx sweep train.py --max 100    # fail each trace-context operation in turn
    $ safe-tracectx lint src/                   # the static check

``main()`` returns an :class:`~safe_tracectx.exitcodes.ExitStatus` (or the
program's own status for ``run``); it never raises ``SystemExit`` itself.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from safe_tracectx import __version__
from safe_tracectx.cli.options import add_audit_options, usage_error
from safe_tracectx.exitcodes import ExitStatus

__all__ = ["build_parser", "main"]


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and each subcommand's parser (for its own usage in errors)."""
    parser = argparse.ArgumentParser(
        prog="safe-tracectx", description="Make Lightning Thunder's trace context safe: audit, demo and lint."
    )
    parser.add_argument("--version", action="version", version=f"safe-tracectx {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    subs: dict[str, argparse.ArgumentParser] = {}

    demo = subs["demo"] = commands.add_parser(
        "demo", help="the main job on the built-in model: a small GPT compiled by thunder.jit, audited"
    )
    demo.add_argument("--tour", action="store_true", help="instead, a guided tour of the three managers")
    add_audit_options(demo)

    run = subs["run"] = commands.add_parser(
        "run",
        help="run a Thunder program under the hooks and print the audit report",
        usage="safe-tracectx run [options] (script.py | -m MODULE) [program arguments ...]",
        description="Everything after the script (or after -m MODULE) is the program's own arguments.",
        allow_abbrev=False,
    )
    run.add_argument("-m", dest="module", metavar="MODULE", help="run a module, like python -m")
    add_audit_options(run)

    from safe_tracectx.cli import combine as combine_cli

    combine = subs["combine"] = commands.add_parser(
        "combine", help="merge data files (one per rank, or several runs) and compare the ranks' traces"
    )
    combine_cli.add_combine_arguments(combine)
    report = subs["report"] = commands.add_parser(
        "report", help="print the report of a data file or a combined one (text, --json, --html DIR)"
    )
    combine_cli.add_report_arguments(report)

    from safe_tracectx.cli.sweep import add_arguments as add_sweep_arguments

    sweep = subs["sweep"] = commands.add_parser(
        "sweep",
        help="fail each set_tracectx, proxy creation and pass entry in turn; report what leaked or was masked",
        usage="safe-tracectx sweep [options] (script.py | -m MODULE) [program arguments ...]",
        allow_abbrev=False,
    )
    add_sweep_arguments(sweep)

    from safe_tracectx.lint import command as lint_command

    lint = subs["lint"] = commands.add_parser(
        "lint", help="statically check trace-context safety (exit 0: clean, 1: findings, 2: usage or I/O error)"
    )
    lint_command.add_arguments(lint)
    return parser, subs


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``safe-tracectx`` console script and of ``python -m safe_tracectx``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, subs = build_parser()
    program: list[str] = []
    if argv and argv[0] in ("run", "sweep"):
        from safe_tracectx.cli.run import split_program

        argv, program = split_program(argv)
    try:
        args, extra = parser.parse_known_args(argv)
    except SystemExit as exit_:  # argparse printed the (sub)command's usage, or --help/--version
        return int(exit_.code) if isinstance(exit_.code, int) else ExitStatus.USAGE_ERROR
    command: str = args.command
    if extra:
        return usage_error(subs[command], f"unrecognized arguments: {' '.join(extra)}")
    if command == "lint":
        from safe_tracectx.lint import command as lint_command

        return lint_command.run(args)
    if command in ("report", "combine"):
        from safe_tracectx.cli import combine as combine_cli

        if command == "combine":
            return combine_cli.combine_command(args, subs["combine"])
        from safe_tracectx.cli.outputs import closed_stdout_safe

        with closed_stdout_safe():  # `report FILE | head`: no BrokenPipeError, --html still written
            return combine_cli.report_command(args, subs["report"])
    if getattr(args, "top", 0) < 0:
        return usage_error(subs[command], "--top must be >= 0")
    from safe_tracectx._support.extras import MissingExtraError, require_thunder

    try:
        require_thunder(f"safe-tracectx {command}")
    except MissingExtraError as error:
        print(f"safe-tracectx {command}: error: {error}", file=sys.stderr)
        return ExitStatus.USAGE_ERROR
    if command == "sweep":
        from safe_tracectx.cli.sweep import sweep_command

        return sweep_command(args, program, subs["sweep"])
    if command == "demo":
        from safe_tracectx.cli.demo import demo_command

        return demo_command(args, subs["demo"])
    from safe_tracectx.cli.run import run_command

    return run_command(args, program, subs["run"])
