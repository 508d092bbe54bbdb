"""The child processes of a run: multiprocessing workers (fork, spawn, forkserver) audit themselves too.

While ``run`` runs a program, each ``multiprocessing`` process it starts (a
``Pool`` worker, a ``DataLoader`` worker, a ``Process``) carries a
:class:`ChildRequest`: where to write its data and the policy. The child
audits itself from its start (a forked child has the hooks already, a spawned
one installs them when the request arrives) and writes ``child-<pid>.json``
into the run's folder when its ``_bootstrap`` returns (before a forked worker's
``os._exit``) or when it is sent SIGTERM (``Pool.terminate()``, the end of a
``with Pool()`` block). The parent writes ``child-<pid>.started`` as it starts
one, so a child that ended without writing its data (killed, ``os._exit`` in
its own code, still running when the program ended) is counted, not lost::

    >>> from safe_tracectx.hooks.children import child_processes
    >>> import tempfile
    >>> child_processes(tempfile.mkdtemp()) is None  # no child started: nothing to add
    True
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Mapping
from multiprocessing import process
from pathlib import Path
from types import FrameType
from typing import Any, Final

from safe_tracectx.auditlog.document_types import AuditDocument, ChildProcesses, ProcessInfo
from safe_tracectx.policy import Policy

__all__ = ["ChildAuditing", "ChildRequest", "child_processes"]

#: The attribute of a ``multiprocessing`` process object holding its request (pickled with it under spawn).
_ATTRIBUTE: Final = "_safe_tracectx_request"
_ORIGINAL_START: Final = process.BaseProcess.start
_ORIGINAL_BOOTSTRAP: Final = process.BaseProcess._bootstrap  # type: ignore[attr-defined]


class ChildRequest:
    """What a child process needs to audit itself: the folder for its data file and the policy."""

    __slots__ = ("folder", "policy")

    def __init__(self, folder: str, policy: Policy | None) -> None:
        self.folder = folder
        self.policy = policy

    def __reduce__(self) -> tuple[Any, tuple[str, Policy | None]]:
        return _arrive, (self.folder, self.policy)


def _arrive(folder: str, policy: Policy | None) -> ChildRequest:
    """A spawned child unpickles its process object: hook ``multiprocessing`` here too (for its own children)."""
    request = ChildRequest(folder, policy)
    _patch(request)
    return request


_state: dict[str, ChildRequest] = {}  # "request": the request of the run (or of the child) this process is in


def _patch(request: ChildRequest) -> None:
    _state["request"] = request
    process.BaseProcess.start = _start_with_request  # type: ignore[method-assign]
    process.BaseProcess._bootstrap = _audited_bootstrap  # type: ignore[attr-defined]


def _unpatch() -> None:
    _state.pop("request", None)
    process.BaseProcess.start = _ORIGINAL_START  # type: ignore[method-assign]
    process.BaseProcess._bootstrap = _ORIGINAL_BOOTSTRAP  # type: ignore[attr-defined]


def _start_with_request(self: process.BaseProcess) -> None:
    request = _state.get("request")
    if request is not None:
        setattr(self, _ATTRIBUTE, request)
    _ORIGINAL_START(self)
    if request is not None and self.pid is not None:
        _write(Path(request.folder) / f"child-{self.pid}.started", "")


def _audited_bootstrap(self: process.BaseProcess, *args: Any, **kwargs: Any) -> int:
    request = getattr(self, _ATTRIBUTE, None)
    child = None
    if request is not None:
        try:
            child = _AuditedChild(request, self)
        except Exception as error:  # noqa: BLE001 - the worker runs unaudited (and is counted so), never broken
            print(f"safe-tracectx: {self.name} is not audited: {type(error).__name__}: {error}", file=sys.stderr)
    try:
        code: int = _ORIGINAL_BOOTSTRAP(self, *args, **kwargs)
        return code
    finally:
        if child is not None:
            child.finish()


class _AuditedChild:
    """This child process's own installation and audit, until it writes its data file."""

    def __init__(self, request: ChildRequest, worker: process.BaseProcess) -> None:
        from safe_tracectx.hooks import begin, running_installations

        for inherited in running_installations():  # a forked child's copies of the parent's: not this process's
            if inherited.audit_log is not None:
                inherited.audit_log.stop()
        self.folder = Path(request.folder)
        self.about: ProcessInfo = {"pid": os.getpid(), "name": worker.name, "start_method": _start_method(worker)}
        self.installation = begin("safe-tracectx run (child process)", request.policy, audit=True)
        self.finished = False
        main = threading.current_thread() is threading.main_thread()
        self.on_sigterm = main and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        if self.on_sigterm:
            signal.signal(signal.SIGTERM, self._on_terminate)

    def _on_terminate(self, signum: int, frame: FrameType | None) -> None:
        """Write the data, then end as SIGTERM would have ended the process."""
        self.finish()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    def finish(self) -> None:
        """End the installation (closing its leaked sets, recorded as violations) and write the data file."""
        from safe_tracectx.errors import TraceContextError

        if self.on_sigterm:  # a worker that ends as Pool.terminate() sends SIGTERM: its data is written whole
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if self.finished:
            return
        self.finished = True
        log = self.installation.audit_log
        assert log is not None
        try:
            self.installation.end(raising=False)  # recorded as violations, "reported at the end", as run's own
        except TraceContextError:
            pass  # a warning turned into an error by the program's filters: recorded all the same
        except Exception as error:  # noqa: BLE001 - no data written: the parent counts it as not audited
            print(f"safe-tracectx: {self.about['name']} is not audited: {type(error).__name__}: {error}", file=sys.stderr)
            return
        document: AuditDocument = {**log.to_dict(), "process": self.about}
        _write(self.folder / f"child-{os.getpid()}.json", json.dumps(document, default=str, separators=(",", ":")))


