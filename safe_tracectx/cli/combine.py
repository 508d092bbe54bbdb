"""``safe-tracectx combine`` and ``report``: merge data files (ranks, runs) and report them, like coverage's.

    $ torchrun --nproc_per_node 2 -m safe_tracectx run train.py   # .safe-tracectx.rank0.json, ...rank1.json
    $ safe-tracectx combine                                         # -> .safe-tracectx.json, divergences listed
    $ safe-tracectx report .safe-tracectx.json --html htmlreport    # per-rank columns; the HTML report
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from safe_tracectx._support.writable import check_writable
from safe_tracectx.cli.options import check_folder
from safe_tracectx.exitcodes import ExitStatus, usage_error

if TYPE_CHECKING:
    from safe_tracectx.auditlog.documents import Document

__all__ = ["COMBINED_DEFAULT", "add_combine_arguments", "add_report_arguments", "combine_command", "report_command"]

#: Where ``combine`` writes when not told (``report`` reads it by default).
COMBINED_DEFAULT = ".safe-tracectx.json"


def add_combine_arguments(parser: argparse.ArgumentParser) -> None:
    """``combine [PATH ...] [-o FILE] [--fail-on-divergence]``."""
    parser.add_argument(
        "paths", nargs="*", metavar="PATH",
        help="data files (a pytest report brings a member per test), or folders holding "
        ".safe-tracectx.rank*.json (default: the current folder)",
    )
    parser.add_argument("-o", "--output", default=COMBINED_DEFAULT, metavar="FILE", help=f"default: {COMBINED_DEFAULT}")
    parser.add_argument("--fail-on-divergence", action="store_true", help="exit 1 if the ranks diverge")
    parser.add_argument(
        "--all-events", action="store_true",
        help="keep every member's raw events (default: the first member's only; counts, passes, "
        "fingerprints, call sites and violations of every member are always kept)",
    )


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """``report [DATA.json] [--json] [--top N] [--html DIR]``."""
    parser.add_argument("data_file", nargs="?", default=COMBINED_DEFAULT, metavar="DATA.json",
                        help="a data file, run --json's output, combine's, or the pytest plugin's report "
                        f"(--safe-tracectx-report); -: standard input (default: {COMBINED_DEFAULT})")
    parser.add_argument("--json", action="store_true", help="print the JSON document instead of the text report")
    parser.add_argument("--top", type=int, default=15, metavar="N", help="call sites to list (0: none)")
    parser.add_argument("--html", metavar="DIR", help="write the HTML report into DIR (index.html)")


def _data_files(paths: list[str]) -> list[Path]:
    from safe_tracectx.auditlog.ranks import DATA_FILE_PATTERN

    found: list[Path] = []
    for path in [Path(p) for p in paths] or [Path(".")]:
        if path.is_dir():  # the default names, and names chosen with --data-file DIR/job.rank{rank}.json
            found += sorted(set(path.glob(DATA_FILE_PATTERN)) | set(path.glob("*.rank[0-9]*.json")))
        else:
            found.append(path)
    return found


def combine_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Merge the data files into one combined document; print what diverged."""
    from safe_tracectx.auditlog.combine import DataFileError, carried_runs, combine, load_members, paused_gc
    from safe_tracectx.auditlog.documents import RENDER_ERRORS, write_document
    from safe_tracectx.report.sections import plural

    files = _data_files(args.paths)
    if not files:
        return usage_error(parser, "no data files (.safe-tracectx.rank*.json) found; run under torchrun first")
    resolved = [f.resolve() for f in files]
    if (twice := next((f for f, r in zip(files, resolved) if resolved.count(r) > 1), None)) is not None:
        return usage_error(parser, f"{twice} is given twice: name each data file once")
    if Path(args.output).resolve() in resolved:
        return usage_error(parser, f"--output: {args.output} is one of the data files to combine; name another file "
                                   f"(the default is {COMBINED_DEFAULT})")
    if (problem := check_writable(args.output)) is not None:
        return usage_error(parser, f"--output: {problem}")
    started = time.perf_counter()
    with paused_gc(freeze=True):  # only acyclic JSON data is made: the collector would rescan it all, again and again
        try:
            combined = combine(load_members(files, all_events=args.all_events), all_events=args.all_events)
        except DataFileError as error:
            return usage_error(parser, str(error))
        except RENDER_ERRORS as error:  # damaged deeper than validate checks
            return usage_error(parser, _damaged_message(files, error))
        write_document(combined, args.output, compact=True)
    divergences, members = combined["divergences"], combined["members"]
    names = ", ".join(m["name"] for m in members)
    # a combined file or a pytest report brings several members: the count is of what the list names
    what = plural(len(files), "data file") if len(members) == len(files) else \
        f"{plural(len(members), 'member')} of {plural(len(files), 'data file')}"
    print(f"combined {what} ({names}) into {args.output} in {time.perf_counter() - started:.2f}s")
    world = combined.get("world_size")
    if world is not None and world != len(members):
        print(f"warning: world size {world}, but {plural(len(members), 'member')}", file=sys.stderr)
    first = [d for d in divergences if not d.get("carried")]
    carried = carried_runs(divergences)
    print(f"rank divergence: {len(divergences)}" + ("" if divergences else " (none)")
          + (f"; {len(first)} where it starts, {plural(len(carried), 'later pass run')} carrying it on" if carried else ""))
    for divergence in first[:20]:
        print(f"  {divergence['message']}")
    if args.fail_on_divergence and divergences:
        return ExitStatus.FINDINGS
    return ExitStatus.OK


