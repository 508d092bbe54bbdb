"""The reports of audit documents: text, per rank, ThunderFX, the pytest plugin's document, and HTML.

- ``text``: the text report of one document;
- ``sections``: the text sections the reports share (passes, balance, violations, child processes);
- ``ranks``: the combined report of a distributed launch, rank by rank;
- ``thunderfx``: the ThunderFX section (what the splitter made of each FX graph);
- ``pytest_document``: the pytest plugin's report, one section per test;
- ``html``: the HTML report, a page per pass run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from safe_tracectx._support.moved import moved_names

#: What the module ``safe_tracectx.report`` held before it became this package, and each name's module now:
#: re-exported for the 0.2 release (with a DeprecationWarning), then removed.
_MOVED: dict[str, str] = {
    **dict.fromkeys(["render_text"], "safe_tracectx.report.text"),
    **dict.fromkeys(
        ["balance_lines", "child_lines", "pass_lines", "plural", "violation_lines"], "safe_tracectx.report.sections"
    ),
    **dict.fromkeys(["site_text"], "safe_tracectx.auditlog.documents"),
}

#: The old module's ``__all__``: ``from ... import *`` still brings them (each with its warning).
__all__ = list(_MOVED)

if not TYPE_CHECKING:
    __getattr__ = moved_names(__name__, _MOVED)
