#!/usr/bin/env python3
"""A hostile but realistic user against the real ``rebalancer`` CLI: hundreds of bad inputs and hand edits, each
run as an operator would run it (a subprocess of ``.venv/bin/python -m rebalancer ...`` in the repository root),
against a real ZooKeeper with the project's simulated Kafka cluster running in this process (zk:// and kafka://,
one cluster with SASL/PLAIN users, one chroot behind a digest ACL).

For every case it records and checks:

- clean one-line error: exit code non-zero and not 70, stderr exactly one non-empty line, no "Traceback";
- exit-70s (goal 0): the CLI's "internal error", i.e. a bug;
- half-written files (goal 0): the case's whole workspace (its run directory, ``--out`` and ``--write-lp`` targets,
  inputs) is hashed before and after, dotfiles included: after a failed command it must be byte-identical and
  nothing new may exist (a documented product of a failure is allowed where the case says so, e.g. ``validation/``
  on exit 6; a leftover temporary dotfile never is);
- cluster changes (goal 0): for every case that can reach a cluster, every partition's replicas/leader/ISR (read
  through ZooKeeper), every throttle config, ``/admin/reassign_partitions``, the preferred-election znode, and the
  lock marker topic ``__rebalancer_lock`` are compared before and after (with a few seconds of grace for Kafka's
  asynchronous topic deletion); a changed cluster is rebuilt in a fresh chroot so later cases start clean;
- secret leaks (goal 0): each case carries a distinctive secret (``S3cr3t-<case number>``) in URLs, client config
  files and ``REBALANCER_ZK_AUTH``; it must never appear in stdout, stderr, or any file the command wrote.

A case may succeed (exit 0) only when it is marked so (an idempotent no-op, an input the documentation accepts).
Anything else must fail cleanly; "other unclean" counts multi-line or traceback errors, timeouts, unexpected
successes and marked-must-succeed cases that failed. The exit status is non-zero when any of exit-70s, other
unclean, half-written, cluster changes or secret leaks is non-zero.

    .venv/bin/python bench/probe_hostile.py [--quick] [--jobs N] [--json FILE] [--only FAMILY] [-v]

Families: ``urls``, ``cluster-files``, ``options``, ``run-edits``, ``environment`` (bad inputs, hand edits, hostile
surroundings) and ``faults`` (issue 42 items 6-8: a broker killed while the CLI executes, then what the operator runs
next: a ``rollback --source kafka://`` around a dead kept replica must refuse at once, the ``throttle --clear``
advice of a stalled execution must run as printed, a destination restarting within ``--destination-grace`` must
let the execution complete).

Cases that cannot reach the cluster run in ``--jobs`` parallel threads; cases that can are run one at a time (the
two-executions race and the faults run on clusters of their own). Everything it starts (ZooKeeper, simulators, tmpfs mounts,
immutable attributes, child processes) is undone on exit, Ctrl-C or a crash.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
_VENV_PY = REPO / ".venv" / "bin" / "python"
PYTHON = str(_VENV_PY) if _VENV_PY.exists() else sys.executable
IS_ROOT = os.geteuid() == 0
SECRET_WORD = "S3cr3t"
NEW_BROKERS = [12, 13, 14, 15]
SASL_USER, SASL_PASSWORD = "ops", "S3cr3t-sasl-right"  # the SASL cluster's real user (never the case's secret)
ACL_USER, ACL_PASSWORD = "acl-admin", "S3cr3t-acl-right"  # the digest-ACL chroot's real credentials
FAMILIES = ["urls", "cluster-files", "options", "run-edits", "environment", "faults"]


# -- cleanup: everything started is undone, whatever happens ------------------------------------------------------
class Cleanup:
    """LIFO undo actions, run once each (on normal exit, atexit, Ctrl-C or SIGTERM)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._actions: dict[int, tuple[str, Callable[[], None]]] = {}
        self._next = 0
        self.procs: set[subprocess.Popen[bytes]] = set()

    def push(self, label: str, fn: Callable[[], None]) -> int:
        with self._lock:
            self._next += 1
            self._actions[self._next] = (label, fn)
            return self._next

    def pop(self, token: int, run: bool = True) -> None:
        with self._lock:
            item = self._actions.pop(token, None)
        if item and run:
            self._run(*item)

    @staticmethod
    def _run(label: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - best effort; say what could not be undone
            print(f"probe: cleanup '{label}' failed: {type(exc).__name__}: {exc}", file=sys.stderr)

    def kill_children(self) -> None:
        for proc in list(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)

    def run_all(self) -> None:
        self.kill_children()
        while True:
            with self._lock:
                if not self._actions:
                    return
                token = max(self._actions)
                item = self._actions.pop(token)
            self._run(*item)


CLEANUP = Cleanup()
STOP = threading.Event()
atexit.register(CLEANUP.run_all)


def _on_sigterm(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


# -- helpers -------------------------------------------------------------------------------------------------------
def dead_port() -> tuple[socket.socket, int]:
    """A local port that refuses connections for the whole run: bound (so nothing else takes it), never listening."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    return s, s.getsockname()[1]


def tree(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (dotfiles included): files by SHA-256, directories, symlinks by target."""
    out: dict[str, str] = {}
    if not root.exists() and not root.is_symlink():
        return out
    if root.is_symlink() or not root.is_dir():
        return {".": _entry(root)}
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        rel = os.path.relpath(d, root)
        out[rel + "/"] = "dir"
        for name in list(dirnames):
            p = d / name
            if p.is_symlink():
                out[os.path.relpath(p, root)] = _entry(p)
                dirnames.remove(name)
        for name in filenames:
            p = d / name
            out[os.path.relpath(p, root)] = _entry(p)
    return out


def _entry(p: Path) -> str:
    try:
        if p.is_symlink():
            return "link:" + os.readlink(p)
        if p.is_file():
            h = hashlib.sha256()
            with p.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            return "file:" + h.hexdigest()
        return "special"
    except OSError as exc:
        return f"unreadable:{exc.errno}"


def tree_diff(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def mask(text: str, secret: str, limit: int = 160) -> str:
    text = text.replace(secret, "***") if secret else text
    text = re.sub(r"S3cr3t[-\w]*", "***", text)
    text = text.replace("\n", "\\n").replace("\t", "\\t").replace("\x01", "\\x01")
    return text if len(text) <= limit else text[: limit - 20] + f"...(+{len(text) - limit + 20} chars)"


def write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return path


def wjson(path: Path, doc: Any) -> Path:
    return write(path, json.dumps(doc))


def copy_run(src: Path, ws: Path, name: str = "run") -> Path:
    dst = ws / name
    shutil.copytree(src, dst, symlinks=True)
    return dst


def plan_hash_of(doc: dict[str, Any]) -> str | None:
    """The content hash of plan.json's changes, computed as the library does (None when the changes are malformed)."""
    try:
        canon = sorted((c["topic"], int(c["partition"]), list(c["replicas_before"]), list(c["replicas_after"]))
                       for c in doc["changes"])
        return hashlib.sha256(json.dumps(canon, separators=(",", ":")).encode()).hexdigest()
    except Exception:  # noqa: BLE001 - broken on purpose
        return None


def edit_plan(run: Path, fn: Callable[[dict[str, Any]], Any], *, rehash: bool = False, reapprove: bool = False) -> None:
    """Edit plan.json; optionally recompute its content hash, and re-write approval.json for the new hash (as
    someone with write access to the run directory could)."""
    path = run / "plan.json"
    doc = json.loads(path.read_text())
    new = fn(doc)
    doc = doc if new is None else new
    if rehash and isinstance(doc, dict):
        h = plan_hash_of(doc)
        if h:
            doc["content_hash"] = h
    path.write_text(json.dumps(doc))
    if reapprove and isinstance(doc, dict):
        wjson(run / "approval.json", {"plan_hash": doc.get("content_hash"), "decision": "approved", "by": "mallory",
                                      "comment": "", "at": "2026-01-01T00:00:00Z"})


# -- the clusters ---------------------------------------------------------------------------------------------------
class Clusters:
    """ZooKeeper, the main simulated cluster (PLAINTEXT, foreign throttles set), a SASL/PLAIN one, a digest-ACL
    chroot; state snapshots of both simulated clusters; rebuild of the main one after a case changed it."""

    def __init__(self, root: Path) -> None:
        from rebalancer.zkserver import ZooKeeperServer

        self.root = root
        self.server = ZooKeeperServer(root / "zookeeper", tick_ms=500)
        self.server.start()
        CLEANUP.push("stop ZooKeeper", self.server.stop)
        self.generation = 0
        self.main: dict[str, Any] = {}
        self.sasl: dict[str, Any] = {}
        self._lock = threading.RLock()
        self._setup_acl_chroot()
        self.sasl = self._start_sim("/sasl", sasl_users={SASL_USER: SASL_PASSWORD}, foreign=False)
        self.main = self._start_sim("/kafka-0", foreign=True)

    @property
    def hosts(self) -> str:
        return self.server.hosts

    @property
    def chroot(self) -> str:
        return self.main["chroot"]

    def zk_url(self, secret: str | None = None, user: str = "probe") -> str:
        cred = f"{user}:{secret}@" if secret else ""
        return f"zk://{cred}{self.hosts}{self.chroot}"

    @property
    def kafka(self) -> str:
        return self.main["sim"].bootstrap

    @property
    def kafka_one(self) -> str:
        return self.kafka.split(",")[0]

    @property
    def sasl_one(self) -> str:
        return self.sasl["sim"].bootstrap.split(",")[0]

    def sizes_url(self) -> str:
        return f"file://{self.main['state_dir'] / 'log-dirs.json'}"

    def client(self, chroot: str = "", auth: tuple[str, str] | None = None) -> Any:
        from kazoo.client import KazooClient

        c = KazooClient(hosts=self.hosts + chroot, timeout=10,
                        auth_data=[("digest", f"{auth[0]}:{auth[1]}")] if auth else None)
        c.start(timeout=15)
        token = CLEANUP.push(f"close ZooKeeper client {chroot}", lambda: (c.stop(), c.close()))
        c._probe_token = token  # noqa: SLF001
        return c

    def close_client(self, c: Any) -> None:
        CLEANUP.pop(getattr(c, "_probe_token", -1))

    def _setup_acl_chroot(self) -> None:
        from kazoo.security import make_digest_acl

        root = self.client(auth=(ACL_USER, ACL_PASSWORD))
        acl = [make_digest_acl(ACL_USER, ACL_PASSWORD, all=True)]
        root.create("/secure", b"", acl=acl)
        for path in ("/secure/brokers", "/secure/brokers/ids", "/secure/brokers/topics"):
            root.create(path, b"", acl=acl)
        root.create("/not-kafka", b"")
        root.create("/not-kafka/something", b"hello")
        self.close_client(root)

    @staticmethod
    def scenario(partitions: int = 48) -> Any:
        from rebalancer.sim.scenarios import ScenarioParams, build_scenario

        return build_scenario("new-brokers", ScenarioParams(partitions=partitions, mean_partition_mib=64))

    def _start_sim(self, chroot: str, *, acceleration: float = 200.0, sasl_users: dict[str, str] | None = None,
                   foreign: bool = False, tick: float = 0.05) -> dict[str, Any]:
        from rebalancer.sim.controller import SimulatedCluster
        from rebalancer.sim.kafka_listener import serve

        root = self.client()
        root.ensure_path(chroot)
        self.close_client(root)
        zk = self.client(chroot)
        state_dir = self.root / ("sim" + chroot.replace("/", "-"))
        sim = SimulatedCluster(zk, acceleration=acceleration, tick=tick, state_dir=state_dir, sasl_users=sasl_users,
                               listener_factory=serve)
        sim.load(self.scenario())
        sim.start()
        token = CLEANUP.push(f"stop simulator {chroot}", sim.stop)
        entry = {"chroot": chroot, "sim": sim, "zk": zk, "state_dir": state_dir, "token": token}
        # /admin/delete_topics exists in a Kafka cluster; with it in place, /admin's child version changes only when
        # a reassignment or a preferred election znode is created or deleted (see _state: "admin_cversion")
        zk.ensure_path("/admin/delete_topics")
        zk.ensure_path("/config/changes")
        if foreign:  # someone else's throttles, which nothing of ours may ever remove
            from rebalancer.access.zk_backend import ZkBackend

            backend = ZkBackend(zk, "probe")
            backend.alter_configs("brokers", "3", {"leader.replication.throttled.rate": "1000"})
            backend.alter_configs("topics", "orders.v0", {"follower.replication.throttled.replicas": "0:3"})
        return entry

    def stop_sim(self, entry: dict[str, Any]) -> None:
        CLEANUP.pop(entry["token"])
        self.close_client(entry["zk"])

    def reset_main(self) -> None:
        """A case changed the main cluster: later cases get a pristine one (same scenario) in a fresh chroot."""
        with self._lock:
            old = self.main
            self.generation += 1
            self.main = self._start_sim(f"/kafka-{self.generation}", foreign=True)
            self.stop_sim(old)

    def state(self) -> dict[str, Any]:
        with self._lock:
            return {"main": self._state(self.main["zk"]), "sasl": self._state(self.sasl["zk"])}

    @staticmethod
    def _state(zk: Any) -> dict[str, Any]:
        from rebalancer import kafka_zk as kz
        from rebalancer.access.zk_backend import ZkBackend
        from rebalancer.kafka_names import LOCK_TOPIC

        def get(path: str) -> str | None:
            try:
                return zk.get(path)[0].decode(errors="replace")
            except Exception:  # noqa: BLE001 - NoNodeError
                return None

        try:
            cluster = kz.read_cluster(zk, display="probe")
            parts = sorted((p.topic, p.partition, list(p.replicas), p.leader, sorted(p.isr), list(p.adding),
                            list(p.removing)) for p in cluster.partitions)
            alive = sorted(b.id for b in cluster.brokers if b.alive)
            throttles = {f"{t}/{n}": v for (t, n), v in sorted(ZkBackend(zk, "probe").throttle_configs().items())}
        except Exception as exc:  # noqa: BLE001 - a cluster the probe cannot even read has changed
            return {"error": f"{type(exc).__name__}: {exc}"}
        marker = get(kz.topic_path(LOCK_TOPIC))
        admin = zk.exists("/admin")
        changes = zk.exists("/config/changes")
        try:
            deleting = sorted(zk.get_children("/admin/delete_topics"))
        except Exception:  # noqa: BLE001
            deleting = []
        # admin_cversion: a reassignment (or election) submitted during the case changes it, even one the controller
        # dropped at once, so nothing submitted goes unseen; config_notifications: likewise any config change
        # announced to the brokers (a throttle set and removed again)
        return {"partitions": parts, "alive": alive, "throttles": throttles, "reassign": get(kz.REASSIGN),
                "election": get(kz.PREFERRED_ELECTION), "lock_marker": marker, "deleting": deleting,
                "admin_cversion": admin.cversion if admin else None,
                "config_notifications": changes.cversion if changes else None}

    def stop(self) -> None:
        for entry in (self.main, self.sasl):
            if entry:
                self.stop_sim(entry)
        self.server.stop()


def describe_change(before: dict[str, Any], after: dict[str, Any]) -> str:
    out = []
    for name in before:
        b, a = before[name], after.get(name, {})
        for key in sorted(set(b) | set(a)):
            if b.get(key) != a.get(key):
                if key == "partitions" and isinstance(b.get(key), list) and isinstance(a.get(key), list):
                    diff = [x for x in a[key] if x not in b[key]]
                    out.append(f"{name}.partitions: {len(diff)} changed, e.g. {diff[:1]}")
                else:
                    out.append(f"{name}.{key}: {str(b.get(key))[:80]} -> {str(a.get(key))[:80]}")
    return "; ".join(out)[:400]


# -- cases ----------------------------------------------------------------------------------------------------------
Build = Callable[["Ctx", Path, str], list[str]]


@dataclass
class Case:
    family: str
    title: str
    build: Build
    cluster: bool = False                # can reach a cluster: run alone, cluster compared before/after
    ok: bool = False                     # exit 0 is acceptable
    must_ok: bool = False                # exit 0 is required (a control case)
    code: int | None = None              # the exit code expected (informational)
    env: Callable[[Ctx, Path, str], dict[str, str | None]] | None = None
    allow: dict[int, tuple[str, ...]] = field(default_factory=dict)  # exit code -> workspace paths it may write
    quick: bool = False
    timeout: float = 150.0
    around: Callable[[Ctx, Path], Any] | None = None  # a context manager: the environment (chattr, tmpfs)
    limit: tuple[str, int] | None = None  # ("fsize"|"as", bytes): a resource limit for the command
    runner: Callable[[Ctx, int, Case, str], Result] | None = None  # a case that is not one CLI command
    secret: str | None = None


@dataclass
class Result:
    n: int
    family: str
    title: str
    args: str
    code: int | None
    seconds: float
    stderr: str
    clean: bool = False
    expected_ok: bool = False
    exit70: bool = False
    unclean: bool = False
    half: bool = False
    cluster_change: bool = False
    leak: bool = False
    code_expected: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def failing(self) -> bool:
        return self.exit70 or self.unclean or self.half or self.cluster_change or self.leak


class Ctx:
    """What cases need: the clusters, the base run directories, a port nobody listens on, a lock directory."""

    def __init__(self, root: Path, clusters: Clusters) -> None:
        self.root = root
        self.c = clusters
        self._sock, self.fp = dead_port()
        CLEANUP.push("close the dead port", self._sock.close)
        self.lockdir = root / "locks"
        self.lockdir.mkdir()
        self.bases = root / "bases"
        self.bases.mkdir()
        self.cluster_file = root / "bases" / "cluster.json"
        self.big_cluster_file = root / "bases" / "big-cluster.json"

    def dead_zk(self, secret: str | None = None, chroot: str = "/kafka") -> str:
        return f"zk://{'probe:' + secret + '@' if secret else ''}127.0.0.1:{self.fp}{chroot}"

    def build_bases(self) -> None:
        from rebalancer.execute import approve
        from rebalancer.formats import write_cluster_json
        from rebalancer.plan import plan_run_dir
        from rebalancer.snapshot import take_snapshot

        write_cluster_json(Clusters.scenario(), self.cluster_file)
        write_cluster_json(Clusters.scenario(2000), self.big_cluster_file)
        self.base_file = self.bases / "file-run"  # snapshot only (from a file)
        take_snapshot(f"file://{self.cluster_file}", self.base_file)
        self.base_add = self.bases / "add-run"  # snapshot from the simulator (zk://), add-brokers plan, approved
        take_snapshot(self.c.zk_url(), self.base_add, sizes=self.c.sizes_url())
        snap = self.bases / "snap-run"
        shutil.copytree(self.base_add, snap)
        self.base_snap = snap  # snapshot from the simulator only
        plan_run_dir(self.base_add, "add-brokers", brokers=NEW_BROKERS, time_limit=60)
        approve(self.base_add, by="probe")
        self.base_reb = self.bases / "rebalance-run"  # the same snapshot, rebalance plan, approved
        shutil.copytree(snap, self.base_reb)
        plan_run_dir(self.base_reb, "rebalance", time_limit=60)
        approve(self.base_reb, by="probe")
        self.base_report = self.bases / "report-run"  # add-brokers run with an analysis, for the report
        shutil.copytree(self.base_add, self.base_report)
        make_analysis(self.base_report)
        self.base_state = self.bases / "state-run"  # add-brokers run as a killed execution leaves it
        shutil.copytree(self.base_add, self.base_state)
        make_pending_state(self.base_state)


def make_analysis(run: Path) -> None:
    """A minimal analysis/ in the documented schema (docs/analysis-schema.md), computed from the snapshot, so the
    report stage can run without Spark (the probe is about the report's handling of edited run files)."""
    import statistics

    from rebalancer.snapshot import load_snapshot

    cl = load_snapshot(run)
    per = {b.id: {"replicas": 0, "leaders": 0, "bytes": 0} for b in cl.brokers}
    for p in cl.partitions:
        for b in p.replicas:
            per[b]["replicas"] += 1
            per[b]["bytes"] += p.size_bytes
        if p.leader is not None:
            per[p.leader]["leaders"] += 1
    med = {m: float(statistics.median(v[m] for v in per.values())) for m in ("replicas", "leaders", "bytes")}

    def dev(v: float, m: float) -> float:
        return round((v - m) / m * 100, 3) if m else 0.0

    rows = [{"broker": b.id, "rack": b.rack, **per[b.id], "bytes_in_p95": 0.0,
             **{f"dev_{m}_pct": dev(per[b.id][m], med[m]) for m in ("replicas", "leaders", "bytes")},
             "wix_underloaded": per[b.id]["replicas"] < med["replicas"] / 2,
             "pinterest_over": per[b.id]["replicas"] > med["replicas"],
             "pinterest_under": per[b.id]["replicas"] < med["replicas"]} for b in cl.brokers]
    before = {"topics": len(cl.topics), "partitions": len(cl.partitions), "replicas": cl.replica_count,
              "bytes": sum(p.size_bytes * len(p.replicas) for p in cl.partitions), "brokers": len(cl.brokers),
              "racks": len(cl.racks), "median": med,
              "max_abs_deviation_pct": {m: max(abs(r[f"dev_{m}_pct"]) for r in rows) for m in ("replicas", "leaders", "bytes")},
              "wix_underloaded": [r["broker"] for r in rows if r["wix_underloaded"]],
              "pinterest_over": [r["broker"] for r in rows if r["pinterest_over"]],
              "pinterest_under": [r["broker"] for r in rows if r["pinterest_under"]],
              "under_replicated_partitions": 0, "worst_topics": []}
    topics = sorted(cl.topics)
    brokers = [b.id for b in cl.brokers]
    matrix = [[sum(1 for p in cl.partitions if p.topic == t and b in p.replicas) for b in brokers] for t in topics]
    a = run / "analysis"
    wjson(a / "summary.json", {"generated_at": "2026-01-01T00:00:00Z",
                               "spark": {"master": "probe (synthetic)", "version": "n/a", "seconds": 0.0},
                               "input": {"replica_rows": cl.replica_count, "history": None, "plan": True},
                               "before": before, "after": None})
    wjson(a / "brokers.json", rows)
    wjson(a / "topic_broker_top.json", {"topics": topics, "brokers": brokers, "replicas": matrix})


def make_pending_state(run: Path) -> None:
    """execution/state.json as an execution killed before its first batch leaves it (all batches pending)."""
    from rebalancer.execute import ExecOptions
    from rebalancer.execute.runner import _new_state
    from rebalancer.movement.batches import Step
    from rebalancer.plan import load_plan

    plan = load_plan(run)
    steps = [Step(c.topic, c.partition, c.replicas_before, c.replicas_after, c.size_bytes) for c in plan.changes]
    state = _new_state(plan, ExecOptions(throttle=200_000_000), "execute", steps)
    wjson(run / "execution" / "state.json", state)


# -- running one case ------------------------------------------------------------------------------------------------
def base_env(ctx: Ctx, secret: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REBALANCER_")}
    env.update({"REBALANCER_ZK_AUTH": f"probe:{secret}", "REBALANCER_LOCK_DIR": str(ctx.lockdir),
                "PYTHONUNBUFFERED": "1"})
    return env


def _limit_cmd(limit: tuple[str, int] | None) -> list[str]:
    if not limit:
        return []
    kind, value = limit
    if shutil.which("prlimit"):
        return ["prlimit", f"--{kind}={value}", "--"]
    return []


def _preexec(limit: tuple[str, int] | None) -> Callable[[], None] | None:
    if not limit or shutil.which("prlimit"):
        return None
    import resource

    res = resource.RLIMIT_FSIZE if limit[0] == "fsize" else resource.RLIMIT_AS

    def apply() -> None:
        resource.setrlimit(res, (limit[1], limit[1]))

    return apply


def run_cli(argv: list[str], env: dict[str, str], timeout: float,
            limit: tuple[str, int] | None = None) -> tuple[int | None, str, str, float]:
    """One CLI run in its own process group (killed with its children on timeout or Ctrl-C)."""
    started = time.monotonic()
    proc = subprocess.Popen([*_limit_cmd(limit), PYTHON, "-m", "rebalancer", *argv], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            start_new_session=True, preexec_fn=_preexec(limit))
    CLEANUP.procs.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = None
    finally:
        CLEANUP.procs.discard(proc)
    return code, out.decode(errors="replace"), err.decode(errors="replace"), time.monotonic() - started


def _new_file_leaks(ws: Path, changed: list[str], secret: str) -> list[str]:
    found = []
    for rel in changed:
        p = ws / rel
        if p.is_file() and not p.is_symlink():
            try:
                with p.open("rb") as fh:
                    data = fh.read(20_000_000)
            except OSError:
                continue
            if secret.encode() in data:
                found.append(rel)
    return found


PROGRESS_COMMANDS = ("execute", "rollback", "throttle")


def judge(res: Result, case: Case, out: str, err: str, secret: str, argv: list[str] | None = None) -> None:
    code = res.code
    lines = [ln for ln in err.splitlines() if ln.strip()]
    one_line = len(lines) == 1 and "Traceback" not in err
    if not one_line and argv and argv[0] in PROGRESS_COMMANDS and lines and "Traceback" not in err:
        # execute/rollback/throttle --clear log their progress on stderr by design (cli.py): an error after some
        # progress is clean when it is the last line and the only "rebalancer:" line
        ours = [ln for ln in lines if ln.startswith("rebalancer:")]
        if len(ours) == 1 and lines[-1] == ours[0]:
            one_line = True
            res.notes.append(f"{len(lines) - 1} progress line(s) before the error")
    if code is None:
        res.unclean = True
        res.notes.append(f"timed out after {case.timeout:g} s (killed)")
    elif code == 70:
        res.exit70 = True
    elif code == 0:
        if case.ok or case.must_ok:
            res.expected_ok = True
            if "Traceback" in err:
                res.unclean = True
                res.notes.append("exit 0 but a traceback on stderr")
        else:
            res.unclean = True
            res.notes.append("unexpected success (exit 0)")
    elif case.must_ok:
        res.unclean = True
        res.notes.append(f"expected success, got exit {code}")
    elif one_line:
        res.clean = True
    else:
        res.unclean = True
        res.notes.append(f"stderr has {len(lines)} non-empty lines" + (" and a traceback" if "Traceback" in err else ""))
    if code is not None and code < 0:
        res.notes.append(f"killed by signal {-code}")
    if secret and (secret in out or secret in err):
        res.leak = True
        res.notes.append("the secret is in " + " and ".join(n for n, t in (("stdout", out), ("stderr", err)) if secret in t))


def run_case(ctx: Ctx, n: int, case: Case) -> Result:
    secret = case.secret or f"{SECRET_WORD}-{n:04d}"
    if case.runner:
        return case.runner(ctx, n, case, secret)
    ws = ctx.root / "ws" / f"{n:04d}"
    ws.mkdir(parents=True)
    res = Result(n, case.family, case.title, "", None, 0.0, "", code_expected=case.code)
    try:
        argv = case.build(ctx, ws, secret)
        env = base_env(ctx, secret)
        extra = case.env(ctx, ws, secret) if case.env else {}
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
    except Exception as exc:  # noqa: BLE001 - the probe's own bug: reported, not hidden
        res.notes.append(f"PROBE ERROR building the case: {type(exc).__name__}: {exc}")
        res.unclean = True
        return res
    res.args = mask(" ".join(_shown_arg(a) for a in argv), secret, 400)
    env_note = [f"{k}={mask(str(v), secret, 60)}" if v is not None else f"{k} unset" for k, v in extra.items()]
    if env_note:
        res.args = " ".join(env_note) + " " + res.args
    with (case.around(ctx, ws) if case.around else contextlib.nullcontext()):
        files_before = tree(ws)
        cluster_before = ctx.c.state() if case.cluster else None
        code, out, err, secs = run_cli(argv, env, case.timeout, case.limit)
        files_after = tree(ws)
        res.code, res.seconds, res.stderr = code, secs, err
        judge(res, case, out, err, secret, argv)
        changed = tree_diff(files_before, files_after)
        if changed:
            leaks = _new_file_leaks(ws, changed, secret)
            if leaks:
                res.leak = True
                res.notes.append(f"the secret was written to {', '.join(leaks[:3])}")
        temps = [c for c in changed if c in files_after and Path(c).name.startswith(".")]
        allowed = case.allow.get(code, ()) if code is not None else ()
        if code != 0:
            bad = [c for c in changed if not any(c == a or c.startswith(a.rstrip("/") + "/") for a in allowed)]
        else:
            bad = []
        bad = sorted(set(bad) | set(temps))
        if bad and code is None:  # the probe killed it (timeout): what it left is noted, not counted
            res.notes.append("files left by the killed command: " + ", ".join(bad[:5]))
        elif bad:
            res.half = True
            res.notes.append("files changed/left: " + ", ".join(bad[:5]) + (f" (+{len(bad) - 5})" if len(bad) > 5 else ""))
    if case.cluster and cluster_before is not None:
        after = ctx.c.state()
        deadline = time.monotonic() + 8.0  # Kafka deletes a topic asynchronously (the lock marker)
        while after != cluster_before and time.monotonic() < deadline:
            time.sleep(0.25)
            after = ctx.c.state()
        if after != cluster_before:
            res.cluster_change = True
            res.notes.append("cluster changed: " + describe_change(cluster_before, after))
            ctx.c.reset_main()
    with contextlib.suppress(OSError):
        shutil.rmtree(ws)
    return res


def _shown_arg(a: str) -> str:
    if a == "" or re.search(r"\s", a):
        return repr(a)
    return a


# -- environments -----------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """A directory nobody can write to, root included (the immutable attribute; mode bits when not root)."""
    if IS_ROOT:
        subprocess.run(["chattr", "+i", str(path)], check=True)
        undo = lambda: subprocess.run(["chattr", "-i", str(path)], check=False)  # noqa: E731
    else:
        os.chmod(path, 0o555)
        undo = lambda: os.chmod(path, 0o755)  # noqa: E731
    token = CLEANUP.push(f"undo read-only {path}", undo)
    try:
        yield
    finally:
        CLEANUP.pop(token)


@contextlib.contextmanager
def tiny_disk(path: Path, fill: bool = True) -> Iterator[bool]:
    """A small file system at ``path`` (a 512 KiB tmpfs, as root; the case copies its run in, then fills it up);
    yields whether it is a real mount (when not, cases fall back to a file-size limit)."""
    path.mkdir(parents=True, exist_ok=True)
    if not IS_ROOT:
        yield False
        return
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(path)], check=True)
    token = CLEANUP.push(f"unmount {path}", lambda: subprocess.run(["umount", "-l", str(path)], check=False))
    try:
        yield True
    finally:
        CLEANUP.pop(token)


def fill_up(directory: Path, keep: int = 0) -> None:
    """Fill the file system of ``directory``, leaving about ``keep`` bytes."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 1024)
    except OSError:
        pass
    finally:
        os.close(fd)
    if keep:
        size = (directory / "filler").stat().st_size
        os.truncate(directory / "filler", max(0, size - keep))


# -- the case families -----------------------------------------------------------------------------------------------
def exec_tail() -> list[str]:
    return ["--throttle", "200MB/s", "--throttle-settle", "0", "--poll", "0.1", "--min-timeout", "20"]


def run_dir_command(cmd: str, run: Path, source: str, timeout: str = "5") -> list[str]:
    """A command that acts on the cluster for ``run``, as an operator types it."""
    if cmd == "execute":
        return ["execute", str(run), "--source", source, *exec_tail(), "--timeout", timeout]
    if cmd == "rollback":
        return ["rollback", str(run), "--source", source, *exec_tail(), "--timeout", timeout]
    if cmd == "throttle":
        return ["throttle", "--clear", str(run), "--source", source, "--timeout", timeout]
    if cmd == "verify":
        return ["verify", str(run), "--source", source, "--timeout", timeout]
    if cmd == "unlock":
        return ["unlock", "AAAAAAAAAAAAAAAAAAAAAA", "--source", source, "--timeout", timeout]
    if cmd == "snapshot":
        return ["snapshot", "--source", source, "--out", str(run.parent / "out"), "--timeout", timeout, "--quiet"]
    raise ValueError(cmd)


SOURCE_COMMANDS = ["snapshot", "execute", "verify", "rollback", "throttle", "unlock"]


def url_cases() -> list[Case]:
    """Family 1: malformed and hostile source URLs (with secrets), client configs, unreachable and denying sources."""
    F = "urls"
    cases: list[Case] = []
    # (title, template, real cluster?, expected code, all commands?, quick?)
    # {S} secret, {ZK} ZooKeeper host:port, {C} chroot, {FP} a port that refuses, {K} a Kafka listener, {KS} SASL one
    long_label = "a" * 70
    D = "127.0.0.1:{FP}"  # where syntax is the point: if a malformed URL were accepted, it reaches nothing
    urls: list[tuple[str, str, int | None, bool, bool]] = [  # (title, template, expected code, every command?, quick?)
        ("zk:/ (one slash)", "zk:/probe:{S}@" + D + "{C}", 2, False, True),
        ("ZK:// upper case, unreachable", "ZK://probe:{S}@" + D + "{C}", 4, False, False),
        ("http://", "http://probe:{S}@" + D + "{C}", 2, False, True),
        ("no scheme", "probe:{S}@" + D + "{C}", 2, False, False),
        ("'/' in the password", "zk://probe:{S}/x/y@" + D + "{C}", 4, True, True),
        ("'@' in the password", "zk://probe:{S}@x@" + D + "{C}", 4, False, True),
        ("percent-encoded password", "zk://probe:{S}%40%2F%3A%25@" + D + "{C}", 4, False, False),
        ("broken percent-encoding", "zk://probe:{S}%zz%4@" + D + "{C}", None, False, False),
        ("'?' and '#' in the password", "zk://probe:{S}?x#y@" + D + "{C}", 4, False, False),
        ("space in the password", "zk://probe:{S} x@" + D + "{C}", None, False, False),
        ("empty host", "zk://probe:{S}@:2181{C}", 2, False, False),
        ("nothing after the credentials", "zk://probe:{S}@", 2, False, False),
        ("credentials without '@' (password where the host goes)", "zk://probe:{S}", 2, False, True),
        ("a token without a user", "zk://{S}@" + D + "{C}", None, False, False),
        ("port 0", "zk://probe:{S}@127.0.0.1:0{C}", 2, False, False),
        ("port 65536", "zk://probe:{S}@127.0.0.1:65536{C}", 2, False, True),
        ("full-width digits port", "zk://probe:{S}@127.0.0.1:\uff12\uff11\uff18\uff11{C}", 2, False, False),
        ("IPv6, unreachable", "zk://probe:{S}@[::1]:{FP}{C}", 4, False, False),
        ("IPv6 unclosed bracket", "zk://probe:{S}@[::1:{FP}{C}", 2, False, False),
        ("space in the chroot", "zk://probe:{S}@{ZK}/ka fka", 2, False, False),
        ("newline in the URL", "zk://probe:{S}@{ZK}{C}\nx", 2, False, False),
        ("control character in the URL", "zk://probe:{S}@{ZK}{C}\x01", 2, False, False),
        ("spaces around the URL, unreachable", "  zk://probe:{S}@" + D + "{C}  ", 4, False, False),
        ("unicode host name", "zk://probe:{S}@z\u00f6\u00f6keeper.invalid:2181{C}", 4, False, True),
        ("63+ character DNS label", "zk://probe:{S}@" + long_label + ".invalid:2181{C}", None, False, True),
        ("5000-character chroot, unreachable", "zk://probe:{S}@" + D + "/" + "c" * 5000, 4, False, False),
        ("60 kB password, unreachable", "zk://probe:{S}" + "p" * 60000 + "@" + D + "{C}", 4, False, True),
        ("query string", "zk://probe:{S}@{ZK}{C}?digest=1", 2, False, False),
        ("wrong chroot", "zk://probe:{S}@{ZK}/no-such-chroot", 4, False, True),
        ("chroot that is not Kafka", "zk://probe:{S}@{ZK}/not-kafka", 4, False, False),
        ("no chroot (the ZooKeeper root)", "zk://probe:{S}@{ZK}", 4, False, False),
        ("'..' in the chroot", "zk://probe:{S}@{ZK}{C}/../kafka-0", None, False, False),
        ("digest ACL, wrong password", "zk://probe:{S}@{ZK}/secure", 4, True, True),
        ("Kafka SASL credentials to a PLAINTEXT listener", "kafka://ops:{S}@{K}", 4, False, False),
        ("Kafka wrong SASL password", "kafka://" + SASL_USER + ":{S}@{KS}", 4, False, True),
        ("Kafka unreachable", "kafka://ops:{S}@" + D, 4, False, False),
        ("Kafka with a path", "kafka://ops:{S}@" + D + "/kafka", 2, False, False),
        ("Kafka 63+ character DNS label", "kafka://ops:{S}@" + long_label + ".invalid:9092", None, False, False),
    ]
    k = 0
    for title, tpl, code, every, quick in urls:
        real = any(x in tpl for x in ("{ZK}", "{K}", "{KS}"))
        commands = (["snapshot", "execute", "throttle", "unlock"] if "{ZK}" not in tpl else ["snapshot", "execute", "unlock"]) \
            if every else [SOURCE_COMMANDS[k % len(SOURCE_COMMANDS)]]
        k += 1
        for j, cmd in enumerate(commands):
            def build(ctx: Ctx, ws: Path, s: str, tpl: str = tpl, cmd: str = cmd) -> list[str]:
                url = (tpl.replace("{S}", s).replace("{ZK}", ctx.c.hosts).replace("{C}", ctx.c.chroot)
                       .replace("{FP}", str(ctx.fp)).replace("{K}", ctx.c.kafka_one).replace("{KS}", ctx.c.sasl_one))
                run = copy_run(ctx.base_add, ws) if cmd != "snapshot" else ws / "run"
                return run_dir_command(cmd, run, url, timeout="3")
            cases.append(Case(F, f"{cmd}: {title}", build, cluster=real, code=code, quick=quick and j == 0,
                              allow={8: ("run/verification.json",)}))

    # Uppercase schemes on the real cluster: documented as accepted (RFC 3986), so a read may succeed.
    for title, tpl in (("ZK:// upper case on the real cluster", "ZK://probe:{S}@{ZK}{C}"),
                       ("KAFKA:// upper case on the real cluster", "KAFKA://{K}")):
        def build(ctx: Ctx, ws: Path, s: str, tpl: str = tpl) -> list[str]:
            url = tpl.replace("{S}", s).replace("{ZK}", ctx.c.hosts).replace("{C}", ctx.c.chroot).replace("{K}", ctx.c.kafka_one)
            return ["snapshot", "--source", url, "--out", str(ws / "run"), "--quiet", "--timeout", "5"]
        cases.append(Case(F, f"snapshot: {title}", build, cluster=True, ok=True))

    # Credentials from the environment.
    def acl_env(value: str) -> Callable[[Ctx, Path, str], dict[str, str | None]]:
        return lambda ctx, ws, s: {"REBALANCER_ZK_AUTH": value.replace("{S}", s)}

    def acl_build(cmd: str, chroot: str = "/secure") -> Build:
        def build(ctx: Ctx, ws: Path, s: str) -> list[str]:
            run = copy_run(ctx.base_add, ws) if cmd != "snapshot" else ws / "run"
            return run_dir_command(cmd, run, f"zk://{ctx.c.hosts}{chroot}")
        return build

    def no_creds_env(ctx: Ctx, ws: Path, s: str) -> dict[str, str | None]:
        # no ZooKeeper credentials at all; the secret sits in the Kafka client config the environment names
        cfg = write(ws / "client.properties", f"sasl.password={s}\n")
        return {"REBALANCER_ZK_AUTH": None, "REBALANCER_KAFKA_CONFIG": str(cfg)}

    for i, cmd in enumerate(("snapshot", "execute", "unlock")):
        cases.append(Case(F, f"{cmd}: digest ACL, no credentials", acl_build(cmd), cluster=True, code=4,
                          env=no_creds_env, quick=i == 0))
    for title, value, code in (("REBALANCER_ZK_AUTH wrong for the ACL", f"{ACL_USER}:{{S}}", 4),
                               ("REBALANCER_ZK_AUTH without ':'", "{S}", 2),
                               ("REBALANCER_ZK_AUTH with a newline", "probe:{S}\nmore", None),
                               ("REBALANCER_ZK_AUTH of 100 kB", "probe:{S}" + "x" * 100_000, 4)):
        cmd = "execute" if "100 kB" in title or "newline" in title else "snapshot"
        cases.append(Case(F, f"{cmd}: {title}", acl_build(cmd), cluster=True, code=code, env=acl_env(value)))

    # Kafka client config files (the SASL cluster, or nowhere).
    J = 'org.apache.kafka.common.security.plain.PlainLoginModule required'
    configs: list[tuple[str, str, str, int | None, bool]] = [  # (title, file text, target, code, quick)
        ("jaas config, wrong password", f'security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={J} username="{SASL_USER}" password="{{S}}";\n', "sasl", 4, True),
        ("sasl.username/sasl.password, wrong password", f"security.protocol=SASL_PLAINTEXT\nsasl.username={SASL_USER}\nsasl.password={{S}}\n", "sasl", 4, False),
        ("JSON config, wrong password", json.dumps({"security_protocol": "SASL_PLAINTEXT", "sasl_plain_username": SASL_USER, "sasl_plain_password": "{S}"}), "sasl", 4, False),
        ("jaas config with an unterminated quote", f'security.protocol=SASL_PLAINTEXT\nsasl.jaas.config={J} username="{SASL_USER}" password="{{S}};\n', "dead", 2, False),
        ("the password alone on a line", "security.protocol=SASL_PLAINTEXT\nsasl.username=ops\nsasl.password=\n{S}\n", "dead", 2, True),
        ("an unknown property holding the password", "security.protocol=SASL_PLAINTEXT\nsasl.passwd={S}\n", "dead", 2, False),
        ("a Java truststore", "security.protocol=SSL\nssl.truststore.location=/etc/kafka/truststore.jks\nssl.key.password={S}\n", "dead", 2, False),
        ("a missing key file", "security.protocol=SSL\nssl.key.location=/nonexistent/key.pem\nssl.key.password={S}\n", "dead", 2, False),
        ("SSL to a PLAINTEXT listener", "security.protocol=SSL\nssl.key.password={S}\n", "plain", 4, False),
        ("sasl.mechanism=GSSAPI", f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.password={{S}}\nsasl.username={SASL_USER}\n", "sasl", None, True),
        ("sasl.mechanism=OAUTHBEARER", f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\nsasl.password={{S}}\nsasl.username={SASL_USER}\n", "sasl", None, False),
        ("JSON with an unknown key", '{"password": "{S}"}', "dead", 2, False),
        ("JSON api_version as a string", json.dumps({"api_version": "latest", "security_protocol": "SASL_PLAINTEXT", "sasl_plain_username": SASL_USER, "sasl_plain_password": "{S}"}), "sasl", None, True),
        ("JSON password as a list", json.dumps({"security_protocol": "SASL_PLAINTEXT", "sasl_plain_username": SASL_USER, "sasl_plain_password": ["{S}"]}), "sasl", None, True),
        ("request.timeout.ms=abc", "request.timeout.ms=abc\nsasl.password={S}\nsecurity.protocol=SASL_PLAINTEXT\nsasl.username=ops\n", "dead", 2, False),
        ("JSON nested 200k deep", '{"sasl_plain_password": "{S}", "x": ' + "[" * 200_000 + "]" * 200_000 + "}", "dead", 2, True),
        ("JSON with a 5000-digit number", '{"sasl_plain_password": "{S}", "request_timeout_ms": ' + "9" * 5000 + "}", "dead", 2, True),
        ("not UTF-8", b"sasl.password={S}\nsecurity.protocol=\xff\xfe\xfa\n", "dead", 2, True),
    ]
    cmds = ["snapshot", "execute", "verify", "rollback", "throttle", "unlock"]
    for i, (title, text, target, code, quick) in enumerate(configs):
        cmd = cmds[i % len(cmds)] if i % 3 else "snapshot"

        def build(ctx: Ctx, ws: Path, s: str, text: str | bytes = text, target: str = target, cmd: str = cmd) -> list[str]:
            body = text.replace(b"{S}", s.encode()) if isinstance(text, bytes) else text.replace("{S}", s)
            cfg = write(ws / "client.cfg", body)
            host = {"sasl": ctx.c.sasl_one, "plain": ctx.c.kafka_one, "dead": f"127.0.0.1:{ctx.fp}"}[target]
            run = copy_run(ctx.base_add, ws) if cmd != "snapshot" else ws / "run"
            return [*run_dir_command(cmd, run, f"kafka://{host}", timeout="3"), "--kafka-config", str(cfg)]
        cases.append(Case(F, f"{cmd}: client config: {title}", build, cluster=target != "dead", code=code, quick=quick,
                          allow={8: ("run/verification.json",)}))

    # The config file itself missing, a directory, or named by the environment.
    def cfg_path_case(title: str, path_fn: Callable[[Path], str], via_env: bool) -> Case:
        def build(ctx: Ctx, ws: Path, s: str) -> list[str]:
            args = ["snapshot", "--source", f"kafka://ops:{s}@127.0.0.1:{ctx.fp}", "--out", str(ws / "run"), "--timeout", "2"]
            return args if via_env else [*args, "--kafka-config", path_fn(ws)]
        env = (lambda ctx, ws, s: {"REBALANCER_KAFKA_CONFIG": path_fn(ws)}) if via_env else None
        return Case(F, f"snapshot: {title}", build, code=2, env=env)

    cases.append(cfg_path_case("--kafka-config missing", lambda ws: str(ws / "nope.properties"), False))
    cases.append(cfg_path_case("REBALANCER_KAFKA_CONFIG missing", lambda ws: str(ws / "nope.properties"), True))
    return cases


# -- family 2 ---------------------------------------------------------------------------------------------------------
def _brokers(n: int = 3) -> list[dict[str, Any]]:
    return [{"id": i, "rack": "abc"[i % 3]} for i in range(n)]


def _part(**kw: Any) -> dict[str, Any]:
    return {"topic": "t", "partition": 0, "replicas": [0, 1], "leader": 0, "isr": [0, 1], "size_bytes": 10, **kw}


def _doc(*parts: dict[str, Any], brokers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"brokers": _brokers() if brokers is None else brokers, "partitions": list(parts) or [_part()]}


def cluster_file_cases() -> list[Case]:
    """Family 2: bad cluster description files (and --sizes files) for snapshot --source file://."""
    F = "cluster-files"
    deep = "[" * 200_000 + "]" * 200_000
    big = "9" * 5000
    raw: list[tuple[str, str | bytes, int | None, bool]] = [  # (title, file content, code, quick)
        ("truncated JSON", '{"brokers": [{"id": 0}], "partitions": [', 2, True),
        ("UTF-16 file", json.dumps(_doc()).encode("utf-16"), "ok?", False),
        ("invalid UTF-8", b'{"brokers": [{"id": 0, "rack": "\xff\xfe"}], "partitions": []}', 2, True),
        ("binary garbage", bytes(range(256)) * 64, 2, True),
        ("200k-deep arrays", deep, 2, True),
        ("5000-deep nesting (parseable)", '{"brokers": [{"id": 0}], "partitions": ' + "[" * 5000 + "]" * 5000 + "}", None, False),
        ("5000-digit partition number", '{"brokers": [{"id": 0}, {"id": 1}], "partitions": [{"topic": "t", "partition": ' + big + ', "replicas": [0, 1]}]}', 2, True),
        ("NaN literal size", '{"brokers": [{"id": 0}, {"id": 1}], "partitions": [{"topic": "t", "partition": 0, "replicas": [0, 1], "size_bytes": NaN}]}', None, False),
        ("1e400 capacity", '{"brokers": [{"id": 0, "disk_capacity_bytes": 1e400}, {"id": 1}], "partitions": [{"topic": "t", "partition": 0, "replicas": [0, 1]}]}', None, True),
    ]
    docs: list[tuple[str, Any, int | None, bool]] = [
        ("partition 2**31", _doc(_part(partition=2**31)), 3, True),
        ("broker id 2**31", _doc(_part(replicas=[0, 2**31], isr=[0]), brokers=[*_brokers(), {"id": 2**31}]), 3, True),
        ("broker id \"0\"", _doc(brokers=[{"id": "0"}, {"id": 1}]), 3, False),
        ("replica 3000000000", _doc(_part(replicas=[0, 3000000000], isr=[0])), 3, False),
        ("size 2**63", _doc(_part(size_bytes=2**63)), 3, True),
        ("size 1e30", _doc(_part(size_bytes=1e30)), 3, False),
        ("size null (optional)", _doc(_part(size_bytes=None)), "ok?", False),
        ("rack with a newline and markup", _doc(brokers=[{"id": 0, "rack": "a\n<script>"}, {"id": 1}, {"id": 2}]), "ok?", False),
        ("duplicate brokers", _doc(brokers=[{"id": 0}, {"id": 0}, {"id": 1}]), 3, True),
        ("duplicate partitions", _doc(_part(), _part()), 3, True),
        ("replica on an unknown broker", _doc(_part(replicas=[0, 9], isr=[0])), 3, False),
        ("duplicate replicas", _doc(_part(replicas=[0, 0], isr=[0])), 3, True),
        ("leader not a replica", _doc(_part(leader=2)), 3, False),
        ("leader not in the ISR", _doc(_part(isr=[1])), 3, True),
        ("leader -1 (Kafka's no leader)", _doc(_part(leader=-1, isr=[])), "ok?", False),
        ("topic with '/'", _doc(_part(topic="orders/eu")), 3, True),
        ("unicode topic", _doc(_part(topic="caf\u00e9")), 3, False),
        ("topic of 250 characters", _doc(_part(topic="x" * 250)), 3, False),
        ("topic '..'", _doc(_part(topic="..")), 3, False),
        ("topic with a NUL", _doc(_part(topic="a\u0000b")), 3, False),
        ("topic of 249 characters (Kafka's limit)", _doc(_part(topic="y" * 249)), "ok", False),
        ("no brokers", {"brokers": [], "partitions": []}, 3, False),
        ("no partitions (a new cluster)", {"brokers": _brokers(), "partitions": []}, "ok?", True),
        ("top level a list", [_part()], 2, False),
        ("Kafka format, replicas beyond int32", {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2**31]}]}, 3, False),
        ("100k brokers, no partitions", {"brokers": [{"id": i} for i in range(100_000)], "partitions": []}, "ok?", False),
    ]
    cases: list[Case] = []

    def make(title: str, content: Callable[[Path], Path] | None, code: Any, quick: bool, existing: bool,
             sizes: Callable[[Path], str] | None = None, source: Callable[[Ctx, Path], str] | None = None,
             cluster: bool = False) -> None:
        def build(ctx: Ctx, ws: Path, s: str) -> list[str]:
            out = copy_run(ctx.base_file, ws, "run") if existing else ws / "run"
            src = source(ctx, ws) if source else f"file://{content(ws)}"
            args = ["snapshot", "--source", src, "--out", str(out), "--quiet", "--timeout", "5"]
            if sizes:
                args += ["--sizes", sizes(ws)]
            return args
        ok = code in ("ok", "ok?")  # "ok": must succeed; "ok?": an input Kafka or the docs allow, may succeed
        cases.append(Case(F, f"snapshot: {title}" + (" (into an existing run)" if existing else ""), build,
                          ok=ok, must_ok=code == "ok", code=None if ok else code, quick=quick, cluster=cluster))

    i = 0
    for title, text, code, quick in raw:
        make(title, lambda ws, text=text: write(ws / "cluster.json", text), code, quick, existing=i % 2 == 1)
        i += 1
    for title, doc, code, quick in docs:
        make(title, lambda ws, doc=doc: wjson(ws / "cluster.json", doc), code, quick, existing=i % 2 == 1)
        i += 1
    make("a directory instead of a file", lambda ws: ws, 2, True, existing=False)
    make("a missing file", lambda ws: ws / "missing.json", 2, False, existing=True)
    make("a symlink loop", lambda ws: (os.symlink(ws / "loop", ws / "loop"), ws / "loop")[1], 2, False, existing=False)
    make("file:// with no path", None, 2, False, existing=False, source=lambda ctx, ws: "file://")
    make("/dev/null", None, 2, False, existing=True, source=lambda ctx, ws: "file:///dev/null")
    make("a relative path", None, 2, False, existing=False, source=lambda ctx, ws: "file://no-such-relative.json")

    # --sizes: kafka-log-dirs --describe JSON
    good = lambda ws: write(ws / "cluster.json", json.dumps(_doc(_part(), _part(partition=1))))  # noqa: E731

    def logdirs(parts: list[dict[str, Any]], broker: Any = 0) -> dict[str, Any]:
        return {"version": 1, "brokers": [{"broker": broker, "logDirs": [{"logDir": "/d", "error": None, "partitions": parts}]}]}

    sizes_docs: list[tuple[str, str | bytes | Any, int | None, bool]] = [
        ("--sizes malformed JSON", "{", 2, True),
        ("--sizes size -1", logdirs([{"partition": "t-0", "size": -1, "offsetLag": 0, "isFuture": False}]), 2, True),
        ("--sizes size 2**63", logdirs([{"partition": "t-0", "size": 2**63, "offsetLag": 0, "isFuture": False}]), 3, False),
        ("--sizes partition number beyond int32", logdirs([{"partition": "t-2147483648", "size": 1, "offsetLag": 0, "isFuture": False}]), "ok?", False),
        ("--sizes broker 2**31", logdirs([{"partition": "t-0", "size": 1, "offsetLag": 0, "isFuture": False}], broker=2**31), "ok?", False),
    ]
    for title, doc, code, quick in sizes_docs:
        def sizes(ws: Path, doc: Any = doc) -> str:
            p = write(ws / "log-dirs.json", doc) if isinstance(doc, (str, bytes)) else wjson(ws / "log-dirs.json", doc)
            return f"file://{p}"
        make(title, good, code, quick, existing=i % 2 == 1, sizes=sizes)
        i += 1
    make("--sizes not file://", good, 2, False, existing=False, sizes=lambda ws: "http://example.invalid/sizes.json")
    make("--sizes missing", good, 2, False, existing=True, sizes=lambda ws: f"file://{ws / 'none.json'}")
    make("--sizes a directory", good, 2, False, existing=False, sizes=lambda ws: f"file://{ws}")
    # --sizes with the simulator as the source (reads the real cluster; nothing may change)
    make("--sizes malformed with zk://", None, 2, False, existing=False, cluster=True,
         source=lambda ctx, ws: ctx.c.zk_url(), sizes=lambda ws: f"file://{write(ws / 'log-dirs.json', '{')}")
    return cases


