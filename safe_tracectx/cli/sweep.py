"""``safe-tracectx sweep``: run a program once per trace-context injection point and report what broke.

    $ safe-tracectx sweep train.py --lr 0.1            # every point
    $ safe-tracectx sweep --max 100 --seed 1 train.py  # a seeded sample of 100
    $ safe-tracectx sweep --kinds set -m pkg.train     # only the set_tracectx points

Exit status: 0 nothing broke, 1 some injection point broke an invariant, 2 usage error.

    >>> from safe_tracectx.sweep.text import render
    >>> from safe_tracectx.sweep.findings import SweepResult
    >>> print(render(SweepResult(0, {}, 0, {}, [], 0.0), "x.py").splitlines()[0])
    safe-tracectx sweep of x.py
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from safe_tracectx._support.writable import check_writable
from safe_tracectx.cli.program import NoSuchModule, resolve_program
from safe_tracectx.exitcodes import ExitStatus, UsageError, usage_error
from safe_tracectx.sweep.findings import SWEEP_SCHEMA

__all__ = ["SWEEP_SCHEMA", "add_arguments", "progress_bar", "sweep_command"]

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``sweep`` (the program and its arguments come last, as for ``run``)."""
    parser.add_argument("-m", dest="module", metavar="MODULE", help="sweep a module, like python -m")
    parser.add_argument("--max", dest="max_runs", type=int, metavar="N", help="inject at a seeded sample of N points")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    parser.add_argument(
        "--kinds", default="set,proxy,pass", help="injection points to use: set, proxy, pass (default: all three)"
    )
    parser.add_argument("--in-pass", metavar="TEXT", help="only points inside a pass whose label contains TEXT")
    parser.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    parser.add_argument("--top", type=int, default=20, metavar="N", help="broken points to list in full (default 20)")


def progress_bar(out: TextIO | None = None) -> Callable[[int, int, int], None]:
    """A progress callback drawing ``[#####-----] done/total, broken`` on stderr."""
    stream = sys.stderr if out is None else out
    tty = stream.isatty()

    def show(done: int, total: int, broken: int) -> None:
        filled = 30 * done // max(total, 1)
        line = f"  sweep [{'#' * filled}{'-' * (30 - filled)}] {done}/{total} runs, {broken} broken"
        if tty:
            print("\r" + line, end="\n" if done == total else "", file=stream, flush=True)
        elif done == total or done % max(total // 10, 1) == 0:
            print(line, file=stream, flush=True)

    return show


def sweep_command(args: argparse.Namespace, program: list[str], parser: argparse.ArgumentParser) -> int:
    """``safe-tracectx sweep``: check the arguments, sweep, report."""
    from safe_tracectx.hooks.faults import POINT_KINDS  # the hooks import Thunder: only when sweeping

    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if not kinds or any(k not in POINT_KINDS for k in kinds):
        return usage_error(parser, f"--kinds takes a comma-separated list of {', '.join(POINT_KINDS)}")
    if args.max_runs is not None and args.max_runs < 1:
        return usage_error(parser, "--max must be >= 1")
    if args.json is not None and (problem := check_writable(args.json)) is not None:
        return usage_error(parser, f"--json: {problem}")
    try:
        found = resolve_program("sweep", args.module, program)
    except UsageError as error:
        return usage_error(parser, str(error))
    body, name = found.body, found.name
    import warnings

    warnings.filterwarnings("ignore", message="transformer_engine module not found")
    import thunder  # noqa: F401 - imported once here, reused by every forked run

    from safe_tracectx.sweep.runner import ProgramFails, sweep
    from safe_tracectx.sweep.text import render

    print(f"safe-tracectx sweep: counting the injection points of {name} ...", file=sys.stderr, flush=True)
    try:
        result = sweep(
            body, max_runs=args.max_runs, seed=args.seed, kinds=kinds, in_pass=args.in_pass, progress=progress_bar()
        )
    except KeyboardInterrupt:
        return ExitStatus.INTERRUPTED
    except RuntimeError as error:  # no clean counting run to compare the faulted runs with
        if isinstance(error, ProgramFails) and error.failed.type == NoSuchModule.__name__:
            return usage_error(parser, error.failed.message)  # as run says it: nothing of the program ran
        print(f"safe-tracectx sweep: {error}", file=sys.stderr)
        return ExitStatus.USAGE_ERROR
    print(render(result, name, top=args.top), flush=True)
    if result.points == 0:
        print(
            "safe-tracectx sweep: no injection points: the program never set a trace, made a proxy or ran a pass",
            file=sys.stderr,
        )
    if args.json is not None:
        Path(args.json).write_text(json.dumps(result.to_document(name), indent=2) + "\n", encoding="utf-8")
    return ExitStatus.FINDINGS if result.findings else ExitStatus.OK
