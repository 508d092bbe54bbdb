"""The ThunderFX part of the text report: per FX graph, how the splitter split it, why, what ran in PyTorch, and
which Thunder compilation compiled each of its Thunder modules (from the ``thunderfx`` entries of ``pass_runs``).

A leaf module (no Thunder import)::

    >>> from safe_tracectx.report.thunderfx import thunderfx_lines
    >>> thunderfx_lines({"pass_runs": []})
    []
"""

from __future__ import annotations

from typing import Any

from safe_tracectx.auditlog.document_types import AuditDocument, PassRun, SplitReason, ThunderFXSplit

__all__ = ["thunderfx_lines"]


def _graph_name(split: ThunderFXSplit) -> str:
    if split.get("graph") is None:
        return "FX graph split outside a ThunderCompiler"
    return f"FX graph {split['graph']} of ThunderCompiler {split.get('backend')}"


def _reason_text(reason: SplitReason) -> str:
    text = f"{reason.get('type')}: {reason.get('info') or '(no detail)'}"
    exception = str(reason.get("exception") or "").strip()
    if exception:
        text += f" (exception: {exception.splitlines()[0][:200]})"
    return text


def _groups(runs: list[PassRun]) -> list[tuple[ThunderFXSplit, list[tuple[int, str]]]]:
    """(the split of an FX graph, [(compilation number, Thunder module it compiled)]) per FX graph, in order."""
    groups: dict[tuple[Any, ...], tuple[ThunderFXSplit, list[tuple[int, str]]]] = {}
    compilation = 0
    for run in runs:
        if run.get("kind") == "tracing":
            compilation += 1
        split = run.get("thunderfx")
        if not split:
            continue
        key = (split.get("backend"), split.get("graph"), tuple(split.get("modules") or ()))
        _, compiled = groups.setdefault(key, (split, []))
        if (module := split.get("split")) is not None and run.get("kind") == "tracing":
            compiled.append((compilation, module))
    return list(groups.values())


def thunderfx_lines(document: AuditDocument) -> list[str]:
    """The report's ThunderFX section (no lines when nothing ran under ``torch.compile`` with Thunder)."""
    groups = _groups(document.get("pass_runs") or [])
    if not groups:
        return []
    compiled = sum(len(c) for _, c in groups)
    out = ["", f"ThunderFX (torch.compile with Thunder as its backend): {len(groups)} FX graph(s), {compiled} Thunder "
           "compilation(s) of their modules (compilation N: the Nth interpretation/tracing run)"]
    for split, compilations in groups:
        modules = split.get("modules") or []
        out.append(f"  {_graph_name(split)}: split into {', '.join(modules) or '(no module)'}")
        reasons = split.get("reasons") or []
        for reason in reasons:
            out.append(f"    split because {_reason_text(reason)}")
        if not reasons:
            out.append("    not split: Thunder supports every op of the graph")
        pytorch = split.get("pytorch") or []
        for module in pytorch:
            out.append(f"    ran in PyTorch: {module['module']} ({module['by']}): {', '.join(module['ops']) or '(no op)'}")
        if not pytorch:
            out.append("    ran in PyTorch: nothing")
        parts = []
        for name in (m for m in modules if m.startswith("thunder_")):
            numbers = [str(number) for number, module in compilations if module == name]
            parts.append(f"{name} in compilation {', '.join(numbers)}" if numbers else f"{name} not compiled while audited")
        out.append(f"    compiled by Thunder: {'; '.join(parts) or 'nothing'}")
    return out