# -- family 3 ---------------------------------------------------------------------------------------------------------
BAD_NUMBERS = ["inf", "nan", "-1", "0", "1e400", "9" * 40, "abc", ""]


def option_cases() -> list[Case]:
    """Family 3: bad options for plan/execute/rollback/validate/sim/unlock, throttles, output paths, broker lists."""
    F = "options"
    cases: list[Case] = []

    def plan_case(title: str, extra: Callable[[Ctx, Path], list[str]], code: int | None = 2, ok: bool = False,
                  quick: bool = False) -> None:
        def build(ctx: Ctx, ws: Path, s: str) -> list[str]:
            return ["plan", str(copy_run(ctx.base_file, ws)), *extra(ctx, ws)]
        cases.append(Case(F, f"plan: {title}", build, code=code, ok=ok, quick=quick, timeout=240))

    for v in ("0", "1e400", "abc"):
        plan_case(f"--max-changes-per-partition {v!r}", lambda c, w, v=v: ["--mode", "rebalance", "--max-changes-per-partition", v], quick=v == "0")
    for v in ("inf", "0"):
        plan_case(f"--time-limit {v!r}", lambda c, w, v=v: ["--mode", "rebalance", "--time-limit", v], quick=v == "inf")
    plan_case("--mode bogus", lambda c, w: ["--mode", "bogus"])
    # issue 42: numbers the arithmetic downstream cannot hold, a Spark master Spark refuses
    for title, disk in (("1e308", "1e308"), ("a 401-digit integer", "9" * 401)):
        plan_case(f"--capacity with a disk capacity of {title}", lambda c, w, disk=disk: [
            "--mode", "rebalance", "--balance", "load", "--capacity", str(write(
                w / "capacity.json", '{"brokerCapacities": [{"brokerId": -1, "capacity": {"DISK": ' + disk + '}}]}'))],
                  quick=disk == "1e308")
    plan_case("--fanout '*=1e300'", lambda c, w: ["--mode", "rebalance", "--balance", "load", "--fanout", "*=1e300"],
              quick=True)
    plan_case("--groups 2 --master 'local[0]'", lambda c, w: ["--mode", "rebalance", "--balance", "load", "--groups",
                                                             "2", "--master", "local[0]"], quick=True)
    plan_case("--mode leaders --strategy lp", lambda c, w: ["--mode", "leaders", "--strategy", "lp"])
    brokers: list[tuple[str, int | None, bool]] = [
        ("", 2, False), ("12,12", 2, True), ("2147483648", 2, True),
        ("12,13,99", 2, True), ("12;13", 2, False), ("9" * 5000, 2, False), ("12,,13", None, False),
        ("\uff11\uff12", None, False),
    ]
    for value, code, quick in brokers:
        lenient = code is None  # Python's int() accepts it (empty items skipped, full-width digits): may plan
        plan_case(f"--mode add-brokers --brokers {value[:20]!r}", lambda c, w, v=value: ["--mode", "add-brokers", "--brokers", v],
                  code=code, ok=lenient, quick=quick)
    plan_case("--mode remove-brokers of every broker", lambda c, w: ["--mode", "remove-brokers", "--brokers", ",".join(map(str, range(16)))])
    plan_case("--mode remove-brokers of an unknown broker", lambda c, w: ["--mode", "remove-brokers", "--brokers", "77"])
    plan_case("--write-lp into a missing directory", lambda c, w: ["--mode", "rebalance", "--strategy", "lp", "--write-lp", str(w / "missing" / "p.lp")], quick=True)
    plan_case("--write-lp is a directory", lambda c, w: ["--mode", "rebalance", "--strategy", "lp", "--write-lp", str(w)])
    plan_case("--write-lp under a file", lambda c, w: ["--mode", "rebalance", "--strategy", "lp", "--write-lp", str(write(w / "afile", "x") / "p.lp")])
    plan_case("--write-lp /dev/full", lambda c, w: ["--mode", "rebalance", "--strategy", "lp", "--write-lp", "/dev/full"], code=None)

    # execute / rollback options, against a port that refuses (so an accepted value fails at connecting, exit 4)
    def exec_case(cmd: str, title: str, extra: list[str], code: int | None = 2, quick: bool = False,
                  throttle: bool = True) -> None:
        def build(ctx: Ctx, ws: Path, s: str) -> list[str]:
            run = copy_run(ctx.base_add, ws)
            base = [cmd, str(run), "--source", ctx.dead_zk(s)]
            return [*base, *(["--throttle", "50MB/s"] if throttle else []), *extra]
        cases.append(Case(F, f"{cmd}: {title}", build, code=code, quick=quick))

    numeric = ["--max-moves", "--max-moves-per-broker", "--poll", "--timeout-factor", "--min-timeout",
               "--throttle-settle", "--destination-grace", "--timeout"]
    k = 0
    for opt in numeric:
        for _ in range(1):
            v = BAD_NUMBERS[k % len(BAD_NUMBERS)]
            k += 1
            # 0 s is a valid value there
            accepted = opt in ("--min-timeout", "--throttle-settle", "--destination-grace") and v == "0"
            exec_case("execute", f"{opt} {v!r}", [opt, v, "--timeout", "2"] if opt != "--timeout" else [opt, v],
                      code=4 if accepted else 2, quick=opt == "--poll")
        v = BAD_NUMBERS[(k + 3) % len(BAD_NUMBERS)]
        if opt not in ("--max-moves", "--min-timeout"):
            continue
        exec_case("rollback", f"{opt} {v!r}", [opt, v, "--timeout", "2"] if opt != "--timeout" else [opt, v],
                  code=4 if opt in ("--min-timeout", "--throttle-settle") and v == "0" else 2)
    for v in ("-5GB", "0", "100000000000000000000000000GB"):
        exec_case("execute", f"--max-batch-bytes {v!r}", ["--max-batch-bytes", v, "--timeout", "2"], quick=v == "0")
    exec_case("execute", "--order random", ["--order", "random", "--timeout", "2"])
    throttles = [("0", True), ("-5MB/s", True), ("1e26GB/s", False), ("100000000000000000000000000GB/s", True),
                 ("fast", False), ("10 parsecs", True), ("\u0665\u0660MB/s", False),
                 ("9" * 5000, False)]
    for value, quick in throttles:
        exec_case("execute", f"--throttle {value[:30]!r}", ["--throttle", value, "--timeout", "2"], throttle=False, quick=quick)
    for value in ("0", "10 parsecs"):
        exec_case("rollback", f"--throttle {value!r}", ["--throttle", value, "--timeout", "2"], throttle=False)
    exec_case("execute", "--throttle at Kafka's largest rate (valid)", ["--throttle", "9223372036854775807", "--timeout", "2"], code=4, throttle=False)

    # validate thresholds (refused by the parser: the gates never run)
    for opt, v in (("--max-changes-per-partition", "0"), ("--max-deviation", "nan"), ("--max-leader-deviation", "1e400")):
        def build(ctx: Ctx, ws: Path, s: str, opt: str = opt, v: str = v) -> list[str]:
            return ["validate", str(copy_run(ctx.base_add, ws)), opt, v]
        cases.append(Case(F, f"validate: {opt} {v!r}", build, code=2, quick=v == "nan"))

    # sim (nothing is started: every value is refused, or the command fails)
    def sim_case(title: str, args: Callable[[Ctx, Path], list[str]], code: int | None = 2, quick: bool = False,
                 limit: tuple[str, int] | None = None, timeout: float = 60.0,
                 allow: dict[int, tuple[str, ...]] | None = None) -> None:
        cases.append(Case(F, f"sim: {title}", lambda ctx, ws, s: args(ctx, ws), code=code, quick=quick, limit=limit,
                          timeout=timeout, allow=allow or {}))

    for v in ("nan", "0"):
        sim_case(f"up --acceleration {v!r}", lambda c, w, v=v: ["sim", "up", "--dir", str(w / "sim"), "--scenario", "new-brokers", "--acceleration", v], quick=v == "0")
    # The log of the failed start stays in the --dir the operator named, to say why (sim.json, the state, does not).
    sim_case("up --zookeeper that refuses", lambda c, w: ["sim", "up", "--dir", str(w / "sim"), "--scenario", "new-brokers", "--zookeeper", f"127.0.0.1:{c.fp}"], code=4,
             allow={4: ("sim/", "sim/sim.log")})
    for i, opt in enumerate(("--partitions", "--racks", "--rf")):
        v = ("0", "-1", "abc", "1e400", "9" * 40)[i % 5]
        sim_case(f"scenario {opt} {v!r}", lambda c, w, opt=opt, v=v: ["sim", "scenario", "--scenario", "new-brokers", opt, v, "--out", str(w / "s.json")], quick=opt == "--rf")
    sim_case("scenario --rf 100 (more than the brokers)", lambda c, w: ["sim", "scenario", "--scenario", "new-brokers", "--rf", "100", "--out", str(w / "s.json")], code=None)
    sim_case("scenario --partitions 2147483647 (3 GB address space)", lambda c, w: ["sim", "scenario", "--scenario", "new-brokers", "--partitions", "2147483647", "--out", str(w / "s.json")],
             code=None, limit=("as", 3_000_000_000))
    sim_case("scenario --brokers 2147483647 (3 GB address space)", lambda c, w: ["sim", "scenario", "--scenario", "new-brokers", "--brokers", "2147483647", "--out", str(w / "s.json")],
             code=None, limit=("as", 3_000_000_000))
    sim_case("scenario --scenario file: of a malformed file", lambda c, w: ["sim", "scenario", "--scenario", f"file:{write(w / 'bad.json', '{')}", "--out", str(w / "s.json")])
    for v in ("2147483648",):
        sim_case(f"kill-broker {v!r}", lambda c, w, v=v: ["sim", "kill-broker", v, "--zk", f"zk://127.0.0.1:{c.fp}"])
    sim_case("status with a corrupt sim.json", lambda c, w: ["sim", "status", "--dir", str(write(w / "sim" / "sim.json", "{").parent)])

    # snapshot --out
    def snap_out(title: str, out: Callable[[Path], str], quick: bool = False) -> None:
        def build(ctx: Ctx, ws: Path, s: str) -> list[str]:
            return ["snapshot", "--source", f"file://{ctx.cluster_file}", "--out", out(ws), "--quiet"]
        cases.append(Case(F, f"snapshot: --out {title}", build, code=2, quick=quick))

    snap_out("under a file", lambda w: str(write(w / "afile", "x") / "run"), quick=True)
    snap_out("is a file", lambda w: str(write(w / "afile", "x")))
    snap_out("a 2100-deep path", lambda w: str(w / "/".join(["d"] * 2100)))

    # unlock with hostile lock ids, against the real cluster (nothing may be released)
    for lid, quick in (("../../brokers/ids", True), ("x" * 10_000, False)):
        def build(ctx: Ctx, ws: Path, s: str, lid: str = lid) -> list[str]:
            return ["unlock", lid, "--source", ctx.c.zk_url(s), "--timeout", "5"]
        cases.append(Case(F, f"unlock: lock id {lid[:24]!r}", build, cluster=True, code=None, quick=quick))

    def throttle_no_clear(ctx: Ctx, ws: Path, s: str) -> list[str]:
        return ["throttle", str(copy_run(ctx.base_add, ws)), "--source", ctx.c.zk_url(s)]
    cases.append(Case(F, "throttle: without --clear", throttle_no_clear, cluster=True, code=2))
    cases.append(Case(F, "an unknown command", lambda c, w, s: ["rebalance-everything"], code=2))
    return cases


