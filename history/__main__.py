"""``python -m history``: run the corpus (and the ordinary programs) and print the tables."""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import sys
from pathlib import Path
from collections.abc import Callable
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
    parser.add_argument("--from", dest="saved", metavar="FILE",
                        help="reuse the runs saved by an earlier --json FILE (same commits), run only the others, judge all "
                             "with the cases as they are now")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each run's tail")
    return parser


def _saved(raw: dict[str, Any]) -> dict[tuple[str, ...], RunResult]:
    """The runs of an earlier ``--json`` document's section, keyed as when they ran."""
    return {tuple(key.split("/")): RunResult(**value) for key, value in raw.items()}


def _corpus(
    history: History, cases: list[Case], jobs: int, verbose: bool, modes: tuple[Mode, ...] = MODES,
    saved: dict[str, Any] | None = None, checkpoint: Callable[[dict[str, Any]], None] = lambda raw: None,
) -> tuple[list[Verdict], dict[str, Any]]:
    tasks = [(case, side, revision, mode) for case in cases
             for side, revision in (("parent", case.parent), ("fix", case.fix)) for mode in modes]
    results: dict[tuple[str, str, Mode], RunResult] = {}
    if saved is not None:  # what was saved is reused (when it ran the same commit); the rest runs now
        found = _saved(saved)
        for case, side, revision, mode in tasks:
            run = found.get((case.id, side, mode))
            if run is not None and run.commit == history.resolve(revision):
                results[(case.id, side, mode)] = run
        tasks = [t for t in tasks if (t[0].id, t[1], t[3]) not in results]
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {
            pool.submit(run_program, history, case, revision, mode, test_from=(case.parent, case.fix)): (case.id, side, mode)
            for case, side, revision, mode in tasks
        }
        for future in concurrent.futures.as_completed(futures):
            key = futures[future]
            results[key] = result = future.result()
            checkpoint({"/".join(k): v.to_dict() for k, v in results.items()})
            print(f"  {key[0]:<10} {key[1]:<6} {key[2]:<6} exit {result.returncode:<4} {result.seconds:6.1f} s"
                  f"  violations {len(result.violations)}  notes {len(result.notes)}"
                  f"{'  ours: ' + result.ours_raised if result.ours_raised else ''}"
                  f"{'  raised: ' + result.other_raised if result.other_raised else ''}", file=sys.stderr)
            if verbose:
                print(result.tail, file=sys.stderr)
    complete = all((case.id, side, mode) in results for case in cases for side in ("parent", "fix") for mode in MODES)
    verdicts = [
        judge(case, {side: {mode: results[(case.id, side, mode)] for mode in MODES} for side in ("parent", "fix")})
        for case in cases
    ] if complete else []
    raw = {f"{k[0]}/{k[1]}/{k[2]}": v.to_dict() for k, v in results.items()}
    return verdicts, raw


def _ordinary(
    history: History, versions: list[str], jobs: int, verbose: bool, saved: dict[str, Any] | None = None,
    checkpoint: Callable[[dict[str, Any]], None] = lambda raw: None,
) -> tuple[list[list[str]], dict[str, Any]]:
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
    if saved is not None:  # what was saved is reused; the rest runs now
        found = _saved(saved)
        results = {(v, c.id, m): found[(v, c.id, m)] for v, c, m in tasks if (v, c.id, m) in found}
        tasks = [t for t in tasks if (t[0], t[1].id, t[2]) not in results]
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_program, history, case, version, mode): (version, case.id, mode)
                   for version, case, mode in tasks}
        for future in concurrent.futures.as_completed(futures):
            key = futures[future]
            results[key] = result = future.result()
            checkpoint({"/".join(k): v.to_dict() for k, v in results.items()})
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
    out: list[str] = [
        "# Thunder's history as the acceptance test", "",
        "Written by `make history` (`python -m history --all`); the cases are `history/cases/*.toml`. Each case runs "
        "at the fix's parent (the bug) and at the fix: plain Thunder, `safe-tracectx run --policy strict` (or the "
        "pytest plugin) and the non-raising `audit` mode. **Caught** means a report names every one of the bug's "
        "names and the pass or step that made the trace, before or instead of Thunder's own failure, with nothing "
        "reported at the fix and strict behaving as plain there.", "",
    ]
    raw: dict[str, Any] = {}
    saved: dict[str, Any] = json.loads(Path(args.saved).read_text()) if args.saved else {}

    def checkpoint(section: str) -> Callable[[dict[str, Any]], None]:
        """Keep ``--json``'s file up to date after every run: an interrupted run keeps what it did (``--from``)."""
        def save(runs: dict[str, Any]) -> None:
            if args.json:
                raw[section] = runs
                Path(args.json).write_text(json.dumps(raw, indent=1, default=str))
        return save
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
        verdicts, raw["corpus"] = _corpus(history, cases, args.jobs, args.verbose, modes,
                                          saved.get("corpus", {}) if args.saved else None, checkpoint("corpus"))
        caught = sum(v.caught for v in verdicts)
        unexpected = [v.case.id for v in verdicts if not v.as_expected]
        out += ["## The corpus", "", markdown(HEADER, [v.row() for v in verdicts]), "",
                f"caught {caught} of {len(verdicts)}; not as expected: {', '.join(unexpected) or 'none'}"]
        held = [v for v in verdicts if v.case.held_out is not None]
        if held:
            out += ["", "### Held out: cases found after the checks were written", "",
                    f"{len(held)} cases were found by a search for fixes of the class after the checks were written, "
                    f"not written against: {sum(v.case.held_out == 'caught' for v in held)} caught when found, "
                    f"{sum(v.caught for v in held)} caught now.", ""]
            out += [f"- **{v.case.id}** (#{v.case.pr}): {v.case.held_out} when found, "
                    f"{'caught' if v.caught else 'missed'} now. {v.case.held_out_note or ''}".rstrip() for v in held]
        others = [v for v in verdicts if v.case.other_bug_at_fix is not None]
        if others:
            out += ["", "### Another bug the fix commit still has", ""]
            out += [f"- **{v.case.id}** (#{v.case.pr}): at the fix, {v.case.other_bug_at_fix['kind']} is reported "
                    f"(fixed later by {v.case.other_bug_at_fix['fixed_by']}; not counted against silence at the fix): "
                    f"{v.case.other_bug_at_fix['why']}" for v in others if v.case.other_bug_at_fix is not None]
        misses = [v for v in verdicts if not v.caught]
        if misses:
            out += ["", "### Not caught, and what catching it would need", ""]
            out += [f"- **{v.case.id}** (#{v.case.pr}, reported: {v.reported}): "
                    f"{v.case.missed_because or 'not explained yet'}" for v in misses]
        status = 0 if not unexpected else 1
    if args.ordinary or args.all:
        rows, raw["ordinary"] = _ordinary(history, [v for v in args.versions.split(",") if v], args.jobs, args.verbose,
                                          saved.get("ordinary", {}) if args.saved else None, checkpoint("ordinary"))
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
