"""Thunder's own history as the acceptance test: real bugs, run at the fix's parent and at the fix.

Each case of ``history/cases.toml`` is a fix commit of lightning-thunder whose
parent has a bug of the trace-context class. The runner builds Thunder's
package at both commits from the git bundle in ``../shared/thunder-history``
(cached under ``build/history``), runs the case's program (or Thunder's own
regression test from the fix commit) plain, strict and in the audit mode, and
prints what was caught::

    python -m history                 # every case, and the table
    python -m history --fast          # the cases marked fast (make test runs these)
    python -m history --ordinary      # the ordinary programs across Thunder versions (false alarms)

``make history`` runs both tables and writes ``docs/history.md``.
"""
