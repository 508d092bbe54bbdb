"""What the run-time parts need beyond the linter, and the error that names the extra to install.

The linter needs nothing; the managers, hooks, checks, audit runs and the pytest
plugin's modes need Lightning Thunder and torch (``pip install "safe-tracectx[thunder]"``)::

    >>> from safe_tracectx.extras import require_thunder
    >>> require_thunder("tracectx")  # installed here: nothing to say
"""

from __future__ import annotations

import importlib.util

__all__ = ["MissingExtraError", "require_thunder"]

THUNDER_EXTRA = 'pip install "safe-tracectx[thunder]"'


class MissingExtraError(ImportError):
    """A run-time part was used without the packages of its extra."""


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def require_thunder(what: str) -> None:
    """Raise MissingExtraError naming ``what`` and the ``thunder`` extra if Thunder or torch is missing."""
    missing = [name for name in ("torch", "thunder") if not _importable(name)]
    if missing:
        raise MissingExtraError(
            f"{what} needs lightning-thunder and torch ({', '.join(missing)} not installed); "
            f"install them with: {THUNDER_EXTRA} (the linter alone needs neither)"
        )
