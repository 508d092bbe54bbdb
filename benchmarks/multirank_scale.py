"""How data files and ``combine`` grow with the number of ranks: generated data for 2, 8 and 64 ranks.

    python benchmarks/multirank_scale.py [TEMPLATE.json] [--ranks 2 8 64]

TEMPLATE is one rank's data file (``safe-tracectx demo --data-file demo.json`` for
the demo GPT); without it a synthetic one is generated (``--passes``, ``--symbols``,
``--events``). Each rank gets a copy with its own ``rank``; the last rank's last
pass differs at its last bound symbol, so ``combine`` compares every row of every
pass. Prints a Markdown table: data-file size per rank; ``safe-tracectx combine``'s
wall time (Python's start-up included: read, compare, write) and its file; the
same in-process with ``--all-events``; the HTML report's size and write time.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from safe_tracectx.auditlog.document_types import AuditDocument
from safe_tracectx.auditlog.combine import combine, load_members, pass_runs, paused_gc
from safe_tracectx.cli.outputs import write_document
from safe_tracectx.report.html import write_html


def synthetic(passes: int, symbols: int, events: int) -> AuditDocument:
    """One rank's data file: ``passes`` pass runs of ``symbols`` bound symbols each, ``events`` kept events."""
    rows = [[f"op{i % 17}", [f"t{i}"], [[16, 64]], ["float32"]] for i in range(symbols)]
    runs = [{"label": f"pass {p}", "kind": "transform", "role": "forward", "seconds": 0.01, "changed": True,
             "proxies": symbols // 10, "violations": [], "fingerprints": [list(rows)]} for p in range(passes)]
    site = {"file": "thunder/core/prims.py", "line": 100, "function": "meta"}
    kept = [{"kind": "proxy_created", "site": site, "thread": "MainThread", "trace_id": 1, "trace": "trace 1",
             "pass": None, "detail": {"name": f"t{i}"}} for i in range(events)]
    return cast(AuditDocument, {
        "schema": "safe-tracectx/audit", "version": 2, "counts": {"proxy_created": events}, "kept": events, "dropped": 0,
        "passes": {}, "proxies_by_pass": {}, "call_sites": [], "leaked_sets": [], "traceless": [], "violations": [],
        "events": kept, "pass_runs": runs})


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def measure(template: AuditDocument, ranks: int, folder: Path) -> dict[str, float]:
    """Write ``ranks`` data files, combine them twice (in-process, CLI), render the HTML; sizes and times."""
    for rank in range(ranks):
        document = copy.deepcopy(template) if rank == ranks - 1 else template
        document["rank"] = {"rank": rank, "world_size": ranks, "local_rank": rank % 8, "host": f"node{rank // 8}"}
        if rank == ranks - 1 and pass_runs(document):
            last = pass_runs(document)[-1]["fingerprints"][-1]
            last[-1] = ["diverged", [], [], []]
        write_document(document, str(folder / f".safe-tracectx.rank{rank}.json"), compact=True)
    files = sorted(folder.glob(".safe-tracectx.rank*.json"))
    started = time.perf_counter()
    with paused_gc():  # as the CLI does
        everything = combine(load_members(files), all_events=True)
        write_document(everything, str(folder / "all-events.json"), compact=True)
    all_events = time.perf_counter() - started
    del everything
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "safe_tracectx", "combine", str(folder), "-o", str(folder / "combined.json")],
                   check=True, capture_output=True)
    cli = time.perf_counter() - started
    combined = json.loads((folder / "combined.json").read_text(encoding="utf-8"))
    assert len(combined["divergences"]) == 1, combined["divergences"][:3]
    started = time.perf_counter()
    write_html(combined, folder / "html")
    html = time.perf_counter() - started
    return {"ranks": ranks, "per_rank": _size(folder / ".safe-tracectx.rank0.json"), "cli": cli,
            "combined": _size(folder / "combined.json"), "all_events": all_events,
            "all_events_size": _size(folder / "all-events.json"), "html_seconds": html, "html": _size(folder / "html")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("template", nargs="?")
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 8, 64])
    parser.add_argument("--passes", type=int, default=12)
    parser.add_argument("--symbols", type=int, default=400)
    parser.add_argument("--events", type=int, default=4000)
    args = parser.parse_args()
    if args.template:
        template = json.loads(Path(args.template).read_text(encoding="utf-8"))
    else:
        template = synthetic(args.passes, args.symbols, args.events)
    runs = pass_runs(template)
    rows = sum(len(t) for r in runs for t in r.get("fingerprints") or [])
    print(f"template: {args.template or 'synthetic'}: {len(runs)} pass runs, {rows} fingerprint rows, "
          f"{len(template.get('events', []))} events\n")
    print("| ranks | data file per rank | `combine` (CLI, wall) | combined file | `combine --all-events` (in-process) | its file | HTML report (write time) |")
    print("|---|---|---|---|---|---|---|")
    for ranks in args.ranks:
        with tempfile.TemporaryDirectory() as folder:
            m = measure(template, ranks, Path(folder))
        print(f"| {ranks} | {m['per_rank'] / 1e6:.2f} MB | {m['cli']:.2f} s | {m['combined'] / 1e6:.1f} MB | "
              f"{m['all_events']:.2f} s | {m['all_events_size'] / 1e6:.1f} MB | "
              f"{m['html'] / 1e6:.2f} MB ({m['html_seconds']:.2f} s) |", flush=True)


if __name__ == "__main__":
    main()
