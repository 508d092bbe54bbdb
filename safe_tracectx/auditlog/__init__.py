"""The audit: the log a run records, the document it writes, and the readers that combine documents.

- ``log``: ``AuditLog``, the events of one audited run (also ``safe_tracectx.AuditLog``);
- ``documents``: the documents' one owner: schema names and versions, reading, validating and writing them, and
  what every report reads of them; ``document_types``: their shapes, as ``TypedDict``s;
- ``combine``: several documents (ranks, runs) as one;
- ``ranks``: which rank of a distributed launch a document is;
- ``launches``: whether documents come from one launch;
- ``jit_traces``: the traces of each ``thunder.jit`` compile, for the reports.

The package re-exports ``AuditLog`` (its path before the log moved into ``log``)::

    >>> from safe_tracectx.auditlog import AuditLog
    >>> AuditLog().to_dict()["schema"]
    'safe-tracectx/audit'
"""

from __future__ import annotations

from safe_tracectx.auditlog.log import AuditLog

__all__ = ["AuditLog"]
