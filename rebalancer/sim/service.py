"""Running the simulated cluster: in the foreground, or as background processes managed through a directory.

``up(DIR)`` starts a ZooKeeper server (unless one is given) and ``rebalancer sim run`` as detached processes, records
them in ``DIR/sim.json`` at once (so ``down`` stops them even if ``up`` is killed while it waits), waits until the
controller has published its status and adds its Kafka listeners (``kafka_bootstrap``, null until then)::

    {"zk_url": "zk://127.0.0.1:PORT/kafka", "kafka_bootstrap": "kafka://127.0.0.1:PORT,...",
     "sizes": "file://DIR/log-dirs.json",
     "zookeeper": {"pid": .., "start_time": .., "cmdline": [..], "port": ..} | null,
     "controller": {"pid": .., "start_time": .., "cmdline": [..], "log": ..}, "scenario": ..}

``kafka_bootstrap`` lists the brokers' Kafka listeners as they were at start (``sim status`` shows the live ones).
``start_time`` (clock ticks after boot, field 22 of ``/proc/<pid>/stat``) and ``cmdline`` identify each process.

``down(DIR)`` stops both, each only if its pid still belongs to the process ``up`` started (same start time and
command line): a pid the system gave to another process since is reported in one line and left alone, as is one
whose identity cannot be read or was not recorded. ``send_command`` asks a running controller to kill or restart a
broker.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from ..errors import SimulationError, SourceError
from ..formats import atomic_write_json, read_json
from ..procs import process_alive, process_identity, started_identity
from ..retry import poll, retry_call
from ..zkclient import ZkTarget, parse_zk_url, zk_session
from .controller import COMMANDS_PATH, STATUS_PATH, SimulatedCluster
from .kafka_listener import serve
from .scenarios import ScenarioParams, build_scenario

__all__ = ["run_foreground", "up", "down", "read_state", "send_command", "wait_ready", "DEFAULT_CHROOT"]

log = logging.getLogger(__name__)
DEFAULT_CHROOT = "/kafka"
STATE_FILE = "sim.json"


def run_foreground(zk_url: str, *, scenario: str | None, params: ScenarioParams, acceleration: float,
                   state_dir: str | Path | None, attach: bool = False, stop: threading.Event | None = None) -> int:
    """Load (or attach to) a cluster and run the controller until SIGTERM/SIGINT or ``stop``."""
    target = parse_zk_url(zk_url)
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    with zk_session(target, create_chroot=True) as zk:
        sim = SimulatedCluster(zk, acceleration=acceleration, state_dir=state_dir, listener_factory=serve)
        if attach:
            sim.attach()
        else:
            if scenario is None:
                raise SimulationError("give a scenario to load, or attach to existing metadata")
            sim.load(build_scenario(scenario, params))
        sim.start()
        log.warning("simulated cluster running on %s: %d brokers, %d partitions, acceleration x%g, Kafka at %s",
                    target.display, len(sim.brokers), len(sim.state), acceleration, sim.bootstrap)
        while not stop.wait(0.2):
            if sim.error is not None:
                sim.stop()
                raise SimulationError(f"simulated controller failed: {sim.error!r}")
        sim.stop()
    return 0


def _not_the_recorded(record: dict[str, Any]) -> str | None:
    """Why the process now holding ``record["pid"]`` cannot be taken for the one recorded, or None when it is it."""
    current = process_identity(record.get("pid"))
    if current is None:
        return "its /proc entry cannot be read, so it cannot be told from another process"
    if "start_time" not in record:
        return "sim.json records no start time, so it cannot be told from another process"
    if record["start_time"] != current["start_time"]:
        return "it started at another time than the process 'sim up' started (the pid was reused)"
    if record.get("cmdline") and record["cmdline"] != current["cmdline"]:
        return "its command line is not that of the process 'sim up' started (the pid was reused)"
    return None


def _started(pid: int | None, **extra: Any) -> dict[str, Any]:
    """The record of a process ``up`` just started (its child, so the pid cannot have been reused yet)."""
    return {**started_identity(pid), **extra}


def read_state(directory: str | Path) -> dict[str, Any]:
    path = Path(directory) / STATE_FILE
    if not path.exists():
        raise SimulationError(f"no simulated cluster in {directory} (run 'rebalancer sim up --dir {directory}')")
    state = read_json(path)
    if not isinstance(state, dict) or "zk_url" not in state:
        raise SimulationError(f"{path} is not a simulator state file")
    return state


def wait_ready(target: ZkTarget, proc: subprocess.Popen[bytes] | None, log_path: Path | None, timeout: float) -> dict[str, Any]:
    """Wait until *this* controller (its pid) publishes its status znode; fail early if its process dies."""
    deadline = time.monotonic() + timeout
    # A session is attempted for up to 10 s at a time until the deadline: a fresh ZooKeeper on a loaded machine may
    # take a connection before it serves sessions and never answer its handshake (the fast tier's four workers on 2
    # cores saw both), and kazoo waits for that answer as long as the session timeout asked for.
    def attempt() -> dict[str, Any]:
        with zk_session(target, timeout=min(10.0, max(1.0, deadline - time.monotonic())), create_chroot=True) as zk:
            return _await_status(zk, proc, log_path, deadline, timeout)

    try:
        return retry_call(attempt, on=SourceError, patience=timeout,
                          before_retry=lambda _exc: _fail_if_exited(proc, log_path))
    except SourceError as exc:
        _fail_if_exited(proc, log_path)
        raise SimulationError(f"simulated cluster not ready within {timeout:g} s: {exc}") from None


def _await_status(zk: Any, proc: subprocess.Popen[bytes] | None, log_path: Path | None, deadline: float,
                  timeout: float) -> dict[str, Any]:
    def look() -> dict[str, Any] | None:
        if zk.exists(STATUS_PATH):
            data, _ = zk.get(STATUS_PATH)
            status = dict(json.loads(data))
            if proc is None or status.get("pid") == proc.pid:
                return status
        _fail_if_exited(proc, log_path)
        return None

    status, _ = poll(look, lambda found: found is not None, timeout=max(0.0, deadline - time.monotonic()), interval=0.1)
    if status is not None:
        return status
    raise SimulationError(f"simulated cluster not ready within {timeout:g} s: {_last_line(log_path)}")


def _fail_if_exited(proc: subprocess.Popen[bytes] | None, log_path: Path | None) -> None:
    if proc is not None and proc.poll() is not None:
        raise SimulationError(f"simulated cluster exited with code {proc.returncode}: {_last_line(log_path)}")


def _last_line(path: Path | None) -> str:
    if path is None or not path.exists():
        return "(no log)"
    lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "(empty log)"


def up(directory: str | Path, *, scenario: str, params: ScenarioParams, acceleration: float = 1.0,
       zk_hosts: str | None = None, chroot: str = DEFAULT_CHROOT, port: int | None = None,
       timeout: float = 120.0) -> dict[str, Any]:
    """Start ZooKeeper (unless ``zk_hosts``) and the controller in the background; returns the state record."""
    from ..zkserver import ZooKeeperServer

    d = Path(directory).resolve()
    created = not d.exists()
    d.mkdir(parents=True, exist_ok=True)
    if (d / STATE_FILE).exists():
        old = read_json(d / STATE_FILE)
        controller = old.get("controller") or {}
        if process_alive(controller.get("pid")) and _not_the_recorded(controller) is None:
            raise SimulationError(f"a simulated cluster is already running from {d} (rebalancer sim down --dir {d})")
    zk_record = None
    server = None
    if zk_hosts is None:
        # Our own ZooKeeper holds only the simulated cluster: start it empty, never on a previous run's data.
        shutil.rmtree(d / "zookeeper", ignore_errors=True)
        for stale in ("log-dirs.json", "events.jsonl"):
            (d / stale).unlink(missing_ok=True)
        server = ZooKeeperServer(d / "zookeeper", port=port)
        server.start(detach=True)
        zk_hosts = server.hosts
        zk_record = _started(server.process.pid if server.process else None, port=server.port)
    zk_url = f"zk://{zk_hosts}{chroot}"
    log_path = d / "sim.log"
    log_existed = log_path.exists()
    cmd = [sys.executable, "-m", "rebalancer", "sim", "run", "--zk", zk_url, "--scenario", scenario,
           "--acceleration", str(acceleration), "--state-dir", str(d), "--seed", str(params.seed)]
    for flag, value in (("--brokers", params.brokers), ("--racks", params.racks), ("--partitions", params.partitions),
                        ("--topics", params.topics), ("--rf", params.rf), ("--new-brokers", params.new_brokers)):
        if value is not None:
            cmd += [flag, str(value)]
    with open(log_path, "ab") as logf:
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    state = {
        "zk_url": zk_url,
        "kafka_bootstrap": None,
        "sizes": f"file://{d / 'log-dirs.json'}",
        "zookeeper": zk_record,
        "controller": _started(proc.pid, log=str(log_path)),
        "scenario": scenario,
        "acceleration": acceleration,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    # Recorded before the wait: an `up` killed while waiting (Ctrl-C twice, a caller's timeout) leaves two background
    # processes that `sim down` can stop only through this file.
    atomic_write_json(d / STATE_FILE, state)
    try:
        status = wait_ready(parse_zk_url(zk_url), proc, log_path, timeout)
    except BaseException:
        proc.terminate()
        if server is not None:
            server.stop()
        (d / STATE_FILE).unlink(missing_ok=True)
        # A failed start leaves nothing behind (the error quotes the log's last line): the directory if this call
        # made it, else the log if this call began it.
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        if created:
            shutil.rmtree(d, ignore_errors=True)
        elif not log_existed:
            log_path.unlink(missing_ok=True)
        raise
    state["kafka_bootstrap"] = f"kafka://{status['bootstrap']}"
    atomic_write_json(d / STATE_FILE, state)
    return state


def _terminate(what: str, record: dict[str, Any] | None, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``, to the recorded process, if its pid still is that process; else one
    warning line."""
    pid = (record or {}).get("pid")
    if not process_alive(pid):
        return
    assert record is not None and pid is not None
    reason = _not_the_recorded(record)
    if reason is not None:
        log.warning("not stopping the %s (pid %d): %s", what, pid, reason)
        return
    os.kill(pid, signal.SIGTERM)
    _, gone = poll(lambda: not process_alive(pid) or _not_the_recorded(record) is not None, bool, timeout=timeout,
                   interval=0.05)
    if not gone:
        os.kill(pid, signal.SIGKILL)


