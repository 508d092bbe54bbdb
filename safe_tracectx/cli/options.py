"""Options shared by ``run`` and ``demo``, and the checks of their outputs before anything runs.

    >>> import argparse
    >>> from safe_tracectx.cli.options import add_audit_options
    >>> parser = argparse.ArgumentParser(prog="x")
    >>> add_audit_options(parser)
    >>> parser.parse_args(["--top", "0"]).top
    0
"""

from __future__ import annotations

import argparse
import os

from safe_tracectx._support.writable import check_writable
from safe_tracectx.policy import ENV_VAR, PRESETS, Policy, as_policy, check_overrides, or_default

__all__ = ["add_audit_options", "check_folder", "check_outputs", "chosen_policy"]


def add_audit_options(parser: argparse.ArgumentParser) -> None:
    """``--policy``, ``--json``, ``--top``, ``--fail-on-violation``, ``--data-file``, ``--html``."""
    parser.add_argument(
        "--policy",
        choices=tuple(PRESETS),
        default=None,
        help=f"strict raises, lenient warns, audit only records (default: ${ENV_VAR}, else strict)",
    )
    parser.add_argument(
        "--check",
        action="append",
        default=[],
        metavar="CHECK=ACTION",
        help="one trace check's own action, e.g. --check use-before-definition=warn or --check "
        "unregistered-name=raise (repeatable; actions: raise, warn, log, ignore, off)",
    )
    parser.add_argument(
        "--json",
        metavar="FILE",
        help="also write the audit as JSON (safe-tracectx report FILE reads it); "
        "-: standard output, instead of the text report",
    )
    parser.add_argument("--top", type=int, default=15, metavar="N", help="call sites to list (default: 15; 0: none)")
    parser.add_argument(
        "--fail-on-violation",
        action="store_true",
        help="exit 1 if there were violations, a set never reset among them (else the program's status)",
    )
    parser.add_argument(
        "--data-file",
        metavar="FILE",
        help="write the data file there (under torchrun: one per rank, {rank} in FILE is replaced, "
        "default .safe-tracectx.rank<RANK>.json); safe-tracectx combine merges them",
    )
    parser.add_argument("--html", metavar="DIR", help="also write the HTML report into DIR (under torchrun: DIR/rank<RANK>)")


def chosen_policy(args: argparse.Namespace) -> Policy:
    """The policy ``--policy`` and ``--check`` ask for (``SAFE_TRACECTX_POLICY`` when ``--policy`` is not given);
    a ValueError naming the option and the choices for a bad one."""
    base = or_default(None) if args.policy is None else PRESETS[args.policy]
    overrides = check_overrides(getattr(args, "check", None) or (), option="--check")
    try:
        return as_policy(base, source="--policy", overrides=overrides)
    except ValueError as error:
        raise ValueError(f"--check: {error}") from None


def check_outputs(args: argparse.Namespace) -> str | None:
    """Why ``--json``, ``--data-file`` or ``--html`` cannot be written, or the launch's environment is wrong (None: fine).

    Each path is checked as this process would write it: this rank's file under a launch.
    """
    from safe_tracectx.cli.outputs import PLACEHOLDER, STDOUT, rank_data_file, unknown_placeholder
    from safe_tracectx.auditlog.ranks import RankEnvironmentError, rank_info

    try:
        info = rank_info()
    except RankEnvironmentError as error:
        return str(error)
    json_path = args.json
    if json_path == STDOUT:
        if info is not None:
            return (
                "--json -: under a launch the ranks share standard output; "
                f"give each its file (--json audit-{PLACEHOLDER}.json)"
            )
        json_path = None  # standard output: nothing to check
    for option, path in (("--json", json_path), ("--data-file", getattr(args, "data_file", None))):
        if path is not None and (odd := unknown_placeholder(path)) is not None:
            return (
                f"{option} {path}: {odd} is not a placeholder; the one accepted is {PLACEHOLDER} "
                "(the global rank under torchrun, 0 in a single process); write {{ or }} for a literal brace"
            )
        target = rank_data_file(path, info) if path is not None or option == "--data-file" else None
        if target is not None and (problem := check_writable(target)) is not None:
            return f"{option}: {problem}"
    html = getattr(args, "html", None)
    if html is not None and (problem := check_folder(html)) is not None:
        return f"--html: {problem}"
    return None


def check_folder(path: str) -> str | None:
    """Why a report folder cannot be made or written (None: it can; it is made now, before any work)."""
    if os.path.exists(path) and not os.path.isdir(path):
        return f"{path} exists and is not a folder"
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        return f"cannot make the folder {path}: {error.strerror or error}"
    if not os.access(path, os.W_OK):
        return f"cannot write into {path}: permission denied"
    return None
