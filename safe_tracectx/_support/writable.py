"""Whether an output file can be written, checked before any work is done (the CLI's and the plugin's outputs).

    >>> from safe_tracectx._support.writable import check_writable
    >>> check_writable("/no/such/folder/out.json")
    'cannot write /no/such/folder/out.json: the folder /no/such/folder does not exist'
"""

from __future__ import annotations

import os

__all__ = ["check_writable"]

def check_writable(path: str) -> str | None:
    """Why ``path`` cannot be written (None: it can), checked before any work is done."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"cannot write {path}: the folder {folder} does not exist"
    if os.path.isdir(path):
        return f"cannot write {path}: it is a folder"
    existed = os.path.exists(path)
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as error:
        return f"cannot write {path}: {error.strerror or error}"
    if not existed:
        os.remove(path)
    return None
