"""Execution, verification and rollback over ZooKeeper, against the simulated cluster on a real ZooKeeper."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import expire_session, run_cli, wait_for

from rebalancer import kafka_zk as kz
from rebalancer.access.zk_backend import ZkBackend
from rebalancer.errors import InputError, SourceError
from rebalancer.execute import ExecOptions, approve, execute, verify
from rebalancer.movement.batches import Step, make_batches, steps_of
from rebalancer.plan import plan_run_dir
from rebalancer.sim.scenarios import ScenarioParams, build_scenario
from rebalancer.snapshot import take_snapshot

MB = 1_000_000


def opts(**kw) -> ExecOptions:
    base = dict(throttle=50 * MB, poll=0.05, min_timeout=30.0, destination_grace=1.0, throttle_settle=0.3, progress=lambda _t: None)
    base.update(kw)
    return ExecOptions(**base)


def prepared(tmp: Path, zk, zk_url: str, make_sim, *, scenario="new-brokers", params=None, mode="add-brokers",
             brokers=(12, 13, 14, 15), acceleration=200.0, approve_it=True):
    cluster = build_scenario(scenario, params or ScenarioParams(partitions=48, mean_partition_mib=64))
    sim = make_sim(cluster, acceleration=acceleration)
    run = tmp / "run"
    sizes = tmp / "sim" / "log-dirs.json"
    take_snapshot(zk_url, run, sizes=f"file://{sizes}")
    plan = plan_run_dir(run, mode, brokers=list(brokers) if brokers else None, balance="counts")  # any valid plan
    if approve_it:
        approve(run, by="test")
    return sim, run, plan, ZkBackend(zk, zk_url)


def assignment(backend: ZkBackend) -> dict:
    return {p.tp: p.replicas for p in backend.read_cluster().partitions}


def test_refusals_change_nothing(tmp_path, zk, zk_url, make_sim):
    sim, run, plan, backend = prepared(tmp_path, zk, zk_url, make_sim, approve_it=False)
    before = assignment(backend)
    with pytest.raises(InputError, match="no approval record"):
        execute(run, backend, opts())
    approve(run, by="test", decision="rejected")
    with pytest.raises(InputError, match="was rejected, not approved"):
        execute(run, backend, opts())
    approve(run, by="test")
    # A plan whose changes no longer match its hash (edited after approval).
    doc = json.loads((run / "plan.json").read_text())
    original = json.dumps(doc)
    doc["changes"][0]["replicas_after"] = doc["changes"][0]["replicas_before"][::-1]
    (run / "plan.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="do not match its content hash"):
        execute(run, backend, opts())
    (run / "plan.json").write_text(original)
    # A foreign reassignment in flight (a stalled one: its destination is down).
    sim.kill_broker(15)
    p = next(p for p in backend.read_cluster().partitions if 15 not in p.replicas)
    zk.create(kz.REASSIGN, kz.encode({"version": 1, "partitions": [{"topic": p.topic, "partition": p.partition,
                                                                   "replicas": [15, *p.replicas[1:]]}]}))
    with pytest.raises(SourceError, match="a reassignment this run did not start is in flight"):
        execute(run, backend, opts())
    assert backend.throttle_configs() == {}
    after = assignment(backend)
    assert {k: v for k, v in after.items() if k != p.tp} == {k: v for k, v in before.items() if k != p.tp}
    assert not (run / "execution" / "state.json").exists() or all(
        b["status"] == "pending" for b in json.loads((run / "execution" / "state.json").read_text())["batches"])


def test_invalid_throttle_is_one_line_and_touches_nothing(tmp_path, zk, zk_url, make_sim):
    sim, run, plan, backend = prepared(tmp_path, zk, zk_url, make_sim)
    for bad in ("fast", "-5MB/s", "0", "10 parsecs"):
        result = run_cli("execute", str(run), "--source", zk_url, f"--throttle={bad}")
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "invalid throttle" in result.stderr
    assert not zk.exists(kz.REASSIGN) and backend.throttle_configs() == {}
    assert not (run / "execution").exists()


def test_drifted_partition_is_skipped_and_reported(tmp_path, zk, zk_url, make_sim):
    sim, run, plan, backend = prepared(tmp_path, zk, zk_url, make_sim)
    victim = next(c for c in plan.changes if c.added)
    # Someone else moves it first.
    other = [b for b in range(12) if b not in victim.replicas_before][:1]
    drifted = (victim.replicas_before[0], *victim.replicas_before[1:-1], other[0])
    zk.create(kz.REASSIGN, kz.encode({"version": 1, "partitions": [{"topic": victim.topic, "partition": victim.partition,
                                                                   "replicas": list(drifted)}]}))
    wait_for(lambda: not zk.exists(kz.REASSIGN), 20, "the controller to finish the other reassignment")
    state = execute(run, backend, opts())
    skipped = [s for b in state["batches"] for s in b["skipped"]]
    assert [(s["topic"], s["partition"]) for s in skipped] == [(victim.topic, victim.partition)]
    assert "drifted" in skipped[0]["reason"]
    assert assignment(backend)[(victim.topic, victim.partition)] == drifted  # never overwritten


def test_session_expiry_during_execution_is_ridden_out(tmp_path, zk, zk_url, make_sim):
    import threading

    from kazoo.client import KazooClient

    sim, run, plan, _ = prepared(tmp_path, zk, zk_url, make_sim, acceleration=20.0)
    hosts = zk_url[len("zk://"):]
    client = KazooClient(hosts=hosts, timeout=2.0)
    client.start()
    backend = ZkBackend(client, zk_url)
    fault: dict[str, object] = {}

    def expire() -> None:
        try:
            wait_for(lambda: client.exists(kz.REASSIGN), 30, "the execution to submit its first batch")
            expire_session(client, hosts)
            fault["in_flight"] = zk.exists(kz.REASSIGN) is not None  # read on another session: the batch copying
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread below
            fault["error"] = exc

    t = threading.Thread(target=expire)
    t.start()
    try:
        state = execute(run, backend, opts(throttle=40 * MB))
    except SourceError as exc:  # failing cleanly is allowed; then a rerun must finish
        assert "rerun" in str(exc)
        state = execute(run, backend, opts(throttle=40 * MB))
    t.join()
    assert "error" not in fault, fault.get("error")
    assert fault["in_flight"], "the session expired after the batch had finished: the fault did not hit the run"
    assert state["finished"]
    verify(run, backend)
    client.stop()
    client.close()


def test_multi_replica_change_moves_in_steps_never_beyond_rf_plus_one():
    steps = steps_of("t", 0, (1, 2, 3), (4, 5, 3), 100)
    assert [s.after for s in steps] == [(4, 2, 3), (4, 5, 3)]
    for s in steps:
        assert len(set(s.before) | set(s.after)) <= len(s.before) + 1
    batches = make_batches(steps, per_broker=5, total=50)
    assert [len(b) for b in batches] == [1, 1]  # the second step waits for the first
    reorder = steps_of("t", 1, (1, 2, 3), (3, 1, 2), 100)
    assert len(reorder) == 1 and reorder[0].leader_only and reorder[0].bytes == 0


def test_throttle_clear_removes_this_runs_throttles_only(tmp_path, zk, zk_url, make_sim):
    from rebalancer.execute import throttle as thr

    sim, run, plan, backend = prepared(tmp_path, zk, zk_url, make_sim)
    # Someone else's throttles, and an unrelated key on the same broker.
    backend.alter_configs("brokers", "3", {"leader.replication.throttled.rate": "1000", "other.setting": "x"})
    backend.alter_configs("topics", "orders.v0", {"follower.replication.throttled.replicas": "0:3"})
    # This run's, as a killed execution would leave them (recorded in its ledger, then set).
    ledger = thr.Ledger(run / "execution" / "throttles.json")
    steps = [Step.from_dict(d) for d in make_state_steps(plan)[:3]]
    thr.apply(backend, ledger, 5 * MB, thr.batch_throttles(steps, set(range(16))))
    theirs = {("brokers", "3"): {"leader.replication.throttled.rate": "1000"},
              ("topics", "orders.v0"): {"follower.replication.throttled.replicas": "0:3"}}
    assert backend.throttle_configs() != theirs
    result = run_cli("throttle", "--clear", str(run), "--source", zk_url)
    assert result.returncode == 0, result.stderr
    assert "removed this run's throttles from" in result.stdout and "brokers/3" in result.stdout.splitlines()[-1]
    assert backend.throttle_configs() == theirs
    assert backend._config("brokers", "3") == {"leader.replication.throttled.rate": "1000", "other.setting": "x"}  # noqa: SLF001
    again = run_cli("throttle", "--clear", str(run), "--source", zk_url)
    assert again.returncode == 0 and "no throttle left" in again.stdout


def test_narrowing_the_throttles_reads_only_what_it_may_change(tmp_path, zk, zk_url, make_sim):
    """A rolling run narrows its throttles to the moves still copying: it reads the configs of the brokers and
    topics it may release, not of every one it throttled (on a long run, every broker and hundreds of topics), and
    leaves exactly what the moves kept need."""
    from rebalancer.execute import throttle as thr

    sim, run, plan, backend = prepared(tmp_path, zk, zk_url, make_sim)
    ledger = thr.Ledger(run / "execution" / "throttles.json")
    steps = [Step.from_dict(d) for d in make_state_steps(plan)[:6]]
    live = set(range(16))
    thr.apply(backend, ledger, 5 * MB, thr.batch_throttles(steps, live))
    kept = steps[:3]
    keep = thr.batch_throttles(kept, live)
    read: list[tuple[str, str]] = []
    configs = backend.throttle_configs

    def recording(entities=None):
        read.extend(entities or [("all", "")])
        return configs(entities)

    backend.throttle_configs = recording
    thr.release(backend, ledger, keep=keep)
    backend.throttle_configs = configs
    assert ("all", "") not in read
    assert not {int(b) for kind, b in read if kind == "brokers"} & keep[0]
    dropping = thr.batch_throttles(steps[3:], live)
    assert {t for kind, t in read if kind == "topics"} <= set(dropping[1])
    # What is left is what the kept moves need: throttling them again changes nothing.
    assert thr.apply(backend, ledger, 5 * MB, keep) is False
    thr.release(backend, ledger)
    assert backend.throttle_configs() == {}


def make_state_steps(plan) -> list[dict]:
    return [s.to_dict() for c in plan.changes for s in steps_of(c.topic, c.partition, c.replicas_before,
                                                                  c.replicas_after, c.size_bytes)]


def test_a_move_whose_target_keeps_a_dead_broker_is_refused_at_once(tmp_path, zk, zk_url, make_sim):
    """A move completes only when its whole target is in sync: one that keeps a replica on a dead broker would copy
    everything and still wait out the batch timeout. Refused before anything is submitted, naming the broker."""
    from rebalancer.execute import ExecutionFailed

    sim, run, plan, backend = prepared(tmp_path, zk, zk_url, make_sim)
    added = {b for c in plan.changes for b in c.replicas_after if b not in c.replicas_before}
    kept = next(b for c in plan.changes for b in c.replicas_after if b in c.replicas_before and b not in added)
    sim.kill_broker(kept)
    started = time.monotonic()
    with pytest.raises(ExecutionFailed) as failed:
        execute(run, backend, opts(min_timeout=60.0, per_broker=50, total=500))
    assert time.monotonic() - started < 30, "waited instead of refusing"
    message = str(failed.value)
    assert f"keeps broker {kept}, which is down" in message and "nothing submitted" in message, message
    assert not zk.exists(kz.REASSIGN)


def test_the_runs_verdict_says_the_throttle_command_whole_without_a_password(tmp_path):
    from rebalancer.runbook import outcome

    run = tmp_path / "run dir"
    run.mkdir()
    message = outcome(run, ["cleanup_throttles"], "kafka://ops:s3cret@broker-1:9092")["message"]
    assert f"rebalancer throttle --clear '{run.resolve()}' --source 'kafka://ops:***@broker-1:9092'" in message
    assert "s3cret" not in message


def test_batches_report_the_whole_runs_progress_and_keep_it_in_the_state(tmp_path, zk, zk_url, make_sim):
    sim, run, plan, backend = prepared(tmp_path, zk, zk_url, make_sim, acceleration=50.0)
    lines: list[str] = []
    state = execute(run, backend, opts(throttle=20 * MB, report_every=0.0, progress=lines.append))
    assert state["finished"] and len(state["batches"]) > 1
    copies = [s for b in state["batches"] for s in b["steps"] if s["bytes"]]
    progress = state["progress"]
    assert progress["moves_done"] == progress["moves"] == len(copies)
    assert progress["bytes_done"] == progress["bytes"] == sum(s["bytes"] for s in copies) > 0
    assert progress["eta_s"] == 0.0 and progress["elapsed_s"] > 0 and progress["critical"] == []
    # While it ran: the batch's moves, then the whole run's, the critical broker's bytes left and an ETA.
    running = [x for x in lines if "moves of the batch; run " in x]
    copying = [x for x in running if not x.split("; run ")[1].startswith(f"{len(copies)}/")]
    assert copying and all("critical broker " in x and "ETA ~" in x for x in copying), [
        x for x in copying if "critical broker " not in x]
    assert any(f"0/{len(copies)} moves" not in x for x in running[1:])  # the run's count moves on across batches
