"""rebalancer.localkafka on real Apache Kafka: 3.9.2 with its ZooKeeper, and 4.3.1 in KRaft mode.

One cluster per version for the whole module (4 brokers in 3 racks: the ``new-brokers`` scenario with 3 old
brokers in racks a, b and an empty new broker in rack c; 24 partitions at RF 2; 120 MiB of data), stopped at the
end whatever happens (``local_cluster``'s ``finally``, and an atexit hook should the interpreter die first).
The fault tests run after the read-only ones and ``down`` runs last. A failed test's cluster directory (every
node's server.log, stdout.log and server.properties) stays under pytest's basetemp.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import waiting

from rebalancer.localkafka import active_controller, down, local_cluster, read_state, status
from rebalancer.localkafka.load import partition_targets, replica_sizes
from rebalancer.localkafka.nodes import admin_client
from rebalancer.sim.scenarios import ScenarioParams, build_scenario

wait_for = partial(waiting.wait_for, poll=0.3)  # what these tests poll is slow to ask (a CLI, a cluster)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parent.parent
PARAMS = {"brokers": 3, "racks": 2, "new_brokers": 1, "partitions": 24, "topics": 3, "rf": 2}
DATA_MIB = 120
MiB = 1024 * 1024
# Faster failure detection than Kafka's defaults (18 s ZooKeeper session, 9 s KRaft broker session), so that the
# fault tests take seconds; nothing else is changed.
FAST_FAILOVER = {"3.9": {"zookeeper.session.timeout.ms": 6000}, "4.x": {"broker.session.timeout.ms": 6000}}


def scenario() -> Any:
    return build_scenario("new-brokers", ScenarioParams(**PARAMS))


def localkafka(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rebalancer.localkafka", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def java_processes_of(directory: Path) -> list[int]:
    """Pids of the java processes whose command line names ``directory``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"java") and any(str(directory).encode() in arg for arg in cmd):
            pids.append(int(entry.name))
    return pids


def live_brokers(state: dict[str, Any]) -> set[int] | None:
    """The registered, unfenced brokers; None when no answer came (kafka-python gives up on a request it sent to a
    broker that was just killed, while the cluster's metadata still lists it)."""
    import kafka.errors as ke

    from rebalancer.localkafka.load import bootstrap_of

    try:
        with admin_client(bootstrap_of(read_state(state["directory"])), timeout=5.0) as admin:
            return {b["broker_id"] for b in admin.describe_cluster()["brokers"] if not b.get("is_fenced")}
    except ke.KafkaError:
        return None


@pytest.fixture(scope="module", params=["3.9", "4.x"])
def kafka(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    directory = tmp_path_factory.mktemp(f"kafka-{request.param}")
    atexit.register(down, directory, missing_ok=True)
    with local_cluster(directory, request.param, scenario="new-brokers", **PARAMS, data_mib=DATA_MIB,
                       broker_config=FAST_FAILOVER[request.param]) as state:
        yield state


# -- start-up -----------------------------------------------------------------------------------------------------
def test_sources_answer(kafka: dict[str, Any]) -> None:
    cluster = scenario()
    assert live_brokers(kafka) == {b.id for b in cluster.brokers}
    with admin_client(kafka["kafka_url"].removeprefix("kafka://"), timeout=5.0) as admin:
        racks = {b["broker_id"]: b["rack"] for b in admin.describe_cluster()["brokers"]}
    assert racks == {b.id: b.rack for b in cluster.brokers}
    assert kafka["startup_seconds"] < 120
    if kafka["version"] == "3.9":
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=kafka["zk_url"].removeprefix("zk://"))
        zk.start(timeout=10)
        try:
            assert sorted(map(int, zk.get_children("/brokers/ids"))) == sorted(b.id for b in cluster.brokers)
        finally:
            zk.stop()
            zk.close()
    else:
        assert kafka["zk_url"] is None
        assert [n["roles"] for n in kafka["nodes"]] == [["broker", "controller"]] * 3 + [["broker"]]


