"""The console entry point as an operator meets it: outputs, files, one-line errors and exit codes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_cli, wait_for

from rebalancer.errors import SimulationError
from rebalancer.procs import process_alive
from rebalancer.zkserver import free_port


def assert_one_line_error(result, code: int, *fragments: str) -> None:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_snapshot_from_file_writes_run_dir_and_prints_table(tmp_path: Path):
    src = tmp_path / "cluster.json"
    src.write_text(json.dumps({
        "brokers": [{"id": 0, "rack": "a"}, {"id": 1, "rack": "b"}, {"id": 2, "rack": "c"}],
        "partitions": [{"topic": "t", "partition": i, "replicas": [i % 3, (i + 1) % 3], "size_bytes": 1000} for i in range(6)],
    }))
    result = run_cli("snapshot", "--source", f"file://{src}", "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "run" / "snapshot.json").exists() and (tmp_path / "run" / "replicas.parquet").exists()
    assert "3 brokers (3 racks), 1 topics, 6 partitions, 12 replicas" in result.stdout
    rows = [ln.split() for ln in result.stdout.splitlines() if ln.strip()[:1].isdigit()]
    assert [(r[0], r[2], r[4]) for r in rows] == [("0", "4", "2"), ("1", "4", "2"), ("2", "4", "2")]
    again = run_cli("skew", str(tmp_path / "run"))
    assert again.returncode == 0 and "max |deviation from median|: replicas 0.0%" in again.stdout


def test_malformed_json_is_one_line_and_writes_nothing(tmp_path: Path):
    src = tmp_path / "bad.json"
    src.write_text('{"brokers": [{"id": 0}], "partitions": [')
    result = run_cli("snapshot", "--source", f"file://{src}", "--out", str(tmp_path / "run"))
    assert_one_line_error(result, 2, "malformed JSON at line 1")
    assert not (tmp_path / "run").exists()


def test_replica_on_unknown_broker_is_one_line(tmp_path: Path):
    src = tmp_path / "c.json"
    src.write_text(json.dumps({"brokers": [{"id": 0}, {"id": 1}],
                               "partitions": [{"topic": "orders", "partition": 4, "replicas": [0, 9]}]}))
    result = run_cli("snapshot", "--source", f"file://{src}", "--out", str(tmp_path / "run"))
    assert_one_line_error(result, 3, "partition orders-4: replica on unknown broker 9")
    assert not (tmp_path / "run").exists()


def test_unreachable_zookeeper_is_one_line(tmp_path: Path):
    result = run_cli("snapshot", "--source", f"zk://127.0.0.1:{free_port()}/kafka", "--timeout", "2", "--out", str(tmp_path / "r"))
    assert_one_line_error(result, 4, "cannot connect to ZooKeeper at zk://127.0.0.1:", "/kafka within 2 s")
    assert not (tmp_path / "r").exists()


def test_credentials_never_printed(tmp_path: Path):
    result = run_cli("snapshot", "--source", f"zk://admin:s3cret@127.0.0.1:{free_port()}", "--timeout", "1", "--out", str(tmp_path / "r"))
    assert result.returncode == 4
    assert "s3cret" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["snapshot", "--out", "x"], "the following arguments are required: --source"),
        (["snapshot", "--source", "ftp://x", "--out", "x"], "unknown source 'ftp://x'"),
        (["snapshot", "--source", "zk://nohost", "--out", "x"], "'nohost' is not HOST:PORT"),
        (["snapshot", "--source", "file:///nonexistent.json", "--out", "x"], "/nonexistent.json: no such file"),
        (["snapshot", "--source", "file:///tmp", "--out", "x", "--timeout", "-1"], "'-1' must be greater than 0"),
        (["sim", "status", "--dir", "/nonexistent"], "no simulated cluster in /nonexistent"),
        (["skew", "/nonexistent"], "no snapshot in this run directory"),
    ],
)
def test_bad_usage_is_one_line(args: list[str], fragment: str):
    result = run_cli(*args)
    assert result.returncode != 0
    assert_one_line_error(result, result.returncode, fragment)


def test_sim_up_snapshot_kill_down(tmp_path: Path):
    """The main job's path: a simulated cluster in the background, read back through zk://."""
    sim_dir = tmp_path / "sim"
    try:
        # Inside the try: an `up` that fails or outlives its wait still leaves processes that `down` must stop.
        up = run_cli("sim", "up", "--dir", str(sim_dir), "--scenario", "new-brokers", "--partitions", "96",
                     "--acceleration", "50")
        assert up.returncode == 0, up.stderr
        state = json.loads((sim_dir / "sim.json").read_text())
        snap = run_cli("snapshot", "--source", state["zk_url"], "--sizes", state["sizes"], "--out", str(tmp_path / "run"))
        assert snap.returncode == 0, snap.stderr
        assert "16 brokers (4 racks), 8 topics, 96 partitions, 288 replicas" in snap.stdout
        table = {ln.split()[0]: ln.split() for ln in snap.stdout.splitlines() if ln.strip()[:1].isdigit()}
        assert table["12"][2] == "0" and table["12"][3] == "-100.0!"  # new broker: empty, beyond the count gate
        assert table["0"][7] in ("MiB", "GiB") and float(table["0"][6]) > 0  # sizes came through log-dirs.json

        kill = run_cli("sim", "kill-broker", "0", "--dir", str(sim_dir))
        assert kill.returncode == 0, kill.stderr
        snap2 = run_cli("snapshot", "--source", state["zk_url"], "--out", str(tmp_path / "run2"), "--quiet")
        assert "down: 0" in snap2.stdout
        status = run_cli("sim", "status", "--dir", str(sim_dir))
        assert "brokers alive [1, 2," in status.stdout
        again = run_cli("sim", "up", "--dir", str(sim_dir), "--scenario", "wix")
        assert_one_line_error(again, 5, "already running")
    finally:
        down = run_cli("sim", "down", "--dir", str(sim_dir))
    assert down.returncode == 0, down.stderr
    gone = run_cli("snapshot", "--source", state["zk_url"], "--timeout", "1", "--out", str(tmp_path / "run3"))
    assert_one_line_error(gone, 4, "cannot connect")