def _start_method(worker: process.BaseProcess) -> str:
    """``fork``, ``spawn`` or ``forkserver``: the process class's own (``ForkProcess``), else the default's."""
    import multiprocessing

    method = getattr(worker, "_start_method", None)
    return str(method or multiprocessing.get_start_method())


def _write(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (the parent may read the folder at any moment); a removed folder: nothing."""
    partial = path.with_name(path.name + ".partial")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        pass  # the run has ended and removed its folder: a child that outlived it


class ChildAuditing:
    """Within: every ``multiprocessing`` child started is audited (``run`` uses this around the program)."""

    def __init__(self, policy: Policy | None) -> None:
        self.folder = tempfile.mkdtemp(prefix="safe-tracectx-children-")
        self.policy = policy
        self._outer: ChildRequest | None = None

    def __enter__(self) -> ChildAuditing:
        self._outer = _state.get("request")  # a run inside a run (a sweep's, a test's): the outer one's again after
        _patch(ChildRequest(self.folder, self.policy))
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._outer is None:
            _unpatch()
        else:
            _patch(self._outer)

    def collect(self) -> ChildProcesses | None:
        """The document's ``child_processes`` (None when no child was started); the folder is removed."""
        try:
            return child_processes(self.folder)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def child_processes(folder: str) -> ChildProcesses | None:
    """``{"audited": [members], "not_audited": N}`` from the folder's files (None if no child was started)."""
    from safe_tracectx.auditlog.combine import load_members

    path = Path(folder)
    written = sorted(path.glob("child-*.json"), key=lambda p: int(p.stem.removeprefix("child-")))
    started = {p.name.removesuffix(".started") for p in path.glob("child-*.started")}
    if not written and not started:
        return None
    members = load_members(written)
    for member in members:
        about: Mapping[str, Any] = member["audit"].get("process") or {}
        member["name"] = f"pid {about.get('pid')} {about.get('name')} ({about.get('start_method')})"
    return {"audited": members, "not_audited": len(started - {p.stem for p in written})}
