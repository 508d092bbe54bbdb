"""The audit: the log a run records, the document it writes, and the readers that combine documents.

- ``log``: ``AuditLog``, the events of one audited run;
- ``documents``: the document's schema names and versions, and its one reader;
- ``combine``: several documents (ranks, runs) as one;
- ``ranks``: which rank of a distributed launch a document is;
- ``launches``: whether documents come from one launch;
- ``jit_traces``: the traces of each ``thunder.jit`` compile, for the reports.

    >>> from safe_tracectx.auditlog import AuditLog
    >>> AuditLog().to_dict()["schema"]
    'safe-tracectx/audit'
"""

from __future__ import annotations

from safe_tracectx.auditlog.log import AuditLog

__all__ = ["AuditLog"]