def down(directory: str | Path) -> dict[str, Any]:
    """Stop the controller, then ZooKeeper (if ``up`` started it), each only if it still is the process ``up``
    recorded. Safe to call twice."""
    state = read_state(directory)
    _terminate("simulated controller", state.get("controller"))
    _terminate("ZooKeeper server", state.get("zookeeper"))
    (Path(directory) / STATE_FILE).unlink(missing_ok=True)
    return state


def send_command(zk_url: str, op: str, broker: int, *, timeout: float = 30.0) -> None:
    """Ask the running controller to ``kill-broker`` or ``restart-broker``; waits until it has done so."""
    target = parse_zk_url(zk_url)
    with zk_session(target, timeout=min(timeout, 10.0)) as zk:
        if not zk.exists(STATUS_PATH):
            raise SourceError(f"no simulated cluster at {target.display}")
        path = zk.create(f"{COMMANDS_PATH}/cmd-", json.dumps({"op": op, "broker": broker, "id": uuid.uuid4().hex}).encode(),
                         sequence=True, makepath=True)
        _, acted = poll(lambda: not zk.exists(path), bool, timeout=timeout, interval=0.05)
        if not acted:
            zk.delete(path)
            raise SimulationError(f"the simulated controller did not act on {op} {broker} within {timeout:g} s")
