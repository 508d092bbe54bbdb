"""The names a module held before it became a package, served from their new modules with a DeprecationWarning.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     moved_names("pkg", {"dumps": "json"})("dumps").__name__
    'dumps'
    >>> str(caught[0].message)
    'pkg.dumps moved to json.dumps; import it from there (from json import dumps)'
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping

__all__ = ["moved_names"]


def moved_names(package: str, moved: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: each name of ``moved`` is imported from its module, with a
    DeprecationWarning that points at the importing line; any other name is an AttributeError."""

    def __getattr__(name: str) -> object:
        module = moved.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        warnings.warn(
            f"{package}.{name} moved to {module}.{name}; import it from there (from {module} import {name})",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(module), name)

    return __getattr__
