"""A program that compiles only while its on-disk cache is cold: the first run writes it (``warm_cache.py DIR``)."""

from __future__ import annotations

import sys
from pathlib import Path

from thunder.core.trace import TraceCtx, tracectx

cache = Path(sys.argv[1]) / "compiled"
if not cache.exists():
    for _ in range(3):  # the "compilation": three trace-context points
        with tracectx(TraceCtx()):
            pass
    cache.write_text("done\n")
