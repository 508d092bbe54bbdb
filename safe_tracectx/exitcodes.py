"""The exit statuses of the ``safe-tracectx`` command, in one place (like coverage's ``cmdline``).

    >>> from safe_tracectx.exitcodes import ExitStatus
    >>> int(ExitStatus.USAGE_ERROR)
    2
"""

from __future__ import annotations

import enum

__all__ = ["ExitStatus"]


class ExitStatus(enum.IntEnum):
    """What a ``safe-tracectx`` command exits with (``run`` keeps the program's own status)."""

    #: Nothing found; or the program's own status 0.
    OK = 0
    #: ``lint`` found something (unless ``--exit-zero``).
    FINDINGS = 1
    #: ``run``/``demo``/``report`` with ``--fail-on-violation``: there were violations.
    VIOLATIONS = 1
    #: ``sweep``: an injection point left a trace active, a set open, a masked exception or a changed input.
    SWEEP_FINDINGS = 1
    #: Bad arguments, an unreadable input or an unwritable output.
    USAGE_ERROR = 2
    #: Ended by Ctrl-C (``KeyboardInterrupt``), as Python itself exits.
    INTERRUPTED = 130
