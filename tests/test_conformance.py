"""The execution contract, one test code on every engine (tests/engines.py): the simulator through zk:// and
kafka://, real Kafka 3.9 (ZooKeeper mode) through zk:// and kafka://, real Kafka 4.x (KRaft) through kafka://.

Each engine runs the default schedule (``auto``): rolling through kafka://, batches through zk://. What an operator
relies on: an approved add-brokers plan executes to the exact assignment under a real throttle
(seen on brokers and topics while copying, gone afterwards, an operator's own throttle untouched), the copy takes
about bytes / throttle of the busiest broker, a killed executor resumes without moving anything twice, a dead
destination fails the batch and rollback restores the original replicas in their original order, a controller
failover is ridden out, and someone else's reassignment (Kafka's own tool) is refused with nothing changed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, wait_for
from engines import (
    ENGINES,
    RACKS,
    Engine,
    RealCluster,
    agreed_throttles,
    create_topic_elsewhere,
    keep_logs,
    real_cluster,
    real_engine,
    sim_engine,
    wait_until,
)

from rebalancer.access.backend import ConfigChange
from rebalancer.errors import ClusterBusy
from rebalancer.execute import (
    ExecOptions,
    ExecutionFailed,
    approve,
    execute,
    open_backend,
    release_throttles,
    rollback,
    verify,
)
from rebalancer.movement.estimate import estimate
from rebalancer.planfile.result import build_plan, load_plan, write_plan
from rebalancer.snapshot import load_snapshot, read_source, take_snapshot

MB = 1_000_000


@pytest.fixture(scope="session")
def real_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Real clusters by version, started on first use and stopped at the end of the session."""
    from contextlib import ExitStack

    base = tmp_path_factory.mktemp("real-kafka")
    with ExitStack() as stack:
        clusters: dict[str, Any] = {}

        def get(version: str) -> RealCluster:
            if version not in clusters:
                clusters[version] = stack.enter_context(real_cluster(version, base))
            return clusters[version]

        yield {"get": get, "clusters": clusters}


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, tmp_path: Path, real_clusters: dict[str, Any]) -> Iterator[Engine]:
    name = request.param
    cluster = None
    if name.startswith("sim-"):
        make_sim = request.getfixturevalue("make_sim")
        zk_url = request.getfixturevalue("zk_url")
        eng = sim_engine(name, make_sim, zk_url, tmp_path)
    else:
        cluster = real_clusters["get"]("3.9" if name.startswith("kafka-3.9") else "4.x")
        eng = real_engine(name, cluster, tmp_path)
        record(eng, "setup", test=request.node.originalname, **eng.extra["setup"])
    yield eng
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed and cluster is not None:
        keep_logs(cluster, REPO / "tests" / "artifacts" / request.node.name)


def opts(engine: Engine, **kw: Any) -> ExecOptions:
    base: dict[str, Any] = dict(throttle=50 * MB, poll=0.1, min_timeout=60.0, destination_grace=3.0, settle_grace=15.0,
                                throttle_settle=1.0 if engine.real else 0.2, progress=lambda _t: None)
    base.update(kw)
    return ExecOptions(**base)


def assignment(engine: Engine) -> dict[tuple[str, int], tuple[int, ...]]:
    with open_backend(engine.source) as backend:
        return {p.tp: p.replicas for p in backend.read_cluster().partitions}


def leaders(engine: Engine) -> dict[tuple[str, int], int | None]:
    with open_backend(engine.source) as backend:
        return {p.tp: p.leader for p in backend.read_cluster().partitions}


def throttles(engine: Engine) -> dict[tuple[str, str], dict[str, str]]:
    with open_backend(engine.source) as backend:
        return backend.throttle_configs()


def busiest_seconds(engine: Engine, rate: int) -> float:
    """Bytes in or out of the busiest broker, at the throttle: the physical floor of the copy time."""
    moved_in: dict[int, int] = {}
    moved_out: dict[int, int] = {}
    for c in load_plan(engine.run).changes:
        for b in c.added:
            moved_in[b] = moved_in.get(b, 0) + c.size_bytes
            moved_out[c.replicas_before[0]] = moved_out.get(c.replicas_before[0], 0) + c.size_bytes
    return max([*moved_in.values(), *moved_out.values()]) / rate


