"""Process identity through psutil keeps the records written before it: the start time in clock ticks after boot
(field 22 of /proc/<pid>/stat, as the cluster lock's marker, sim.json and a local cluster's state hold it)."""

from __future__ import annotations

import os
import subprocess
import sys

from waiting import wait_for

from rebalancer.procs import process_alive, process_identity, rss_kib


def _ticks(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat, read by hand: what the records hold."""
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[19])


def test_the_identity_of_every_process_here_is_the_start_time_in_ticks_and_its_command_line() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "an argument with spaces"])
    try:
        wait_for(lambda: (process_identity(child.pid) or {}).get("cmdline"), timeout=10, what="the child's cmdline")
        ident = process_identity(child.pid)
        assert ident == {"pid": child.pid, "start_time": _ticks(child.pid),
                         "cmdline": [sys.executable, "-c", "import time; time.sleep(60)", "an argument with spaces"]}
        checked = 0
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                ticks = _ticks(int(name))
            except OSError:
                continue  # gone meanwhile
            found = process_identity(int(name))
            if found is not None:
                assert found["start_time"] == ticks, name
                checked += 1
        assert checked >= 3
        assert process_alive(child.pid) and rss_kib(child.pid) > 1024
    finally:
        child.kill()
        child.wait()


def test_a_process_gone_or_a_zombie_is_not_alive_and_has_no_identity() -> None:
    child = subprocess.Popen(["sleep", "60"])
    child.kill()
    wait_for(lambda: not process_alive(child.pid), timeout=10, what="the killed child to be a zombie")
    assert os.path.exists(f"/proc/{child.pid}")  # not reaped yet: a zombie, which counts as dead
    child.wait()
    assert process_identity(child.pid) is None and rss_kib(child.pid) == 0 and not process_alive(child.pid)
    assert process_identity(None) is None and not process_alive(0)
