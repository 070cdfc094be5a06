"""The cluster lock: one execution per Kafka cluster, seen by every backend and every host.

The lock is a marker topic, ``__rebalancer_lock`` (one partition, one replica, no data), held by whoever created
it. Creating a topic is atomic in Kafka, whatever the path: in ZooKeeper mode the topic is the znode
``/brokers/topics/__rebalancer_lock`` (the ``zk://`` backend creates it there, as Kafka's own admin code does; the
Admin API's CreateTopics makes the controller create the same znode), and in KRaft mode it is a record in the
controller's metadata log. So a ``zk://`` and a ``kafka://`` execution of one cluster, on any hosts, exclude each
other, and a ZooKeeper-mode cluster's lock is in its ZooKeeper.

- **Owner**: the lock id is the marker's Kafka topic id, new with every creation: it names one execution. The owner
  releases the lock by deleting the topic *by that id* (the Admin API's DeleteTopics by topic id; in ZooKeeper mode
  after checking the id in the topic znode), so a process never deletes a lock it does not own.
- **Never taken over**: a contender is refused (``ClusterBusy``, exit 9) and told who holds the lock, as far as the
  cluster says: the ``zk://`` backend records the owner (run directory, host, pid, start) under
  ``/rebalancer/locks/<id>``; the Admin API offers no place for it, so a ``kafka://`` owner is named by its id.
- **Stale locks**: the owner also records the lock in its run directory (``execution/lock.json``: id, host, pid and
  the process's start time). After a kill -9, a rerun of the same run directory on the same host finds its own id
  on the cluster and a process that is gone, says so and releases it. Anywhere else the message names the lock id
  and how to release it once no execution is running: ``rebalancer unlock --source URL LOCK_ID``.
- The executor checks the lock is still its own before it submits each batch (``ClusterLock.check``).

Topic deletion is asynchronous in ZooKeeper mode: a marker being deleted is waited for (``deleting_grace``).
Clusters with ``delete.topic.enable=false`` cannot release the lock: the error says so.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..access.backend import Backend, Marker, MarkerExists
from ..errors import ClusterBusy, InputError, LockLost, RebalancerError, SourceError
from ..kafka_names import LOCK_TOPIC
from ..procs import process_identity
from ..retry import retry_call
from ..rundir import RunDir

__all__ = ["ClusterLock", "LockLost", "process_start", "unlock"]

LOCAL_FILE = "lock.json"  # in RUN_DIR/execution/


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (``procs.process_identity``), or None if there is no such process: with the pid
    this names one process, so a recycled pid is not mistaken for a lock's owner."""
    ident = process_identity(pid)
    return None if ident is None else int(ident["start_time"])


class _BeingDeleted(Exception):
    """The lock's marker exists but is being deleted (or was deleted just now): wait, then create it."""


def _describe(marker: Marker) -> str:
    o = marker.owner
    if not o:
        return f"lock id {marker.topic_id}"
    return (f"lock id {marker.topic_id}: {o.get('command', 'execution')} of {o.get('run_dir')} on {o.get('host')}, "
            f"pid {o.get('pid')}, since {o.get('started_at')}")