def cli(engine: Engine, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rebalancer", *args, "--source", engine.source], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, env=os.environ.copy())


def record(engine: Engine, what: str, **values: Any) -> None:
    """Measurements for the notes and docs (tests/artifacts/conformance.jsonl), one line per test and engine."""
    out = REPO / "tests" / "artifacts" / "conformance.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as f:
        f.write(json.dumps({"engine": engine.name, "what": what, **values}) + "\n")


def watch_throttles(engine: Engine) -> tuple[list[dict[tuple[str, str], dict[str, str]]], Callable[[], None]]:
    """Poll the cluster's throttles in a thread until the returned stop() is called: (the polls, stop)."""
    seen: list[dict[tuple[str, str], dict[str, str]]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            try:
                seen.append(throttles(engine))
            except Exception:  # noqa: BLE001 - a poll that races the run's own connection churn
                pass
            time.sleep(0.3)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()

    def stop() -> None:
        done.set()
        watcher.join()

    return seen, stop


class _Action(threading.Thread):
    """A thread whose ``join`` raises what its action raised (a fault injection that failed must fail the test with
    its own cause, not as whatever the run then did without it)."""

    def __init__(self, run: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self._run, self.error = run, None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - re-raised in join
            self.error = exc

    def join(self, timeout: float | None = None) -> None:
        super().join(timeout)
        if self.error is not None:
            raise AssertionError(f"the injected fault failed: {type(self.error).__name__}: {self.error}") from self.error


def _submitted(state_file: Path) -> bool:
    try:
        return any(b["status"] == "submitted" for b in json.loads(state_file.read_text())["batches"])
    except (OSError, ValueError, KeyError):
        return False  # not written yet, or being replaced


def when_copying(engine: Engine, action: Callable[[], Any], delay: float = 0.0) -> threading.Thread:
    """A started thread that runs ``action`` once a batch of this run is submitted (``delay`` s later). No batch
    submitted within two minutes fails the test (through ``join``) without the fault: a fault injected at the wrong
    moment would test something else."""
    state_file = engine.run / "execution" / "state.json"

    def run() -> None:
        wait_for(lambda: _submitted(state_file), 120, "a batch of the run to be submitted (the fault was not injected)",
                 poll=0.02)
        time.sleep(delay)  # the moment of the fault, counted from the submission
        action()

    thread = _Action(run)
    thread.start()
    return thread


def state_of(engine: Engine) -> dict[str, Any]:
    return json.loads((engine.run / "execution" / "state.json").read_text())


# -- the contract ---------------------------------------------------------------------------------------------------
def test_add_brokers_plan_executes_exactly_under_a_real_throttle(engine: Engine) -> None:
    plan = load_plan(engine.run)
    assert plan.changes and all(set(c.added) <= {3, 4} for c in plan.changes)
    # An operator's own throttles, set before the run: a rate on a broker the run throttles too, and a replica
    # list entry on a moving topic. Both must be exactly as they were afterwards.
    topic = plan.changes[0].topic
    with open_backend(engine.source) as backend:  # both in one call (a broker's request and the topics')
        assert backend.alter_many([ConfigChange("brokers", "0", {"leader.replication.throttled.rate": "987654321"}),
                                   ConfigChange("topics", topic, {"leader.replication.throttled.replicas": "999:0"})]) == 2
    # Read after write: once every broker shows both (KRaft brokers apply a change a moment after it is made).
    operator = agreed_throttles(engine, want=lambda t: (
        t.get(("brokers", "0"), {}).get("leader.replication.throttled.rate") == "987654321"
        and t.get(("topics", topic), {}).get("leader.replication.throttled.replicas") == "999:0"))
    with open_backend(engine.source) as backend:
        assert backend.throttle_configs() == operator  # the engine's own backend reads the same
    # A copy of ~10 s on a real cluster: Kafka's quota works in 1 s samples and a controller takes a moment to start
    # and finish a move, which a copy of a few seconds would measure instead of the throttle.
    rate = 2 * MB if engine.real else 5 * MB
    seen, stop = watch_throttles(engine)
    with open_backend(engine.source) as backend:
        state = execute(engine.run, backend, opts(engine, throttle=rate, per_broker=50, total=500))
        stop()
        # The default schedule, as the engine's access resolves it: rolling where moves can be added to those in
        # flight (kafka://), batches through ZooKeeper.
        assert state.get("schedule", "batches") == ("rolling" if engine.source.startswith("kafka://") else "batches")
        # One batch copies everything; a load plan may add one of leader-only reorders (bytes-out balance).
        data = [b for b in state["batches"] if any(s["bytes"] for s in b["steps"])]
        assert state["finished"] and len(data) == 1 and all(b["status"] == "done" for b in state["batches"])
        now = {p.tp: p.replicas for p in backend.read_cluster().partitions}
        assert all(now[(c.topic, c.partition)] == c.replicas_after for c in plan.changes)
        # Someone else creates a topic meanwhile: the brokers' counts no longer match the plan's prediction, which
        # verify reports but does not fail on (it checks what this plan changed).
        create_topic_elsewhere(engine, f"{topic}-elsewhere")
        result = verify(engine.run, backend)
        assert result["passed"] and result["throttles_left"] == {}
        assert result["balance_differences"]
        # the time it copied against the bound at its throttle (wall seconds: the simulator's run faster)
        took = result["execution_time"]
        assert took["throttle_bytes_per_s"] == rate and took["seconds"] > 0
        assert took["bound_seconds"] == round(estimate(plan.changes, rate).bound_seconds, 3) > 0
        # This run's throttles were on the brokers and topics during the copy ...
        during = [s for s in seen if any(k == ("brokers", "3") for k in s)]
        assert during, f"no throttle seen on broker 3 in {len(seen)} polls"
        assert during[0][("brokers", "3")]["follower.replication.throttled.rate"] == str(rate)
        moving_topics = {c.topic for c in plan.changes}
        assert any(("topics", t) in during[-1] for t in moving_topics)
        # ... and afterwards only the operator's are left, exactly as they were, on every broker.
        assert agreed_throttles(engine, want=lambda t: t == operator) == operator
        assert backend.throttle_configs() == operator
        backend.alter_configs("brokers", "0", {}, delete=["leader.replication.throttled.rate"])
        backend.alter_configs("topics", topic, {}, delete=["leader.replication.throttled.replicas"])
    took = engine.copy_seconds(data[0])
    bound = busiest_seconds(engine, rate)
    record(engine, "copy", seconds=round(took, 2), bound_seconds=round(bound, 2), ratio=round(took / bound, 3),
           bytes=sum(c.size_bytes * len(c.added) for c in load_plan(engine.run).changes), throttle=rate)
    # The copy is throttled: not faster than the busiest broker's bytes at the rate. Nor stalled: real brokers share
    # two cores with the other test worker here (1.32x seen in CI), so the upper limit only catches a stall; the
    # ratio itself is measured by bench/bench_execute.py --real on a quiet machine (1.08-1.18x).
    assert 0.85 * bound <= took <= (2.0 if engine.real else 1.3) * bound, (took, bound)


def test_executor_killed_mid_batch_then_rerun_moves_each_partition_once(engine: Engine) -> None:
    plan = load_plan(engine.run)
    rate = "3MB/s" if engine.real else "20MB/s"
    args = ["execute", str(engine.run), "--throttle", rate, "--poll", "0.2", "--max-moves", "4",
            "--throttle-settle", "1" if engine.real else "0.2"]
    proc = subprocess.Popen([sys.executable, "-m", "rebalancer", *args, "--source", engine.source], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
    state_file = engine.run / "execution" / "state.json"

    def submitted_batches() -> dict[int, float] | None:
        assert proc.poll() is None, "the execution ended before a batch was seen in flight"
        if not _submitted(state_file):
            return None
        st = json.loads(state_file.read_text())
        return {b["index"]: b["submitted_at"] for b in st["batches"] if b.get("submitted_at")}

    submitted = wait_for(submitted_batches, 120, "a batch of the run to be submitted")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    result = cli(engine, *args)
    assert result.returncode == 0, result.stderr[-2000:]
    after = state_of(engine)
    # The batch in flight at the kill was waited for, never submitted again.
    for index, at in submitted.items():
        assert after["batches"][index]["submitted_at"] == at
    now = assignment(engine)
    assert all(now[(c.topic, c.partition)] == c.replicas_after for c in plan.changes)
    moved = engine.completed_moves()
    if moved is not None:  # the simulator logs every completed move: none twice
        assert len(moved) == len(set(moved))
    verified = cli(engine, "verify", str(engine.run))
    assert verified.returncode == 0 and "copied in " in verified.stdout and ": the bound was " in verified.stdout
    assert agreed_throttles(engine, want=lambda t: t == {}) == {}  # on every broker


def test_destination_killed_fails_the_batch_and_rollback_restores_the_original_order(engine: Engine) -> None:
    plan = load_plan(engine.run)
    original = assignment(engine)
    original_leaders = leaders(engine)
    victim = 3
    killer = when_copying(engine, lambda: engine.kill_broker(victim), delay=0.2)
    rate = 2 * MB if engine.real else 1 * MB
    with open_backend(engine.source) as backend:
        with pytest.raises(ExecutionFailed, match=f"stalled: destination broker {victim} of .* is down"):
            execute(engine.run, backend, opts(engine, throttle=rate, per_broker=50, total=500))
    killer.join()
    # The moves still copying keep this run's throttles (ZooKeeper mode cannot cancel them: unthrottled, they would
    # flood the cluster once the broker is back); every other throttle of the run is gone.
    with open_backend(engine.source) as backend:
        flight = backend.in_flight()
    # Once every live broker agrees: released throttles reach the brokers a moment after they are deleted.
    kept = agreed_throttles(engine, want=lambda t: {n for (kind, n) in t if kind == "topics"} <= {t for t, _ in flight})
    before = {(c.topic, c.partition): c.replicas_before for c in plan.changes}
    assert flight and any(victim in target for target in flight.values())
    followers = {(t, e) for (kind, t), keys in kept.items() if kind == "topics"
                 for e in keys.get("follower.replication.throttled.replicas", "").split(",")}
    assert {(t, f"{p}:{b}") for (t, p), target in flight.items() for b in target if b not in before[(t, p)]} <= followers
    assert {t for (kind, t) in kept if kind == "topics"} <= {t for t, _ in flight}
    if not engine.source.startswith("kafka://"):
        engine.restart_broker(victim)  # ZooKeeper mode cannot cancel: the moves must finish before they revert
    said: list[str] = []
    with open_backend(engine.source) as backend:
        rollback(engine.run, backend, opts(engine, throttle=100 * MB, progress=said.append))
    if engine.source.startswith("kafka://"):
        # The Admin API reaches a broker's config through the broker: the dead one's rate waits in the ledger
        # until it is back, and the operator clears it as the executor said: the advice runs as printed (from
        # another directory: the run directory in it is whole).
        advice = [m.group(1) for t in said if (m := re.search(r"'(rebalancer throttle --clear [^']*)'", t))]
        assert advice, said
        engine.restart_broker(victim)
        cleared = subprocess.run([sys.executable, "-m", *shlex.split(advice[0])], cwd="/", capture_output=True,
                                 text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert cleared.returncode == 0 and f"brokers/{victim}" in cleared.stdout, cleared.stdout + cleared.stderr
    assert json.loads((engine.run / "verification_rollback.json").read_text())["passed"] is True
    changed = {(c.topic, c.partition) for c in plan.changes}
    want = ({tp: original[tp] for tp in changed}, {tp: original_leaders[tp] for tp in changed})
    # ... and its original leader (fresh topics: the preferred replica), with the destination broker back.
    assert want[1] == {tp: original[tp][0] for tp in changed}

    def seen() -> tuple[dict[Any, Any], dict[Any, Any]]:
        now, back = assignment(engine), leaders(engine)
        return {tp: now[tp] for tp in changed}, {tp: back[tp] for tp in changed}

    # Rollback verified through its own connection; this reads through any broker, whose metadata may lag by a
    # moment: wait (a minute at most) until it shows the result, then compare (the diff names what differs).
    with contextlib.suppress(AssertionError):
        wait_until(lambda: seen() == want, 60, "the original replicas and leaders on the broker read")
    # The original replicas, in their original order (the preferred leader first), and the original leaders.
    assert seen() == want
    assert agreed_throttles(engine, want=lambda t: t == {}) == {}  # on every broker


def test_destination_restarted_within_the_grace_completes_the_batch(engine: Engine) -> None:
    plan = load_plan(engine.run)
    victim = 3
    said: list[str] = []
    down = f"destination broker {victim} is down; waiting up to"

    def bounce() -> None:
        # a restart, as a rolling upgrade does one: down long enough for the executor to see it, then back
        engine.kill_broker(victim)
        wait_until(lambda: any(down in t for t in said), 120, "the executor seeing the destination down")
        engine.restart_broker(victim)

    killer = when_copying(engine, bounce, delay=0.2)
    rate = 2 * MB if engine.real else 1 * MB
    with open_backend(engine.source) as backend:
        try:
            state = execute(engine.run, backend, opts(engine, throttle=rate, per_broker=50, total=500,
                                                      destination_grace=240.0, min_timeout=240.0,
                                                      progress=said.append))
        finally:
            killer.join()
        assert state["finished"], said
        assert any(f"destination broker {victim} is back after" in t for t in said), said
        now = {p.tp: p.replicas for p in backend.read_cluster().partitions}
        assert all(now[(c.topic, c.partition)] == c.replicas_after for c in plan.changes)
        release_throttles(engine.run, backend, opts(engine))  # a rate the dead broker kept while it was down
        assert verify(engine.run, backend, settle=60.0)["passed"]


def test_controller_failover_mid_execution_is_ridden_out(engine: Engine) -> None:
    plan = load_plan(engine.run)
    killed: list[int] = []
    killer = when_copying(engine, lambda: killed.append(engine.kill_controller()))
    rate = 4 * MB if engine.real else 10 * MB
    # In ZooKeeper mode the controller is a broker, perhaps a destination or a replica the moves keep: the batch waits
    # for it to come back (kill_controller restarts it: its session expiry, then a JVM start, over a minute on the
    # loaded CI machine) rather than failing as for a broker that stays down.
    with open_backend(engine.source) as backend:
        try:
            state = execute(engine.run, backend, opts(engine, throttle=rate, per_broker=50, total=500,
                                                      destination_grace=180.0, min_timeout=180.0))
        finally:
            killer.join()  # a kill or restart that failed is the cause to report
        assert killed and state["finished"]
        now = {p.tp: p.replicas for p in backend.read_cluster().partitions}
        assert all(now[(c.topic, c.partition)] == c.replicas_after for c in plan.changes)
        # A throttle on the killed node could not be removed while it was down (the executor said so): the
        # operator's 'throttle --clear' removes it now that the node is back.
        release_throttles(engine.run, backend, opts(engine))
        assert verify(engine.run, backend, settle=60.0)["passed"]


def test_someone_elses_reassignment_is_refused_with_nothing_changed(engine: Engine) -> None:
    plan = load_plan(engine.run)
    before = assignment(engine)
    # Someone else (Kafka's own kafka-reassign-partitions on a real cluster, through the Admin API) moves a partition
    # the plan does not touch, throttled to a crawl so that it is still in flight.
    planned = {(c.topic, c.partition) for c in plan.changes}
    tp = next(tp for tp, r in sorted(before.items()) if tp not in planned and 4 not in r)
    target = {tp: [4, *before[tp][1:]]}
    engine.foreign_reassign(target, 1000)
    try:
        with open_backend(engine.source) as backend:
            wait_for(lambda: tp in backend.in_flight(), 30, f"their move of {tp} to be in flight", poll=0.2)
        # Their throttles, once every broker shows them: a rate on each broker of the move (the tool sets them
        # through each broker; in ZooKeeper mode a broker applies its own a moment later).
        involved = {str(b) for b in (*before[tp], *target[tp])}
        theirs = agreed_throttles(engine, want=lambda t: involved <= {n for k, n in t if k == "brokers"})
        result = cli(engine, "execute", str(engine.run), "--throttle", "50MB/s")
        assert result.returncode == 9, result.stderr
        assert "a reassignment this run did not start is in flight" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert agreed_throttles(engine, want=lambda t: t == theirs) == theirs  # their throttles stay
        with open_backend(engine.source) as backend:
            assert backend.throttle_configs() == theirs
            assert set(backend.in_flight()) == {tp}
        now = assignment(engine)
        assert {k: v for k, v in now.items() if k != tp} == {k: v for k, v in before.items() if k != tp}
        with pytest.raises(ClusterBusy):
            with open_backend(engine.source) as backend:
                execute(engine.run, backend, opts(engine))
    finally:
        engine.foreign_cancel(target)


def test_the_copy_is_throttled_at_the_current_leader_not_the_preferred_one(engine: Engine) -> None:
    """The copy is served by whichever replica leads, which after a broker restart is often not the preferred one:
    Kafka's own tool rates every broker of a moving partition. Here every moving partition is preferred-led by
    broker x but led by broker y, and copies to 3 and 4: broker y's outbound bytes are the bound."""
    cluster = load_snapshot(engine.run)
    # Not the controller's broker: a new controller checks the preferred leaders 5 s after taking over (Kafka's
    # auto leader rebalancing), which would hand leadership back mid-copy.
    x = next(b for b in (0, 1, 2) if b != engine.controller_id())
    y = next(b for b in (0, 1, 2) if b != x)
    pairs = [p for p in cluster.partitions if p.replicas == (x, y)]
    assert len(pairs) >= 2
    engine.kill_broker(x)
    moving = {p.tp for p in pairs}
    wait_for(lambda: all(v == y for tp, v in leaders(engine).items() if tp in moving), 60,
             f"broker {y} to lead every partition of ({x}, {y})", poll=0.3)
    engine.restart_broker(x)  # back as a follower; leadership stays on y (auto leader rebalancing waits 300 s)
    targets = {p.tp: ((3, y) if i % 2 == 0 else (4, y)) for i, p in enumerate(pairs)}
    plan = build_plan(cluster, targets, mode="rebalance", strategy="manual", eligible=frozenset(b.id for b in cluster.brokers),
                      params={}, solver={}, bounds={})
    write_plan(plan, engine.run)
    approve(engine.run, by="conformance")
    now = leaders(engine)
    assert all(now[tp] == y for tp in targets), {tp: now[tp] for tp in targets}
    rate = 1 * MB
    out_of_leader = sum(p.size_bytes for p in pairs)
    into = {b: sum(p.size_bytes for p in pairs if b in targets[p.tp]) for b in (3, 4)}
    bound = out_of_leader / rate
    assert bound >= 1.5 * max(into.values()) / rate  # unthrottled at the leader, the copy would take half as long
    polls, stop = watch_throttles(engine)
    with open_backend(engine.source) as backend:
        state = execute(engine.run, backend, opts(engine, throttle=rate, per_broker=50, total=500))
        stop()
    assert agreed_throttles(engine, want=lambda t: t == {}) == {}
    seen = [poll.get(("brokers", str(y)), {}) for poll in polls]
    # The current leader (not the preferred replica) carried the leader-side rate while it served the copy.
    assert any(c.get("leader.replication.throttled.rate") == str(rate) for c in seen), seen[-3:]
    took = engine.copy_seconds(state["batches"][0])
    record(engine, "copy-at-current-leader", seconds=round(took, 2), bound_seconds=round(bound, 2),
           ratio=round(took / bound, 3))
    if not engine.real:
        # The simulator's quota is exact. Real Kafka's leader-side quota lets two followers' concurrent fetches of
        # up to 1 MiB each overshoot it (measured 0.64-0.69x of this bound, with or without the leader's rate), so
        # there the rate on the leader is what is checked (above), not the time.
        assert took >= 0.85 * bound, (took, bound)


def test_a_move_that_producers_outpace_is_reported_not_timed_out(engine: Engine) -> None:
    """Producers write into a moving partition faster than the throttle. Kafka counts the in-sync follower's fetches
    against the leader's rate (KIP-73), so the new replica gets nothing and the move cannot finish. Where the backend
    sees replica sizes (kafka://) the executor says so and keeps waiting past the batch's time limit; once the
    traffic drops the move finishes. Through ZooKeeper, which holds no sizes, such a move cannot be told from a stuck
    one: the time limit applies, and its message says why and what to do."""
    cluster = load_snapshot(engine.run)
    p = min(cluster.partitions, key=lambda q: q.tp)
    targets = {p.tp: (p.replicas[0], 3)}  # the leader stays; broker 3 copies the whole log
    plan = build_plan(cluster, targets, mode="rebalance", strategy="manual",
                      eligible=frozenset(b.id for b in cluster.brokers), params={}, solver={}, bounds={})
    write_plan(plan, engine.run)
    approve(engine.run, by="conformance")
    rate = 1 * MB
    said: list[str] = []
    options = opts(engine, throttle=rate, min_timeout=4.0, timeout_factor=0.5, report_every=1.0, progress=said.append)
    limit = options.min_timeout + options.timeout_factor * p.size_bytes / rate  # the batch's time limit (wall s)
    # Under load in the flake hunt the 4 MiB log once moved anyway: a producer on a loaded machine falls behind its
    # pace now and then, and a lull of a few seconds let the copy reach the log end. The move starts only once the log
    # holds a quota window's worth of the throttle (Kafka's 11 one-second samples) plus 2 MB, so catching up needs a
    # lull longer than that window; the 1.6x margin over the rate keeps the gap growing in between.
    lead = 11 * rate + 2 * MB - p.size_bytes
    stop_producing = engine.ingest(p.tp, 1.6 * rate, max(1.6 * rate, lead))
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            with open_backend(engine.source) as backend:
                outcome["state"] = execute(engine.run, backend, options)
        except ExecutionFailed as exc:
            outcome["failed"] = str(exc)

    runner = threading.Thread(target=run)
    runner.start()
    try:
        runner.join(limit + options.min_timeout + 4.0)  # past the time limit, and past min_timeout of it
    finally:
        stop_producing()
    with open_backend(engine.source) as backend:
        sees_sizes = backend.replica_sizes({p.tp}) is not None
    if sees_sizes:
        assert runner.is_alive(), outcome  # still waiting on a move that copies
        assert any("do not catch up" in line and "producers write into it" in line for line in said), said[-5:]
        runner.join(180)
        assert not runner.is_alive() and "state" in outcome, outcome
        batch = outcome["state"]["batches"][0]
        assert batch["status"] == "done" and batch["ingest_outpaces_throttle"] == [f"{p.topic}-{p.partition}"]
        assert assignment(engine)[p.tp] == targets[p.tp]
    else:
        runner.join(30)
        assert "failed" in outcome and "timed out" in outcome["failed"], outcome
        assert "ZooKeeper shows no replica sizes" in outcome["failed"]
        with open_backend(engine.source) as backend:  # the move goes on (ZooKeeper mode cannot cancel), throttled
            assert p.tp in backend.in_flight() and backend.throttle_configs()


def test_a_broker_killed_after_the_plan_hands_its_leadership_as_the_plan_predicted(engine: Engine) -> None:
    """Issue 46: the N-1 figures are what Kafka does. After the plan is executed (every partition led by its first
    replica), the broker leading the most partitions is killed (kill -9 on a real cluster): each partition it led
    elects the first replica of its assignment that is alive and in sync, so the survivors' leader counts, as the
    cluster then reports them, are exactly those the final replica order predicts, and so is the plan's figure."""
    from rebalancer.plan.failover import failover_figures

    with open_backend(engine.source) as backend:
        assert execute(engine.run, backend, opts(engine, per_broker=50, total=500))["finished"]
        final = {p.tp: p.replicas for p in backend.read_cluster().partitions}
        backend.elect_preferred(list(final))  # no-op where the executor's own election left them preferred
    wait_until(lambda: all(lead == final[tp][0] for tp, lead in leaders(engine).items()), 60,
               "every partition led by its first replica", poll=0.5)
    led: dict[int, int] = {}
    for reps in final.values():
        led[reps[0]] = led.get(reps[0], 0) + 1
    victim = max(sorted(led), key=lambda b: led[b])
    alive = sorted(set(RACKS) - {victim})
    predicted = {b: 0 for b in alive}
    for reps in final.values():
        predicted[next(b for b in reps if b != victim)] += 1
    engine.kill_broker(victim)
    try:
        def reported() -> dict[int, int] | None:
            now = leaders(engine)
            if any(lead in (victim, None) for lead in now.values()):
                return None  # the failure not yet seen everywhere
            counts = {b: 0 for b in alive}
            for lead in now.values():
                counts[lead] += 1
            return counts

        counts = wait_until(reported, 180, f"the partitions broker {victim} led failing over", poll=0.5)
        assert counts == predicted, (victim, final)
        figure = failover_figures(list(final.values()), sorted(RACKS), RACKS)["brokers"][victim]
        mean = sum(counts.values()) / len(counts)
        seen = round(max(abs(v - mean) for v in counts.values()) / mean * 100, 2)
        assert figure["leaders_dev_pct"] == seen and figure["offline"] == 0
        record(engine, "failover", victim=victim, leaders=counts, leaders_dev_pct=seen)
    finally:
        engine.restart_broker(victim)


def test_a_follower_order_only_change_decides_who_leads_when_the_leader_fails(engine: Engine) -> None:
    """Issue 46's failover order is a metadata change: the same replicas in another order. At RF 3 it decides which
    follower takes over: three partitions led by broker 0, each with its followers swapped by an order-only plan;
    once broker 0 is killed (kill -9 on a real cluster), each is led by its new second replica, not its old one."""
    prefix = engine.extra["cluster"].prefixes[-1] if engine.real else ""
    topic = f"{prefix}failover-order"
    before = {0: [0, 1, 2], 1: [0, 2, 1], 2: [0, 1, 2]}
    create_topic_elsewhere(engine, topic, assignment=before)
    with open_backend(engine.source) as backend:
        cluster = backend.read_cluster()
    targets = {(topic, p): (0, reps[2], reps[1]) for p, reps in before.items()}
    assert all(cluster.partition(*tp).replicas == tuple(before[tp[1]]) for tp in targets)
    plan = build_plan(cluster, targets, mode="leaders", strategy="manual",
                      eligible=frozenset(b.id for b in cluster.brokers), params={}, solver={}, bounds={})
    assert plan.summary["bytes_moved"] == 0
    write_plan(plan, engine.run)
    approve(engine.run, by="conformance")
    with open_backend(engine.source) as backend:
        assert execute(engine.run, backend, opts(engine))["finished"]
    assert {tp: assignment(engine)[tp] for tp in targets} == targets
    wait_until(lambda: all(leaders(engine)[tp] == 0 for tp in targets), 60, "broker 0 leading the topic", poll=0.5)
    engine.kill_broker(0)
    try:
        def led() -> dict[tuple[str, int], int | None] | None:
            now = {tp: leaders(engine)[tp] for tp in targets}
            return None if any(lead in (0, None) for lead in now.values()) else now

        now = wait_until(led, 180, "the partitions broker 0 led failing over", poll=0.5)
        assert now == {tp: reps[1] for tp, reps in targets.items()}, now  # the new seconds: 2, 1, 2 (not 1, 2, 1)
        record(engine, "failover-order", leaders={f"{t}-{p}": b for (t, p), b in now.items()})
    finally:
        engine.restart_broker(0)


def test_a_snapshot_reads_each_topics_min_insync_replicas(engine: Engine) -> None:
    """Issue 46's failover figures count the partitions a failure leaves under their min.insync.replicas: the
    snapshot reads the setting, a topic's own through ZooKeeper (which holds no broker defaults), each topic's
    effective one through the Admin API; at RF 2 and min.insync.replicas 2, any one broker's failure leaves every
    partition it holds of that topic under it, and the plan's figures say so."""
    from rebalancer.plan import plan_run_dir

    cluster = load_snapshot(engine.run)
    topic = min(p.topic for p in cluster.partitions)
    other = max(p.topic for p in cluster.partitions)
    with open_backend(engine.source) as backend:
        backend.alter_configs("topics", topic, {"min.insync.replicas": "2"})

    def read() -> dict[str, int] | None:
        found = read_source(engine.source).meta.get("topic_min_insync_replicas") or {}
        return found if found.get(topic) == 2 else None

    found = wait_until(read, 30, f"{engine.source} showing {topic}'s min.insync.replicas", poll=0.5)
    assert found == ({topic: 2} if engine.kind == "zk" else {topic: 2, other: 1}), found
    run = engine.run.parent / "min-isr"
    snapshot = take_snapshot(engine.source, run)
    plan_run_dir(run, "leaders")
    failover = load_plan(run).summary["failover"]
    assert failover["min_insync_replicas_known"] is True
    assert all(len(p.replicas) == 2 for p in snapshot.partitions if p.topic == topic)
    under = {int(b): f["under_min_isr"] for b, f in failover["before"]["brokers"].items()}
    assert under == {b: sum(1 for p in snapshot.partitions if p.topic == topic and b in p.replicas) for b in under}
    assert sum(under.values()) == 2 * sum(1 for p in snapshot.partitions if p.topic == topic) > 0