def test_sim_up_killed_while_it_waits_leaves_processes_that_down_stops(tmp_path: Path):
    # `up` waits for the simulator to come up; killed meanwhile (Ctrl-C twice, a caller's timeout) its background
    # processes must still be stoppable by `down`, which finds them in sim.json. A ZooKeeper address that takes
    # connections and never answers (a socket that listens and never accepts) keeps `up` waiting.
    hole = socket.create_server(("127.0.0.1", 0))
    sim_dir = tmp_path / "sim"
    up = subprocess.Popen([sys.executable, "-m", "rebalancer", "sim", "up", "--dir", str(sim_dir), "--scenario", "new-brokers", "--zookeeper",
                           f"127.0.0.1:{hole.getsockname()[1]}"], cwd=REPO, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (sim_dir / "sim.json").exists(), timeout=60, what="up to record its processes")
        up.kill()
        up.wait()
        state = json.loads((sim_dir / "sim.json").read_text())
        controller = state["controller"]["pid"]
        assert state["kafka_bootstrap"] is None and process_alive(controller)
        down = run_cli("sim", "down", "--dir", str(sim_dir))
        assert down.returncode == 0, down.stderr
        wait_for(lambda: not process_alive(controller), timeout=30, what="the controller to stop")
        assert not (sim_dir / "sim.json").exists()
    finally:
        up.kill()
        hole.close()


