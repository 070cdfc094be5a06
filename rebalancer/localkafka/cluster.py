"""The public operations on a local cluster: up, down, status, the test context manager, and faults."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import InputError, RebalancerError, SimulationError
from ..model import Cluster
from ..retry import poll
from .nodes import (
    LOG_DIRS_FILE,
    admin_client,
    is_ours,
    node_record,
    normalize_version,
    read_state,
    signal_all,
    start_cluster,
    start_node,
    stop_cluster,
    wait_brokers,
    write_state,
)

__all__ = ["up", "down", "local_cluster", "kill_broker", "restart_broker", "kill_controller",
           "active_controller", "MAX_BROKERS"]

MiB = 1024 * 1024
MAX_BROKERS = 32  # each broker is a JVM of about 200-300 MiB resident
MAX_PARTITIONS = 20_000


def _scenario_cluster(scenario: str, *, brokers: int | None, racks: int | None, partitions: int | None,
                      topics: int | None, rf: int | None, new_brokers: int | None, seed: int) -> Cluster:
    from ..sim.scenarios import ScenarioParams, build_scenario

    return build_scenario(scenario, ScenarioParams(brokers=brokers, racks=racks, partitions=partitions, topics=topics,
                                                   rf=rf, new_brokers=new_brokers, seed=seed))


def _plain_brokers(brokers: int | None, racks: int | None) -> dict[int, str | None]:
    n = 3 if brokers is None else brokers
    if racks is not None and not 1 <= racks <= 26:
        raise InputError(f"--racks {racks}: give 1 to 26")
    names = [chr(ord("a") + i) for i in range(racks or 0)]
    return {i: names[i % len(names)] if names else None for i in range(n)}


def up(directory: str | os.PathLike[str], version: str = "3.9", *, brokers: int | None = None,
       racks: int | None = None, scenario: str | None = None, partitions: int | None = None,
       topics: int | None = None, rf: int | None = None, new_brokers: int | None = None, seed: int = 42,
       data_mib: float = 0.0, broker_config: Mapping[str, Any] | None = None, heap_mib: int = 256,
       producer: str = "auto", timeout: float = 180.0) -> dict[str, Any]:
    """Start a real Kafka cluster under ``directory`` and load a scenario into it; returns the state record.

    Without ``scenario``: ``brokers`` (default 3) empty brokers, ids from 0, racks a, b, ... in turn when ``racks``
    is given. With one (``new-brokers``, ``wix``, ..., or ``file:PATH``): the scenario's broker ids and racks
    (``brokers``, ``racks``, ... are its parameters, as for the simulator), every topic created with the scenario's
    replica lists, and ``data_mib`` MiB of random data shared among the partitions in proportion to the scenario's
    sizes. ``broker_config`` adds or overrides server.properties keys on every node. Everything started is
    stopped again when start-up or loading fails."""
    key = normalize_version(version)
    if not 0 <= data_mib <= 1_000_000:
        raise InputError(f"--data-mib {data_mib:g}: give 0 to 1000000")
    cluster = None
    if scenario is not None:
        cluster = _scenario_cluster(scenario, brokers=brokers, racks=racks, partitions=partitions, topics=topics,
                                    rf=rf, new_brokers=new_brokers, seed=seed)
        members: dict[int, str | None] = {b.id: b.rack for b in cluster.brokers}
    else:
        if any(v is not None for v in (partitions, topics, rf, new_brokers)) or data_mib:
            raise InputError("--partitions, --topics, --rf, --new-brokers and --data-mib need a --scenario")
        members = _plain_brokers(brokers, racks)
    if not 1 <= len(members) <= MAX_BROKERS:
        raise InputError(f"{len(members)} brokers: a local cluster runs 1 to {MAX_BROKERS} (each is a JVM of"
                         f" about 250 MiB); give the scenario fewer with --brokers")
    if cluster is not None and len(cluster.partitions) > MAX_PARTITIONS:
        raise InputError(f"{len(cluster.partitions):,} partitions: a local cluster takes at most {MAX_PARTITIONS:,};"
                         " give the scenario fewer with --partitions")
    if cluster is not None and data_mib:
        rf_max = max((len(p.replicas) for p in cluster.partitions), default=1)
        need = data_mib * MiB * rf_max * 1.1
        d = Path(directory)
        free = shutil.disk_usage(next(p for p in (d, *d.resolve().parents) if p.exists())).free
        if need > free:
            raise InputError(f"--data-mib {data_mib:g} needs about {need / MiB:,.0f} MiB on disk with replication;"
                             f" {free / MiB:,.0f} MiB are free under {directory}")
    state = start_cluster(directory, version=key, brokers=members, broker_config=broker_config, heap_mib=heap_mib,
                          timeout=timeout)
    state.update(scenario=scenario, racks={str(i): r for i, r in sorted(members.items())},
                 new_brokers=list((cluster.meta.get("new_brokers") or []) if cluster else []), data_mib=data_mib)
    if cluster is not None:
        from .load import load_cluster

        try:
            state["load"] = load_cluster(state, cluster, data_mib, producer=producer,
                                         timeout=max(timeout, 60.0 + data_mib))
        except BaseException:
            stop_cluster(directory, wait=5.0)
            raise
        state["sizes"] = f"file://{Path(state['directory']) / LOG_DIRS_FILE}"
    write_state(state)
    return state


def down(directory: str | os.PathLike[str], *, missing_ok: bool = False, wait: float = 5.0) -> dict[str, Any] | None:
    """Stop every process ``up`` started from ``directory`` (SIGTERM, SIGKILL after ``wait`` s; brokers, then
    KRaft controllers, then ZooKeeper), each only while its pid is still that process. The directory is kept (logs
    and data for a post-mortem). Safe to call twice."""
    state = stop_cluster(directory, wait=wait)
    if state is None and not missing_ok:
        raise InputError(f"no local Kafka cluster in {directory}")
    return state


@contextmanager
def local_cluster(directory: str | os.PathLike[str], version: str = "3.9", **kwargs: Any) -> Iterator[dict[str, Any]]:
    """``up`` for a ``with`` block; ``down`` on the way out, whatever happened inside (logs are kept)."""
    try:
        yield up(directory, version, **kwargs)
    finally:
        down(directory, missing_ok=True)


# -- faults -------------------------------------------------------------------------------------------------------
def _running_ids(state: Mapping[str, Any]) -> list[int]:
    return [n["id"] for n in state["nodes"] if is_ours(n.get("process"))]


def kill_broker(directory: str | os.PathLike[str], broker_id: int) -> dict[str, Any]:
    """``kill -9`` one broker (KRaft: the whole node, controller included). Its data stays for ``restart_broker``."""
    state = read_state(directory)
    node = node_record(state, broker_id)
    if not is_ours(node.get("process")):
        raise InputError(f"broker {broker_id} is not running")
    signal_all([node["process"]], signal.SIGKILL, wait=0.0)
    return {"broker": broker_id, "pid": node["process"]["pid"], "killed": True}


def _zk(state: Mapping[str, Any]) -> Any:
    from ..zkclient import parse_zk_url, zk_session

    return zk_session(parse_zk_url(state["zk_url"]), timeout=10.0)


def _session_timeout_s(state: Mapping[str, Any]) -> float:
    return int(state.get("broker_config", {}).get("zookeeper.session.timeout.ms", 18000)) / 1000


def _wait_unregistered(state: Mapping[str, Any], broker_id: int, timeout: float) -> None:
    """ZooKeeper mode: a killed broker's /brokers/ids znode lives until its session expires, and a broker restarted
    before then fails to register (the node exists): wait for it to go."""
    with _zk(state) as zk:
        _, gone = poll(lambda: not zk.exists(f"/brokers/ids/{broker_id}"), bool, timeout=timeout, interval=0.2)
        if not gone:
            raise SimulationError(f"broker {broker_id} is still registered in ZooKeeper {timeout:g} s after it"
                                  " stopped")


def _wait_isr(state: Mapping[str, Any], broker_id: int, timeout: float) -> int:
    """Wait until ``broker_id`` is in the ISR of every partition it replicates; returns how many those are."""
    import kafka.errors as ke

    from .load import bootstrap_of

    behind: list[str] = []

    def in_sync() -> int | None:  # how many partitions it replicates, once in the ISR of all; None while behind
        nonlocal behind
        try:
            with admin_client(bootstrap_of(state), timeout=10.0) as admin:
                topics = admin.describe_topics()
        except ke.KafkaError:
            behind = behind or ["(cluster unreadable)"]
            return None
        mine = [(t["name"], p) for t in topics for p in t["partitions"] if broker_id in p["replica_nodes"]]
        behind = [f"{name}-{p['partition_index']}" for name, p in mine if broker_id not in p["isr_nodes"]]
        return None if behind else len(mine)

    count, _ = poll(in_sync, lambda found: found is not None, timeout=timeout, interval=0.3)
    if count is None:
        raise SimulationError(f"broker {broker_id} is back but not in the ISR of {len(behind)} partitions"
                              f" (first {behind[0]}) within {timeout:g} s")
    return count


def restart_broker(directory: str | os.PathLike[str], broker_id: int, *, timeout: float = 120.0,
                   in_sync: bool = True) -> dict[str, Any]:
    """Start a stopped broker again with its configuration and data (a running one is stopped first, gracefully);
    wait until it is registered and every running broker lists it, then (``in_sync``) until it is back in the ISR
    of every partition it replicates."""
    state = read_state(directory)
    node_record(state, broker_id)
    started = time.monotonic()
    from .nodes import stop_node

    stop_node(state, broker_id, wait=30.0)
    if not state["kraft"]:
        _wait_unregistered(state, broker_id, _session_timeout_s(state) + 15.0)
    proc = start_node(state, broker_id)
    want = sorted({*_running_ids(state), broker_id})
    wait_brokers(state, want, timeout=timeout, procs={broker_id: proc})
    registered = time.monotonic() - started
    partitions = _wait_isr(state, broker_id, max(1.0, timeout - registered)) if in_sync else None
    return {"broker": broker_id, "pid": proc.pid, "registered_seconds": round(registered, 2),
            "seconds": round(time.monotonic() - started, 2), "in_sync_partitions": partitions}


def active_controller(directory: str | os.PathLike[str] | Mapping[str, Any]) -> int:
    """The active controller's id: ZooKeeper's /controller znode (3.9), the KRaft quorum leader (4.x)."""
    state = directory if isinstance(directory, Mapping) else read_state(directory)
    if not state["kraft"]:
        with _zk(state) as zk:
            if not zk.exists("/controller"):
                raise SimulationError("no active controller: /controller is absent in ZooKeeper")
            data, _ = zk.get("/controller")
        return int(json.loads(data)["brokerid"])
    import kafka.errors as ke

    from .load import bootstrap_of

    try:
        with admin_client(bootstrap_of(state), timeout=10.0) as admin:
            quorum = admin.describe_metadata_quorum()
    except ke.KafkaError as exc:
        raise SimulationError(f"cannot read the KRaft quorum: {type(exc).__name__} {exc}") from None
    leader = int(quorum["topics"][0]["partitions"][0]["leader_id"])
    if leader < 0:
        raise SimulationError("the KRaft quorum has no leader")
    return leader


def kill_controller(directory: str | os.PathLike[str], *, timeout: float = 120.0) -> dict[str, Any]:
    """``kill -9`` the active controller, wait until another node has taken over, then restart the killed one
    (same configuration and data) so the cluster keeps all its nodes. Returns the old and new controller ids."""
    state = read_state(directory)
    voters = [n for n in state["nodes"] if "controller" in n["roles"]] if state["kraft"] else state["nodes"]
    if len(voters) < (3 if state["kraft"] else 2):
        raise InputError("kill-controller needs another node to take over: at least 3 nodes on 4.x (3 controllers),"
                         " 2 brokers on 3.9")
    old = active_controller(state)
    node = node_record(state, old)
    started = time.monotonic()
    signal_all([node.get("process")], signal.SIGKILL, wait=0.0)
    # 3.9: the controller's ephemeral znode goes when its ZooKeeper session expires; 4.x: the quorum elects anew.
    deadline = started + (timeout + _session_timeout_s(state) if not state["kraft"] else timeout)
    from kazoo.exceptions import KazooException

    def controller() -> int | None:
        try:
            return active_controller(state)
        except (RebalancerError, KazooException):  # no controller yet, or ZooKeeper busy with the fail-over
            return None

    new, took_over = poll(controller, lambda now: now is not None and now != old,
                          timeout=max(0.0, deadline - time.monotonic()), interval=0.3)
    if not took_over:
        raise SimulationError(f"no other controller took over within {deadline - started:.0f} s after killing {old}")
    failover = time.monotonic() - started
    restarted = restart_broker(directory, old, timeout=timeout)
    return {"controller": old, "new_controller": new, "failover_seconds": round(failover, 2),
            "seconds": round(time.monotonic() - started, 2), "restart": restarted}
