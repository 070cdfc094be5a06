"""One execution per cluster, whatever the path: the cluster lock (a marker topic) seen by zk:// and kafka://, from
any run directory and any host; owned by one execution, never taken over while it lives, never deleted by anyone
else; a stale lock after kill -9 is detected and can be released."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_cli, wait_for
from test_cli import assert_one_line_error
from test_execute import opts

from rebalancer import kafka_zk as kz
from rebalancer.access.zk_backend import ZkBackend
from rebalancer.errors import ClusterBusy
from rebalancer.execute import approve, execute
from rebalancer.execute.lock import ClusterLock
from rebalancer.kafka_names import LOCK_TOPIC
from rebalancer.plan import plan_run_dir
from rebalancer.sim.scenarios import ScenarioParams, build_scenario
from rebalancer.snapshot import take_snapshot

SLOW = ["--throttle", "20MB/s", "--poll", "0.1", "--max-moves", "8", "--throttle-settle", "0.2"]


def _prepared(tmp: Path, zk, zk_url: str, make_sim):
    sim = make_sim(build_scenario("new-brokers", ScenarioParams(partitions=48, mean_partition_mib=64)), acceleration=5.0)
    run = tmp / "run"
    take_snapshot(zk_url, run, sizes=f"file://{tmp / 'sim' / 'log-dirs.json'}")
    plan_run_dir(run, "add-brokers", brokers=[12, 13, 14, 15], balance="counts")  # any valid plan, in milliseconds
    approve(run, by="test")
    return sim, run


def _start(run: Path, source: str, *extra: str, env: dict[str, str] | None = None,
           prefix: list[str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([*(prefix or []), sys.executable, "-m", "rebalancer", "execute", str(run), "--source", source,
                             *SLOW, *extra], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def _marker(zk) -> str | None:
    data = zk.exists(kz.topic_path(LOCK_TOPIC)) and zk.get(kz.topic_path(LOCK_TOPIC))[0]
    return json.loads(data)["topic_id"] if data else None


def _submitted_once(sim) -> None:
    moved = [(e["topic"], e["partition"], tuple(e["target"])) for e in sim.completed]
    assert len(moved) == len(set(moved)), "a move was submitted twice"


def _hurry(sim) -> None:
    """The race a test provokes is over: the copies left may finish at once (the simulator's clock is read every
    tick), not at the throttle that kept a batch in flight long enough to race with."""
    sim.acceleration = 200.0


def _other_host() -> list[str]:
    """A command prefix that runs the CLI under another host name (a UTS namespace), where the machine allows it."""
    probe = subprocess.run(["unshare", "--uts", "true"], capture_output=True)
    return ["unshare", "--uts", "sh", "-c", 'hostname other-host && exec "$@"', "sh"] if probe.returncode == 0 else []


@pytest.mark.parametrize("how", ["same run directory", "a copy of the run directory", "zk:// and kafka://",
                                 "two hosts"])
def test_two_concurrent_executions_exactly_one_runs(tmp_path, zk, zk_url, make_sim, how):
    sim, run = _prepared(tmp_path, zk, zk_url, make_sim)
    first = _start(run, zk_url, env={"REBALANCER_LOCK_DIR": str(tmp_path / "host-a")})
    holder = wait_for(lambda: _marker(zk), timeout=60, what="the first execution to take the lock")
    second_run, source, env, prefix = run, zk_url, {}, None
    if how != "same run directory":
        second_run = tmp_path / "copy"
        shutil.copytree(run, second_run, ignore=shutil.ignore_patterns(".*"))  # not the first's temporary files
    if how == "zk:// and kafka://":
        source = f"kafka://{sim.bootstrap}"
    if how == "two hosts":
        env = {"REBALANCER_LOCK_DIR": str(tmp_path / "host-b"), "TMPDIR": str(tmp_path)}
        prefix = _other_host()
    # As the probe found it: the second starts while the first is copying (a batch in flight).
    wait_for(lambda: zk.exists(kz.REASSIGN), timeout=60, what="the first execution's batch in flight")
    second = _start(second_run, source, env=env, prefix=prefix)
    out2, err2 = second.communicate(timeout=120)
    assert second.returncode == 9, err2
    assert len(err2.strip().splitlines()) == 1 and "another execution holds the cluster lock" in err2, err2
    assert holder in err2 and "rebalancer unlock" in err2
    assert _marker(zk) == holder, "the refused execution touched the lock"
    _hurry(sim)
    out1, err1 = first.communicate(timeout=300)
    assert first.returncode == 0, err1
    _submitted_once(sim)
    wait_for(lambda: not zk.exists(kz.topic_path(LOCK_TOPIC)), timeout=30, what="the lock topic to be deleted")


def test_stale_lock_after_kill_9_is_detected_and_recoverable(tmp_path, zk, zk_url, make_sim):
    sim, run = _prepared(tmp_path, zk, zk_url, make_sim)
    first = _start(run, zk_url)
    wait_for(lambda: zk.exists(kz.REASSIGN), timeout=60, what="a batch in flight")
    stale = _marker(zk)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    # Elsewhere (a copy of the run, over the Admin API): refused, told the lock id and how to release it.
    other = tmp_path / "other"
    shutil.copytree(run, other, ignore=shutil.ignore_patterns(".*"))  # its lock record too: a copy proves nothing
    result = run_cli("execute", str(other), "--source", f"kafka://{sim.bootstrap}", *SLOW)
    assert_one_line_error(result, 9, "another execution holds the cluster lock", stale,
                          f"rebalancer unlock --source kafka://{sim.bootstrap.split(',')[0]} {stale}")
    assert_one_line_error(run_cli("unlock", "--source", zk_url, "AAAAAAAAAAAAAAAAAAAAAA"), 4, f"the cluster lock is {stale}")
    assert _marker(zk) == stale
    _hurry(sim)
    # The same run directory on the same host proves its previous process is gone: it says so and resumes.
    result = run_cli("execute", str(run), "--source", zk_url, *SLOW, timeout=300)
    assert result.returncode == 0, result.stderr
    assert f"releasing the stale cluster lock {stale}" in result.stderr
    _submitted_once(sim)
    wait_for(lambda: not zk.exists(kz.topic_path(LOCK_TOPIC)), timeout=30, what="the lock topic to be deleted")


def test_unlock_releases_a_stale_lock_for_another_run(tmp_path, zk, zk_url, make_sim):
    sim, run = _prepared(tmp_path, zk, zk_url, make_sim)
    backend = ZkBackend(zk, zk_url)
    orphan = ClusterLock(backend, tmp_path / "elsewhere").acquire()  # as if its owner died on another host
    refused = run_cli("execute", str(run), "--source", zk_url, *SLOW)
    assert_one_line_error(refused, 9, orphan)
    result = run_cli("unlock", "--source", f"kafka://{sim.bootstrap}", orphan)
    assert result.returncode == 0 and f"released the cluster lock {orphan}" in result.stdout, result.stderr
    _hurry(sim)
    assert run_cli("execute", str(run), "--source", zk_url, *SLOW, timeout=300).returncode == 0


def test_an_execution_whose_lock_was_released_stops_before_the_next_batch(tmp_path, zk, zk_url, make_sim):
    sim, run = _prepared(tmp_path, zk, zk_url, make_sim)
    first = _start(run, zk_url)
    held = wait_for(lambda: zk.exists(kz.REASSIGN) and _marker(zk), timeout=60, what="a batch in flight")
    assert run_cli("unlock", "--source", zk_url, held).returncode == 0
    _hurry(sim)
    _out, err = first.communicate(timeout=300)
    assert first.returncode == 9 and "was released by someone else" in err, err
    _submitted_once(sim)


def test_a_lock_is_never_deleted_by_a_process_that_does_not_own_it(tmp_path, zk, zk_url, make_sim):
    sim, run = _prepared(tmp_path, zk, zk_url, make_sim)
    backend = ZkBackend(zk, zk_url)
    mine = ClusterLock(backend, run)
    held = mine.acquire()
    intruder = ClusterLock(backend, tmp_path / "x")
    intruder.topic_id = "AAAAAAAAAAAAAAAAAAAAAA"  # a process that believes it owns some lock
    intruder.release()
    assert _marker(zk) == held
    with pytest.raises(Exception, match="another execution holds the cluster lock"):
        execute(run, backend, opts())
    assert _marker(zk) == held
    mine.release()
    wait_for(lambda: not zk.exists(kz.topic_path(LOCK_TOPIC)), timeout=30, what="the lock topic to be deleted")


def test_a_lock_id_never_begins_with_a_dash(monkeypatch):
    """The lock's id is its marker topic's id, which ``rebalancer unlock LOCK_ID`` takes as an argument: one that
    began with '-' was read as an option (the CLI refused it, 1 lock in 64). Kafka's ``Uuid.randomUuid`` draws
    again then, and so does ``new_topic_id``."""
    import uuid

    from rebalancer import kafka_names as lock

    drawn = iter([uuid.UUID(bytes=b"\xf8" + b"\x01" * 15), uuid.UUID(bytes=b"\x01" * 16)])
    monkeypatch.setattr(lock.uuid, "uuid4", lambda: next(drawn))
    assert lock.kafka_uuid(uuid.UUID(bytes=b"\xf8" + b"\x01" * 15)).startswith("-")  # what the first draw gives
    assert lock.new_topic_id() == lock.kafka_uuid(uuid.UUID(bytes=b"\x01" * 16))
    monkeypatch.undo()
    assert not any(lock.new_topic_id().startswith("-") for _ in range(2000))


def _being_deleted(zk) -> None:
    """A lock marker the previous holder released and the controller has not deleted yet (ZooKeeper mode deletes
    topics asynchronously), on a cluster of one live broker and no controller: nothing else touches it."""
    zk.create(f"{kz.BROKER_IDS}/0", b"{}", makepath=True)
    zk.create(kz.topic_path(LOCK_TOPIC), kz.encode({"version": 3, "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ",
                                                     "partitions": {"0": [0]}}), makepath=True)
    zk.create(f"{kz.DELETE_TOPICS}/{LOCK_TOPIC}", b"", makepath=True)


def test_acquire_waits_for_a_marker_being_deleted_then_takes_the_lock(tmp_path, zk, zk_url):
    _being_deleted(zk)
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # the controller finishes the deletion during the third wait
        slept.append(seconds)
        if len(slept) == 3:
            zk.delete(kz.topic_path(LOCK_TOPIC))
            zk.delete(f"{kz.DELETE_TOPICS}/{LOCK_TOPIC}")

    held = ClusterLock(ZkBackend(zk, zk_url), tmp_path / "run", deleting_grace=60, sleep=sleep).acquire()
    assert slept == [0.2, 0.2, 0.2]
    assert _marker(zk) == held != "AAAAAAAAAAAAAAAAAAAAAQ"


def test_acquire_refuses_a_marker_still_being_deleted_after_the_grace(tmp_path, zk, zk_url):
    _being_deleted(zk)
    slept: list[float] = []
    lock = ClusterLock(ZkBackend(zk, zk_url), tmp_path / "run", deleting_grace=0.5, sleep=slept.append)
    with pytest.raises(ClusterBusy, match=f"the cluster lock topic {LOCK_TOPIC} is still being deleted after 0.5 s"):
        lock.acquire()
    assert slept and set(slept) == {0.2}
    assert _marker(zk) == "AAAAAAAAAAAAAAAAAAAAAQ"  # nothing created, nothing deleted
