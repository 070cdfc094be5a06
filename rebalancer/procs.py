"""Telling one process from another: whether a pid runs, what identifies it beyond its pid (pids are reused), and
how much memory it holds. Through psutil (pinned with Airflow), not by parsing ``/proc`` here.

Used by the simulator's ``sim down`` (stop only the processes ``sim up`` started), the local Kafka cluster's
records of its nodes, and the cluster lock (a killed owner's lock is stale only when its pid is gone or now belongs
to another process).
"""

from __future__ import annotations

import os
from typing import Any

import psutil

from .retry import poll

__all__ = ["process_alive", "process_identity", "started_identity", "rss_kib"]

# The start time is recorded in clock ticks after boot (field 22 of /proc/<pid>/stat), as records written before
# psutil was used here hold it (the cluster lock's marker in Kafka, sim.json, a local cluster's state): psutil gives
# it as seconds since the epoch, its boot time plus ticks / CLK_TCK, which this turns back exactly.
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_alive(pid: int | None) -> bool:
    """Whether a process runs (a zombie child counts as dead); shared with scripts/airflow_local.py."""
    if not pid:
        return False
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def process_identity(pid: int | None) -> dict[str, Any] | None:
    """What tells a process from a later one given the same pid: ``{"pid", "start_time", "cmdline"}``, the start time
    in clock ticks after boot. None when there is no such process (or it cannot be read)."""
    if not pid:
        return None
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            created = proc.create_time()
            cmdline = proc.cmdline()
    except (psutil.Error, OSError):
        return None
    return {"pid": pid, "start_time": round((created - psutil.boot_time()) * _CLOCK_TICKS), "cmdline": cmdline}


def started_identity(pid: int | None) -> dict[str, Any]:
    """The identity of a child just started (``{"pid"}`` alone if it cannot be read). Popen returns once the child
    has begun its exec, a moment before the kernel sets up the new command line: until then it reads empty, so wait
    for it, briefly (the start time alone will do)."""
    ident, _ = poll(lambda: process_identity(pid), lambda found: found is None or bool(found["cmdline"]), timeout=2.0,
                    interval=0.01)
    return ident or {"pid": pid}


def rss_kib(pid: int | None) -> int:
    """The resident memory of a process in KiB (0 when there is no such process)."""
    if not pid:
        return 0
    try:
        return int(psutil.Process(pid).memory_info().rss // 1024)
    except (psutil.Error, OSError):
        return 0
