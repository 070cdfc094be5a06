"""The weekly DAG end to end at LinkedIn scale (issue 26): a 2,600-broker / 13-rack cluster of 1,000,000 partitions
(RF 3, 3M replicas, heavy-tailed sizes, the ``2600b-3m`` case of bench_load) written in Kafka's ZooKeeper layout into
a real ZooKeeper, its sizes in a ``kafka-log-dirs --describe`` file, then ``kafka_rebalance_weekly`` triggered on a
real Airflow 3 (LocalExecutor, the analysis through spark-submit on local[*]) and followed to its approval:
snapshot -> analyze -> plan -> check_changes -> validate -> analyze_plan -> report -> approve (parked). The approval
is then rejected, so nothing executes (there are no brokers behind the metadata), and the run must end with its
verdict. Prints one row per task (seconds, peak memory of the task's process tree) and the total.

    .venv/bin/python bench/bench_dag_scale.py                       # 1,000,000 partitions (about 15-20 minutes)
    .venv/bin/python bench/bench_dag_scale.py --partitions 20000    # a quick look at the same path

Peak memory is sampled every 0.5 s (psutil) over the processes started for the run under the scheduler (task
supervisors and processes, spark-submit's JVM and Python workers): the largest sum of RSS seen while a task ran.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

_spec = importlib.util.spec_from_file_location("airflow_local", REPO / "scripts" / "airflow_local.py")
assert _spec is not None and _spec.loader is not None
airflow_local = importlib.util.module_from_spec(_spec)
sys.modules["airflow_local"] = airflow_local
_spec.loader.exec_module(airflow_local)

DAG = "kafka_rebalance_weekly"
UP_TO_APPROVAL = ("snapshot", "analyze", "plan", "check_changes", "validate", "analyze_plan", "report")


def log_dirs(cluster: Any) -> dict[str, Any]:
    """Every replica's size (its partition's) in ``kafka-log-dirs --describe`` format."""
    per: dict[int, list[dict[str, Any]]] = {b.id: [] for b in cluster.brokers}
    for p in cluster.partitions:
        entry = {"partition": f"{p.topic}-{p.partition}", "size": p.size_bytes, "offsetLag": 0, "isFuture": False}
        for b in p.replicas:
            per[b].append(entry)
    return {"version": 1, "brokers": [{"broker": b, "logDirs": [{"logDir": f"/var/lib/kafka/data-{b}", "error": None,
                                                                "partitions": parts}]} for b, parts in per.items()]}


class Sampler(threading.Thread):
    """The peak summed RSS of the processes under Airflow's scheduler (task runners and what they start), per
    running task."""

    def __init__(self, root_pid: int) -> None:
        super().__init__(daemon=True)
        self.root_pid = root_pid
        self.since = time.time()
        self.task: str | None = None
        self.peak: dict[str, int] = {}
        self.stopped = threading.Event()

    def run(self) -> None:
        import psutil

        root = psutil.Process(self.root_pid)
        while not self.stopped.wait(0.5):
            task = self.task
            if task is None:
                continue
            total = 0
            try:
                # The processes started for the run (task supervisors, task processes, spark-submit's JVM and
                # Python workers), not LocalExecutor's idle workers started with the scheduler.
                for child in root.children(recursive=True):
                    try:
                        if child.create_time() >= self.since:
                            total += child.memory_info().rss
                    except psutil.Error:
                        pass
            except psutil.Error:
                continue
            self.peak[task] = max(self.peak.get(task, 0), total)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    import load_cases

    load_cases.add_shape_arguments(ap)
    ap.add_argument("--keep", action="store_true", help="keep the working directory (Airflow home, run directory)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the approval")
    args = ap.parse_args()

    from kazoo.client import KazooClient

    from rebalancer.formats import atomic_write_json
    from rebalancer.kafka_zk import write_cluster
    from rebalancer.zkserver import ZooKeeperServer

    work = Path(tempfile.mkdtemp(prefix="bench-dag-scale-"))
    print(f"working directory {work}", flush=True)
    t0 = time.perf_counter()
    cluster = load_cases.shaped(args)
    print(f"cluster: {len(cluster.brokers)} brokers, {len(cluster.partitions):,} partitions, "
          f"{cluster.replica_count:,} replicas ({time.perf_counter() - t0:.0f} s)", flush=True)
    sizes = work / "log-dirs.json"
    atomic_write_json(sizes, log_dirs(cluster))
    zk = ZooKeeperServer(work / "zookeeper", heap_mb=4096)
    zk.start()
    home = work / "airflow"
    try:
        t0 = time.perf_counter()
        chroot = "/linkedin-scale"
        client = KazooClient(hosts=zk.hosts, timeout=60)
        client.start()
        client.ensure_path(chroot)
        client.stop()
        client = KazooClient(hosts=zk.hosts + chroot, timeout=60)
        client.start()
        write_cluster(client, cluster, ephemeral=False)
        client.stop()
        client.close()
        written = time.perf_counter() - t0
        print(f"metadata written to ZooKeeper {zk.hosts}{chroot} in {written:.0f} s", flush=True)
        del cluster

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        env = airflow_local.airflow_env(home, port, users=[("admin", "admin")],
                                        extra={"AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2"})
        airflow_local.init(home, env)
        pids = airflow_local.start(home, env, ("api-server", "scheduler", "dag-processor"))
        base = f"http://127.0.0.1:{port}"
        airflow_local.wait_ready(base, home)
        admin = airflow_local.Client(base, "admin", airflow_local.passwords(home)["admin"])
        airflow_local.configure(admin)
        admin.request("POST", "/connections", json={
            "connection_id": "zk_scale", "conn_type": "zookeeper", "host": zk.hosts, "schema": chroot.strip("/"),
            "extra": json.dumps({"sizes": f"file://{sizes}"})})
        sampler = Sampler(pids["scheduler"])
        sampler.start()  # counts the processes started from now on
        started = time.perf_counter()
        run_id = admin.trigger(DAG, {"backend": "zookeeper", "zookeeper_conn_id": "zk_scale"})
        # Unpaused after the trigger: the scheduled run unpausing creates (on zookeeper_default, absent here) then
        # waits behind this one (one active run) instead of running, and failing, first.
        admin.unpause(DAG)
        print(f"triggered {DAG} {run_id}", flush=True)
        deadline = time.monotonic() + args.timeout
        seen: dict[str, str | None] = {}
        while time.monotonic() < deadline:
            states = admin.task_states(DAG, run_id)
            running = [t for t, s in states.items() if s == "running"]
            sampler.task = running[0] if running else sampler.task
            for t, s in states.items():
                if s != seen.get(t) and s is not None:
                    print(f"  {time.perf_counter() - started:7.1f} s  {t:<14} {s}", flush=True)
            seen = dict(states)
            if states.get("approve") == airflow_local.PARKED_STATE:
                break
            if any(s in ("failed", "upstream_failed") for s in states.values()):
                print("the run failed before its approval; logs in", home / "logs", flush=True)
                for t, s in states.items():
                    if s == "failed":
                        print(admin.log(DAG, run_id, t)[-3000:])
                return 1
            time.sleep(1.0)
        else:
            print(f"no approval within {args.timeout:g} s", flush=True)
            return 1
        to_approval = time.perf_counter() - started
        sampler.task = None
        airflow_local.wait_parked(admin, home, DAG, run_id, timeout=600)
        tis = admin.request("GET", f"/dags/{DAG}/dagRuns/{run_id}/taskInstances")["task_instances"]
        by_id = {ti["task_id"]: ti for ti in tis}
        run_dir = Path(env["REBALANCER_RUNS_DIR"]) / DAG
        plan = next(run_dir.rglob("plan.json"), None)
        result = next(run_dir.rglob("validation/result.json"), None)
        print()
        print("| task | seconds | peak MiB (task's processes) |")
        print("|---|---|---|")
        for t in UP_TO_APPROVAL:
            ti = by_id.get(t) or {}
            dur = ti.get("duration")
            print(f"| {t} | {dur:.1f} | {sampler.peak.get(t, 0) / 2**20:,.0f} |" if dur is not None
                  else f"| {t} | - | - |")
        print(f"| trigger -> approval parked | {to_approval:.1f} | |")
        if result is not None:
            gates = json.loads(result.read_text())["gates"]
            print(f"gates passed: {sum(g['passed'] for g in gates)}/{len(gates)}; failed: "
                  f"{[g['name'] for g in gates if not g['passed']]}")
        if plan is not None:
            doc = json.loads(plan.read_text())
            s = doc["summary"]
            print(f"plan: {len(doc['changes']):,} changes, strategy {doc.get('strategy')}, "
                  f"bytes/bound {s['load'].get('bytes_to_bound')}")
        admin.answer(DAG, run_id, "Reject")
        state = admin.wait_state(DAG, run_id, states=["success", "failed"], timeout=600)
        print(f"rejected: run {state}; tasks {admin.task_states(DAG, run_id)}")
        print(f"ZooKeeper write {written:.0f} s (before the run)")
        return 0
    finally:
        airflow_local.stop(home)
        zk.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
