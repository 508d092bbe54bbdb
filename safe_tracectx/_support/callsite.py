"""Find the user's ``file:line``: the first frame outside this package.

Frames of this package and of :mod:`contextlib` are always skipped, so a
report names the line that wrote ``with tracectx(...)`` or called
``set_tracectx``, not the machinery in between::

    >>> from safe_tracectx._support.callsite import find_call_site
    >>> def where():
    ...     return find_call_site()
    >>> where().function
    'where'
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Container
from types import FrameType
from typing import NamedTuple

__all__ = [
    "CallSite", "SiteKey", "calling_code", "display_path", "find_call_site", "find_frame", "find_site_key", "is_own_file",
    "thunder_root", "user_definition",
]  # fmt: skip

#: The package's folder (this module is in its ``_support/``): every module of it is machinery.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_ALWAYS_SKIPPED = frozenset({contextlib.__file__})
_thunder_root: str | None = None


#: A call site as plain values, ``(filename, lineno, function)``: what the audit counts proxies by, per proxy
#: (``CallSite(*key)`` when a report shows it).
SiteKey = tuple[str, int, str]


class CallSite(NamedTuple):
    """A source location: ``filename:lineno in function``."""

    filename: str
    lineno: int
    function: str

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} in {self.function}"

    def location(self) -> str:
        """``path:line``, the path relative to the current directory when inside it (clickable)."""
        return f"{display_path(self.filename)}:{self.lineno}"


def display_path(filename: str) -> str:
    """``filename`` relative to the current directory when it is inside it, else absolute."""
    if filename.startswith("<"):  # <stdin>, <string>, <doctest ...>
        return filename
    try:
        absolute = os.path.abspath(filename)
        here = os.getcwd() + os.sep
    except OSError:  # the current directory was removed
        return filename
    return absolute[len(here) :] if absolute.startswith(here) else absolute


def thunder_root() -> str | None:
    """The directory of the imported ``thunder`` package (None if not imported)."""
    global _thunder_root
    if _thunder_root is None:
        module = sys.modules.get("thunder")
        path = getattr(module, "__file__", None)
        if path is None:
            return None
        _thunder_root = os.path.dirname(os.path.abspath(path)) + os.sep
    return _thunder_root


_machinery: frozenset[str] | None = None


def _thunder_machinery() -> frozenset[str]:
    """Thunder's trace and proxy plumbing: set_tracectx, tracectx, Proxy.__init__, replace ..."""
    global _machinery
    if _machinery is None:
        root = thunder_root()
        if root is None:
            return frozenset()
        _machinery = frozenset(os.path.join(root, "core", name) for name in ("trace.py", "proxies.py"))
    return _machinery


def is_own_file(filename: str) -> bool:
    """``filename`` is one of this package's: its frames are machinery, never a call site or the program's."""
    return filename.startswith(_PACKAGE_DIR)


def calling_code(
    frame: FrameType | None, through: Container[str], *, own_stops: bool = False, through_constructors: bool = False
) -> tuple[str, str] | None:
    """(``module.qualname``, ``qualname``) of the first function, walking out from ``frame``, whose module is not
    in ``through`` (machinery that acts for its caller), skipping this package's frames, or, with ``own_stops``,
    giving None at the first of them (this package acted for itself). With ``through_constructors`` an
    ``__init__`` is looked through too (a constructor builds for whoever constructs it).

    >>> import sys
    >>> def asker():
    ...     return calling_code(sys._getframe(), through=())
    >>> asker()[1]
    'asker'
    """
    while frame is not None:
        code = frame.f_code
        if is_own_file(code.co_filename):
            if own_stops:
                return None
        else:
            module = str(frame.f_globals.get("__name__", "?"))
            if module not in through and not (through_constructors and code.co_name == "__init__"):
                return f"{module}.{code.co_qualname}", code.co_qualname
        frame = frame.f_back
    return None


def _skipped(filename: str, *, skip_thunder: bool) -> bool:
    if is_own_file(filename) or filename in _ALWAYS_SKIPPED:
        return True
    if skip_thunder:
        root = thunder_root()
        return root is not None and filename.startswith(root)
    # Thunder's own set/reset/tracectx and proxy constructors are machinery, not call sites.
    return filename in _thunder_machinery()


def find_frame(
    matches: Callable[[FrameType], bool], start: FrameType | None, *, limit: int = 8
) -> FrameType | None:
    """The first of ``limit`` frames walking out from ``start`` for which ``matches`` is true."""
    frame = start
    for _ in range(limit):
        if frame is None:
            return None
        if matches(frame):
            return frame
        frame = frame.f_back
    return None


#: Per skip_thunder: filename -> whether its frames are skipped (a file's answer never changes: Thunder's files
#: run only once Thunder is imported, and then thunder_root() knows them). Bounded: Thunder names every program
#: it generates anew.
_skipped_files: tuple[dict[str, bool], dict[str, bool]] = ({}, {})
_MAX_CACHED_FILES = 10_000


def find_site_key(frame: FrameType | None, *, skip_thunder: bool = False) -> SiteKey | None:
    """The first frame, walking out from ``frame``, outside this package, as a :data:`SiteKey` (no object made)."""
    skipped = _skipped_files[skip_thunder]
    f = frame
    while f is not None:
        code = f.f_code
        filename = code.co_filename
        skip = skipped.get(filename)
        if skip is None:
            skip = _skipped(filename, skip_thunder=skip_thunder)
            if len(skipped) < _MAX_CACHED_FILES:
                skipped[filename] = skip
        if not skip:
            return (filename, f.f_lineno, code.co_qualname)
        f = f.f_back
    return None


def find_call_site(*, skip_thunder: bool = False, frame: FrameType | None = None) -> CallSite | None:
    """The first frame, walking out from ``frame`` (default: the caller), outside this package.

    With ``skip_thunder=True`` Thunder's frames are skipped too, so the site is
    the user's code that called into Thunder.
    """
    key = find_site_key(frame if frame is not None else sys._getframe(1), skip_thunder=skip_thunder)
    return None if key is None else CallSite(*key)


def user_definition(function: object) -> CallSite | None:
    """Where ``function`` is defined (its ``def`` line), if that is the user's code: not Thunder's, not this package's."""
    for _ in range(8):  # through functools.wraps wrappers and bound methods
        inner = getattr(function, "__wrapped__", None) or getattr(function, "__func__", None)
        if inner is None:
            break
        function = inner
    code = getattr(function, "__code__", None)
    filename = getattr(code, "co_filename", None)
    if code is None or not isinstance(filename, str) or filename.startswith("<") or _skipped(filename, skip_thunder=True):
        return None
    return CallSite(filename, code.co_firstlineno, code.co_qualname)