def test_plan_writes_kafka_files_and_prints_summary(tmp_path: Path):
    src = tmp_path / "sqooba.json"
    assert run_cli("sim", "scenario", "--scenario", "sqooba", "--out", str(src)).returncode == 0
    run = tmp_path / "run"
    assert run_cli("snapshot", "--source", f"file://{src}", "--out", str(run), "--quiet").returncode == 0
    result = run_cli("plan", str(run), "--mode", "remove-brokers", "--brokers", "19", "--balance", "counts")
    assert result.returncode == 0, result.stderr
    assert "replica moves          1   lower bound        1   ratio 1.000" in result.stdout
    reassignment = json.loads((run / "reassignment.json").read_text())
    rollback = json.loads((run / "rollback.json").read_text())
    assert reassignment == {"version": 1, "partitions": [{"topic": "x.y.z.t", "partition": 1, "replicas": [8, 1]}]}
    assert rollback == {"version": 1, "partitions": [{"topic": "x.y.z.t", "partition": 1, "replicas": [8, 19]}]}
    plan = json.loads((run / "plan.json").read_text())
    assert plan["summary"]["replica_moves"] == 1 and len(plan["content_hash"]) == 64
    # The reassignment file is itself a valid snapshot source (Kafka's format), as operators would reuse it.
    again = run_cli("snapshot", "--source", f"file://{run / 'reassignment.json'}", "--out", str(tmp_path / "r2"), "--quiet")
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize(
    ("args", "fragment", "code"),
    [
        (["--mode", "add-brokers", "--brokers", "12,x"], "--brokers takes comma-separated broker ids", 2),
        (["--mode", "add-brokers", "--brokers", "42"], "broker(s) 42 not in the snapshot", 2),
        (["--mode", "remove-brokers", "--brokers", ",".join(map(str, range(20)))], "leaves no broker", 2),
        (["--mode", "leaders", "--strategy", "greedy"], "--mode leaders takes flow or pinterest", 2),
        (["--mode", "rebalance", "--max-changes-per-partition", "0"], "must be at least 1", 2),
    ],
)
def test_plan_refusals_are_one_line_and_write_nothing(tmp_path: Path, args, fragment, code):
    src = tmp_path / "sqooba.json"
    run_cli("sim", "scenario", "--scenario", "sqooba", "--out", str(src))
    run = tmp_path / "run"
    run_cli("snapshot", "--source", f"file://{src}", "--out", str(run), "--quiet")
    result = run_cli("plan", str(run), *args)
    assert_one_line_error(result, code, fragment)
    assert not (run / "plan.json").exists() and not (run / "reassignment.json").exists()


def test_plan_without_snapshot_is_one_line(tmp_path: Path):
    assert_one_line_error(run_cli("plan", str(tmp_path), "--mode", "rebalance"), 2, "no snapshot in this run directory")


def test_report_without_analysis_is_one_line(tmp_path: Path):
    assert_one_line_error(run_cli("report", str(tmp_path)), 2, "analysis/summary.json: no such file")


def test_sim_up_against_a_zookeeper_that_refuses_leaves_nothing(tmp_path: Path):
    """One line, a non-zero exit and no directory or log left behind (the hostile probe's half-written check)."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        up = run_cli("sim", "up", "--dir", str(tmp_path / "sim"), "--scenario", "new-brokers",
                     "--zookeeper", f"127.0.0.1:{port}")
    assert up.returncode != 0 and "cannot connect to ZooKeeper" in up.stderr, up
    assert len(up.stderr.strip().splitlines()) == 1 and "Traceback" not in up.stderr
    assert not (tmp_path / "sim").exists()
    kept = tmp_path / "kept"
    (kept / "notes.txt").parent.mkdir()
    (kept / "notes.txt").write_text("mine")
    run_cli("sim", "up", "--dir", str(kept), "--scenario", "new-brokers", "--zookeeper", f"127.0.0.1:{port}")
    assert sorted(p.name for p in kept.iterdir()) == ["notes.txt"]


def test_sim_up_twice_in_one_dir_starts_clean(tmp_path: Path):
    sim_dir = tmp_path / "sim"
    for scenario, brokers in (("sqooba", 20), ("new-brokers", 16)):
        up = run_cli("sim", "up", "--dir", str(sim_dir), "--scenario", scenario, "--partitions", "24")
        assert up.returncode == 0, up.stderr
        try:
            state = json.loads((sim_dir / "sim.json").read_text())
            snap = run_cli("snapshot", "--source", state["zk_url"], "--out", str(tmp_path / scenario), "--quiet")
            assert f"{brokers} brokers" in snap.stdout, snap.stdout
        finally:
            run_cli("sim", "down", "--dir", str(sim_dir))


def test_zookeeper_starts_again_on_another_port_when_its_picked_port_is_taken(tmp_path: Path, monkeypatch):
    """A picked port is only free when picked: a parallel process that binds it first must not fail ``sim up``."""
    from rebalancer import zkserver

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        picks = iter([taken.getsockname()[1]])
        real = zkserver.free_port
        monkeypatch.setattr(zkserver, "free_port", lambda host="127.0.0.1": next(picks, None) or real(host))
        server = zkserver.ZooKeeperServer(tmp_path / "zk").start()
        try:
            assert server.port != taken.getsockname()[1]
            assert zkserver.four_letter(server.host, server.port) == "imok"
        finally:
            server.stop()
        # A port given by the caller is not swapped behind its back: one line naming the port.
        with pytest.raises(SimulationError, match=f"could not bind port {taken.getsockname()[1]}: address already in use"):
            zkserver.ZooKeeperServer(tmp_path / "zk2", port=taken.getsockname()[1]).start()
