"""flake8 adapter: the STC rules as a flake8 plugin (entry point ``flake8.extension``, prefix ``STC``).

flake8 applies its own ``# noqa`` handling and code selection to what this yields.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from safe_tracectx import __version__
from safe_tracectx.lint.checker import check_tree

__all__ = ["Flake8Plugin"]


class Flake8Plugin:
    """Yields ``(line, col, "STCxxx message", type)`` for each finding of the default rules."""

    name = "safe-tracectx"
    version = __version__

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree

    def run(self) -> Iterator[tuple[int, int, str, type[Any]]]:
        for finding in check_tree(self.tree):
            yield finding.line, finding.col - 1, f"{finding.code} {finding.message}", type(self)