def test_status_reports_every_jvm(kafka: dict[str, Any]) -> None:
    st = status(kafka["directory"])
    expected = len(kafka["nodes"]) + (1 if kafka["version"] == "3.9" else 0)
    assert st["running"] == expected and len(st["processes"]) == expected
    assert all(p["alive"] and p["rss_kib"] > 50 * 1024 for p in st["processes"])
    # 256 MiB heaps: each JVM stays well under 600 MiB resident.
    assert all(p["rss_kib"] < 600 * 1024 for p in st["processes"])
    assert st["rss_kib"] == sum(p["rss_kib"] for p in st["processes"])
    assert read_state(kafka["directory"])["nodes"][0]["process"]["pid"] == st["processes"][0]["pid"]


def test_topics_have_the_scenario_assignment_exactly(kafka: dict[str, Any]) -> None:
    cluster = scenario()
    with admin_client(kafka["kafka_url"].removeprefix("kafka://"), timeout=10.0) as admin:
        topics = admin.describe_topics(sorted(cluster.topics))
    got = {(t["name"], p["partition_index"]): tuple(p["replica_nodes"]) for t in topics for p in t["partitions"]}
    assert got == {p.tp: tuple(p.replicas) for p in cluster.partitions}
    new = cluster.meta["new_brokers"]
    assert new == kafka["new_brokers"] == [3]
    assert not any(set(new) & set(r) for r in got.values())  # the new broker starts empty


def test_partition_sizes_match_the_request(kafka: dict[str, Any]) -> None:
    targets = partition_targets(scenario(), DATA_MIB * MiB)
    sizes = replica_sizes(kafka)
    assert sum(targets.values()) == pytest.approx(DATA_MIB * MiB, rel=1e-6)
    for tp, want in targets.items():
        per_replica = sizes[tp]
        assert len(set(per_replica.values())) == 1, f"{tp}: replicas differ {per_replica}"
        assert per_replica[next(iter(per_replica))] == pytest.approx(want, rel=0.02, abs=64 * 1024), tp
    # Different partitions got different shares, as the scenario's sizes differ.
    assert max(targets.values()) > 2 * min(targets.values())


def test_log_dirs_json_is_what_snapshot_reads(kafka: dict[str, Any]) -> None:
    from rebalancer.snapshot import read_sizes

    assert kafka["sizes"] == f"file://{kafka['directory']}/log-dirs.json"
    from_file = read_sizes(kafka["sizes"])
    live = replica_sizes(kafka)
    assert {tp: v for tp, v in from_file.items() if not tp[0].startswith("__")} == \
        {tp: v for tp, v in live.items() if not tp[0].startswith("__")}


def test_rebalancer_snapshot_reads_the_cluster(kafka: dict[str, Any], tmp_path: Path) -> None:
    # kafka:// on every version; zk:// (sizes from log-dirs.json) where there is a ZooKeeper (3.9): same snapshot.
    sources = {"kafka": ["--source", kafka["kafka_url"]]}
    if kafka["zk_url"] is not None:
        sources["zk"] = ["--source", kafka["zk_url"], "--sizes", kafka["sizes"]]
    for source, args in sources.items():
        _check_snapshot(args, tmp_path / source)