class ClusterLock:
    """Take, check and release the cluster lock for one execution of ``run_dir``."""

    def __init__(self, backend: Backend, run_dir: str | Path, *, command: str = "execute",
                 source: str | None = None, deleting_grace: float = 30.0,
                 say: Callable[[str], None] = lambda _t: None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.backend = backend
        self.run_dir = Path(run_dir)
        self.command = command
        self.source = source or backend.source or backend.display
        self.deleting_grace = deleting_grace
        self.say = say
        self.sleep = sleep
        self.topic_id: str | None = None

    @property
    def _local(self) -> Path:
        return RunDir(self.run_dir).lock

    def _owner(self) -> dict[str, Any]:
        pid = os.getpid()
        return {"command": self.command, "run_dir": str(self.run_dir.resolve()), "host": socket.gethostname(),
                "pid": pid, "pid_start": process_start(pid), "backend": self.backend.name,
                "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    def _stale_local(self, marker: Marker) -> dict[str, Any] | None:
        """This run directory's own record of ``marker``, if its process is provably gone (same host, no such
        process, or another process now has that pid)."""
        from ..formats import read_json

        if not self._local.exists():
            return None
        try:
            rec = read_json(self._local)
        except RebalancerError:
            return None
        if not isinstance(rec, dict) or rec.get("id") != marker.topic_id or rec.get("host") != socket.gethostname() \
                or rec.get("run_dir") != str(self.run_dir.resolve()):
            return None  # not provably this run directory's own lock (a copied record proves nothing)
        pid = rec.get("pid")
        if not isinstance(pid, int) or pid == os.getpid():
            return None
        started = process_start(pid)
        return rec if started is None or started != rec.get("pid_start") else None

    def _held(self, marker: Marker) -> ClusterBusy:
        return ClusterBusy(f"another execution holds the cluster lock ({_describe(marker)}); one execution per "
                           f"cluster. If none is running (one was killed), release it with: rebalancer unlock "
                           f"--source {self.source} {marker.topic_id}")

    def refuse_if_held(self) -> None:
        """Read-only: refuse now if someone else holds the lock (``acquire`` then need not write anything to say so).
        A lock this run directory provably left behind, or one being released, is left to ``acquire``."""
        marker = self.backend.lock_marker()
        if marker is not None and not marker.deleting and self._stale_local(marker) is None:
            raise self._held(marker)

    def _create(self, owner: dict[str, Any]) -> str | Marker:
        """Create the marker: its id, or the marker of whoever holds the lock; ``_BeingDeleted`` while a marker is
        going away."""
        try:
            return self.backend.create_lock_marker(owner)
        except MarkerExists as exc:
            marker = None if exc.deleting else self.backend.lock_marker()
            if exc.deleting or marker is None or marker.deleting:
                raise _BeingDeleted from None
            return marker

    def acquire(self) -> str:
        """Create the marker; refuse (``ClusterBusy``) while anyone else holds it. Returns the lock id."""
        owner = self._owner()
        while True:
            try:
                # Released just now, or the previous holder's marker is still being deleted (asynchronous in
                # ZooKeeper mode, where the Admin API's Metadata may already hide it): wait for it.
                held = retry_call(lambda: self._create(owner), on=_BeingDeleted, patience=self.deleting_grace,
                                  interval=0.2, sleep=self.sleep)
            except _BeingDeleted:
                raise ClusterBusy(f"the cluster lock topic {LOCK_TOPIC} is still being deleted after "
                                  f"{self.deleting_grace:g} s; try again later") from None
            if isinstance(held, str):
                self.topic_id = held
                break
            stale = self._stale_local(held)
            if stale is None:
                raise self._held(held)
            self.say(f"releasing the stale cluster lock {held.topic_id} of this run directory's previous "
                     f"execution (pid {stale['pid']} on {stale['host']} is gone)")
            self.backend.delete_lock_marker(held.topic_id)
        try:
            self._record(owner)
        except BaseException:
            self.release()  # a lock nobody could prove stale must not outlive a failed start
            raise
        return self.topic_id

    def _record(self, owner: dict[str, Any]) -> None:
        from ..formats import atomic_write_json

        try:
            self._local.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot write {self._local}: {exc.strerror or exc}") from None
        atomic_write_json(self._local, {"id": self.topic_id, "run_dir": owner["run_dir"], "host": owner["host"],
                                        "pid": owner["pid"],
                                        "pid_start": owner["pid_start"], "command": self.command,
                                        "source": self.source, "taken_at": owner["started_at"]})

    def check(self) -> None:
        """Raise ``LockLost`` unless the cluster's lock is still this execution's."""
        marker = self.backend.lock_marker()
        if self.topic_id is None or marker is None or marker.topic_id != self.topic_id or marker.deleting:
            raise LockLost(f"this execution's cluster lock {self.topic_id} was released by someone else "
                           f"(now: {_describe(marker) if marker else 'no lock'}); stopped before the next batch")

    def release(self) -> None:
        """Delete the marker if it is still ours (never anyone else's); forget the local record."""
        if self.topic_id is None:
            return
        self.backend.delete_lock_marker(self.topic_id)
        self.topic_id = None
        try:
            self._local.unlink(missing_ok=True)
            self._local.parent.rmdir()  # only when empty: an execution that never got further leaves nothing
        except OSError:
            pass


def unlock(backend: Backend, topic_id: str) -> Marker:
    """The operator's way out of a stale lock: delete the marker if its id is ``topic_id``."""
    marker = backend.lock_marker()
    if marker is None:
        raise SourceError(f"{backend.display} has no cluster lock")
    if marker.topic_id != topic_id:
        raise SourceError(f"the cluster lock is {marker.topic_id}, not {topic_id}: nothing released")
    if not backend.delete_lock_marker(topic_id):
        raise SourceError(f"the cluster lock {topic_id} changed while releasing it: nothing released")
    return marker