def _damaged_message(files: list[Path], error: BaseException) -> str:
    """What a damaged data file that ``combine`` could not read is: the first file that cannot be combined with itself
    (violation path only: each is read and combined once more)."""
    from safe_tracectx.auditlog.combine import combine, load_members
    from safe_tracectx.auditlog.documents import RENDER_ERRORS, DataFileError, damaged, read_document

    for path in files:
        try:
            combine(load_members([path, path]))  # (twice: what compares members reads it too)
        except DataFileError as alone:
            return str(alone)
        except RENDER_ERRORS as alone:
            return str(damaged(read_document(path), str(path), alone))
    return f"the data files cannot be combined ({type(error).__name__}: {error}): one of them is damaged"


def _render(document: Document, path: str, top: int) -> str:
    """The text report of an audit, a combined file (a column per member) or a pytest report (a section per test)."""
    from safe_tracectx.auditlog.documents import COMBINED_SCHEMA, PYTEST_SCHEMA
    from safe_tracectx.report.pytest_document import render_pytest
    from safe_tracectx.report.ranks import render_combined
    from safe_tracectx.report.text import render_text

    if document["schema"] == COMBINED_SCHEMA:
        return render_combined(document, top=top)
    if document["schema"] == PYTEST_SCHEMA:
        return render_pytest(document, path=path)
    return render_text(document, top=top)


def report_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """A document's report (text, ``--json``, ``--html DIR``): a data file's, per-rank columns for a combined
    file, a section per test for the pytest plugin's report. ``-`` reads standard input."""
    from safe_tracectx.auditlog.combine import combine, members_of
    from safe_tracectx.auditlog.documents import PYTEST_SCHEMA, DataFileError, damaged, read_document

    if args.top < 0:
        return usage_error(parser, "--top must be >= 0")
    if args.html is not None and (problem := check_folder(args.html)) is not None:
        return usage_error(parser, f"--html: {problem}")
    try:
        document = read_document(args.data_file)  # its version, and the keys its report reads, checked
        members = members_of(document, args.data_file)
    except DataFileError as error:
        return usage_error(parser, str(error))
    try:
        text = _render(document, args.data_file, args.top)
    except DataFileError as error:  # damaged deeper than checked: named as the file it is
        cause = error.__cause__
        return usage_error(parser, str(error) if cause is None else str(damaged(document, args.data_file, cause)))
    print(json.dumps(document, indent=2) if args.json else text)
    if args.html is not None:
        from safe_tracectx.report.html import ReportFolderError, write_html

        # the HTML report reads audits and combined files: a pytest report is given as its tests combined
        shown = combine(members) if document["schema"] == PYTEST_SCHEMA else document
        try:
            print(f"HTML report written to {write_html(shown, args.html)}")
        except ReportFolderError as refused:
            return usage_error(parser, str(refused))
        except DataFileError as error:  # damaged deeper than the text report reads: named as the file it is
            cause = error.__cause__
            return usage_error(parser, str(error) if cause is None else str(damaged(document, args.data_file, cause)))
    return ExitStatus.OK