def _check_snapshot(args: list[str], tmp_path: Path) -> None:
    done = subprocess.run([str(REPO / ".venv" / "bin" / "rebalancer"), "snapshot", *args, "--out", str(tmp_path),
                           "--quiet"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    snap = json.loads((tmp_path / "snapshot.json").read_text())
    cluster = scenario()
    targets = partition_targets(cluster, DATA_MIB * MiB)
    parts = {(p["topic"], p["partition"]): p for p in snap["partitions"]}
    for p in cluster.partitions:
        assert parts[p.tp]["replicas"] == list(p.replicas)
        assert parts[p.tp]["size_bytes"] == pytest.approx(targets[p.tp], rel=0.02, abs=64 * 1024)
    assert {b["id"]: b.get("rack") for b in snap["brokers"]} == {b.id: b.rack for b in cluster.brokers}


# -- faults (they change the cluster: after the read-only tests) --------------------------------------------------
def test_kill_and_restart_broker(kafka: dict[str, Any]) -> None:
    d = kafka["directory"]
    victim = 1
    done = localkafka("kill-broker", str(victim), "--dir", d)
    assert done.returncode == 0, done.stderr
    wait_for(lambda: (live := live_brokers(kafka)) is not None and victim not in live, 30,
             f"broker {victim} to leave the cluster")
    again = localkafka("kill-broker", str(victim), "--dir", d)
    assert again.returncode == 2 and again.stderr.strip().count("\n") == 0 and "not running" in again.stderr
    done = localkafka("restart-broker", str(victim), "--dir", d, "--timeout", "120")
    assert done.returncode == 0, done.stderr
    assert "in the ISR" in done.stdout
    assert victim in wait_for(lambda: live_brokers(kafka), 10, "an answer")


def test_kill_controller_fails_over_and_restarts(kafka: dict[str, Any]) -> None:
    from rebalancer.localkafka import kill_controller

    before = active_controller(kafka["directory"])
    result = kill_controller(kafka["directory"], timeout=120)
    assert result["controller"] == before
    assert result["new_controller"] != before
    assert wait_for(lambda: live_brokers(kafka), 10, "an answer") == {b.id for b in scenario().brokers}
    assert status(kafka["directory"])["running"] == len(kafka["nodes"]) + (kafka["version"] == "3.9")


def test_down_leaves_no_java_process(kafka: dict[str, Any]) -> None:
    d = Path(kafka["directory"])
    assert java_processes_of(d)
    done = localkafka("down", "--dir", str(d))
    assert done.returncode == 0, done.stderr
    assert java_processes_of(d) == []
    assert status(d)["running"] == 0
    assert (d / "node-0" / "server.log").exists()  # logs are kept
    assert down(d)["stopped_at"]  # a second down is a no-op


# -- no cluster needed --------------------------------------------------------------------------------------------
def test_bad_version_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = localkafka("up", "--dir", str(tmp_path), "--version", "5.0")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "choose 3.9" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "localkafka.json").exists()


def test_commands_without_a_cluster_fail_in_one_line(tmp_path: Path) -> None:
    for args in (["status"], ["down"], ["kill-broker", "0"], ["kill-controller"]):
        done = localkafka(*args, "--dir", str(tmp_path))
        assert done.returncode == 2, args
        assert done.stderr.count("\n") == 1 and "no local Kafka cluster" in done.stderr


@pytest.mark.kafka
def test_failed_start_names_the_broker_and_stops_everything(tmp_path: Path) -> None:
    from rebalancer.errors import SimulationError
    from rebalancer.localkafka import up

    with pytest.raises(SimulationError, match=r"broker 0 exited with code \d+: .*num.io.threads"):
        up(tmp_path, "3.9", brokers=1, broker_config={"num.io.threads": "many"}, timeout=60)
    assert java_processes_of(tmp_path) == []
    assert os.path.exists(tmp_path / "node-0" / "server.log") or os.path.exists(tmp_path / "node-0" / "stdout.log")


def test_down_never_signals_a_process_it_did_not_start(tmp_path: Path) -> None:
    """A pid recorded in localkafka.json that now belongs to another process (another start time) is left alone;
    the same pid with its true identity is stopped."""
    from rebalancer.formats import atomic_write_json
    from rebalancer.procs import process_identity

    stranger = subprocess.Popen(["sleep", "60"])
    try:
        ident = process_identity(stranger.pid)
        assert ident is not None
        node = {"id": 0, "rack": None, "roles": ["broker"], "port": 1, "controller_port": None,
                "dir": str(tmp_path / "node-0"), "process": {**ident, "start_time": ident["start_time"] - 1}}
        state = {"version": "3.9", "kafka_version": "3.9.2", "kraft": False, "directory": str(tmp_path),
                 "nodes": [node], "zookeeper": None}
        atomic_write_json(tmp_path / "localkafka.json", state)
        down(tmp_path, wait=1.0)
        assert stranger.poll() is None  # a stranger: untouched
        node["process"] = ident
        atomic_write_json(tmp_path / "localkafka.json", state)
        down(tmp_path, wait=1.0)
        assert stranger.wait(5) == -15  # the recorded process itself: SIGTERM
    finally:
        stranger.kill()
        stranger.wait()
