"""Thunder's package at any commit, built from the git bundle of its history and cached.

Thunder is pure Python: a commit's ``thunder/`` folder put first on ``PYTHONPATH``
imports with the installed torch in place of the installed lightning-thunder::

    >>> from history.packages import History
    >>> History().resolve("0.2.6")[:8]  # doctest: +SKIP
    '0a1b2c3d'
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import threading
from pathlib import Path
from typing import Final

__all__ = ["BUNDLE", "CACHE", "History", "HistoryUnavailable"]

ROOT: Final = Path(__file__).resolve().parents[1]
#: The bundle of Thunder's history (``THUNDER_HISTORY_BUNDLE`` overrides it).
BUNDLE: Final = Path(
    os.environ.get("THUNDER_HISTORY_BUNDLE", ROOT.parent / "shared" / "thunder-history" / "lightning-thunder.bundle")
)
#: Where packages, extracted tests and extra dependencies are kept between runs.
CACHE: Final = Path(os.environ.get("THUNDER_HISTORY_CACHE", ROOT / "build" / "history"))


class HistoryUnavailable(RuntimeError):
    """The bundle is missing or git cannot read it."""


class History:
    """A bare clone of the bundle, and the package of any of its commits (built once, then reused)."""

    def __init__(self, bundle: Path = BUNDLE, cache: Path = CACHE) -> None:
        self.bundle = bundle
        self.cache = cache
        self.git_dir = cache / "thunder.git"
        self._lock = threading.Lock()

    def _git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", "--git-dir", str(self.git_dir), *args], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise HistoryUnavailable(f"git {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def ensure_clone(self) -> None:
        """Clone the bundle (bare) on first use."""
        with self._lock:
            if (self.git_dir / "HEAD").is_file():
                return
            if not self.bundle.is_file():
                raise HistoryUnavailable(
                    f"Thunder's history bundle is not at {self.bundle}: put shared/ beside the project, "
                    "or set THUNDER_HISTORY_BUNDLE"
                )
            self.cache.mkdir(parents=True, exist_ok=True)
            partial = self.git_dir.with_name(f"thunder.git.partial-{os.getpid()}")
            shutil.rmtree(partial, ignore_errors=True)
            done = subprocess.run(
                ["git", "clone", "--bare", "-q", str(self.bundle), str(partial)], capture_output=True, text=True
            )
            if done.returncode != 0:
                raise HistoryUnavailable(f"git clone of {self.bundle} failed: {done.stderr.strip()}")
            _publish(partial, self.git_dir)

    def resolve(self, revision: str) -> str:
        """The full commit id of ``revision`` (a commit, a tag, ``main`` or ``X^``)."""
        self.ensure_clone()
        return self._git("rev-parse", "--verify", f"{revision}^{{commit}}").strip()

    def describe(self, commit: str) -> str:
        """``<short id> <date> <subject>`` of ``commit``."""
        return self._git("log", "-1", "--date=short", "--format=%h %ad %s", commit).strip()

    def package(self, revision: str) -> Path:
        """The folder holding ``thunder/`` at ``revision`` (put it first on PYTHONPATH)."""
        commit = self.resolve(revision)
        target = self.cache / "pkg" / commit[:12]
        if (target / "thunder" / "__init__.py").is_file():
            return target
        with self._lock:
            if (target / "thunder" / "__init__.py").is_file():
                return target
            partial = target.with_name(f"{target.name}.partial-{os.getpid()}-{threading.get_ident()}")
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
            self._extract(commit, "thunder", partial)
            _publish(partial, target)
        return target

    def file_at(self, revision: str, path: str) -> bytes:
        """The bytes of ``path`` at ``revision``."""
        self.ensure_clone()
        done = subprocess.run(
            ["git", "--git-dir", str(self.git_dir), "show", f"{self.resolve(revision)}:{path}"],
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            raise HistoryUnavailable(f"{path} is not in commit {revision}: {done.stderr.decode().strip()}")
        return done.stdout

    def _extract(self, commit: str, path: str, into: Path) -> None:
        archive = subprocess.Popen(
            ["git", "--git-dir", str(self.git_dir), "archive", "--format=tar", commit, path], stdout=subprocess.PIPE
        )
        assert archive.stdout is not None
        with tarfile.open(fileobj=archive.stdout, mode="r|") as tar:
            tar.extractall(into, filter="data")
        if archive.wait() != 0:
            raise HistoryUnavailable(f"git archive {commit} {path} failed")


def _publish(partial: Path, target: Path) -> None:
    """Move a finished ``partial`` folder to ``target``; another process that got there first wins."""
    try:
        partial.rename(target)
    except OSError:
        if not target.exists():
            raise
        shutil.rmtree(partial, ignore_errors=True)


def extra_packages(names: tuple[str, ...], cache: Path = CACHE) -> Path | None:
    """A ``--target`` folder holding the extra PyPI packages some commits or tests need (``igraph``, ``fdm``), installed
    once, without their dependencies (they must not shadow the environment's numpy or torch): list those too."""
    if not names:
        return None
    target = cache / "extra" / "-".join(sorted(names))
    if (target / ".installed").is_file():
        return target
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}-{threading.get_ident()}")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--target", str(partial),
         *names],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise HistoryUnavailable(f"pip install --target {target} {' '.join(names)} failed: {done.stderr.strip()[-500:]}")
    (partial / ".installed").write_text("")
    target.parent.mkdir(parents=True, exist_ok=True)
    _publish(partial, target)
    return target
