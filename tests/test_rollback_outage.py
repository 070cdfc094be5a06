"""Rollback after a broker outage (issue 22), on the simulated ZooKeeper-mode cluster on a real ZooKeeper: leaders back
on the original preferred replicas, nothing submitted that needs a broker that is down, messages that fit the backend
in use. The same contract on real Kafka: tests/test_conformance.py (the destination-killed test)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_for
from test_execute import opts, prepared

from rebalancer import kafka_zk as kz
from rebalancer.execute import ExecutionFailed, execute, open_backend, rollback, verify

MB = 1_000_000


def _in_flight_batch(zk: Any, run: Path, index: int) -> dict[str, Any] | None:
    state_file = run / "execution" / "state.json"
    if not zk.exists(kz.REASSIGN) or not state_file.exists():
        return None
    batches = json.loads(state_file.read_text())["batches"]
    return next((b for b in batches if b["status"] == "submitted" and b["index"] >= index), None)


def _execute_until_a_broker_dies(tmp_path: Path, zk: Any, zk_url: str, make_sim: Any, *, kept: bool
                                 ) -> tuple[Any, Path, Any, int, str]:
    """Execute the add-brokers plan of the simulator's default cluster (as the main job) in batches; while the third
    copies, kill a destination broker of it (``kept``: a broker its moves keep instead). Returns (sim, run, plan, the
    killed broker, execute's error)."""
    from rebalancer.sim.scenarios import ScenarioParams

    sim, run, plan, backend = prepared(tmp_path, zk, zk_url, make_sim, acceleration=50.0, params=ScenarioParams())
    outcome: dict[str, str] = {}

    def run_it() -> None:
        try:
            execute(run, backend, opts(throttle=50 * MB, min_timeout=3.0, timeout_factor=0.5, destination_grace=1.0))
        except ExecutionFailed as exc:
            outcome["failed"] = str(exc)

    runner = threading.Thread(target=run_it)
    runner.start()
    try:
        batch = wait_for(lambda: _in_flight_batch(zk, run, 2), 120, "the third batch in flight")
    finally:
        if "batch" not in locals():
            runner.join(120)
    steps = batch["steps"]
    if kept:  # (the highest: the cluster lock's marker topic lives on the lowest live broker)
        victim = sorted({b for s in steps for b in s["to"] if b in s["from"]})[-1]
    else:
        victim = sorted({b for s in steps for b in s["to"] if b not in s["from"]})[0]
    sim.kill_broker(victim)
    runner.join(180)
    assert not runner.is_alive() and "failed" in outcome, outcome
    return sim, run, plan, victim, outcome["failed"]


def test_rollback_after_an_outage_restores_the_original_replicas_and_leaders(tmp_path, zk, zk_url, make_sim):
    """Point 1: while the destination broker is down, another outage moves leadership (an old broker restarts: its
    partitions stay led by the replicas that took over). Once both are back, rollback reverts every replica set and
    gives every planned partition its original leader; verify passes."""
    sim, run, plan, victim, failed = _execute_until_a_broker_dies(tmp_path, zk, zk_url, make_sim, kept=False)
    assert f"destination broker {victim}" in failed
    with open_backend(zk_url) as backend:
        now = backend.read_cluster()
    # An old broker that leads planned partitions the execution never reached: down, then back.
    untouched = [p for p in now.partitions if any((c.topic, c.partition) == p.tp and p.replicas == c.replicas_before
                                                  for c in plan.changes)]
    old = untouched[0].leader
    assert old is not None and old != victim
    sim.kill_broker(old)
    sim.restart_broker(old)
    sim.restart_broker(victim)
    with open_backend(zk_url) as backend:
        moved = [p.name for p in backend.read_cluster().partitions if p.tp in {u.tp for u in untouched}
                 and p.leader != p.replicas[0]]
        assert moved, "the outage moved no leadership: the test would prove nothing"
        rollback(run, backend, opts(throttle=200 * MB))
        now = backend.read_cluster()
        for c in plan.changes:
            p = now.partition(c.topic, c.partition)
            assert (p.replicas, p.leader) == (c.replicas_before, c.replicas_before[0]), (p.name, p.replicas, p.leader)
        assert verify(run, backend, expect="original")["passed"]


def test_rollback_refuses_moves_that_wait_for_a_broker_that_is_down(tmp_path, zk, zk_url, make_sim):
    """Point 2: ZooKeeper mode cannot cancel a move in flight, and one whose target needs a broker that is down never
    finishes: rollback refuses at once, naming the broker, with nothing submitted (as execute does)."""
    sim, run, plan, victim, failed = _execute_until_a_broker_dies(tmp_path, zk, zk_url, make_sim, kept=True)
    assert f"stalled: kept broker {victim} of" in failed and "--destination-grace" in failed, failed
    before = zk.get(kz.REASSIGN)[0] if zk.exists(kz.REASSIGN) else None
    with open_backend(zk_url) as backend:
        started = time.monotonic()
        with pytest.raises(ExecutionFailed) as refused:
            rollback(run, backend, opts(throttle=200 * MB, min_timeout=60.0))
        assert time.monotonic() - started < 20, "rollback waited instead of refusing"
    message = str(refused.value)
    assert message.startswith("rollback cannot start") and f"needs broker {victim}, which is down" in message, message
    assert "nothing submitted" in message and "\n" not in message
    # nothing submitted: the znode holds no move it did not hold before (the controller removes the moves of the
    # execution's batch that complete meanwhile, those that do not wait for the dead broker)
    after = zk.get(kz.REASSIGN)[0] if zk.exists(kz.REASSIGN) else None
    moves = [{(m["topic"], m["partition"], tuple(m["replicas"])) for m in json.loads(z)["partitions"]} if z else set()
             for z in (before, after)]
    assert moves[1] <= moves[0], (moves[1] - moves[0])
    assert not (run / "execution" / "rollback_state.json").exists()


def test_rollback_through_kafka_speaks_of_what_kafka_does(tmp_path, zk, zk_url, make_sim):
    """Point 3: the same outage rolled back through kafka:// (moves a zk:// run started): the Admin API cancels them,
    and a batch that needs the dead broker is refused in a rollback's words, never ZooKeeper's."""
    sim, run, plan, victim, _failed = _execute_until_a_broker_dies(tmp_path, zk, zk_url, make_sim, kept=True)
    with open_backend(f"kafka://{sim.bootstrap}") as backend:
        with pytest.raises(ExecutionFailed) as refused:
            rollback(run, backend, opts(throttle=200 * MB, min_timeout=10.0))
    message = str(refused.value)
    assert "ZooKeeper" not in message and "or roll back" not in message, message
    assert f"broker {victim}" in message and "roll back again" in message, message
