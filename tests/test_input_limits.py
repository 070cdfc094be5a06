"""Bad input meets a named one-line error and leaves nothing behind: Kafka's own limits (int32 ids and partitions,
int64 sizes, topic name rules), deep JSON, unwritable or full run directories, and options out of range, each
refused before any connection or any file is written."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_cli
from test_cli import assert_one_line_error

BROKERS = [{"id": 0, "rack": "a"}, {"id": 1, "rack": "b"}, {"id": 2, "rack": "c"}]


def _cluster(tmp: Path, **partition) -> Path:
    part = {"topic": "t", "partition": 0, "replicas": [0, 1], "size_bytes": 10, **partition}
    src = tmp / "cluster.json"
    src.write_text(json.dumps({"brokers": BROKERS, "partitions": [part]}))
    return src


def _files(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


@pytest.mark.parametrize("partition, code, message", [
    ({"partition": 2**31}, 3, "partition number 2147483648 is not an integer from 0 to 2147483647"),
    ({"replicas": [0, 3000000000]}, 3, "replica 3000000000 is not a broker id"),
    ({"size_bytes": 2**63}, 3, "size_bytes 9223372036854775808 is not an integer from 0 to"),
    ({"size_bytes": 1e30}, 3, "size_bytes"),
    ({"topic": "orders/eu"}, 3, "topic name 'orders/eu' contains '/'"),
    ({"topic": "x" * 250}, 3, "is 250 characters long (Kafka allows at most 249)"),
    ({"topic": ".."}, 3, "cannot be '.' or '..'"),
    ({"topic": "caf\u00e9"}, 3, "contains"),
])
def test_kafka_limits_are_named_and_nothing_is_written(tmp_path, partition, code, message):
    run = tmp_path / "run"
    result = run_cli("snapshot", "--source", f"file://{_cluster(tmp_path, **partition)}", "--out", str(run))
    assert_one_line_error(result, code, message)
    assert not run.exists()


def test_broker_id_beyond_int32_from_zookeeper_writes_nothing(tmp_path, zk, zk_url):
    """A broker registered as 3000000000 (the id 3e9 of the probe): named, and no snapshot.json to plan from."""
    from rebalancer import kafka_zk as kz

    zk.create(kz.broker_path(3000000000), kz.encode({"host": "h", "port": 1, "rack": "a"}), makepath=True)
    zk.create(kz.topic_path("t"), kz.encode({"version": 3, "partitions": {"0": [3000000000]}}), makepath=True)
    run = tmp_path / "run"
    run.mkdir()
    result = run_cli("snapshot", "--source", zk_url, "--out", str(run))
    assert_one_line_error(result, 3, "broker id 3000000000 is not a Kafka broker id")
    assert _files(run) == []


def test_json_nested_200k_deep_is_named(tmp_path):
    src = tmp_path / "deep.json"
    src.write_text("[" * 200_000 + "]" * 200_000)
    assert_one_line_error(run_cli("snapshot", "--source", f"file://{src}", "--out", str(tmp_path / "run")), 2,
                          "nested too deeply")
    assert not (tmp_path / "run").exists()


def test_out_under_a_file_is_named(tmp_path):
    (tmp_path / "afile").write_text("x")
    result = run_cli("snapshot", "--source", f"file://{_cluster(tmp_path)}", "--out", str(tmp_path / "afile" / "run"))
    assert_one_line_error(result, 2, "afile")


def _limited_cli(max_file_bytes: int, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with a file-size limit: a write past it fails (EFBIG), as writing to a full disk fails (ENOSPC)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    return subprocess.run([sys.executable, "-m", "rebalancer", *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO, preexec_fn=limit)


def test_a_full_disk_during_snapshot_leaves_nothing(tmp_path):
    from rebalancer.formats import write_cluster_json
    from rebalancer.sim.scenarios import ScenarioParams, build_scenario

    src = tmp_path / "cluster.json"
    write_cluster_json(build_scenario("new-brokers", ScenarioParams(partitions=2000)), src)
    for where in (tmp_path / "new-run", tmp_path / "old-run"):
        if where.name == "old-run":  # a run directory with an earlier, complete snapshot: it must stay as it was
            assert run_cli("snapshot", "--source", f"file://{src}", "--out", str(where), "--quiet").returncode == 0
        before = {p: p.read_bytes() for p in where.rglob("*") if p.is_file()} if where.exists() else {}
        result = _limited_cli(20_000, "snapshot", "--source", f"file://{src}", "--out", str(where))
        assert_one_line_error(result, 2, "cannot write", "File too large")
        after = {p: p.read_bytes() for p in where.rglob("*") if p.is_file()} if where.exists() else {}
        assert after == before, "a failed snapshot changed or left files"


def test_a_full_disk_during_plan_leaves_the_old_plan(tmp_path):
    from rebalancer.formats import write_cluster_json
    from rebalancer.sim.scenarios import ScenarioParams, build_scenario

    src = tmp_path / "cluster.json"
    write_cluster_json(build_scenario("new-brokers", ScenarioParams(partitions=400)), src)
    run = tmp_path / "run"
    assert run_cli("snapshot", "--source", f"file://{src}", "--out", str(run), "--quiet").returncode == 0
    assert run_cli("plan", str(run), "--mode", "rebalance").returncode == 0
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    result = _limited_cli(30_000, "plan", str(run), "--mode", "add-brokers", "--brokers", "12,13,14,15")
    assert_one_line_error(result, 2, "cannot write")
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


def _read_only(path: Path, on: bool) -> None:
    """Make a directory unwritable, for root too: the immutable attribute (root ignores mode bits); mode bits else."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i" if on else "-i", str(path)], check=True)
    else:
        os.chmod(path, 0o555 if on else 0o755)


