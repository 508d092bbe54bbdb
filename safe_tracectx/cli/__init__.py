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
import dataclasses
import sys
from collections.abc import Callable, Sequence

from safe_tracectx import __version__
from safe_tracectx.cli import combine as combine_cli
from safe_tracectx.cli import demo as demo_cli
from safe_tracectx.cli import run as run_cli
from safe_tracectx.cli import sweep as sweep_cli
from safe_tracectx.cli.program import split_program
from safe_tracectx.exitcodes import ArgumentParser, ExitStatus, UsageError, usage_error
from safe_tracectx.lint import command as lint_command

__all__ = ["COMMANDS", "Command", "build_parser", "main"]

#: A command's handler: its parsed options, the program and its arguments (``run``, ``sweep``), its parser.
Handler = Callable[[argparse.Namespace, list[str], argparse.ArgumentParser], int]


@dataclasses.dataclass(frozen=True)
class Command:
    """One subcommand: its help, its options, what runs it."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Handler
    usage: str | None = None
    description: str | None = None
    #: Its options end at a script (or after ``-m MODULE``): the rest is the program's.
    takes_program: bool = False
    needs_thunder: bool = False


def _report(args: argparse.Namespace, program: list[str], parser: argparse.ArgumentParser) -> int:
    from safe_tracectx.cli.outputs import closed_stdout_safe

    with closed_stdout_safe():  # `report FILE | head`: no BrokenPipeError, --html still written
        return combine_cli.report_command(args, parser)


def _program_usage(command: str) -> str:
    return f"safe-tracectx {command} [options] (script.py | -m MODULE) [program arguments ...]"


#: Every subcommand, in the order ``--help`` lists them.
COMMANDS: dict[str, Command] = {
    "demo": Command(
        "the main job on the built-in model: a small GPT compiled by thunder.jit, audited",
        demo_cli.add_arguments,
        lambda args, program, parser: demo_cli.demo_command(args, parser),
        needs_thunder=True,
    ),
    "run": Command(
        "run a Thunder program under the hooks and print the audit report",
        run_cli.add_arguments,
        run_cli.run_command,
        usage=_program_usage("run"),
        description="Everything after the script (or after -m MODULE) is the program's own arguments.",
        takes_program=True,
        needs_thunder=True,
    ),
    "combine": Command(
        "merge data files (one per rank, or several runs) and compare the ranks' traces",
        combine_cli.add_combine_arguments,
        lambda args, program, parser: combine_cli.combine_command(args, parser),
    ),
    "report": Command(
        "print the report of a data file or a combined one (text, --json, --html DIR)",
        combine_cli.add_report_arguments,
        _report,
    ),
    "sweep": Command(
        "fail each set_tracectx, proxy creation and pass entry in turn; report what leaked or was masked",
        sweep_cli.add_arguments,
        sweep_cli.sweep_command,
        usage=_program_usage("sweep"),
        takes_program=True,
        needs_thunder=True,
    ),
    "lint": Command(
        "statically check trace-context safety (exit 0: clean, 1: findings, 2: usage or I/O error)",
        lint_command.add_arguments,
        lambda args, program, parser: lint_command.run(args),
    ),
}


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and each subcommand's parser (for its own usage in errors).

    Their errors raise :class:`~safe_tracectx.exitcodes.UsageError`: ``main`` reports them as every other one.
    """
    parser = ArgumentParser(
        prog="safe-tracectx", description="Make Lightning Thunder's trace context safe: audit, demo and lint."
    )
    parser.add_argument("--version", action="version", version=f"safe-tracectx {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    subs: dict[str, argparse.ArgumentParser] = {}
    for name, command in COMMANDS.items():
        sub = subs[name] = commands.add_parser(
            name,
            help=command.help,
            usage=command.usage,
            description=command.description,
            allow_abbrev=not command.takes_program,  # an abbreviation would not end the split at the program
        )
        command.add_arguments(sub)
    return parser, subs


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``safe-tracectx`` console script and of ``python -m safe_tracectx``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, subs = build_parser()
    program: list[str] = []
    if argv and argv[0] in COMMANDS and COMMANDS[argv[0]].takes_program:
        argv, program = split_program(argv, subs[argv[0]])
    try:
        args, extra = parser.parse_known_args(argv)
    except UsageError as error:  # argparse's own: printed with the usage of the parser that found it
        return usage_error(error.parser or parser, str(error))
    except SystemExit as exit_:  # --help, --version
        return int(exit_.code) if isinstance(exit_.code, int) else ExitStatus.USAGE_ERROR
    name: str = args.command
    command, sub = COMMANDS[name], subs[name]
    if extra:
        return usage_error(sub, f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "top", 0) < 0:
        return usage_error(sub, "--top must be >= 0")
    if command.needs_thunder:
        from safe_tracectx._support.extras import MissingExtraError, require_thunder

        try:
            require_thunder(f"safe-tracectx {name}")
        except MissingExtraError as error:
            print(f"safe-tracectx {name}: error: {error}", file=sys.stderr)
            return ExitStatus.USAGE_ERROR
    return command.run(args, program, sub)
