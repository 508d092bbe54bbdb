"""Which files a run reads: the ``.py`` regular files under the given paths, less the excluded ones.

Only regular files are read: a FIFO named ``pipe.py`` would block ``read()`` forever, and a
broken symbolic link cannot be read at all, so both are skipped with a message instead.

    >>> from safe_tracectx.lint.files import matches
    >>> matches("build/lib/x.py", ("build",)), matches("src/x.py", ("build", "tests/*"))
    (True, False)
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import Final

__all__ = ["DEFAULT_EXCLUDE", "Discovery", "Skip", "discover", "matches", "not_excluded", "relative_posix"]

#: Folders and files never walked into unless ``exclude`` is replaced (``extend-exclude`` adds to these).
DEFAULT_EXCLUDE: Final[tuple[str, ...]] = (
    ".*",  # hidden folders: .git, .venv, .tox, .mypy_cache, ...
    "__pycache__",
    "venv",
    "build",
    "dist",
    "node_modules",
    "*.egg-info",
)


@dataclasses.dataclass(frozen=True)
class Skip:
    """A path that was not read, and why."""

    path: str
    reason: str


@dataclasses.dataclass
class Discovery:
    """The files to read and the paths skipped on the way."""

    files: list[Path] = dataclasses.field(default_factory=list)
    skipped: list[Skip] = dataclasses.field(default_factory=list)


def relative_posix(path: str | os.PathLike[str], root: Path | None = None) -> str:
    """``path`` relative to ``root`` (default: the current folder) if it lies below it, as ``a/b.py``."""
    absolute = Path(os.path.abspath(path))
    base = Path(os.path.abspath(root if root is not None else os.curdir))
    try:
        return absolute.relative_to(base).as_posix()
    except ValueError:
        return absolute.as_posix()


def matches(relative: str, patterns: Iterable[str], *, below: str | None = None) -> bool:
    """Does a glob match the path? A pattern with ``/`` matches the relative path (or a leading part
    of it); one without matches any single component of ``below`` (default: of ``relative``), like
    ruff's and flake8's excludes. ``below`` is the part under the folder given on the command line,
    so a checkout under ``~/.cache`` or ``build/`` is not excluded by its own parents' names."""
    parts = PurePosixPath(relative).parts
    names = PurePosixPath(below if below is not None else relative).parts
    for raw in patterns:
        pattern = raw.strip().rstrip("/").removeprefix("./")
        if not pattern:
            continue
        if "/" in pattern:
            if any(fnmatchcase("/".join(parts[: i + 1]), pattern) for i in range(len(parts))):
                return True
        elif any(fnmatchcase(name, pattern) for name in names):
            return True
    return False


def not_excluded(paths: Sequence[str], exclude: Sequence[str], *, root: Path | None = None) -> list[str]:
    """``--force-exclude``: the paths named on the command line that ``exclude`` does not match, as ruff's (a
    named ``build/x.py`` is skipped as one found by walking would be; ``-``, standard input, is always kept).

        >>> not_excluded(["build/x.py", "src/y.py", "-"], ("build",))
        ['src/y.py', '-']
        >>> not_excluded(["/elsewhere/build/z.py"], ("build",), root=Path("/project"))
        ['/elsewhere/build/z.py']
    """
    return [path for path in paths if path == "-" or not _excluded(relative_posix(path, root), exclude)]


def _excluded(relative: str, exclude: Sequence[str]) -> bool:
    """A path outside the project (left absolute) is matched by its own name only: the names of the folders
    above the project (``~/.cache``, a ``build/`` checkout) exclude nothing."""
    outside = PurePosixPath(relative).is_absolute()
    return matches(relative, exclude, below=PurePosixPath(relative).name if outside else None)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _regular(path: Path, found: Discovery) -> bool:
    """Is ``path`` a regular file (after symbolic links)? If not, record why it is skipped."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        reason = "a broken symbolic link" if os.path.islink(path) else f"cannot be examined ({error.strerror})"
        found.skipped.append(Skip(str(path), f"{reason}; skipped"))
        return False
    if stat.S_ISREG(mode):
        return True
    found.skipped.append(Skip(str(path), f"{_kind(mode)}; only regular files are read, skipped"))
    return False


def discover(paths: Sequence[str], *, exclude: Sequence[str] = DEFAULT_EXCLUDE, root: Path | None = None) -> Discovery:
    """The ``.py`` files under ``paths``. A named file is always read (if regular); ``exclude``
    applies to what is found by walking a folder (``not_excluded`` first applies it to the names too). A path that does not exist raises FileNotFoundError.

        >>> discover(["no/such/dir"])
        Traceback (most recent call last):
        ...
        FileNotFoundError: no such file or directory: no/such/dir
    """
    found = Discovery()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.files.extend(_walk(path, exclude, root, found))
        elif os.path.lexists(path):
            if _regular(path, found):
                found.files.append(path)
        else:
            raise FileNotFoundError(f"no such file or directory: {raw}")
    return found


def _walk(top: Path, exclude: Sequence[str], root: Path | None, found: Discovery) -> Iterator[Path]:
    def excluded(path: str) -> bool:
        return matches(relative_posix(path, root), exclude, below=relative_posix(path, top))

    def report(error: OSError) -> None:
        found.skipped.append(Skip(str(error.filename), f"cannot be listed ({error.strerror}); skipped"))

    for folder, dirs, files in os.walk(top, onerror=report):
        dirs[:] = sorted(d for d in dirs if not excluded(os.path.join(folder, d)))
        for name in sorted(files):
            path = Path(folder, name)
            if name.endswith(".py") and not excluded(str(path)) and _regular(path, found):
                yield path