def test_a_read_only_run_directory_is_named(tmp_path):
    run = tmp_path / "run"
    assert run_cli("snapshot", "--source", f"file://{_cluster(tmp_path)}", "--out", str(run), "--quiet").returncode == 0
    before = _files(run)
    _read_only(run, True)
    try:
        result = run_cli("plan", str(run), "--mode", "rebalance")
        assert_one_line_error(result, 2, "cannot write", str(run))
        assert _files(run) == before
    finally:
        _read_only(run, False)


@pytest.mark.parametrize("args, message", [
    (["--timeout", "inf"], "'inf' must be a finite number"),
    (["--timeout", "nan"], "'nan' must be a finite number"),
    (["--max-moves", "0"], "'0' must be at least 1"),
    (["--max-moves-per-broker", "-1"], "'-1' must be at least 1"),
    (["--throttle-settle", "-5"], "'-5' must be at least 0"),
    (["--throttle-settle", "nan"], "'nan' must be a finite number"),
    (["--poll", "0"], "'0' must be greater than 0"),
    (["--throttle", "100000000000000000000000000GB/s"], "above Kafka's largest rate"),
    (["--max-batch-bytes", "1e9"], "invalid --max-batch-bytes"),
])
def test_execute_options_are_checked_before_anything(tmp_path, args, message):
    throttle = [] if "--throttle" in args else ["--throttle", "50MB/s"]
    result = run_cli("execute", str(tmp_path / "no-such-run"), "--source", "zk://127.0.0.1:1", *throttle, *args)
    assert_one_line_error(result, 2, message)


def test_write_lp_into_a_missing_directory_fails_before_planning(tmp_path):
    run = tmp_path / "run"
    assert run_cli("snapshot", "--source", f"file://{_cluster(tmp_path)}", "--out", str(run), "--quiet").returncode == 0
    result = run_cli("plan", str(run), "--mode", "rebalance", "--write-lp", str(tmp_path / "missing" / "p.lp"))
    assert_one_line_error(result, 2, "--write-lp", "does not exist")
    assert not (run / "plan.json").exists()


def _snapshot(tmp: Path) -> Path:
    run = tmp / "run"
    assert run_cli("snapshot", "--source", f"file://{_cluster(tmp)}", "--out", str(run), "--quiet").returncode == 0
    return run


@pytest.mark.parametrize("disk, message", [
    (1e308, "brokerCapacities[0].capacity.DISK: 1e+308 is not a capacity: more than"),
    (int("9" * 401), "brokerCapacities[0].capacity.DISK: 9999999999"),
])
def test_a_capacity_beyond_what_the_arithmetic_holds_is_named(tmp_path, disk, message):
    """Issue 42 (1, 2): 1e308 MB overflowed to infinity and a 401-digit integer beyond any float, each an internal
    error (exit 70); now one line naming the key, and no plan."""
    run = _snapshot(tmp_path)
    capacity = tmp_path / "capacity.json"
    capacity.write_text('{"brokerCapacities": [{"brokerId": -1, "capacity": {"DISK": %s}}]}' % (
        repr(disk) if isinstance(disk, float) else str(disk)))
    result = run_cli("plan", str(run), "--mode", "rebalance", "--balance", "load", "--capacity", str(capacity))
    assert_one_line_error(result, 2, message)
    assert not (run / "plan.json").exists()


def test_a_fanout_beyond_what_the_arithmetic_holds_is_named(tmp_path):
    """Issue 42 (4): fan-out 1e300 passed, and network out after the plan was -9223372036854775808 on every broker
    (a numpy cast of infinity): now one line, and no plan."""
    run = _snapshot(tmp_path)
    result = run_cli("plan", str(run), "--mode", "rebalance", "--balance", "load", "--fanout", "*=1e300")
    assert_one_line_error(result, 2, "fan-out of topic", "is not a number from 0 to 1e+06")
    assert not (run / "plan.json").exists()


@pytest.mark.parametrize("master", ["local[0]", "local[-1]", "localhost", "local[x]", "k8s://"])
def test_a_spark_master_spark_would_refuse_is_one_line(tmp_path, master):
    """Issue 42 (3): ``local[0]`` went to Spark (43 lines, two Java stack traces, exit 70): any master starting with
    "local" passed. Now checked against what Spark accepts before anything is submitted."""
    run = _snapshot(tmp_path)
    result = run_cli("plan", str(run), "--mode", "rebalance", "--balance", "load", "--groups", "2",
                     "--master", master)
    assert_one_line_error(result, 2, f"unknown Spark master {master!r}")
    assert not (run / "plan.json").exists()


def test_the_spark_masters_spark_accepts_pass_the_check():
    from rebalancer.analyze import check_master

    for master in ("local", "local[1]", "local[*]", "local[4,2]", "local[*,3]", "yarn", "k8s://https://h:443"):
        check_master(master)
