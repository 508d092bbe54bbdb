"""The exit statuses of the ``safe-tracectx`` command, and its one way to report a usage error (like coverage's ``cmdline``).

Every command (``lint`` too, which imports nothing else of the package) reports a usage error here:
the command's usage, then ``PROG: error: MESSAGE``, and the status ``USAGE_ERROR``::

    >>> from safe_tracectx.exitcodes import ArgumentParser, ExitStatus, UsageError
    >>> int(ExitStatus.USAGE_ERROR)
    2
    >>> parser = ArgumentParser(prog="x")
    >>> try:
    ...     parser.parse_args(["--nope"])
    ... except UsageError as error:
    ...     print(error, error.parser is parser)
    unrecognized arguments: --nope True
"""

from __future__ import annotations

import argparse
import enum
import sys
from typing import Any, Final, NoReturn

__all__ = ["ArgumentParser", "ExitStatus", "UsageError", "usage_error"]


#: The aliases of FINDINGS before ExitStatus had one member per status: still read for the 0.2 release (with a
#: DeprecationWarning), then removed.
_RENAMED: Final = {"VIOLATIONS": "FINDINGS", "SWEEP_FINDINGS": "FINDINGS"}


class _Statuses(enum.EnumType):
    """ExitStatus's metaclass: a renamed status is read as the one it became, with a DeprecationWarning."""

    def __getattr__(cls, name: str) -> Any:
        new = _RENAMED.get(name)
        if new is None:
            raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}")
        import warnings

        warnings.warn(
            f"ExitStatus.{name} is ExitStatus.{new} (one member per status): use ExitStatus.{new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return cls[new]


@enum.unique  # each status one member: an alias would hide the name it repeats
class ExitStatus(enum.IntEnum, metaclass=_Statuses):
    """What a ``safe-tracectx`` command exits with (``run`` keeps the program's own status)."""

    #: Nothing found; or the program's own status 0.
    OK = 0
    #: Something found: ``lint`` findings (unless ``--exit-zero``); violations of ``run``/``demo``/``report`` with
    #: ``--fail-on-violation``; ``sweep``'s injection points that left a trace active, a set open, a masked
    #: exception or a changed input.
    FINDINGS = 1
    #: Bad arguments, an unreadable input or an unwritable output.
    USAGE_ERROR = 2
    #: Ended by Ctrl-C (``KeyboardInterrupt``), as Python itself exits.
    INTERRUPTED = 130


class UsageError(Exception):
    """A bad argument or option value: reported by :func:`usage_error` with ``parser``'s usage (None: the caller's)."""

    def __init__(self, message: str, parser: argparse.ArgumentParser | None = None) -> None:
        super().__init__(message)
        self.parser = parser


class ArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise :class:`UsageError` instead of exiting the process.

    Its subparsers are of this class too (``add_subparsers`` makes them of the parent's class).
    """

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self)


def usage_error(parser: argparse.ArgumentParser, message: str) -> ExitStatus:
    """Print ``parser``'s usage and ``PROG: error: message`` on standard error; return ``USAGE_ERROR``."""
    parser.print_usage(sys.stderr)
    print(f"{parser.prog}: error: {message}", file=sys.stderr)
    return ExitStatus.USAGE_ERROR
