"""What the run-time parts need beyond the linter, and the error that names the extra to install.

The linter needs nothing; the managers, hooks, checks, audit runs and the pytest
plugin's modes need Lightning Thunder (0.2.1 to main) and torch
(the ``thunder`` extra); an older Thunder, or one that does
not import, is refused with :class:`UnsupportedThunderError` naming what was found::

    >>> from safe_tracectx._support.extras import require_thunder
    >>> require_thunder("tracectx")  # installed here: nothing to say
"""

from __future__ import annotations

import importlib
import importlib.util
import re

__all__ = ["SUPPORTED_THUNDER", "MissingExtraError", "UnsupportedThunderError", "require_thunder"]

#: The packages of the ``thunder`` extra, by their own names (safe-tracectx itself is not on the index).
THUNDER_EXTRA = "pip install 'lightning-thunder>=0.2.1,<0.3' 'torch>=2.7.1,<2.13'"
#: The lightning-thunder releases the run-time parts support (development versions between them included).
SUPPORTED_THUNDER = "lightning-thunder 0.2.1 to main"
#: The oldest Thunder the hooks can work with: the 0.2.0 development line (Oct 2024 on, what the history
#: corpus runs); 0.1.x lacks the trace provenance and naming the hooks read.
_OLDEST: tuple[int, int] = (0, 2)
_UPGRADE = "pip install -U 'lightning-thunder>=0.2.1,<0.3'"
_thunder_checked = False


class MissingExtraError(ImportError):
    """A run-time part was used without the packages of its extra."""


class UnsupportedThunderError(ImportError):
    """The installed Thunder is older than the supported range, or does not import at all."""


def _release(version: str) -> tuple[int, int] | None:
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _check_thunder_version(what: str) -> None:
    global _thunder_checked
    if _thunder_checked:
        return
    try:
        thunder = importlib.import_module("thunder")
    except Exception as error:
        raise UnsupportedThunderError(
            f"{what} needs Lightning Thunder, but importing it failed ({type(error).__name__}: {error}); "
            f"safe-tracectx supports {SUPPORTED_THUNDER}: {_UPGRADE}"
        ) from error
    version = str(getattr(thunder, "__version__", "unknown"))
    release = _release(version)
    if release is not None and release < _OLDEST:
        where = getattr(thunder, "__file__", None) or "?"
        raise UnsupportedThunderError(
            f"{what} needs a newer Lightning Thunder: found {version} ({where}); "
            f"safe-tracectx supports {SUPPORTED_THUNDER}: {_UPGRADE}"
        )
    _thunder_checked = True


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def require_thunder(what: str) -> None:
    """Raise MissingExtraError naming ``what`` and the ``thunder`` extra if Thunder or torch is missing,
    UnsupportedThunderError if Thunder is too old or does not import."""
    missing = [name for name in ("torch", "thunder") if not _importable(name)]
    if missing:
        raise MissingExtraError(
            f"{what} needs lightning-thunder and torch ({', '.join(missing)} not installed); "
            f"install them with: {THUNDER_EXTRA} (the linter alone needs neither)"
        )
    _check_thunder_version(what)
