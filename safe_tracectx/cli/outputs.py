"""What ``run`` and ``demo`` write when the program ends: the report or a rank's summary, data files, HTML.

    >>> from safe_tracectx.cli.outputs import rank_data_file
    >>> from safe_tracectx.auditlog.ranks import RankInfo
    >>> info = RankInfo(rank=3, world_size=8, local_rank=1, host="node")
    >>> rank_data_file("audit/run-{rank}.json", info), rank_data_file("audit/run.json", info)
    ('audit/run-3.json', 'audit/run.rank3.json')
    >>> rank_data_file(None, info), rank_data_file("a.json", None)
    ('.safe-tracectx.rank3.json', 'a.json')
    >>> unknown_placeholder("audit/run-{rnak}.json"), unknown_placeholder("audit/run-{rank}.json")
    ('{rnak}', None)
    >>> rank_data_file("run{{1}}/audit-{rank}.json", info)  # {{ and }}: a literal brace
    'run{1}/audit-3.json'
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, TextIO, cast

from safe_tracectx.auditlog.document_types import AuditDocument
from safe_tracectx.auditlog.documents import write_document
from safe_tracectx.auditlog.ranks import RankInfo, default_data_file, rank_summary

__all__ = [
    "PLACEHOLDER",
    "STDOUT",
    "ClosedOutputSafe",
    "closed_stdout_safe",
    "finish_run",
    "rank_data_file",
    "unknown_placeholder",
    "write_document",
]

#: ``--json -``: the document goes to standard output (``-`` as in ``lint -``), instead of the text report.
STDOUT: Final = "-"

#: The one placeholder of an output path: the global rank (0 outside a launch).
PLACEHOLDER: Final = "{rank}"
#: ``{{`` and ``}}`` are a literal brace (as in ``str.format``): a folder named ``run{1}`` is ``run{{1}}``.
_ESCAPES: Final = {"{{": "{", "}}": "}"}
_BRACED: Final = re.compile(r"\{\{|\}\}|\{[^{}/]*\}?|\}")


def _fill(path: str, rank: str) -> str:
    """``path`` with each ``{rank}`` replaced by ``rank`` and each ``{{``/``}}`` made one brace."""
    return _BRACED.sub(lambda m: rank if m.group() == PLACEHOLDER else _ESCAPES.get(m.group(), m.group()), path)


def rank_data_file(path: str | None, info: RankInfo | None) -> str | None:
    """Where this process writes its data file: ``{rank}`` filled in; one file per rank under a launch."""
    if info is None:
        return None if path is None else _fill(path, "0")
    if path is None:
        return default_data_file(info)
    if any(m.group() == PLACEHOLDER for m in _BRACED.finditer(path)):
        return _fill(path, str(info.rank))
    path = _fill(path, "")  # the escaped braces only
    stem, dot, suffix = path.rpartition(".")
    return f"{stem}.rank{info.rank}.{suffix}" if dot and "/" not in suffix else f"{path}.rank{info.rank}"


def unknown_placeholder(path: str) -> str | None:
    """The first ``{...}`` (or stray brace) of ``path`` that is not ``{rank}``, ``{{`` or ``}}`` (None: there is none)."""
    return next((m.group() for m in _BRACED.finditer(path) if m.group() != PLACEHOLDER and m.group() not in _ESCAPES), None)


class ClosedOutputSafe:
    """A text stream whose reader may be gone (``safe-tracectx run prog.py | head -1``): writes then go nowhere.

    On the first ``BrokenPipeError`` the stream's file descriptor is pointed at ``os.devnull``, as the Python
    docs recommend (the note on SIGPIPE in the ``signal`` module): the rest of the work (data files, ``--json``,
    ``--html``, the exit status) goes on, and Python's own flush at exit has nothing to complain about.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.closed_by_reader = stream is None  # started with standard output closed (>&-): print writes nothing

    def write(self, text: str) -> int:
        if not self.closed_by_reader:
            try:
                self.stream.write(text)
            except BrokenPipeError:
                self._discard()
        return len(text)

    def flush(self) -> None:
        if not self.closed_by_reader:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._discard()

    def _discard(self) -> None:
        self.closed_by_reader = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())  # what is still buffered is flushed there, without an error
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextlib.contextmanager
def closed_stdout_safe() -> Iterator[None]:
    """Within: ``sys.stdout`` survives a reader that went away (``safe-tracectx report FILE | head -1``);
    it is flushed at the end, so nothing is left to fail at exit."""
    saved = sys.stdout
    if saved is None:  # started with standard output closed (``>&-``): print already writes nothing
        yield
        return
    guarded = ClosedOutputSafe(saved)
    sys.stdout = replacement = cast(TextIO, guarded)
    try:
        yield
    finally:
        guarded.flush()
        if sys.stdout is replacement:
            sys.stdout = saved


def finish_run(
    document: AuditDocument,
    *,
    info: RankInfo | None,
    json_path: str | None,
    data_file: str | None,
    html_dir: str | None,
    top: int,
    stream: TextIO,
) -> None:
    """Print the report (a short summary per rank under a launch); write the data file(s) and the HTML report.

    ``json_path`` ``-`` (:data:`STDOUT`): the JSON document is what goes to ``stream``, instead of the text report
    (as ``coverage json -o -``), and the lines naming the files written go to standard error. A reader of
    ``stream`` that went away (``| head``) loses it nothing else: every file is still written.
    """
    from safe_tracectx.report.text import render_text

    out = ClosedOutputSafe(stream)
    to_stdout = json_path == STDOUT
    notes = ClosedOutputSafe(sys.stderr) if to_stdout else out  # stdout holds nothing but the document
    if info is not None:
        document["rank"] = info.to_dict()
    target = rank_data_file(data_file, info)
    if to_stdout:
        out.write(json.dumps(document, default=str, indent=2) + "\n")
        out.flush()
    elif info is None or json_path is not None:
        print(file=out)
        print(render_text(document, top=top), file=out, flush=True)
    if json_path is not None and not to_stdout:
        written = rank_data_file(json_path, info)
        assert written is not None
        write_document(document, written)
        print(f"\naudit log written to {written}", file=out)
    if target is not None:
        write_document(document, target, compact=True)
    if info is not None:
        notes.write(rank_summary(document, info, target) + "\n")  # one write: ranks share the terminal
        notes.flush()
    elif target is not None:
        print(f"data file written to {target}", file=notes)
    if html_dir is not None:
        from safe_tracectx.report.html import ReportFolderError, write_html

        folder = html_dir if info is None else str(Path(html_dir) / f"rank{info.rank}")
        try:
            print(f"HTML report written to {write_html(document, folder)}", file=notes)
        except ReportFolderError as refused:  # the program has run: its status stands, the report is not written
            print(f"safe-tracectx: error: no HTML report: {refused}", file=notes)
    out.flush()  # now, not at exit: a reader that went away is then no error of Python's
    notes.flush()
