"""Synthetic data files shaped like issue 14's ``pass_runs`` (until they land), for the multi-rank tests."""

from __future__ import annotations

from typing import Any, cast

from safe_tracectx.auditlog.document_types import AuditDocument, PassRun

Row = list[Any]


def row(symbol: str, *outputs: str, shape: list[int] | None = None) -> Row:
    return [symbol, list(outputs), [shape for _ in outputs], ["float32" if shape is not None else None for _ in outputs]]


def pass_run(label: str, *traces: list[Row], role: str = "forward", proxies: int = 1, violations: list[str] | None = None) -> PassRun:
    return {"label": label, "kind": "remat", "role": role, "seconds": 0.25, "changed": True, "proxies": proxies,
            "violations": violations or [], "fingerprints": [list(t) for t in traces]}


def audit_document(rank: int | None, runs: list[PassRun], *, world_size: int = 2, events: list[dict[str, Any]] | None = None) -> AuditDocument:
    document: dict[str, Any] = {
        "schema": "safe-tracectx/audit", "version": 2, "counts": {"proxy_created": 3, "trace_set": 2, "trace_reset": 2},
        "kept": 0, "dropped": 0, "passes": {}, "proxies_by_pass": {}, "call_sites": [], "leaked_sets": [],
        "traceless": [], "violations": [], "events": events or [], "pass_runs": runs,
    }
    if rank is not None:
        document["rank"] = {"rank": rank, "world_size": world_size, "local_rank": rank, "host": "node"}
    return cast(AuditDocument, document)


BASE = [row("unpack_trivial", "x", shape=[2]), row("sin", "t0", shape=[2]), row("python_return")]
REMAT = [row("unpack_trivial", "x", shape=[2]), row("sin", "t0", shape=[2]), row("cos", "t1", shape=[2]), row("python_return")]
BRANCHED = [row("unpack_trivial", "x", shape=[2]), row("sin", "t0", shape=[2]), row("mul", "t1", shape=[2]), row("cos", "t2", shape=[2]), row("python_return")]


def rank_documents(world_size: int, *, branch_on: int | None = None) -> list[AuditDocument]:
    """Each rank ran ``trace`` then ``fusion``; ``branch_on``'s fusion output has an extra ``mul`` at index 2."""
    return [
        audit_document(rank, [pass_run("trace", BASE), pass_run("fusion", BRANCHED if rank == branch_on else REMAT)],
                       world_size=world_size)
        for rank in range(world_size)
    ]
