"""The files a report folder holds that the report wrote: listed in a manifest, so writing the folder again
removes the pages of an earlier run and never a file of the user's.

    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ("pass-001.html", "pass-002.html", "notes.txt"):
    ...     _ = (folder / name).write_text("x")
    >>> record_owned(folder, ["pass-001.html", "pass-002.html"])
    >>> before = owned(folder)  # read before writing the new files (an old index.html says what was ours)
    >>> remove_stale(folder, before, ["pass-001.html"])
    >>> sorted(p.name for p in folder.iterdir())
    ['.safe-tracectx-html.json', 'notes.txt', 'pass-001.html']
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Final

__all__ = ["MANIFEST", "ReportFolderError", "check_writable", "owned", "record_owned", "remove_stale", "write_file"]

MANIFEST: Final = ".safe-tracectx-html.json"
_SCHEMA: Final = "safe-tracectx/html-files"
#: A folder written before the manifest existed: its index.html says so, and its pages are named like this.
_OLD_INDEX: Final = "<title>safe-tracectx report</title>"
_OLD_PAGE: Final = re.compile(r"pass-\d{3,}\.html")


class ReportFolderError(FileExistsError):
    """The folder holds files of the user's under names the report would write."""


def _plain(name: object) -> bool:
    """A file name of the folder itself (a manifest never names a path elsewhere)."""
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name


def owned(folder: Path) -> set[str]:
    """What the report wrote into ``folder`` last time (read it before writing there again)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        manifest = None
    except (OSError, ValueError):
        return set()  # unreadable: remove nothing
    if isinstance(manifest, dict) and manifest.get("schema") == _SCHEMA and isinstance(manifest.get("files"), list):
        return {name for name in manifest["files"] if _plain(name)}
    try:
        written_by_us = _OLD_INDEX in (folder / "index.html").read_text(encoding="utf-8", errors="replace")
    except OSError:  # no index.html: nothing there is ours
        return set()
    if not written_by_us:
        return set()
    return {path.name for path in folder.iterdir()
            if _OLD_PAGE.fullmatch(path.name) or path.name in ("index.html", "sites.html", "style.css")}


def check_writable(folder: Path, before: set[str], names: list[str]) -> None:
    """Refuse, before writing anything, to replace a file of the user's (one the report did not write there)."""
    theirs = [name for name in names if name not in before and os.path.lexists(folder / name)]
    if theirs:
        raise ReportFolderError(
            f"{folder} holds {', '.join(theirs)}, which no safe-tracectx report wrote there: the report would "
            "replace them; write it into an empty folder (or one it wrote before), or move those files away"
        )


def write_file(path: Path, text: str) -> None:
    """Write ``path`` whole, through a temporary file: a symbolic link there is replaced, never written through."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def remove_stale(folder: Path, before: set[str], written: list[str]) -> None:
    """Remove what the report wrote into ``folder`` before (``owned``) and did not write now."""
    for name in sorted(before - set(written)):
        path = folder / name
        if path.is_file() and not path.is_symlink():
            path.unlink()


def record_owned(folder: Path, written: list[str]) -> None:
    """The manifest: ``written`` are the report's files."""
    write_file(folder / MANIFEST, json.dumps({"schema": _SCHEMA, "files": written}, indent=1) + "\n")
