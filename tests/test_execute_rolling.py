"""The rolling schedule through the Admin API (``kafka://``; ``--schedule rolling`` or ``auto``), against the simulated cluster's
wire-protocol listener: moves start as brokers free up, several batches in flight at once, at most the per-broker
cap in flight on any broker, a partition's steps one after another, resumable, and refused on ZooKeeper."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, run_cli, wait_for

from rebalancer.errors import InputError
from rebalancer.execute import ExecOptions, approve, execute, open_backend, verify
from rebalancer.model import Cluster
from rebalancer.movement.schedule import ROLLING_PER_BROKER
from rebalancer.plan import plan_run_dir
from rebalancer.planfile.result import build_plan, load_plan, write_plan
from rebalancer.sim.scenarios import ScenarioParams, build_scenario
from rebalancer.snapshot import load_snapshot, take_snapshot

MB = 1_000_000


def opts(**kw: Any) -> ExecOptions:
    base: dict[str, Any] = dict(throttle=50 * MB, poll=0.05, min_timeout=30.0, destination_grace=1.0,
                                throttle_settle=0.05, progress=lambda _t: None, schedule="auto")
    base.update(kw)
    return ExecOptions(**base)


class Recording:
    """The Admin backend, recording what is in flight on every broker each time moves are submitted."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self.peaks: list[dict[int, int]] = []
        self.flying_at_submit: list[int] = []  # moves of this run in flight when more were submitted
        self.origin: dict[tuple[str, int], tuple[int, ...]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def submit(self, targets: Any) -> None:
        # The replicas each move started from, read before it was submitted (nothing in flight on it then).
        self.origin.update({tp: p.replicas for tp, p in self._backend.read_partitions(set(targets)).items()})
        flight = self._backend.in_flight()
        self.flying_at_submit.append(len(flight))
        moving = {**{tp: tuple(t) for tp, t in flight.items()}, **{tp: tuple(t) for tp, t in targets.items()}}
        load: dict[int, int] = {}
        for tp, target in moving.items():
            original = self.origin[tp]
            for b in {*(b for b in target if b not in original), original[0]}:
                load[b] = load.get(b, 0) + 1
        self.peaks.append(load)
        self._backend.submit(targets)


def new_brokers_run(tmp: Path, make_sim: Any, *, acceleration: float, partitions: int = 48) -> tuple[Any, Path]:
    cluster = build_scenario("new-brokers", ScenarioParams(partitions=partitions, mean_partition_mib=64))
    sim = make_sim(cluster, acceleration=acceleration)
    run = tmp / "run"
    take_snapshot(f"kafka://{sim.bootstrap}", run)
    plan_run_dir(run, "add-brokers", brokers=[12, 13, 14, 15], balance="counts")
    approve(run, by="test")
    return sim, run


def test_rolling_keeps_brokers_busy_within_the_cap_and_verifies(tmp_path: Path, make_sim: Any) -> None:
    # Moves of seconds (10 MB/s, 5x): more than a start takes, on a busy machine too.
    sim, run = new_brokers_run(tmp_path, make_sim, acceleration=5.0, partitions=24)
    plan = load_plan(run)
    with open_backend(f"kafka://{sim.bootstrap}") as real:
        backend = Recording(real)
        state = execute(run, backend, opts(throttle=10 * MB))  # type: ignore[arg-type]
        assert state["finished"] and state.get("schedule") == "rolling"
        now = {p.tp: p.replicas for p in real.read_cluster().partitions}
        assert all(now[(c.topic, c.partition)] == c.replicas_after for c in plan.changes)
        assert verify(run, real)["passed"]
    # Never more than the rolling cap in flight on a broker, counting what was in flight already (moves of 64 MiB
    # at 10 MB/s outlast the loop's reaction many times over: the byte floor never adds one).
    assert backend.peaks and max(n for peak in backend.peaks for n in peak.values()) <= ROLLING_PER_BROKER
    # Every step of the plan in exactly one batch, and moves submitted while others of this run were in flight
    # (batches one after another never do).
    steps = [(s["topic"], s["partition"], s["seq"]) for b in state["batches"] for s in b["steps"]]
    assert len(steps) == len(set(steps)) == len(state["steps"]) + sum(
        len(b["steps"]) for b in state["batches"] if b.get("leaders_only"))
    assert len([b for b in state["batches"] if not b.get("leaders_only") and b.get("todo")]) > 1
    assert any(n > 0 for n in backend.flying_at_submit[1:]), backend.flying_at_submit
    # The state says how far the run got, as of its last finished batch: all of it, at the end.
    progress = state["progress"]
    assert progress["moves_done"] == progress["moves"] == len(state["steps"]), progress
    assert progress["bytes_done"] == progress["bytes"] == sum(s["bytes"] for s in state["steps"]) > 0
    assert progress["eta_s"] == 0.0 and progress["elapsed_s"] > 0 and progress["critical"] == []  # nothing left


def multi_step_cluster() -> tuple[Cluster, dict[tuple[str, int], tuple[int, ...]]]:
    """A partition of 1 MB whose change replaces two replicas (two steps, one after the other), beside four
    partitions of 40 MB moving one replica each: the small one's second step starts while its first step's batch
    still copies the large ones."""
    base = build_scenario("new-brokers", ScenarioParams(brokers=4, racks=2, new_brokers=4, partitions=6, topics=1,
                                                        rf=2, mean_partition_mib=1))
    parts = list(base.partitions)
    small, large = parts[0], parts[1:5]
    sized = [dataclasses.replace(small, size_bytes=1 * MB)] + [dataclasses.replace(p, size_bytes=40 * MB) for p in large]
    cluster = Cluster.build(base.brokers, [*sized, *parts[5:]], base.meta)
    targets = {small.tp: (4, 5)}
    for i, p in enumerate(large):
        targets[p.tp] = (*p.replicas[:-1], 6 + i % 2)
    return cluster, targets


def test_a_partitions_steps_run_one_after_another_across_batches(tmp_path: Path, make_sim: Any) -> None:
    cluster, targets = multi_step_cluster()
    sim = make_sim(cluster, acceleration=1.0)
    run = tmp_path / "run"
    take_snapshot(f"kafka://{sim.bootstrap}", run)
    snap = load_snapshot(run)
    plan = build_plan(snap, targets, mode="rebalance", strategy="manual", eligible=frozenset(b.id for b in snap.brokers),
                      params={}, solver={}, bounds={})
    write_plan(plan, run)
    approve(run, by="test")
    small = next(c for c in plan.changes if len(c.added) == 2)
    with open_backend(f"kafka://{sim.bootstrap}") as backend:
        state = execute(run, backend, opts(throttle=20 * MB, per_broker=4))
        now = {p.tp: p.replicas for p in backend.read_cluster().partitions}
    assert all(now[(c.topic, c.partition)] == c.replicas_after for c in plan.changes)
    # The small partition's two steps went in two batches, the second while the first's batch still copied.
    holding = [b for b in state["batches"] if any((s["topic"], s["partition"]) == (small.topic, small.partition)
                                                  for s in b["steps"])]
    assert len(holding) == 2 and holding[1]["submitted_at"] < holding[0]["copied_at"]
    assert all(b["status"] == "done" for b in state["batches"])


def test_killed_mid_run_resumes_without_moving_anything_twice(tmp_path: Path, make_sim: Any) -> None:
    sim, run = new_brokers_run(tmp_path, make_sim, acceleration=5.0)
    plan = load_plan(run)
    source = f"kafka://{sim.bootstrap}"
    args = ["execute", str(run), "--source", source, "--throttle", "50MB/s", "--poll", "0.05", "--throttle-settle",
            "0.05", "--schedule", "rolling"]
    proc = subprocess.Popen([sys.executable, "-m", "rebalancer", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    state_file = run / "execution" / "state.json"

    def overlapping() -> dict[int, float] | None:
        """The batches' submission times once some are done and several in flight (the moment to kill it)."""
        assert proc.poll() is None, "the execution ended before two batches were in flight at once"
        try:
            st = json.loads(state_file.read_text())
        except (OSError, ValueError):
            return None
        done = [b for b in st.get("batches", []) if b["status"] == "done" and b.get("todo")]
        flying = [b for b in st.get("batches", []) if b["status"] == "submitted"]
        if not done or len(flying) < 2:
            return None
        return {b["index"]: b["submitted_at"] for b in st["batches"] if b.get("submitted_at")}

    seen = wait_for(overlapping, 120, "some batches done and two in flight at once", poll=0.02)
    proc.kill()
    proc.wait()
    result = run_cli("execute", *args[1:])
    assert result.returncode == 0, result.stderr[-2000:]
    after = json.loads(state_file.read_text())
    for index, at in seen.items():  # every batch submitted before the kill was waited for, never submitted again
        assert after["batches"][index]["submitted_at"] == at
    moved = [(e["topic"], e["partition"], tuple(e["target"])) for e in sim.completed]
    assert len(moved) == len(set(moved))  # no move twice
    with open_backend(source) as backend:
        now = {p.tp: p.replicas for p in backend.read_cluster().partitions}
        assert all(now[(c.topic, c.partition)] == c.replicas_after for c in plan.changes)
        assert verify(run, backend)["passed"]


def test_rolling_is_refused_through_zookeeper_before_anything_changes(tmp_path: Path, zk_url: str,
                                                                      make_sim: Any) -> None:
    sim, run = new_brokers_run(tmp_path, make_sim, acceleration=200.0)
    with open_backend(zk_url) as backend:
        before = {p.tp: p.replicas for p in backend.read_cluster().partitions}
        with pytest.raises(InputError, match="--schedule rolling needs"):
            execute(run, backend, opts(schedule="rolling"))
        assert {p.tp: p.replicas for p in backend.read_cluster().partitions} == before
        assert not backend.in_flight() and backend.throttle_configs() == {}
        state = execute(run, backend, opts())  # auto: batches through ZooKeeper
        assert state["finished"] and "schedule" not in state


def _tight_disk_run(tmp: Path, make_sim: Any, *, trade: bool) -> tuple[Any, Path, int, int]:
    """Broker x holds what it holds plus 10 MB of room: it receives a 40 MB partition and gives another away
    (``trade``: to broker y, which gives the first and has no more room either). Returns (sim, run, x, y)."""
    base = build_scenario("new-brokers", ScenarioParams(brokers=4, racks=2, new_brokers=0, partitions=8, topics=1,
                                                        rf=2, mean_partition_mib=1))
    x = 0
    parts = list(base.partitions)
    out = next(p for p in parts if x in p.replicas)
    y = next(b.id for b in base.brokers if b.id not in out.replicas)
    into = next(p for p in parts if x not in p.replicas and (y in p.replicas if trade else True) and p is not out)
    sized = {p.tp: dataclasses.replace(p, size_bytes=40 * MB if p in (out, into) else 1 * MB) for p in parts}
    cluster = Cluster.build(base.brokers, list(sized.values()), base.meta)
    held = {b.id: sum(p.size_bytes for p in cluster.partitions if b.id in p.replicas) for b in cluster.brokers}
    tight = {x, y} if trade else {x}
    cap = {b: held[b] + 10 * MB if b in tight else 10**12 for b in held}
    sim = make_sim(cluster, acceleration=2.0)
    run = tmp / "run"
    take_snapshot(f"kafka://{sim.bootstrap}", run)
    snap = load_snapshot(run)
    given = into.replicas[:-1] + (x,) if not trade else tuple(x if b == y else b for b in into.replicas)
    targets = {out.tp: tuple(y if b == x else b for b in out.replicas), into.tp: given}
    plan = build_plan(snap, targets, mode="rebalance", strategy="manual", eligible=frozenset(held), params={},
                      solver={}, bounds={})
    # What a load plan records of the brokers' disks (``load_summary``): before, capacity, the threshold.
    plan.summary["load"] = {"dimensions": {"disk": {"by_capacity": True, "threshold_pct": 100.0}},
                            "brokers": [{"broker": b, "disk": {"before": held[b], "capacity": cap[b]}} for b in held]}
    write_plan(plan, run)
    approve(run, by="test")
    return sim, run, x, y


@pytest.mark.parametrize("schedule", ["rolling", "batches"])
def test_a_move_into_a_full_broker_waits_until_another_frees_room(tmp_path: Path, make_sim: Any,
                                                                  schedule: str) -> None:
    sim, run, x, _ = _tight_disk_run(tmp_path, make_sim, trade=False)
    plan = load_plan(run)
    with open_backend(f"kafka://{sim.bootstrap}") as backend:
        state = execute(run, backend, opts(throttle=20 * MB, schedule=schedule))
        now = {p.tp: p.replicas for p in backend.read_cluster().partitions}
    assert all(now[(c.topic, c.partition)] == c.replicas_after for c in plan.changes)
    peak = state["disk_peak"][str(x)]
    assert peak["peak"] <= peak["limit"], peak  # it would have held 80 MB above its start with both in flight
    receive = next(b for b in state["batches"] if any(x in s["to"] and x not in s["from"] for s in b["steps"]))
    give = next(b for b in state["batches"] if any(x in s["from"] and x not in s["to"] for s in b["steps"]))
    assert receive["submitted_at"] >= give["copied_at"]


@pytest.mark.parametrize("schedule", ["rolling", "batches"])
def test_a_move_no_order_makes_room_for_fails_before_anything_moves(tmp_path: Path, make_sim: Any,
                                                                    schedule: str) -> None:
    from rebalancer.execute import ExecutionFailed

    sim, run, x, y = _tight_disk_run(tmp_path, make_sim, trade=True)
    with open_backend(f"kafka://{sim.bootstrap}") as backend:
        before = {p.tp: p.replicas for p in backend.read_cluster().partitions}
        with pytest.raises(ExecutionFailed, match=rf"cannot (start|move): broker ({x}|{y}) holds \d+ bytes and would"):
            execute(run, backend, opts(throttle=20 * MB, schedule=schedule))
        assert {p.tp: p.replicas for p in backend.read_cluster().partitions} == before
        assert not backend.in_flight() and backend.throttle_configs() == {}
    assert sim.completed == []
