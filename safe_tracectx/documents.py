"""Moved to ``safe_tracectx.auditlog.documents``; this re-export is kept for the 0.2 release and then removed.

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     from safe_tracectx import documents
"""

from __future__ import annotations

import warnings

from safe_tracectx.auditlog.documents import *  # noqa: F403
from safe_tracectx.auditlog.documents import __all__ as __all__

warnings.warn(
    "safe_tracectx.documents moved to safe_tracectx.auditlog.documents; import it from there", DeprecationWarning, stacklevel=2
)
