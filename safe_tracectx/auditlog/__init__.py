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
