"""``safe-tracectx demo``: the main job on the built-in model (or, with ``--tour``, the guided tour)."""

from __future__ import annotations

import argparse
import sys
import time
import warnings

from safe_tracectx.cli.options import add_audit_options, check_outputs, chosen_policy
from safe_tracectx.exitcodes import usage_error

__all__ = ["add_arguments", "demo_command"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``demo``: ``--tour``, and those of ``run``'s report."""
    parser.add_argument("--tour", action="store_true", help="instead, a guided tour of the three managers")
    add_audit_options(parser)


def demo_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Run the demo (or the tour); the exit status."""
    warnings.filterwarnings("ignore", message="transformer_engine module not found")
    if args.tour:
        from safe_tracectx.demo.tour import run_tour

        return run_tour(sys.stdout)
    if (problem := check_outputs(args)) is not None:
        return usage_error(parser, problem)
    try:
        policy = chosen_policy(args)
    except ValueError as error:
        return usage_error(parser, str(error))
    from safe_tracectx.cli.run import run_audited
    from safe_tracectx.demo.main_job import demo_step

    started = time.perf_counter()
    print("safe-tracectx demo: the main job on its built-in model", flush=True)
    print("[  0.0s] importing torch and lightning-thunder, installing the hooks ...", flush=True)
    return run_audited(
        lambda: demo_step(sys.stdout, started),
        policy=policy,
        json_path=args.json,
        top=args.top,
        fail_on_violation=args.fail_on_violation,
        owner="safe-tracectx demo",
        data_file=args.data_file,
        html_dir=args.html,
    )