# -- family 4 ---------------------------------------------------------------------------------------------------------
def _first_change(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["changes"][0]


def _other_brokers(change: dict[str, Any], n: int) -> list[int]:
    used = set(change["replicas_before"]) | set(change["replicas_after"])
    return [b for b in range(16) if b not in used][:n]


def _pile_on_one_broker(run: Path, share: float = 0.15) -> None:
    """Issue 42's row 5: a load plan edited by hand so that one new broker ends ``share`` of its disk target above it
    and another below, by swapping which of the two receives a big and a small partition (replica and leader counts,
    racks and leaders kept: only the disk gate can see it); the content hash, reassignment.json and
    ``params.balance`` ("counts": outside the hash) rewritten as someone with write access would."""
    doc = json.loads((run / "plan.json").read_text())
    snap = json.loads((run / "snapshot.json").read_text())
    rack = {b["id"]: b.get("rack") for b in snap["brokers"]}
    target = sum(p["size_bytes"] * len(p["replicas"]) for p in snap["partitions"]) / len(snap["brokers"])
    a, b = sorted(doc["params"]["brokers"])[:2]

    def movable(c: dict[str, Any], src: int, dst: int, leads: bool) -> bool:
        after = c["replicas_after"]
        return (list(c["added"]) == [src] and dst not in after and (after.index(src) == 0) == leads
                and rack[dst] not in {rack[r] for r in after if r != src})

    gained = 0
    # a leader swapped for a leader of the same topic: leader counts, per broker and per topic, kept too
    groups = [(False, None)] + [(True, t) for t in sorted({c["topic"] for c in doc["changes"]})]
    for leads, topic in groups:
        same = [c for c in doc["changes"] if topic is None or c["topic"] == topic]
        big = sorted((c for c in same if movable(c, a, b, leads)), key=lambda c: -c["size_bytes"])
        small = sorted((c for c in same if movable(c, b, a, leads)), key=lambda c: c["size_bytes"])
        for x, y in zip(big, small, strict=False):
            if gained >= share * target or x["size_bytes"] <= y["size_bytes"]:
                break
            for c, src, dst in ((x, a, b), (y, b, a)):
                c["replicas_after"] = [dst if r == src else r for r in c["replicas_after"]]
                c["added"] = [dst]
            gained += x["size_bytes"] - y["size_bytes"]
    assert gained >= share * target, f"the plan has too few moves to pile {share:.0%} of a target on broker {b}: {gained / target:.1%}"
    doc["params"]["balance"] = "counts"
    doc["content_hash"] = plan_hash_of(doc)
    (run / "plan.json").write_text(json.dumps(doc))
    after = {(c["topic"], c["partition"]): c["replicas_after"] for c in doc["changes"]}
    _edit_json(run / "reassignment.json", lambda d: [p.__setitem__("replicas", after[(p["topic"], p["partition"])])
                                                     for p in d["partitions"]] and None)


def run_edit_cases() -> list[Case]:
    """Family 4: hand-edited run files (plan.json, approval.json, execution/state.json, execution/throttles.json),
    then execute / rollback / throttle --clear / validate / report / approve."""
    F = "run-edits"
    cases: list[Case] = []
    rb = lambda d: _first_change(d).__setitem__("replicas_after", _other_brokers(_first_change(d), len(_first_change(d)["replicas_after"])))  # noqa: E731
    rbefore = lambda d: _first_change(d).__setitem__("replicas_before", _other_brokers(_first_change(d), len(_first_change(d)["replicas_before"])))  # noqa: E731

    def append_partition(d: dict[str, Any]) -> None:
        d["changes"].append({**_first_change(d), "topic": "orders.v7", "partition": 5, "replicas_before": [0, 1, 2],
                             "replicas_after": [3, 4, 5]})

    def set_first(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
        return lambda d: _first_change(d).__setitem__(key, value)

    def set_top(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
        return lambda d: d.__setitem__(key, value)

    def set_summary(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
        return lambda d: d["summary"].__setitem__(key, value)

    # (title, edit, rehash, reapprove, commands, quick)
    plan_edits: list[tuple[str, Callable[[dict[str, Any]], Any], bool, bool, list[str], bool]] = [
        ("replicas_after changed", rb, False, False, ["execute", "approve", "report"], True),
        ("replicas_after changed, hash recomputed", rb, True, False, ["execute", "rollback"], True),
        ("a partition appended", append_partition, False, False, ["execute", "rollback", "validate"], True),
        ("a change removed, hash recomputed", lambda d: d["changes"].pop(), True, False, ["execute", "rollback"], False),
        ("every change removed, hash recomputed", lambda d: d.__setitem__("changes", []), True, False, ["execute", "rollback"], False),
        ("content_hash random", set_top("content_hash", "ab" * 32), False, False, ["execute", "throttle"], False),
        ("content_hash a number", set_top("content_hash", 12345), False, False, ["execute", "approve"], False),
        ("partition 2**31, hash recomputed, re-approved", set_first("partition", 2**31), True, True, ["execute", "rollback"], True),
        ("replicas_after empty, hash recomputed, re-approved", set_first("replicas_after", []), True, True, ["execute", "rollback"], True),
        ("replicas_after with a duplicate broker, hash recomputed, re-approved", lambda d: _first_change(d).__setitem__("replicas_after", [_first_change(d)["replicas_after"][0]] * len(_first_change(d)["replicas_after"])), True, True, ["execute", "rollback"], True),
        ("replicas_after on unknown broker 99, hash recomputed, re-approved", lambda d: _first_change(d).__setitem__("replicas_after", [99, *_first_change(d)["replicas_after"][1:]]), True, True, ["execute", "throttle"], True),
        ("replicas_after on broker 2**31, hash recomputed, re-approved", lambda d: _first_change(d).__setitem__("replicas_after", [2**31, *_first_change(d)["replicas_after"][1:]]), True, True, ["execute", "rollback"], False),
        ("replicas_before not the cluster's, hash recomputed, re-approved", rbefore, True, True, ["execute", "rollback"], False),
        ("topic of markup", set_first("topic", "<script>alert(1)</script>"), False, False, ["report", "approve"], False),
        ("topic unknown to the cluster, hash recomputed, re-approved", set_first("topic", "no-such-topic"), True, True, ["execute", "rollback"], False),
        ("size_bytes 1e30", set_first("size_bytes", 1e30), False, False, ["execute", "report"], False),
        ("changes an object", set_top("changes", {"0": {}}), False, False, ["execute", "rollback"], False),
        ("mode of markup", set_top("mode", "<b>rebalance</b>"), False, False, ["report"], False),
        ("summary replica_moves a string of markup", set_summary("replica_moves", "<script>alert(1)</script>"), False, False, ["report", "approve"], True),
        ("summary brokers a string", set_summary("brokers", "all of them"), False, False, ["report", "approve"], False),
        ("summary null", set_top("summary", None), False, False, ["report", "rollback"], False),
    ]
    # Edits that leave the approved changes and their hash intact (the summary, the mode, leader_before) are not
    # refused by approve; the report, which is read before approval, does not check the hash: success is accepted
    # there for plans that are still well-formed (see the final report's notes on ambiguity).
    OK_AFTER_EDIT = {
        "replicas_after changed": {"report"}, "mode of markup": {"report"}, "topic of markup": {"report"},
        "size_bytes 1e30": {"report"},
        "summary replica_moves a string of markup": {"approve"}, "summary brokers a string": {"report", "approve"},
        "summary brokers with a string broker": {"report"}, "summary max_deviation_pct null": {"report"},
        "summary lower_bounds a string": {"report"}, "leader_before a string": {"approve", "report"},
        "summary a list": {"approve"}, "summary null": {"approve", "rollback"},
    }

    def cmd_args(cmd: str, run: Path, ctx: Ctx, s: str) -> list[str]:
        if cmd in ("execute", "rollback", "throttle"):
            return run_dir_command(cmd, run, ctx.c.zk_url(s))
        if cmd == "approve":
            return ["approve", str(run), "--by", "mallory"]
        return [cmd, str(run)]

    def allow_for(cmd: str) -> dict[int, tuple[str, ...]]:
        return {6: ("run/validation",)} if cmd == "validate" else {}

    def only(edit: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        """The plan reduced to its first change, then edited: whatever the executor does with it is attributable."""
        def fn(d: dict[str, Any]) -> Any:
            d["changes"] = d["changes"][:1]
            return edit(d)
        return fn

    for i, (title, fn, rehash, reapprove, cmds, quick) in enumerate(plan_edits):
        if reapprove:
            # Someone edited the plan *and* re-wrote its approval: the plan holds only the edited change. Skipping
            # it (as a drifted move, exit 0) or refusing it is fine; submitting it is a cluster change.
            fn, title = only(fn), title.replace("re-approved", "re-approved, the only change")
        for j, cmd in enumerate(cmds if quick else [cmds[i % len(cmds)]]):
            def build(ctx: Ctx, ws: Path, s: str, fn: Any = fn, rehash: bool = rehash, reapprove: bool = reapprove,
                      cmd: str = cmd) -> list[str]:
                run = copy_run(ctx.base_report, ws)
                edit_plan(run, fn, rehash=rehash, reapprove=reapprove)
                return cmd_args(cmd, run, ctx, s)
            ok = cmd in OK_AFTER_EDIT.get(title, set()) or (reapprove and cmd in PROGRESS_COMMANDS)
            allow = allow_for(cmd)
            if reapprove:  # a failed execution records its state, a failed rollback its verification (documented)
                allow = {7: ("run/execution",), 8: ("run/execution", "run/verification_rollback.json")}
            cases.append(Case(F, f"{cmd}: plan.json {title}", build, cluster=cmd in ("execute", "rollback", "throttle"),
                              ok=ok, code=None if ok else (2 if cmd != "validate" else None), quick=quick and j == 0,
                              allow=allow, timeout=600 if cmd == "validate" else 150))

    def piled(ctx: Ctx, ws: Path, s: str) -> list[str]:
        run = copy_run(ctx.base_report, ws)
        _pile_on_one_broker(run)
        return ["validate", str(run)]
    # The disk gate follows the snapshot's sizes, not params.balance (outside the hash): exit 6, disk-balance failed.
    cases.append(Case(F, "validate: plan.json with 15 % of a disk target piled on one new broker (counts kept), hash "
                      "and reassignment.json recomputed, params.balance counts", piled, code=6, quick=True,
                      allow=allow_for("validate"), timeout=600))

    raw_plans: list[tuple[str, Callable[[Path], None], list[str], bool]] = [
        ("truncated", lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), ["execute", "throttle", "report"], True),
        ("a 5000-digit partition", lambda p: p.write_text(re.sub(r'"partition": \d+', '"partition": ' + "9" * 5000, p.read_text(), count=1)), ["execute", "report"], False),
        ("a directory", lambda p: (p.unlink(), p.mkdir()), ["execute", "report"], True),
        ("missing", lambda p: p.unlink(), ["execute", "rollback"], False),
        ("a symlink to /dev/zero (endless)", lambda p: (p.unlink(), p.symlink_to("/dev/zero")), ["execute", "approve"], False),
        ("a dangling symlink", lambda p: (p.unlink(), p.symlink_to(p.parent / "gone.json")), ["execute", "execute"], False),
    ]
    for i, (title, fn, cmds, quick) in enumerate(raw_plans):
        for j, cmd in enumerate(cmds if quick else [cmds[i % len(cmds)]]):
            def build(ctx: Ctx, ws: Path, s: str, fn: Any = fn, cmd: str = cmd) -> list[str]:
                run = copy_run(ctx.base_report, ws)
                fn(run / "plan.json")
                return cmd_args(cmd, run, ctx, s)
            endless = "dev/zero" in title  # reading it never ends: bounded to 2 GB of address space and 60 s
            cases.append(Case(F, f"{cmd}: plan.json {title}", build, cluster=cmd in ("execute", "rollback", "throttle"),
                              code=2, quick=quick and j == 0, allow=allow_for(cmd),
                              timeout=600 if cmd == "validate" else 60 if endless else 150,
                              limit=("as", 2_000_000_000) if endless else None))
    # approval.json
    approvals: list[tuple[str, Callable[[Path], None], bool]] = [
        ("approves another hash", lambda p: _edit_json(p, lambda d: d.__setitem__("plan_hash", "0" * 64)), True),
        ("approves the hash's first 12 characters", lambda p: _edit_json(p, lambda d: d.__setitem__("plan_hash", d["plan_hash"][:12])), False),
        ("plan_hash a number", lambda p: _edit_json(p, lambda d: d.__setitem__("plan_hash", 5)), False),
        ("decision rejected", lambda p: _edit_json(p, lambda d: d.__setitem__("decision", "rejected")), True),
        ("decision APPROVED", lambda p: _edit_json(p, lambda d: d.__setitem__("decision", "APPROVED")), False),
        ("decision 'approved ' (trailing space)", lambda p: _edit_json(p, lambda d: d.__setitem__("decision", "approved ")), False),
        ("a JSON list", lambda p: p.write_text("[]"), True),
        ("missing", lambda p: p.unlink(), True),
        ("a directory", lambda p: (p.unlink(), p.mkdir()), True),
        ("malformed JSON", lambda p: p.write_text('{"plan_hash": '), False),
        ("a symlink to /dev/zero (endless)", lambda p: (p.unlink(), p.symlink_to("/dev/zero")), False),
    ]
    for i, (title, fn, quick) in enumerate(approvals):
        cmds = {"approves another hash": ["execute", "throttle"], "decision rejected": ["execute", "rollback"]}.get(
            title, [["execute", "rollback", "throttle"][i % 3]])
        for j, cmd in enumerate(cmds):
            def build(ctx: Ctx, ws: Path, s: str, fn: Any = fn, cmd: str = cmd) -> list[str]:
                run = copy_run(ctx.base_add, ws)
                fn(run / "approval.json")
                return cmd_args(cmd, run, ctx, s)
            endless = "dev/zero" in title
            cases.append(Case(F, f"{cmd}: approval.json {title}", build, cluster=True, code=2, quick=quick and j == 0,
                              timeout=60, limit=("as", 2_000_000_000) if endless else None))
    for title, where, quick in (("--approval of another run's plan", lambda c, w: str(c.base_reb / "approval.json"), True),
                                ("--approval missing", lambda c, w: str(w / "none.json"), False)):
        for cmd in ("execute", "throttle") if quick else ("execute",):
            def build(ctx: Ctx, ws: Path, s: str, where: Any = where, cmd: str = cmd) -> list[str]:
                run = copy_run(ctx.base_add, ws)
                return [*cmd_args(cmd, run, ctx, s), "--approval", where(ctx, ws)]
            cases.append(Case(F, f"{cmd}: {title}", build, cluster=True, code=2, quick=quick and cmd == "execute"))

    # execution/state.json (a killed execution's, every batch pending)
    def smuggle(d: dict[str, Any], other: bool = False) -> None:
        step = d["batches"][0]["steps"][0]
        if other:  # an existing step re-pointed at another broker
            step["to"] = [b if b not in step["to"][:1] else 11 if 11 not in step["to"] else 10 for b in step["to"]]
        else:  # a step for a partition the plan does not change
            d["batches"][0]["steps"].append({**step, "topic": "orders.v7", "partition": 5, "from": [0, 1, 2], "to": [15, 1, 2]})

    states: list[tuple[str, Callable[[Path], None], list[str], bool, bool]] = [  # title, edit, commands, ok, quick
        ("a step added towards another broker", lambda p: _edit_json(p, smuggle), ["execute", "rollback", "throttle"], False, True),
        ("a step re-pointed at another broker", lambda p: _edit_json(p, lambda d: smuggle(d, True)), ["execute"], False, False),
        ("truncated", lambda p: p.write_bytes(p.read_bytes()[:100]), ["execute", "throttle"], False, True),
        ("a directory", lambda p: (p.unlink(), p.mkdir()), ["execute"], False, False),
        ("forged 'finished' (a no-op rerun)", lambda p: _edit_json(p, lambda d: d.__setitem__("finished", True)), ["execute"], True, False),
    ]
    for title, fn, cmds, ok, quick in states:
        for j, cmd in enumerate(cmds):
            def build(ctx: Ctx, ws: Path, s: str, fn: Any = fn, cmd: str = cmd) -> list[str]:
                run = copy_run(ctx.base_state, ws)
                fn(run / "execution" / "state.json")
                return cmd_args(cmd, run, ctx, s)
            # rollback and throttle --clear on a cluster this run never changed: nothing to do is a fine answer
            may = ok or cmd in ("rollback", "throttle")
            cases.append(Case(F, f"{cmd}: execution/state.json {title}", build, cluster=True, ok=may,
                              code=None if may else 2, quick=quick and j == 0,
                              allow={0: ("run/execution", "run/verification_rollback.json")}))

    def execution_file(ctx: Ctx, ws: Path, s: str) -> list[str]:
        run = copy_run(ctx.base_add, ws)
        write(run / "execution", "not a directory")
        return cmd_args("execute", run, ctx, s)
    cases.append(Case(F, "execute: execution/ is a file", execution_file, cluster=True, code=2))

    ledgers: list[tuple[str, str | bytes, bool]] = [
        ("not JSON", "{", True), ("a JSON list", "[]", False), ("binary", bytes(range(256)), False),
        ("brokers a string", '{"brokers": "3", "topics": {}}', True), ("a broker entry a string", '{"brokers": {"3": "x"}, "topics": {}}', False),
        ("a topic entry not a list", '{"brokers": {}, "topics": {"orders.v0": {"follower.replication.throttled.replicas": "0:3"}}}', False),
        ("200k deep", "[" * 200_000 + "]" * 200_000, False),
    ]
    for i, (title, text, quick) in enumerate(ledgers):
        for j, cmd in enumerate(("throttle", "execute", "rollback")[: 3 if i == 0 else 2] if quick else (("throttle", "execute", "rollback")[i % 3],)):
            def build(ctx: Ctx, ws: Path, s: str, text: Any = text, cmd: str = cmd) -> list[str]:
                run = copy_run(ctx.base_add, ws)
                write(run / "execution" / "throttles.json", text)
                return cmd_args(cmd, run, ctx, s)
            lenient = cmd != "execute" and isinstance(text, str) and text.startswith("{") and text != "{"  # an odd ledger's no-op is harmless
            cases.append(Case(F, f"{cmd}: execution/throttles.json {title}", build, cluster=True, code=None if lenient else 2,
                              ok=lenient, quick=quick and j == 0))

    # control cases: the bases themselves work (or the probe's setup is broken)
    cases.append(Case(F, "report: unedited run (control)", lambda c, w, s: ["report", str(copy_run(c.base_report, w))],
                      must_ok=True, quick=True))
    cases.append(Case(F, "approve: unedited run (control)", lambda c, w, s: ["approve", str(copy_run(c.base_add, w)), "--by", "probe"],
                      must_ok=True))
    cases.append(Case(F, "throttle --clear: nothing to clear (idempotent no-op)",
                      lambda c, w, s: cmd_args("throttle", copy_run(c.base_add, w), c, s), cluster=True, must_ok=True, quick=True))
    cases.append(Case(F, "rollback: nothing executed (idempotent no-op)",
                      lambda c, w, s: cmd_args("rollback", copy_run(c.base_add, w), c, s), cluster=True, must_ok=True))
    # approve with hostile arguments
    for title, args in (("--by of 100k characters", ["--by", "m" * 100_000]), ("--by with a newline", ["--by", "mallory\nroot"])):
        cases.append(Case(F, f"approve: {title}", lambda c, w, s, args=args: ["approve", str(copy_run(c.base_add, w)), *args], ok=True))
    return cases


def _edit_json(path: Path, fn: Callable[[Any], Any]) -> None:
    doc = json.loads(path.read_text())
    new = fn(doc)
    path.write_text(json.dumps(doc if new is None else new))


# -- family 5 ---------------------------------------------------------------------------------------------------------
def environment_cases() -> list[Case]:
    """Family 5: read-only run directory, full disk, missing snapshot, two concurrent executions."""
    F = "environment"
    cases: list[Case] = []

    def ro_case(title: str, base: str, args: Callable[[Ctx, Path, Path, str], list[str]], cluster: bool = False,
                quick: bool = False, target: str = "run") -> None:
        @contextlib.contextmanager
        def around(ctx: Ctx, ws: Path) -> Iterator[None]:
            with read_only(ws / target):
                yield

        def build(ctx: Ctx, ws: Path, s: str) -> list[str]:
            run = copy_run(getattr(ctx, base), ws)
            return args(ctx, ws, run, s)
        cases.append(Case(F, f"read-only run directory: {title}", build, around=around, cluster=cluster, code=2, quick=quick))

    ro_case("plan", "base_snap", lambda c, w, r, s: ["plan", str(r), "--mode", "add-brokers", "--brokers", "12,13,14,15"], quick=True)
    ro_case("snapshot from a file", "base_file", lambda c, w, r, s: ["snapshot", "--source", f"file://{c.cluster_file}", "--out", str(r), "--quiet"])
    ro_case("snapshot from zk://", "base_file", lambda c, w, r, s: ["snapshot", "--source", c.c.zk_url(s), "--out", str(r), "--quiet"], cluster=True)
    ro_case("approve", "base_add", lambda c, w, r, s: ["approve", str(r), "--by", "probe"])
    ro_case("validate", "base_add", lambda c, w, r, s: ["validate", str(r)])
    ro_case("report", "base_report", lambda c, w, r, s: ["report", str(r)])
    ro_case("execute", "base_add", lambda c, w, r, s: run_dir_command("execute", r, c.c.zk_url(s)), cluster=True, quick=True)
    ro_case("rollback", "base_add", lambda c, w, r, s: run_dir_command("rollback", r, c.c.zk_url(s)), cluster=True)
    ro_case("execute, execution/ read-only", "base_state", lambda c, w, r, s: run_dir_command("execute", r, c.c.zk_url(s)),
            cluster=True, target="run/execution")

    def full_case(title: str, base: str | None, args: Callable[[Ctx, Path, Path, str], list[str]], cluster: bool = False,
                  quick: bool = False, keep: int = 0, code: int | None = 2) -> None:
        @contextlib.contextmanager
        def around(ctx: Ctx, ws: Path) -> Iterator[None]:
            with tiny_disk(ws / "disk") as mounted:
                if base:
                    shutil.copytree(getattr(ctx, base), ws / "disk" / "run")
                if mounted:
                    fill_up(ws / "disk", keep)
                yield

        def build(ctx: Ctx, ws: Path, s: str) -> list[str]:
            return args(ctx, ws, ws / "disk" / "run", s)
        limit = None if IS_ROOT else ("fsize", 20_000)
        cases.append(Case(F, f"full disk: {title}", build, around=around, cluster=cluster, code=code, quick=quick,
                          limit=limit))

    full_case("snapshot from a file (2000 partitions)", None, lambda c, w, r, s: ["snapshot", "--source", f"file://{c.big_cluster_file}", "--out", str(r), "--quiet"], quick=True)
    full_case("snapshot over an earlier one", "base_file", lambda c, w, r, s: ["snapshot", "--source", f"file://{c.big_cluster_file}", "--out", str(r), "--quiet"])
    full_case("snapshot from zk://", None, lambda c, w, r, s: ["snapshot", "--source", c.c.zk_url(s), "--sizes", c.c.sizes_url(), "--out", str(r), "--quiet"], cluster=True, keep=4096)
    full_case("plan", "base_snap", lambda c, w, r, s: ["plan", str(r), "--mode", "add-brokers", "--brokers", "12,13,14,15"], quick=True, keep=8192)
    full_case("plan --write-lp", "base_snap", lambda c, w, r, s: ["plan", str(r), "--mode", "rebalance", "--strategy", "lp", "--write-lp", str(r.parent / "p.lp")], keep=8192)
    full_case("approve", "base_add", lambda c, w, r, s: ["approve", str(r), "--by", "probe"])
    full_case("validate", "base_add", lambda c, w, r, s: ["validate", str(r)], code=None)
    full_case("report", "base_report", lambda c, w, r, s: ["report", str(r)], keep=4096)
    full_case("execute", "base_add", lambda c, w, r, s: run_dir_command("execute", r, c.c.zk_url(s)), cluster=True, quick=True)
    full_case("rollback", "base_add", lambda c, w, r, s: run_dir_command("rollback", r, c.c.zk_url(s)), cluster=True)

    def missing(title: str, base: str, prep: Callable[[Path], None], args: Callable[[Ctx, Path, str], list[str]],
                cluster: bool = False, quick: bool = False, code: int | None = 2, allow: dict[int, tuple[str, ...]] | None = None,
                ok: bool = False) -> None:
        def build(ctx: Ctx, ws: Path, s: str) -> list[str]:
            run = copy_run(getattr(ctx, base), ws)
            prep(run)
            return args(ctx, run, s)
        cases.append(Case(F, f"snapshot missing/bad: {title}", build, cluster=cluster, code=code, quick=quick,
                          allow=allow or {}, ok=ok))

    rm = lambda name: (lambda r: (r / name).unlink())  # noqa: E731
    missing("plan, empty run directory", "base_snap", lambda r: [p.unlink() for p in r.iterdir() if p.is_file()], lambda c, r, s: ["plan", str(r), "--mode", "rebalance"], quick=True)
    missing("plan, snapshot.json deleted", "base_snap", rm("snapshot.json"), lambda c, r, s: ["plan", str(r), "--mode", "rebalance"])
    missing("validate, snapshot.json deleted", "base_add", rm("snapshot.json"), lambda c, r, s: ["validate", str(r)])
    missing("report, snapshot.json deleted (not needed)", "base_report", rm("snapshot.json"), lambda c, r, s: ["report", str(r)], code=None, ok=True)
    missing("execute, snapshot.json deleted", "base_add", rm("snapshot.json"), lambda c, r, s: run_dir_command("execute", r, c.dead_zk(s)), code=None)
    missing("plan, snapshot.json garbage", "base_snap", lambda r: (r / "snapshot.json").write_bytes(bytes(range(256))), lambda c, r, s: ["plan", str(r), "--mode", "rebalance"])
    missing("plan, snapshot.json truncated", "base_snap", lambda r: (r / "snapshot.json").write_bytes((r / "snapshot.json").read_bytes()[:3000]), lambda c, r, s: ["plan", str(r), "--mode", "rebalance"], quick=True)

    def snap_edit(fn: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
        return lambda r: _edit_json(r / "snapshot.json", fn)
    missing("plan, snapshot with a replica on an unknown broker", "base_snap",
            snap_edit(lambda d: d["partitions"][0].__setitem__("replicas", [0, 1, 99])), lambda c, r, s: ["plan", str(r), "--mode", "rebalance"], code=3)
    missing("plan, snapshot with a duplicate partition", "base_snap",
            snap_edit(lambda d: d["partitions"].append(dict(d["partitions"][0]))), lambda c, r, s: ["plan", str(r), "--mode", "rebalance"], code=3)
    missing("validate, snapshot with a duplicate partition", "base_add",
            snap_edit(lambda d: d["partitions"].append(dict(d["partitions"][0]))), lambda c, r, s: ["validate", str(r)], code=3,
            allow={6: ("run/validation",)})
    missing("plan, snapshot with size 2**63", "base_snap",
            snap_edit(lambda d: d["partitions"][0].__setitem__("size_bytes", 2**63)), lambda c, r, s: ["plan", str(r), "--mode", "rebalance"], code=3)

    variants = ["a copy of the run directory", "the same run directory", "zk:// and kafka://", "kafka:// twice, two lock directories"]
    for i, how in enumerate(variants):
        cases.append(Case(F, f"two concurrent executions: {how}", lambda c, w, s: [], runner=race_runner(how),
                          cluster=True, quick=i == 0))
    return cases


def race_runner(how: str) -> Callable[[Ctx, int, Case, str], Result]:
    """Two executions of one cluster (its own simulator and chroot): the second must be refused with exit 9 and
    change nothing: the lock stays the winner's, no move is submitted twice, the cluster ends exactly as the plan
    says, no throttle or lock is left, and (when it has its own copy) its run directory is untouched."""

    def run(ctx: Ctx, n: int, case: Case, secret: str) -> Result:
        from rebalancer import kafka_zk as kz
        from rebalancer.access.zk_backend import ZkBackend
        from rebalancer.execute import approve
        from rebalancer.kafka_names import LOCK_TOPIC
        from rebalancer.plan import load_plan, plan_run_dir
        from rebalancer.snapshot import take_snapshot

        ws = ctx.root / "ws" / f"{n:04d}"
        ws.mkdir(parents=True)
        res = Result(n, case.family, case.title, f"execute RUN --source ... ({how})", None, 0.0, "", code_expected=9)
        started = time.monotonic()
        entry = ctx.c._start_sim(f"/race-{n}", acceleration=5.0, tick=0.02)  # noqa: SLF001
        zk = entry["zk"]
        winner: subprocess.Popen[bytes] | None = None
        try:
            url = f"zk://probe:{secret}@{ctx.c.hosts}{entry['chroot']}"
            run_a = ws / "run"
            take_snapshot(f"zk://{ctx.c.hosts}{entry['chroot']}", run_a, sizes=f"file://{entry['state_dir'] / 'log-dirs.json'}")
            plan_run_dir(run_a, "add-brokers", brokers=NEW_BROKERS)
            approve(run_a, by="probe")
            plan = load_plan(run_a)
            run_b = run_a
            if how != "the same run directory":
                run_b = ws / "copy"
                shutil.copytree(run_a, run_b)
            env_a = {**base_env(ctx, secret), "REBALANCER_LOCK_DIR": str(ws / "lock-a")}
            env_b = {**base_env(ctx, secret), "REBALANCER_LOCK_DIR": str(ws / ("lock-b" if "two lock" in how else "lock-a"))}
            src_a = f"kafka://{entry['sim'].bootstrap}" if how.startswith("kafka://") else url
            src_b = f"kafka://{entry['sim'].bootstrap}" if ("kafka://" in how) else url
            slow = ["--throttle", "8MB/s", "--poll", "0.1", "--max-moves", "8", "--throttle-settle", "0.2"]
            winner = subprocess.Popen([PYTHON, "-m", "rebalancer", "execute", str(run_a), "--source", src_a, *slow],
                                      cwd=REPO, env=env_a, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      start_new_session=True)
            CLEANUP.procs.add(winner)

            def marker() -> str | None:
                try:
                    return json.loads(zk.get(kz.topic_path(LOCK_TOPIC))[0]).get("topic_id")
                except Exception:  # noqa: BLE001
                    return None

            def copying() -> bool:  # a batch in flight, whichever path submitted it (znode or KIP-455 API)
                with entry["sim"].lock:
                    return bool(entry["sim"].moves)

            deadline = time.monotonic() + 90
            holder = None
            while time.monotonic() < deadline and winner.poll() is None:
                holder = marker()
                if holder and copying():
                    break
                time.sleep(0.05)
            if not holder:
                out, err = winner.communicate(timeout=300)
                res.unclean = True
                res.notes.append(f"PROBE: the first execution never held the lock (exit {winner.returncode}: {mask(err.decode(errors='replace'), secret, 200)})")
                return res
            files_b = tree(run_b) if run_b != run_a else None
            seen: set[str | None] = set()
            stop = threading.Event()

            def watch() -> None:
                while not stop.is_set():
                    seen.add(marker())
                    time.sleep(0.02)
            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            code, out, err, secs = run_cli(["execute", str(run_b), "--source", src_b, *slow], env_b, 150)
            stop.set()
            watcher.join()
            still_running = winner.poll() is None
            with entry["sim"].lock:  # the race is judged: the winner's remaining batches copy faster to the end
                entry["sim"].acceleration = 50.0
            res.code, res.seconds, res.stderr = code, secs, err
            res.args = mask(f"execute {run_b.name} --source {src_b} (while: execute {run_a.name} --source {src_a})", secret, 300)
            judge(res, case, out, err, secret, ["execute"])
            if code is not None and code != 9:
                res.unclean = True
                res.clean = False
                res.notes.append(f"the second execution was not refused with exit 9 (exit {code})")
            if not still_running:
                res.notes.append("PROBE: the first execution ended before the second did: inconclusive timing")
            w_out, w_err = winner.communicate(timeout=400)
            CLEANUP.procs.discard(winner)
            w_out_s, w_err_s = w_out.decode(errors="replace"), w_err.decode(errors="replace")
            if secret in w_out_s or secret in w_err_s:
                res.leak = True
                res.notes.append("the secret is in the first execution's output")
            if winner.returncode != 0:
                res.notes.append(f"the first execution failed (exit {winner.returncode}): {mask(w_err_s.strip().splitlines()[-1] if w_err_s.strip() else '', secret, 200)}")
            changed_by_loser = []
            if seen - {holder, None}:
                changed_by_loser.append(f"the lock changed hands while the second ran: {sorted(x for x in seen if x)}")
            moved = [(e["topic"], e["partition"], tuple(e["target"])) for e in entry["sim"].completed]
            if len(moved) != len(set(moved)):
                changed_by_loser.append("a move was submitted twice")
            backend = ZkBackend(zk, "probe")
            end = time.monotonic() + 30
            while time.monotonic() < end and (zk.exists(kz.topic_path(LOCK_TOPIC)) or zk.exists(kz.REASSIGN)):
                time.sleep(0.1)
            if winner.returncode == 0:
                now = {p.tp: p.replicas for p in backend.read_cluster().partitions}
                wrong = [c for c in plan.changes if now.get((c.topic, c.partition)) != c.replicas_after]
                planned = {(c.topic, c.partition) for c in plan.changes}
                cl = load_snapshot_cluster(run_a)
                others = [p for p in cl.partitions if p.tp not in planned and now.get(p.tp) != p.replicas]
                if wrong or others:
                    changed_by_loser.append(f"final assignment differs from the plan ({len(wrong)} planned, {len(others)} other partitions)")
            if backend.throttle_configs():
                changed_by_loser.append(f"throttles left: {sorted(backend.throttle_configs())}")
            if zk.exists(kz.topic_path(LOCK_TOPIC)):
                changed_by_loser.append("the lock marker topic was left behind")
            if zk.exists(kz.REASSIGN):
                changed_by_loser.append("a reassignment was left in flight")
            if changed_by_loser:
                res.cluster_change = True
                res.notes.append("cluster: " + "; ".join(changed_by_loser))
            if files_b is not None:
                diff = tree_diff(files_b, tree(run_b))
                if diff:
                    res.half = True
                    res.notes.append("the refused execution's run directory changed: " + ", ".join(diff[:5]))
            else:
                res.notes.append("half-written: n/a (one run directory shared with the winner)")
            return res
        except Exception as exc:  # noqa: BLE001 - the probe's own failure: reported
            res.unclean = True
            res.notes.append(f"PROBE ERROR: {type(exc).__name__}: {exc}")
            return res
        finally:
            if winner is not None and winner.poll() is None:
                with contextlib.suppress(OSError):
                    os.killpg(winner.pid, signal.SIGKILL)
                winner.wait()
            if winner is not None:
                CLEANUP.procs.discard(winner)
            ctx.c.stop_sim(entry)
            res.seconds = time.monotonic() - started
            with contextlib.suppress(OSError):
                shutil.rmtree(ws)

    return run


# -- family 6: faults during an execution ------------------------------------------------------------------------------
def fault_cases() -> list[Case]:
    """Issue 42 items 6-8 end to end, each on a simulator of its own: a broker killed (and restarted) while the real
    CLI executes, then the command the operator runs next."""
    F = "faults"
    rows: list[tuple[str, Callable[[Ctx, int, Case, str], Result], bool]] = [
        ("rollback --source kafka:// refuses at once around a dead kept replica", fault_rollback_runner(), False),
        ("the throttle --clear advice of a stalled execution runs as printed", fault_advice_runner(), True),
        ("a destination restarting within --destination-grace completes the execution", fault_restart_runner(), True),
    ]
    return [Case(F, title, lambda c, w, s: [], runner=runner, cluster=True, must_ok=ok, ok=ok, timeout=240,
                 code=None if ok else 7) for title, runner, ok in rows]  # 20-40 s each: tests/test_probe_hostile.py
    # runs them apart from the quick probe (whose 300 s they would overrun on a loaded machine)


FAULT_SLOW = ["--throttle", "8MB/s", "--poll", "0.1", "--max-moves", "8", "--throttle-settle", "0.2"]


class _FaultRun:
    """One fault case's own simulator (chroot /fault-N) with an approved add-brokers run, the case's URL (its secret
    in it) and environment, and the CLI processes it started (killed on the way out)."""

    def __init__(self, ctx: Ctx, n: int, secret: str, *, acceleration: float, tick: float = 0.02) -> None:
        from rebalancer.execute import approve
        from rebalancer.plan import load_plan, plan_run_dir
        from rebalancer.snapshot import take_snapshot

        self.ctx, self.secret = ctx, secret
        self.ws = ctx.root / "ws" / f"{n:04d}"
        self.ws.mkdir(parents=True)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.entry = ctx.c._start_sim(f"/fault-{n}", acceleration=acceleration, tick=tick)  # noqa: SLF001
        try:
            self.sim, self.zk = self.entry["sim"], self.entry["zk"]
            self.chroot = self.entry["chroot"]
            self.url = f"zk://probe:{secret}@{ctx.c.hosts}{self.chroot}"
            self.kafka = f"kafka://{self.sim.bootstrap}"
            self.run = self.ws / "run"
            take_snapshot(f"zk://{ctx.c.hosts}{self.chroot}", self.run,
                          sizes=f"file://{self.entry['state_dir'] / 'log-dirs.json'}")
            plan_run_dir(self.run, "add-brokers", brokers=NEW_BROKERS)
            approve(self.run, by="probe")
            self.plan = load_plan(self.run)
            self.env = {**base_env(ctx, secret), "REBALANCER_LOCK_DIR": str(self.ws / "lock")}
        except BaseException:
            self.close()
            raise

    def start(self, argv: list[str]) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([PYTHON, "-m", "rebalancer", *argv], cwd=REPO, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True)
        CLEANUP.procs.add(proc)
        self.procs.append(proc)
        return proc

    @staticmethod
    def finish(proc: subprocess.Popen[bytes], timeout: float) -> tuple[int | None, str, str]:
        try:
            out, err = proc.communicate(timeout=timeout)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            code = None
        CLEANUP.procs.discard(proc)
        return code, out.decode(errors="replace"), err.decode(errors="replace")

    def moves(self) -> dict[tuple[str, int], Any]:
        """The simulator's moves in flight, copied under its lock: {tp: (original, target, adding, isr)}."""
        with self.sim.lock:
            return {tp: (list(m.original), list(m.target), list(m.adding), list(self.sim.state[tp][1]))
                    for tp, m in self.sim.moves.items()}

    def copying_destination(self) -> int | None:
        """A live broker that a move in flight adds and that has not caught up yet (None: no such move)."""
        for _o, _t, adding, isr in self.moves().values():
            for b in adding:
                if b not in isr and b in self.sim.alive:
                    return b
        return None

    def completed(self) -> list[dict[str, Any]]:
        with self.sim.lock:
            return [dict(e) for e in self.sim.completed]

    def until(self, pred: Callable[[], Any], timeout: float, proc: subprocess.Popen[bytes] | None = None,
              every: float = 0.05) -> Any:
        """``pred()`` once truthy (its value), or None after ``timeout`` s or once ``proc`` ended."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not STOP.is_set():
            got = pred()
            if got:
                return got
            if proc is not None and proc.poll() is not None:
                return pred() or None
            time.sleep(every)
        return None

    def leftovers(self) -> list[str]:
        """Throttles, the lock marker or a reassignment this run left on its cluster (after a short settle)."""
        from rebalancer import kafka_zk as kz
        from rebalancer.access.zk_backend import ZkBackend
        from rebalancer.kafka_names import LOCK_TOPIC

        backend = ZkBackend(self.zk, "probe")
        left: list[str] = []
        self.until(lambda: not (self.zk.exists(kz.topic_path(LOCK_TOPIC)) or self.zk.exists(kz.REASSIGN)
                                or backend.throttle_configs()), 10)
        if backend.throttle_configs():
            left.append(f"throttles left: {sorted('/'.join(k) for k in backend.throttle_configs())}")
        if self.zk.exists(kz.topic_path(LOCK_TOPIC)):
            left.append("the lock marker topic was left behind")
        if self.zk.exists(kz.REASSIGN):
            left.append("a reassignment was left in flight")
        return left

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            CLEANUP.procs.discard(proc)
        self.ctx.c.stop_sim(self.entry)
        with contextlib.suppress(OSError):
            shutil.rmtree(self.ws)


def _failed_cleanly(code: int | None, err: str) -> str | None:
    """Why a command that must fail did not fail with one clean error line (progress lines before it allowed), or
    None when it did."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    ours = [ln for ln in lines if ln.startswith("rebalancer:")]
    if code is None:
        return "did not end (killed)"
    if code in (0, 70):
        return f"exit {code}"
    if "Traceback" in err or not lines or len(ours) != 1 or lines[-1] != ours[0]:
        return f"exit {code} without one clean error line ({len(lines)} stderr lines)"
    return None


def _last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _fault_runner(body: Callable[[_FaultRun, Ctx, Case, Result, str], None], args: str, acceleration: float
                  ) -> Callable[[Ctx, int, Case, str], Result]:
    """A fault case: ``body`` on its own simulator; its result's seconds are the whole case's (setup included)."""

    def run(ctx: Ctx, n: int, case: Case, secret: str) -> Result:
        res = Result(n, case.family, case.title, args, None, 0.0, "", code_expected=case.code)
        started = time.monotonic()
        f: _FaultRun | None = None
        try:
            f = _FaultRun(ctx, n, secret, acceleration=acceleration)
            body(f, ctx, case, res, secret)
        except Exception as exc:  # noqa: BLE001 - the probe's own failure: reported
            res.unclean = True
            res.notes.append(f"PROBE ERROR: {type(exc).__name__}: {exc}: {traceback.format_exc(limit=3)}")
        finally:
            if f is not None:
                if f.sim.error is not None:
                    res.unclean = True
                    res.notes.append(f"PROBE: the case's simulated controller crashed: {f.sim.error!r}")
                f.close()
            res.seconds = time.monotonic() - started
        return res

    return run


def fault_rollback_runner() -> Callable[[Ctx, int, Case, str], Result]:
    """Issue 42 item 8: a broker that both a completed move and a move in flight (or yet to come) keep dies during the
    execution; ``rollback --source kafka://`` must then refuse at once (well under its batch timeout), in one line
    naming the broker, and submit nothing: no reassignment appears, none completes, no partition changes but the
    run's own moves in flight that Kafka's Admin API cancels (noted), the reassignment znode only shrinks."""

    def body(f: _FaultRun, ctx: Ctx, case: Case, res: Result, secret: str) -> None:
        from rebalancer import kafka_zk as kz
        from rebalancer.access.zk_backend import ZkBackend

        backend = ZkBackend(f.zk, "probe")
        proc = f.start(["execute", str(f.run), "--source", f.url, *FAULT_SLOW, "--destination-grace", "1"])
        planned = {(c.topic, c.partition): c for c in f.plan.changes}

        def victim() -> int | None:
            # kept (in its original and target) by a move that completed, and by one in flight or yet to come: the
            # rollback's way back would keep it; the highest (the lock's marker topic lives on the lowest)
            done = f.completed()
            moving = f.moves()
            if not done or not moving:
                return None
            kept_done = set().union(*(set(e["original"]) & set(e["target"]) for e in done))
            finished = {(e["topic"], e["partition"]) for e in done
                        if tuple(e["target"]) == planned[(e["topic"], e["partition"])].replicas_after}
            kept_left = set().union(*(set(o) & set(t) for o, t, _a, _i in moving.values()),
                                    *(set(c.replicas_before) & set(c.replicas_after) for tp, c in planned.items()
                                      if tp not in finished and tp not in moving))
            ids = sorted((kept_done & kept_left) - {min(f.sim.alive)})
            return ids[-1] if ids else None

        k = f.until(victim, 120, proc)
        if k is None:
            code, _out, err = f.finish(proc, 300)
            res.unclean = True
            res.notes.append(f"PROBE: no kept broker to kill while the execution ran (exit {code}: "
                             f"{mask(_last_line(err), secret, 200)})")
            return
        f.sim.kill_broker(k)
        ecode, eout, eerr = f.finish(proc, 120)
        why = _failed_cleanly(ecode, eerr)
        res.notes.append(f"killed kept broker {k}; execute: exit {ecode}: {mask(_last_line(eerr), secret, 240)}")
        if why:
            res.unclean = True
            res.notes.append(f"the execution did not fail cleanly on the dead kept broker: {why}")
        if secret in eout or secret in eerr:
            res.leak = True
            res.notes.append("the secret is in the execution's output")
        # the moves that do not need the dead broker finish first: what is left in flight waits for it
        f.until(lambda: all(k in t for _o, t, _a, _i in f.moves().values()), 60)
        flight0 = f.moves()
        done0 = len(f.completed())
        parts0 = {p.tp: list(p.replicas) for p in backend.read_cluster().partitions}
        znode0 = kz.parse_reassignment(f.zk.get(kz.REASSIGN)[0]) if f.zk.exists(kz.REASSIGN) else {}
        seen: dict[tuple[str, int], list[int]] = {}
        stop = threading.Event()

        def watch() -> None:  # a move that appears during the rollback and was not in flight before it
            while not stop.is_set():
                for tp, (_o, t, _a, _i) in f.moves().items():
                    if tp not in flight0 or flight0[tp][1] != t:
                        seen.setdefault(tp, t)
                time.sleep(0.02)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        argv = ["rollback", str(f.run), "--source", f.kafka, "--poll", "0.1"]
        try:
            code, out, err, secs = run_cli(argv, f.env, case.timeout)
        finally:
            stop.set()
            watcher.join()
        res.code, res.seconds, res.stderr = code, secs, err
        res.notes.append(f"the rollback took {secs:.1f} s")
        res.args = mask(f"rollback {f.run.name} --source {f.kafka} --poll 0.1 (after: execute ... --source {f.url} "
                        f"{' '.join(FAULT_SLOW)} --destination-grace 1; broker {k} killed)", secret, 400)
        judge(res, case, out, err, secret, argv)
        last = _last_line(err)
        if code not in (None, 0) and not re.search(rf"\bbroker {k}\b", last):
            res.unclean, res.clean = True, False
            res.notes.append(f"the refusal does not name the down broker {k}")
        if code not in (None, 0) and secs > 30:
            res.unclean, res.clean = True, False
            res.notes.append(f"the refusal took {secs:.0f} s (waited instead of refusing at once)")
        submitted = [f"{t}-{p} -> {tgt}" for (t, p), tgt in sorted(seen.items())]
        submitted += [f"{e['topic']}-{e['partition']} -> {e['target']} (completed)" for e in f.completed()[done0:]]
        parts1 = {p.tp: list(p.replicas) for p in backend.read_cluster().partitions}
        cancelled = sorted(tp for tp in flight0 if tp not in f.moves())
        changed = [f"{t}-{p}: {parts0.get((t, p))} -> {r}" for (t, p), r in sorted(parts1.items())
                   if r != parts0.get((t, p))
                   and not ((t, p) in cancelled and sorted(r) == sorted(flight0[(t, p)][0]))]
        znode1 = kz.parse_reassignment(f.zk.get(kz.REASSIGN)[0]) if f.zk.exists(kz.REASSIGN) else {}
        grown = [f"{t}-{p}" for (t, p), tgt in sorted(znode1.items()) if znode0.get((t, p)) != tgt]
        if cancelled:
            res.notes.append(f"the rollback cancelled {len(cancelled)} move(s) of this run in flight (Admin API): "
                             "back to their original replicas")
        problems = []
        if submitted:
            problems.append(f"{len(submitted)} move(s) submitted, e.g. {submitted[0]}")
        if changed:
            problems.append(f"{len(changed)} partition(s) changed, e.g. {changed[0]}")
        if grown:
            problems.append(f"/admin/reassign_partitions gained {', '.join(grown[:3])}")
        if problems:
            res.cluster_change = True
            res.notes.append("the refused rollback changed the cluster: " + "; ".join(problems))

    return _fault_runner(body, "rollback RUN --source kafka://... (a kept broker died during execute)", 5.0)


_ADVICE = re.compile(r"'(rebalancer throttle --clear [^']*(?:'[^']*'[^']*)*?)' once")


def fault_advice_runner() -> Callable[[Ctx, int, Case, str], Result]:
    """Issue 42 item 7: an execution stalled on a dead destination broker fails advising ``rebalancer throttle
    --clear ...``; once the broker is back and the moves in flight finished, that command, run as printed (the
    password typed again where the printed URL hides it), exits 0 and leaves no throttle, lock or reassignment."""

    def body(f: _FaultRun, ctx: Ctx, case: Case, res: Result, secret: str) -> None:
        import shlex

        proc = f.start(["execute", str(f.run), "--source", f.url, *FAULT_SLOW, "--destination-grace", "1"])

        b = f.until(f.copying_destination, 120, proc)
        if b is None:
            code, _out, err = f.finish(proc, 300)
            res.unclean = True
            res.notes.append(f"PROBE: no move in flight to stall (exit {code}: {mask(_last_line(err), secret, 200)})")
            return
        f.sim.kill_broker(b)
        ecode, eout, eerr = f.finish(proc, 120)
        res.notes.append(f"killed destination broker {b}; execute: exit {ecode}: {mask(_last_line(eerr), secret, 240)}")
        why = _failed_cleanly(ecode, eerr)
        if why:
            res.unclean = True
            res.notes.append(f"the stalled execution did not fail cleanly: {why}")
        if secret in eout or secret in eerr:
            res.leak = True
            res.notes.append("the secret is in the execution's output")
        advice = [m.group(1) for m in _ADVICE.finditer(eerr + "\n" + eout)]
        if not advice:
            res.unclean = True
            res.notes.append("the failed execution advised no 'rebalancer throttle --clear ...' command: "
                             + mask(eerr.strip()[-300:], secret, 300))
            return
        printed = advice[-1]
        res.notes.append(f"advised: {mask(printed, secret, 300)}")
        f.sim.restart_broker(b)
        with f.sim.lock:  # the outage is judged: what is left copies faster to the end
            f.sim.acceleration = 50.0
        if not f.until(lambda: not f.moves(), 120, every=0.1):
            res.notes.append("PROBE: the moves in flight did not finish within 120 s of the restart")
        argv = shlex.split(printed)
        if argv[:3] != ["rebalancer", "throttle", "--clear"]:
            res.unclean = True
            res.notes.append(f"the advice is not a throttle --clear command: {mask(printed, secret, 200)}")
            return
        from rebalancer.access.zk_backend import ZkBackend

        throttled = sorted("/".join(k) for k in ZkBackend(f.zk, "probe").throttle_configs())
        if throttled:
            res.notes.append(f"throttles before the advised command: {', '.join(throttled[:6])}")
        else:
            res.notes.append("PROBE: no throttle left before the advised command: inconclusive")
        retyped = [a.replace("probe:***@", f"probe:{secret}@") for a in argv[1:]]
        if retyped != argv[1:]:
            res.notes.append("the printed URL hides the password: typed again, as an operator would")
        code, out, err, secs = run_cli(retyped, f.env, case.timeout)
        res.code, res.seconds, res.stderr = code, secs, err
        res.args = mask(printed, secret, 400) + f" (advised by: execute ... --destination-grace 1; broker {b} killed)"
        judge(res, case, out, err, secret, retyped)
        res.notes.append(f"stdout: {mask(_last_line(out), secret, 240)}")
        left = f.leftovers()
        if left:
            res.cluster_change = True
            res.notes.append("after the advised command: " + "; ".join(left))

    return _fault_runner(body, "rebalancer throttle --clear ... (as a stalled execute printed it)", 5.0)


def fault_restart_runner() -> Callable[[Ctx, int, Case, str], Result]:
    """Issue 42 item 6: a destination broker that restarts (down ~3 s) within ``--destination-grace 30`` is waited
    for, said so, and the execution completes: exit 0, the plan's assignment, no throttle, lock or reassignment
    left."""

    def body(f: _FaultRun, ctx: Ctx, case: Case, res: Result, secret: str) -> None:
        from rebalancer.access.zk_backend import ZkBackend

        argv = ["execute", str(f.run), "--source", f.url, *FAULT_SLOW, "--destination-grace", "30"]
        started = time.monotonic()
        proc = f.start(argv)

        b = f.until(f.copying_destination, 120, proc)
        if b is None:
            code, _out, err = f.finish(proc, 300)
            res.unclean = True
            res.notes.append(f"PROBE: no move in flight to interrupt (exit {code}: {mask(_last_line(err), secret, 200)})")
            return
        f.sim.kill_broker(b)
        time.sleep(3.0)  # the outage (simulated faults are instant)
        f.sim.restart_broker(b)
        code, out, err = f.finish(proc, case.timeout)
        res.code, res.seconds, res.stderr = code, time.monotonic() - started, err
        res.args = mask(f"execute {f.run.name} --source {f.url} {' '.join(FAULT_SLOW)} --destination-grace 30 "
                        f"(destination broker {b} down ~3 s)", secret, 400)
        judge(res, case, out, err, secret, argv)
        res.notes.append(f"stdout: {mask(_last_line(out), secret, 240)}")
        if not re.search(rf"destination broker {b} is down; waiting up to 30 s", err):
            res.unclean = True
            res.notes.append(f"the output does not say it waited for destination broker {b}")
        if not re.search(rf"broker {b} is back after", err):
            res.notes.append(f"the output does not say broker {b} is back")
        if code != 0:
            return
        backend = ZkBackend(f.zk, "probe")
        now = {p.tp: p.replicas for p in backend.read_cluster().partitions}
        wrong = [c for c in f.plan.changes if now.get((c.topic, c.partition)) != c.replicas_after]
        planned = {(c.topic, c.partition) for c in f.plan.changes}
        others = [p for p in load_snapshot_cluster(f.run).partitions if p.tp not in planned and now.get(p.tp) != p.replicas]
        problems = f.leftovers()
        if wrong or others:
            problems.insert(0, f"final assignment differs from the plan ({len(wrong)} planned, {len(others)} other "
                               "partitions)")
        if problems:
            res.cluster_change = True
            res.notes.append("cluster: " + "; ".join(problems))

    return _fault_runner(body, "execute RUN --source ... --destination-grace 30 (a destination restarts)", 5.0)


def load_snapshot_cluster(run: Path) -> Any:
    from rebalancer.snapshot import load_snapshot

    return load_snapshot(run)


# -- the whole probe --------------------------------------------------------------------------------------------------
def all_cases() -> list[Case]:
    return [*url_cases(), *cluster_file_cases(), *option_cases(), *run_edit_cases(), *environment_cases(), *fault_cases()]


QUICK_PER_FAMILY = {"urls": 14, "cluster-files": 10, "options": 12, "run-edits": 16, "environment": 8, "faults": 0}


def quick_subset(cases: list[Case]) -> list[Case]:
    """The cases marked quick, evenly thinned to about 60 (control cases and the race always kept)."""
    out: list[Case] = []
    for fam in FAMILIES:
        marked = [c for c in cases if c.family == fam and c.quick]
        keep = [c for c in marked if c.must_ok or c.runner]
        rest = [c for c in marked if c not in keep]
        room = max(0, QUICK_PER_FAMILY[fam] - len(keep))
        if len(rest) > room:
            step = len(rest) / room if room else float("inf")
            rest = [rest[int(i * step)] for i in range(room)]
        chosen = set(map(id, keep + rest))
        out += [c for c in marked if id(c) in chosen]
    return out


COLUMNS = ["cases", "clean-errors", "expected-ok", "exit-70", "other-unclean", "half-written", "cluster-changes",
           "secret-leaks"]


def table(results: list[Result]) -> str:
    rows = []
    fams = [f for f in FAMILIES if any(r.family == f for r in results)]
    for fam in [*fams, "TOTAL"]:
        rs = [r for r in results if fam == "TOTAL" or r.family == fam]
        rows.append([fam, len(rs), sum(r.clean for r in rs), sum(r.expected_ok for r in rs), sum(r.exit70 for r in rs),
                     sum(r.unclean for r in rs), sum(r.half for r in rs), sum(r.cluster_change for r in rs),
                     sum(r.leak for r in rs)])
    head = ["family", *COLUMNS]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    fmt = lambda row: "  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w) for i, (v, w) in enumerate(zip(row, widths, strict=True)))  # noqa: E731
    lines = [fmt(head), "-" * (sum(widths) + 2 * (len(widths) - 1))]
    lines += [fmt(r) for r in rows[:-1]] + ["-" * (sum(widths) + 2 * (len(widths) - 1)), fmt(rows[-1])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a representative subset (~60 cases)")
    ap.add_argument("--jobs", type=int, default=2, help="parallel cases that cannot reach the cluster (default 2)")
    ap.add_argument("--json", help="write the per-case results to this file")
    ap.add_argument("--only", action="append", choices=FAMILIES, help="run only this family (repeatable)")
    ap.add_argument("--match", help="run only cases whose title contains this text")
    ap.add_argument("-v", "--verbose", action="store_true", help="one progress line per case on stderr")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (for debugging)")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored (a background job)

    logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # the probe's own clients: nothing to say on stderr
    cases = all_cases()
    if args.quick:
        cases = quick_subset(cases)
    if args.only:
        cases = [c for c in cases if c.family in args.only]
    if args.match:
        cases = [c for c in cases if args.match in c.title]
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="probe-hostile-"))
    if not args.keep:
        CLEANUP.push("remove the temporary directory", lambda: _rmtree(root))
    results: list[Result] = []
    done_lock = threading.Lock()
    try:
        clusters = Clusters(root)
        ctx = Ctx(root, clusters)
        ctx.build_bases()
        setup_s = time.monotonic() - started
        print(f"probe: {len(cases)} cases; ZooKeeper {clusters.hosts}, setup {setup_s:.0f} s", file=sys.stderr, flush=True)
        numbered = list(enumerate(cases, 1))
        seq = [(n, c) for n, c in numbered if c.cluster and not c.runner]
        races = [(n, c) for n, c in numbered if c.runner]
        par = [(n, c) for n, c in numbered if not c.cluster and not c.runner]

        def one(n: int, case: Case) -> None:
            if STOP.is_set():
                return
            try:
                r = run_case(ctx, n, case)
            except Exception as exc:  # noqa: BLE001 - a probe bug must not hide the other results
                r = Result(n, case.family, case.title, "", None, 0.0, "", unclean=True,
                           notes=[f"PROBE ERROR: {type(exc).__name__}: {exc}: {traceback.format_exc(limit=3)}"])
            with done_lock:
                results.append(r)
                if args.verbose:
                    flag = " FAIL" if r.failing else ""
                    print(f"[{len(results):3d}/{len(cases)}] {r.code!s:>4} {r.seconds:5.1f}s {r.family}: {r.title}{flag}",
                          file=sys.stderr, flush=True)

        def serial(items: list[tuple[int, Case]]) -> None:
            for n, c in items:
                if STOP.is_set():
                    return
                one(n, c)

        threads = [threading.Thread(target=serial, args=(seq,), name="cluster-cases", daemon=True),
                   threading.Thread(target=serial, args=(races,), name="race-cases", daemon=True)]
        for t in threads:
            t.start()
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            futures = [pool.submit(one, n, c) for n, c in par]
            try:
                while any(not f.done() for f in futures) or any(t.is_alive() for t in threads):
                    time.sleep(0.2)
            except KeyboardInterrupt:
                STOP.set()
                CLEANUP.kill_children()
                for f in futures:
                    f.cancel()
                raise
        clusters_ok = True
        for name, entry in (("main", clusters.main), ("sasl", clusters.sasl)):
            if entry["sim"].error is not None:
                clusters_ok = False
                print(f"probe: the {name} simulated controller crashed: {entry['sim'].error!r}", file=sys.stderr)
    except KeyboardInterrupt:
        print("probe: interrupted; cleaning up", file=sys.stderr)
        CLEANUP.run_all()
        return 130
    finally:
        STOP.set()
        CLEANUP.run_all()

    results.sort(key=lambda r: r.n)
    elapsed = time.monotonic() - started
    print(table(results))
    print()
    failing = [r for r in results if r.failing]
    print(f"{len(results)} cases in {elapsed:.0f} s; failing cases: {len(failing)}")
    for r in failing:
        what = [k for k, v in (("exit-70", r.exit70), ("unclean", r.unclean), ("half-written", r.half),
                               ("cluster-change", r.cluster_change), ("secret-leak", r.leak)) if v]
        print(f"- #{r.n} [{r.family}] {r.title}: {', '.join(what)}; exit {r.code}")
        print(f"    args: {r.args}")
        print(f"    stderr: {mask(r.stderr.strip(), '', 200) or '(empty)'}")
        for note in r.notes:
            print(f"    note: {mask(note, '', 400)}")
    odd = [r for r in results if not r.failing and r.code_expected is not None and r.code not in (r.code_expected, 0)]
    if odd:
        print()
        print(f"informational: {len(odd)} clean failure(s) with another exit code than expected")
        for r in odd:
            print(f"- #{r.n} [{r.family}] {r.title}: exit {r.code}, expected {r.code_expected}: {mask(r.stderr.strip(), '', 160)}")
    if args.json:
        Path(args.json).write_text(json.dumps([{**asdict(r), "failing": r.failing} for r in results], indent=1))
    if not clusters_ok:
        return 3
    bad = any(r.exit70 or r.unclean or r.half or r.cluster_change or r.leak for r in results)
    return 1 if bad else 0


def _rmtree(root: Path) -> None:
    if IS_ROOT:  # an immutable attribute left by an interrupted case would block removal
        subprocess.run(["chattr", "-R", "-i", str(root)], capture_output=True, check=False)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
