"""Partition states of a large ZooKeeper-mode cluster read by several processes at once (issue 26, point 2).

kazoo serves a session's requests from one Python thread: about 6,000 gets a second here however many are in
flight, so a million partitions took over three minutes to read. Sessions in threads of one process share the
interpreter lock (two and four were slower than one). From ``PARALLEL_FROM`` partitions, a ``zk://`` snapshot
starts ``readers()`` plain ``python -m rebalancer.zk_readers`` processes (not ``multiprocessing``: inside an Airflow
task a child that re-imports the main module fails), each with its own session and the same credentials (sent on
its stdin, never on a command line), each reading an interleaved share of the state znodes, ``WINDOW`` gets in
flight at a time, and writing each znode's data back length-prefixed, in order. The parent parses them as before.

Wire format: the parent writes one JSON line ``{"hosts", "chroot", "auth", "timeout"}`` then one path per line; a
reader answers, per path, a 4-byte big-endian signed length and that many bytes (-1: no such znode). A reader that
fails exits non-zero with one line on stderr, which the parent raises as a ``SourceError``.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from .errors import SourceError
from .zkclient import ZkTarget

__all__ = ["PARALLEL_FROM", "WINDOW", "readers", "read_many", "read_in_session"]

PARALLEL_FROM = 100_000  # state znodes; below, one session reads them in seconds
WINDOW = 5000  # gets in flight per session
MAX_READERS = 4
_LENGTH = struct.Struct(">i")
log = logging.getLogger(__name__)


def readers(paths: int) -> int:
    """How many reader processes for ``paths`` znodes on this machine (1: read in this process)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(MAX_READERS, cores) if paths >= PARALLEL_FROM and cores >= 2 else 1


def read_many(target: ZkTarget, paths: Sequence[str], workers: int, timeout: float = 10.0) -> list[bytes | None]:
    """The data of every path (None: no such znode), read by ``workers`` reader processes, in the order given."""
    package_root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    header = json.dumps({"hosts": target.hosts, "chroot": target.chroot,
                         "auth": list(target.auth) if target.auth else None, "timeout": timeout}) + "\n"
    out: list[bytes | None] = [None] * len(paths)
    log.info("reading %d partition states from %s with %d reader processes", len(paths), target.display, workers)
    procs = []
    errors: list[str] = []
    for w in range(workers):
        share = range(w, len(paths), workers)
        proc = subprocess.Popen([sys.executable, "-m", "rebalancer.zk_readers"], env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        feeder = threading.Thread(target=_feed, args=(proc.stdin, header, [paths[i] for i in share]), daemon=True)
        collector = threading.Thread(target=_collect, args=(proc.stdout, share, out, errors), daemon=True)
        feeder.start()
        collector.start()
        procs.append((proc, feeder, collector))
    failed: list[str] = []
    for proc, feeder, collector in procs:
        feeder.join()
        collector.join()
        stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        if proc.wait() != 0:
            lines = [ln for ln in stderr.splitlines() if ln.strip()]
            failed.append(lines[-1] if lines else f"exit status {proc.returncode}")
    if failed or errors:  # the reader's own line says why its answers ended
        raise SourceError(f"ZooKeeper at {target.display}: a reader of partition states failed: "
                          f"{(failed or errors)[0]}")
    return out


def _feed(stdin: IO[bytes] | None, header: str, paths: list[str]) -> None:
    assert stdin is not None
    try:
        stdin.write(header.encode())
        stdin.write("".join(p + "\n" for p in paths).encode())
        stdin.close()
    except BrokenPipeError:
        pass  # the reader failed early: its exit status and stderr say why


def _collect(stdout: IO[bytes] | None, share: range, out: list[bytes | None], errors: list[str]) -> None:
    assert stdout is not None
    for i in share:
        head = stdout.read(_LENGTH.size)
        if len(head) < _LENGTH.size:
            errors.append("its answers ended early")
            return
        (n,) = _LENGTH.unpack(head)
        out[i] = None if n < 0 else stdout.read(n)


def _serve(stdin: IO[bytes], stdout: IO[bytes]) -> int:
    """A reader: its session, then the data of every path on stdin, in order, on stdout."""
    from .zkclient import zk_session

    conf: dict[str, Any] = json.loads(stdin.readline())
    paths = [line.decode().rstrip("\n") for line in stdin]
    auth = (str(conf["auth"][0]), str(conf["auth"][1])) if conf["auth"] else None
    target = ZkTarget(conf["hosts"], conf["chroot"], auth)
    with zk_session(target, timeout=float(conf["timeout"])) as zk:
        for data in read_in_session(zk, paths):
            stdout.write(_LENGTH.pack(-1) if data is None else _LENGTH.pack(len(data)) + data)
    stdout.flush()
    return 0


def read_in_session(zk: Any, paths: Sequence[str]) -> Iterator[bytes | None]:
    """The data of every path through one session (None: no such znode), ``WINDOW`` gets in flight at a time."""
    from kazoo.exceptions import NoNodeError

    for start in range(0, len(paths), WINDOW):
        for fut in [zk.get_async(p) for p in paths[start:start + WINDOW]]:
            try:
                yield fut.get()[0] or b""
            except NoNodeError:
                yield None


def main() -> int:
    try:
        return _serve(sys.stdin.buffer, sys.stdout.buffer)
    except Exception as exc:  # one line for the parent, which raises it as a SourceError
        print(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
