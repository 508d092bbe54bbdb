"""``python -m history``: run the corpus (and the ordinary programs) and print the tables."""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from history.cases import ORDINARY, Case, load_cases
from history.packages import History, HistoryUnavailable
from history.runs import MODES, Mode, RunResult, run_program
from history.verdicts import HEADER, Verdict, judge, markdown


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m history", description=__doc__)
    parser.add_argument("--case", action="append", default=[], metavar="ID", help="only these cases (repeatable)")
    parser.add_argument("--fast", action="store_true", help="only the cases marked fast")
    parser.add_argument("--ordinary", action="store_true", help="the ordinary programs across versions, not the corpus")
    parser.add_argument("--all", action="store_true", help="the corpus and the ordinary programs")
    parser.add_argument("--versions", default=",".join(ORDINARY["versions"]), help="versions for --ordinary")
    parser.add_argument("--modes", default=",".join(MODES), help="modes to run (default plain,strict,audit)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (default 2)")
    parser.add_argument("--json", metavar="FILE", help="write every run's result as JSON")
    parser.add_argument("--markdown", metavar="FILE", help="write the tables as Markdown")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each run's tail")
    return parser


def _corpus(
    history: History, cases: list[Case], jobs: int, verbose: bool, modes: tuple[Mode, ...] = MODES
) -> tuple[list[Verdict], dict[str, Any]]:
    tasks = [(case, side, revision, mode) for case in cases
             for side, revision in (("parent", case.parent), ("fix", case.fix)) for mode in modes]
    results: dict[tuple[str, str, Mode], RunResult] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {
            pool.submit(run_program, history, case, revision, mode, test_from=(case.parent, case.fix)): (case.id, side, mode)
            for case, side, revision, mode in tasks
        }
        for future in concurrent.futures.as_completed(futures):
            key = futures[future]
            results[key] = result = future.result()
            print(f"  {key[0]:<10} {key[1]:<6} {key[2]:<6} exit {result.returncode:<4} {result.seconds:6.1f} s"
                  f"  violations {len(result.violations)}  notes {len(result.notes)}"
                  f"{'  ours: ' + result.ours_raised if result.ours_raised else ''}"
                  f"{'  raised: ' + result.other_raised if result.other_raised else ''}", file=sys.stderr)
            if verbose:
                print(result.tail, file=sys.stderr)
    verdicts = [
        judge(case, {side: {mode: results[(case.id, side, mode)] for mode in MODES} for side in ("parent", "fix")})
        for case in cases
    ] if modes == MODES else []
    raw = {f"{k[0]}/{k[1]}/{k[2]}": v.to_dict() for k, v in results.items()}
    return verdicts, raw


def _ordinary(history: History, versions: list[str], jobs: int, verbose: bool) -> tuple[list[list[str]], dict[str, Any]]:
    tasks = []
    for version in versions:
        for program in ORDINARY["programs"]:
            for executor in ORDINARY["executors"]:
                case = Case(
                    id=f"{program.removesuffix('.py')}-{executor}", pr=0, summary="ordinary program",
                    parent=version, fix=version, names=(), culprit="", program=program, args=("--executor", executor),
                )
                for mode in MODES:
                    tasks.append((version, case, mode))
    results: dict[tuple[str, str, str], RunResult] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_program, history, case, version, mode): (version, case.id, mode)
                   for version, case, mode in tasks}
        for future in concurrent.futures.as_completed(futures):
            key = futures[future]
            results[key] = result = future.result()
            print(f"  {key[0]:<6} {key[1]:<28} {key[2]:<6} exit {result.returncode:<4} {result.seconds:6.1f} s"
                  f"  violations {len(result.violations)}", file=sys.stderr)
            if verbose and (result.failed or result.violations):
                print(result.tail, file=sys.stderr)
    rows = []
    for version in versions:
        for program in ORDINARY["programs"]:
            for executor in ORDINARY["executors"]:
                name = f"{program.removesuffix('.py')}-{executor}"
                plain, strict, audit = (results[(version, name, m)] for m in MODES)
                rows.append([
                    version, name, "passes" if not plain.failed else f"fails ({plain.other_raised})",
                    str(len(audit.violations)),
                    "as plain" if strict.failed == plain.failed else f"differs (strict exit {strict.returncode})",
                ])
    raw = {"/".join(k): v.to_dict() for k, v in results.items()}
    return rows, raw


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    history = History()
    try:
        history.ensure_clone()
    except HistoryUnavailable as error:
        print(f"python -m history: {error}", file=sys.stderr)
        return 2
    out: list[str] = []
    raw: dict[str, Any] = {}
    status = 0
    if not args.ordinary or args.all:
        cases = load_cases()
        if args.case:
            unknown = sorted(set(args.case) - {c.id for c in cases})
            if unknown:
                print(f"python -m history: unknown case(s) {unknown}", file=sys.stderr)
                return 2
            cases = [c for c in cases if c.id in args.case]
        if args.fast:
            cases = [c for c in cases if c.fast]
        modes: tuple[Mode, ...] = tuple(m for m in MODES if m in args.modes.split(","))
        bad = [m for m in args.modes.split(",") if m and m not in MODES]
        if bad:
            print(f"python -m history: unknown mode(s) {bad}; use {', '.join(MODES)}", file=sys.stderr)
            return 2
        verdicts, raw["corpus"] = _corpus(history, cases, args.jobs, args.verbose, modes)
        caught = sum(v.caught for v in verdicts)
        unexpected = [v.case.id for v in verdicts if not v.as_expected]
        out += ["## The corpus", "", markdown(HEADER, [v.row() for v in verdicts]), "",
                f"caught {caught} of {len(verdicts)}; not as expected: {', '.join(unexpected) or 'none'}"]
        misses = [v for v in verdicts if not v.caught]
        if misses:
            out += ["", "### Not caught, and what catching it would need", ""]
            out += [f"- **{v.case.id}** (#{v.case.pr}, reported: {v.reported}): "
                    f"{v.case.missed_because or 'not explained yet'}" for v in misses]
        status = 0 if not unexpected else 1
    if args.ordinary or args.all:
        rows, raw["ordinary"] = _ordinary(history, [v for v in args.versions.split(",") if v], args.jobs, args.verbose)
        out += ["", "## Ordinary programs", "",
                markdown(["Thunder", "program", "plain", "violations (audit)", "strict"], rows)]
        if any(row[3] != "0" or row[4] != "as plain" for row in rows):
            status = 1
    text = "\n".join(out)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1, default=str))
    return status


if __name__ == "__main__":
    sys.exit(main())
