"""Which rank of a ``torch.distributed`` launch this process is, and where its data file goes.

``torchrun`` (``python -m torch.distributed.run``) sets ``RANK``, ``WORLD_SIZE``
and ``LOCAL_RANK`` in each process it starts; ``safe-tracectx run`` then writes
one data file per rank, like coverage's parallel mode::

    >>> from safe_tracectx.auditlog.ranks import rank_info, default_data_file
    >>> info = rank_info({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1"})
    >>> info.rank, info.world_size, info.local_rank
    (3, 8, 1)
    >>> default_data_file(info)
    '.safe-tracectx.rank3.json'
    >>> rank_info({}) is None
    True
    >>> rank_info({"RANK": "abc", "WORLD_SIZE": "8"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    safe_tracectx.auditlog.ranks.RankEnvironmentError: the environment variable RANK='abc' is not a rank (an integer >= 0); ...
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, cast

if TYPE_CHECKING:
    from safe_tracectx.auditlog.document_types import AuditDocument, Rank

__all__ = [
    "DATA_FILE_PATTERN",
    "Launch",
    "RankEnvironmentError",
    "RankInfo",
    "default_data_file",
    "launch_of",
    "rank_info",
    "rank_summary",
]

#: The data files ``run`` writes under a distributed launch (``combine`` reads these by default).
DATA_FILE_PATTERN: Final = ".safe-tracectx.rank*.json"


@dataclasses.dataclass(frozen=True)
class Launch:
    """What tells one launch from another, as the launcher's environment says (None: not said).

    ``run_id`` is ``TORCHELASTIC_RUN_ID`` (a fresh id per ``torchrun --standalone``, else the rendezvous id),
    ``master`` ``MASTER_ADDR:MASTER_PORT``, ``restart`` ``TORCHELASTIC_RESTART_COUNT``, and ``started`` when
    this node's torchrun agent (the parent process) started, in seconds since the epoch (Linux).
    """

    run_id: str | None = None
    master: str | None = None
    restart: int | None = None
    started: float | None = None


@dataclasses.dataclass(frozen=True)
class RankInfo:
    """This process's place in a ``torch.distributed`` launch."""

    rank: int
    world_size: int
    local_rank: int
    host: str
    launch: Launch = Launch()

    def to_dict(self) -> Rank:
        """The ``"rank"`` object of a data file."""
        return cast("Rank", dataclasses.asdict(self))


class RankEnvironmentError(ValueError):
    """``RANK``, ``WORLD_SIZE`` or ``LOCAL_RANK`` holds a value no launcher sets (a usage error of ``run``)."""


def _integer(env: Mapping[str, str], name: str, lowest: int, accepted: str) -> int:
    value = env[name]
    try:
        number = int(value)
    except ValueError:
        number = lowest - 1
    if number < lowest:
        raise RankEnvironmentError(
            f"the environment variable {name}={value!r} is not {accepted}; torchrun sets RANK (0 <= RANK < "
            "WORLD_SIZE), WORLD_SIZE (>= 1) and LOCAL_RANK (>= 0): fix it, or unset RANK and WORLD_SIZE for a "
            "single-process run"
        )
    return number


def rank_info(environ: Mapping[str, str] | None = None) -> RankInfo | None:
    """The launch's ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` (None when not launched by torchrun or alike).

    A value no launcher sets (``RANK=abc``, a negative rank, a rank outside the
    world) is a :class:`RankEnvironmentError` naming the variable, never a silent
    single-process run.
    """
    env = os.environ if environ is None else environ
    if "RANK" not in env or "WORLD_SIZE" not in env:
        return None
    rank = _integer(env, "RANK", 0, "a rank (an integer >= 0)")
    world_size = _integer(env, "WORLD_SIZE", 1, "a world size (an integer >= 1)")
    if rank >= world_size:
        raise RankEnvironmentError(
            f"the environment variables RANK={env['RANK']!r} and WORLD_SIZE={env['WORLD_SIZE']!r} disagree: "
            "a rank is below the world size (0 <= RANK < WORLD_SIZE): fix them, or unset RANK and WORLD_SIZE "
            "for a single-process run"
        )
    local_rank = _integer(env, "LOCAL_RANK", 0, "a local rank (an integer >= 0)") if "LOCAL_RANK" in env else rank
    return RankInfo(rank, world_size, local_rank, socket.gethostname(), launch_of(env))


def launch_of(env: Mapping[str, str]) -> Launch:
    """The launch this process belongs to, from what torchrun (or another launcher) put in the environment."""
    run_id = env.get("TORCHELASTIC_RUN_ID") or None
    master = f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}" if env.get("MASTER_ADDR") and env.get("MASTER_PORT") else None
    restart = env.get("TORCHELASTIC_RESTART_COUNT", "")
    # under torchrun the parent is this node's agent: every local rank of one launch has the same one
    started = _process_started(os.getppid()) if run_id is not None else None
    return Launch(None if run_id == "none" else run_id, master, int(restart) if restart.isdigit() else None, started)


def _process_started(pid: int) -> float | None:
    """When process ``pid`` started, in seconds since the epoch (None where /proc does not say)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            ticks = int(stat.read().rpartition(")")[2].split()[19])  # field 22, starttime, after the command name
        with open("/proc/stat", encoding="ascii") as system:
            boot = next(int(line.split()[1]) for line in system if line.startswith("btime "))
        return round(boot + ticks / os.sysconf("SC_CLK_TCK"), 2)
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def default_data_file(info: RankInfo) -> str:
    """``.safe-tracectx.rank<RANK>.json`` in the current folder."""
    return f".safe-tracectx.rank{info.rank}.json"


def rank_summary(document: AuditDocument, info: RankInfo | None, data_file: str | None) -> str:
    """One short paragraph per rank, instead of the full report every rank would print."""
    who = "" if info is None else f"rank {info.rank}/{info.world_size} (local {info.local_rank}, {info.host}): "
    counts: Mapping[str, int] = document.get("counts", {})
    from safe_tracectx.auditlog.documents import pass_runs

    lines = [
        f"[safe-tracectx] {who}{counts.get('proxy_created', 0)} proxies, {len(pass_runs(document))} pass runs, "
        f"{len(document.get('violations', []))} violations, {len(document.get('leaked_sets', []))} sets never reset"
    ]
    children = document.get("child_processes")
    if children is not None:
        audited = children["audited"]
        leaked = sum(len(member["audit"].get("leaked_sets", [])) for member in audited)
        lines[0] += (
            f"; child processes: {len(audited)} audited ({leaked} sets never reset), "
            f"{children['not_audited']} not audited"
        )
    if data_file is not None:
        lines.append(f"[safe-tracectx] {who}data written to {data_file} (safe-tracectx combine, then report)")
    return "\n".join(lines)
