"""Telling one process from another: whether a pid runs, and what identifies it beyond its pid (pids are reused).

Used by the simulator's ``sim down`` (stop only the processes ``sim up`` started) and by the cluster lock (a killed
owner's lock is stale only when its pid is gone or now belongs to another process).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["process_alive", "process_identity"]


def process_alive(pid: int | None) -> bool:
    """Whether a process runs (a zombie child counts as dead); shared with scripts/airflow_local.py."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as dead.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def process_identity(pid: int | None) -> dict[str, Any] | None:
    """What tells a process from a later one given the same pid: ``{"pid", "start_time", "cmdline"}``, the start time
    in clock ticks after boot (field 22 of ``/proc/<pid>/stat``). None when there is no such process or no ``/proc``."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
        with open(f"/proc/{pid}/cmdline", "rb") as fb:
            raw = fb.read()
        start_time = int(stat.rsplit(")", 1)[1].split()[19])  # the command name in parentheses may hold spaces
    except (OSError, IndexError, ValueError):
        return None
    cmdline = [arg.decode(errors="replace") for arg in raw.split(b"\0")[:-1]]
    return {"pid": pid, "start_time": start_time, "cmdline": cmdline}
