"""The ThunderFX splitter as a pass: its proxies in a phase of their own, its split recorded (``fx_splits``).

``thunder.dynamo.splitter._splitter`` is rebound like every hooked function
(``ThunderCompiler.__call__`` binds it by name). Its run is a ``pass_run`` of
kind ``thunderfx`` whose ``thunderfx`` entry says how it split the FX graph;
the support checks it makes (``is_node_supported_by_thunder``, a ``phase`` hook)
report their proxies as ``ThunderFX splitter (support checks)``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from safe_tracectx._support.pass_catalog import PassSpec
from safe_tracectx.hooks import fx_splits
from safe_tracectx.hooks.reporting import internal_error
from safe_tracectx.hooks.runs import PassRun

__all__ = ["wrap_splitter"]


def _backend_and_graph(caller: FrameType | None) -> tuple[int | None, int | None]:
    """(number of the ThunderCompiler splitting, index of this FX graph in its ``subgraph_infos``), or
    (None, None) when something else called the splitter (``thunder.dynamo.report`` does)."""
    if caller is None or caller.f_code.co_name != "__call__":
        return None, None
    compiler = getattr(sys.modules.get("thunder.dynamo.compiler"), "ThunderCompiler", None)
    backend = caller.f_locals.get("self")
    infos = getattr(backend, "subgraph_infos", None)
    if not isinstance(compiler, type) or not isinstance(backend, compiler) or not isinstance(infos, list):
        return None, None
    return fx_splits.backend_number(backend), len(infos)  # it appends this graph's info when the split returns


def wrap_splitter(spec: PassSpec, original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` (the splitter) run as a pass whose ``pass_run`` records the split it made."""

    @functools.wraps(original)
    def audited_splitter(*args: Any, **kwargs: Any) -> Any:
        backend, graph = _backend_and_graph(sys._getframe(1))
        run = PassRun(spec.label, spec.qualname, spec.kind).enter()
        try:
            result = original(*args, **kwargs)
        except BaseException as error:
            run.leave(failed=True, error=error)
            raise
        try:
            run.thunderfx = fx_splits.record(result, backend=backend, graph=graph)
        except Exception as bug:  # noqa: BLE001 - a bug of ours never stops the user's program
            internal_error("the split the ThunderFX splitter made", bug)
        run.leave(result)
        return result

    audited_splitter.__safe_tracectx_pass__ = spec  # type: ignore[attr-defined]
    return audited_splitter
