"""The ``safe-tracectx`` command line: ``demo``, ``run`` and ``lint``.

    $ safe-tracectx demo                        # the main job on the built-in model
    $ safe-tracectx demo --tour                 # a guided tour of the three managers
    $ safe-tracectx run train.py --lr 0.1       # any Thunder program, audited
    $ safe-tracectx run -m mypackage.train      # a module, like python -m
    $ safe-tracectx lint src/                   # the static check
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections.abc import Sequence


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="safe-tracectx",
        description="Make Lightning Thunder's trace context safe: audit, demo and lint.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = commands.add_parser(
        "demo", help="the main job on the built-in model: a small GPT compiled by thunder.jit, audited"
    )
    demo.add_argument("--tour", action="store_true", help="instead, a guided tour of the three managers")
    _audit_options(demo)

    run = commands.add_parser(
        "run", help="run a Thunder program under install(audit=True) and print the audit report"
    )
    run.add_argument("-m", dest="module", metavar="MODULE", help="run a module, like python -m")
    run.add_argument("target", nargs=argparse.REMAINDER, metavar="script.py [args ...]")
    _audit_options(run)

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


def _audit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", choices=("strict", "lenient"), default="strict", help="default: strict")
    parser.add_argument("--json", metavar="FILE", help="also write the full audit log as JSON")
    parser.add_argument("--top", type=int, default=15, metavar="N", help="call sites to list (default: 15)")
    parser.add_argument(
        "--fail-on-violation", action="store_true", help="exit 1 if there were violations (else the program's status)"
    )


def _run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from safe_tracectx.audited_run import run_audited, run_module, run_script

    if args.top < 0:
        parser.error("--top must be >= 0")
    if args.module is not None:
        body = run_module(args.module, args.target)
    elif args.target:
        script, *script_args = args.target
        if not os.path.isfile(script):
            print(f"safe-tracectx run: error: no such script: {script}", file=sys.stderr)
            return 2
        body = run_script(script, script_args)
    else:
        parser.error("run needs a script (safe-tracectx run script.py [args]) or -m MODULE")
    return run_audited(
        body, policy=args.policy, json_path=args.json, top=args.top, fail_on_violation=args.fail_on_violation
    )


def _demo(args: argparse.Namespace) -> int:
    if args.tour:
        from safe_tracectx.tour import run_tour

        return run_tour(sys.stdout)
    from safe_tracectx.audited_run import run_audited
    from safe_tracectx.demo.main_job import demo_step

    started = time.perf_counter()
    print("safe-tracectx demo: the main job on its built-in model", flush=True)
    print("[  0.0s] importing torch and lightning-thunder, installing the hooks ...", flush=True)
    return run_audited(
        lambda: demo_step(sys.stdout, started),
        policy=args.policy,
        json_path=args.json,
        top=args.top,
        fail_on_violation=args.fail_on_violation,
    )


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
    warnings.filterwarnings("ignore", message="transformer_engine module not found")
    if args.command == "demo":
        return _demo(args)
    if args.command == "run":
        return _run(args, parser)
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
