"""Nothing changes unless it was approved: the plan's hash and its approval are checked before any connection, by
every command that changes the cluster; rollback only reverts the approved plan; a refusal changes nothing, not even
someone else's throttles; an edited execution state cannot smuggle in a move."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import run_cli
from test_cli import assert_one_line_error
from test_execute import assignment, opts, prepared

from rebalancer import kafka_zk as kz
from rebalancer.errors import InputError
from rebalancer.execute import approve, execute
from rebalancer.zkserver import free_port

FOREIGN_BROKER = {"leader.replication.throttled.rate": "1000", "follower.replication.throttled.rate": "1000"}


def _edit_plan(run: Path) -> None:
    """What the probe did: one change's replicas_before pointed at other brokers, one unrelated partition appended."""
    doc = json.loads((run / "plan.json").read_text())
    first = doc["changes"][0]
    others = [b for b in range(12) if b not in first["replicas_before"] and b not in first["replicas_after"]]
    first["replicas_before"] = others[: len(first["replicas_before"])]
    doc["changes"].append({**first, "topic": "unrelated", "partition": 0, "replicas_before": [0, 1, 2],
                           "replicas_after": [3, 4, 5]})
    (run / "plan.json").write_text(json.dumps(doc))


def test_rollback_refuses_an_edited_plan_and_moves_nothing(tmp_path, zk, zk_url, make_sim):
    sim, run, plan, backend = prepared(tmp_path, zk, zk_url, make_sim)
    execute(run, backend, opts(per_broker=50, total=500))
    executed = assignment(backend)
    completed = len(sim.completed)
    _edit_plan(run)
    result = run_cli("rollback", str(run), "--source", zk_url, "--throttle", "200MB/s", "--poll", "0.05")
    assert_one_line_error(result, 2, "content hash")
    assert assignment(backend) == executed and len(sim.completed) == completed
    assert not (run / "execution" / "rollback_state.json").exists()


def test_rollback_needs_the_approval_of_exactly_this_plan(tmp_path, zk, zk_url, make_sim):
    sim, run, plan, backend = prepared(tmp_path, zk, zk_url, make_sim)
    execute(run, backend, opts(per_broker=50, total=500))
    executed = assignment(backend)
    record = json.loads((run / "approval.json").read_text())
    (run / "approval.json").write_text(json.dumps({**record, "plan_hash": "0" * 64}))
    result = run_cli("rollback", str(run), "--source", zk_url, "--throttle", "200MB/s")
    assert_one_line_error(result, 2, "not this plan")
    assert assignment(backend) == executed


@pytest.mark.parametrize("command", [
    ["execute", "--throttle", "50MB/s"],
    ["rollback"],
    ["throttle", "--clear"],
])
def test_mutating_commands_check_the_approval_before_connecting(tmp_path, command):
    """Against a ZooKeeper that does not exist: the refusal must come from the approval, not from the connection."""
    from rebalancer.formats import write_cluster_json
    from rebalancer.plan import plan_run_dir
    from rebalancer.sim.scenarios import ScenarioParams, build_scenario
    from rebalancer.snapshot import take_snapshot

    src = tmp_path / "cluster.json"
    write_cluster_json(build_scenario("new-brokers", ScenarioParams(partitions=24)), src)
    run = tmp_path / "run"
    take_snapshot(f"file://{src}", run)
    plan_run_dir(run, "add-brokers", brokers=[12, 13, 14, 15], balance="counts")  # any valid plan, in milliseconds
    source = f"zk://127.0.0.1:{free_port()}"
    name, *rest = command
    started = time.monotonic()
    result = run_cli(name, *rest, str(run), "--source", source, "--timeout", "20")
    assert_one_line_error(result, 2, "no approval record")
    assert time.monotonic() - started < 15, "it tried to connect first"
    approve(run, by="test", decision="rejected")
    assert_one_line_error(run_cli(name, *rest, str(run), "--source", source, "--timeout", "20"), 2, "rejected")


def test_refused_execute_keeps_someone_elses_throttles(tmp_path, zk, zk_url, make_sim):
    sim, run, plan, backend = prepared(tmp_path, zk, zk_url, make_sim)
    sim.kill_broker(15)
    p = next(p for p in backend.read_cluster().partitions if 15 not in p.replicas)
    # Another tool's reassignment, with its own throttles (stalled: its destination is down).
    backend.alter_configs("brokers", str(p.replicas[0]), FOREIGN_BROKER)
    backend.alter_configs("topics", p.topic, {"follower.replication.throttled.replicas": f"{p.partition}:15",
                                              "leader.replication.throttled.replicas": f"{p.partition}:{p.replicas[0]}"})
    throttles = backend.throttle_configs()
    zk.create(kz.REASSIGN, kz.encode({"version": 1, "partitions": [{"topic": p.topic, "partition": p.partition,
                                                                   "replicas": [15, *p.replicas[1:]]}]}))
    result = run_cli("execute", str(run), "--source", zk_url, "--throttle", "50MB/s", "--throttle-settle", "0")
    assert result.returncode != 0 and "did not start is in flight" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert backend.throttle_configs() == throttles


def test_an_edited_execution_state_cannot_add_a_move(tmp_path, zk, zk_url, make_sim):
    from rebalancer.execute.runner import _new_state
    from rebalancer.movement.batches import Step
    from rebalancer.plan import load_plan

    sim, run, plan, backend = prepared(tmp_path, zk, zk_url, make_sim)
    before = assignment(backend)
    steps = [Step(c.topic, c.partition, c.replicas_before, c.replicas_after, c.size_bytes) for c in plan.changes]
    victim = next(p for p in backend.read_cluster().partitions if (p.topic, p.partition) not in {s.tp for s in steps})
    smuggled = Step(victim.topic, victim.partition, victim.replicas, (15, *victim.replicas[1:]), victim.size_bytes)
    state = _new_state(load_plan(run), opts(), "execute", [smuggled, *steps])
    (run / "execution").mkdir(exist_ok=True)
    (run / "execution" / "state.json").write_text(json.dumps(state))
    with pytest.raises(InputError, match="execution state"):
        execute(run, backend, opts())
    assert assignment(backend) == before and not zk.exists(kz.REASSIGN)
