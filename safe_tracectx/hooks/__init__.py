"""Thunder hooks: guarded set/reset of the trace, the naming hook and the remat pass wrappers.

``install()`` puts them in place at run time; ``uninstall()`` restores the originals.
"""

from __future__ import annotations

from safe_tracectx.hooks.guard import (
    RawBlock,
    close_raw_blocks,
    guarded_reset_tracectx,
    guarded_set_tracectx,
    open_blocks,
)
from safe_tracectx.hooks.installer import (
    SupportReport,
    install,
    installed,
    installed_audit_log,
    is_installed,
    thunder_support,
    uninstall,
)
from safe_tracectx.hooks.passes import PASSES, PassSpec

__all__ = [
    "PASSES",
    "PassSpec",
    "RawBlock",
    "SupportReport",
    "close_raw_blocks",
    "guarded_reset_tracectx",
    "guarded_set_tracectx",
    "install",
    "installed",
    "installed_audit_log",
    "is_installed",
    "open_blocks",
    "thunder_support",
    "uninstall",
]
