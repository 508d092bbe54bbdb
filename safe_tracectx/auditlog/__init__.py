"""The audit: the log a run records, the document it writes, and the readers that combine documents.

- ``log``: ``AuditLog``, the events of one audited run (also ``safe_tracectx.AuditLog``);
- ``documents``: the documents' one owner: schema names and versions, reading, validating and writing them, and
  what every report reads of them; ``document_types``: their shapes, as ``TypedDict``s;
- ``combine``: several documents (ranks, runs) as one;
- ``ranks``: which rank of a distributed launch a document is;
- ``launches``: whether documents come from one launch;
- ``jit_traces``: the traces of each ``thunder.jit`` compile, for the reports.

The package imports none of them (the text report, which ``AuditLog.report()`` reaches, reads ``documents``)::

    >>> from safe_tracectx.auditlog.log import AuditLog
    >>> AuditLog().to_dict()["schema"]
    'safe-tracectx/audit'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from safe_tracectx._support.moved import moved_names

#: What the module ``safe_tracectx.auditlog`` held before it became this package, and each name's module now:
#: re-exported for the 0.2 release (with a DeprecationWarning), then removed.
_MOVED: dict[str, str] = {
    **dict.fromkeys(["JSON_SCHEMA", "JSON_VERSION", "PASS_RUN_KEYS", "AuditLog"], "safe_tracectx.auditlog.log"),
}

#: The old module's ``__all__``: ``from ... import *`` still brings them (each with its warning).
__all__ = list(_MOVED)

if not TYPE_CHECKING:
    __getattr__ = moved_names(__name__, _MOVED)
