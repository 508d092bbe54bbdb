"""Moved to ``safe_tracectx.traces.fingerprint``; this re-export is kept for the 0.2 release and then removed.

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     from safe_tracectx import fingerprint
"""

from __future__ import annotations

import warnings

from safe_tracectx.traces.fingerprint import *  # noqa: F403
from safe_tracectx.traces.fingerprint import __all__ as __all__

warnings.warn(
    "safe_tracectx.fingerprint moved to safe_tracectx.traces.fingerprint; import it from there", DeprecationWarning, stacklevel=2
)
