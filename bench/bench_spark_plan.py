"""Benchmark: the plan stage as the DAGs submit it to Spark (``spark-submit spark/plan_job.py``, issue 26) on the
2,600-broker / 13-rack / 3M-replica case, once per master (``local[1]``, ``local[2]``): wall time, the peak memory
of the whole application (spark-submit's JVM, the Python driver and the Python workers, summed, sampled every
0.25 s), the groups, and the plan's quality (disk and count deviations, bytes against the bound, every gate).

    .venv/bin/python bench/bench_spark_plan.py                       # 3M replicas, local[1] and local[2]
    .venv/bin/python bench/bench_spark_plan.py --partitions 200000 --brokers 520
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]


def peak_rss(proc: subprocess.Popen[bytes], done: threading.Event, out: list[int]) -> None:
    import psutil

    root = psutil.Process(proc.pid)
    peak = 0
    while not done.wait(0.25):
        total = 0
        try:
            for p in [root, *root.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
        except psutil.Error:
            continue
        peak = max(peak, total)
    out.append(peak)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    import load_cases

    load_cases.add_shape_arguments(ap)
    ap.add_argument("--masters", nargs="+", default=["local[1]", "local[2]"])
    ap.add_argument("--no-gates", action="store_true", help="skip the GX gates (a minute at 3M)")
    args = ap.parse_args()


    from rebalancer.analyze import spark_env
    from rebalancer.formats import write_cluster_json
    from rebalancer.runbook import plan_args, plan_job
    from rebalancer.validate import GateFailure, validate_run_dir

    work = Path(tempfile.mkdtemp(prefix="bench-spark-plan-"))
    try:
        cluster = load_cases.shaped(args)
        replicas = cluster.replica_count
        base = work / "base"
        base.mkdir()
        write_cluster_json(cluster, base / "snapshot.json")
        del cluster
        rows = []
        for master in args.masters:
            run = work / master.replace("[", "-").replace("]", "").replace("*", "all")
            shutil.copytree(base, run)
            cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", master,
                   "--conf", "spark.ui.enabled=false", "--driver-memory", "4g", plan_job(),
                   *plan_args(run, "rebalance")]
            started = time.perf_counter()
            done, peak = threading.Event(), []
            with open(run / "spark.log", "wb") as log:
                proc = subprocess.Popen(cmd, env=spark_env(master), stdout=log, stderr=subprocess.STDOUT)
                sampler = threading.Thread(target=peak_rss, args=(proc, done, peak))
                sampler.start()
                status = proc.wait()
            seconds = time.perf_counter() - started
            done.set()
            sampler.join()
            if status != 0:
                print(f"{master}: spark-submit exit {status}; see {run / 'spark.log'}")
                print((run / "spark.log").read_text(errors="replace")[-3000:])
                return 1
            doc = json.loads((run / "plan.json").read_text())
            greedy = doc["solver"]["greedy"]
            dims = doc["summary"]["load"]["dimensions"]
            gates = "-"
            if not args.no_gates:
                try:
                    result = validate_run_dir(run)
                except GateFailure:
                    result = json.loads((run / "validation" / "result.json").read_text())
                gates = f"{sum(g['passed'] for g in result['gates'])}/{len(result['gates'])}"
            rows.append({"master": master, "seconds": seconds, "peak": peak[0] / 2**20, "groups": greedy.get("groups", 1),
                         "slowest": max(greedy.get("group_seconds") or [0.0]),
                         "slowest_repair": max(greedy.get("repair_group_seconds") or [0.0]),
                         "whole_repair_moves": greedy.get("whole_repair_moves"),
                         "placement": doc["solver"]["budget"]["phases"].get("greedy", {}).get("seconds"),
                         "disk": dims["disk"]["max_deviation_pct_after"],
                         "replicas": dims["replicas"]["max_deviation_pct_after"],
                         "bound": doc["summary"]["load"]["bytes_to_bound"], "gates": gates,
                         "changes": len(doc["changes"])})
            phases = {k: v.get("seconds") for k, v in doc["solver"]["budget"]["phases"].items()}
            print(rows[-1], "\n  phases:", phases, flush=True)
        print(f"\n{replicas:,} replicas, {args.brokers} brokers, {args.racks} racks; spark-submit spark/plan_job.py")
        print("| master | wall s | peak MiB (all processes) | groups | slowest group s | placement s | disk dev % "
              "| replica dev % | bytes/bound | changes | gates |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['master']} | {r['seconds']:.1f} | {r['peak']:,.0f} | {r['groups']} | {r['slowest']:.1f} | "
                  f"{r['placement']} | {r['disk']} | {r['replicas']} | {r['bound']} | {r['changes']:,} | {r['gates']} |")
        if len(rows) >= 2:
            print(f"speed-up {rows[0]['master']} -> {rows[-1]['master']}: {rows[0]['seconds'] / rows[-1]['seconds']:.2f}x")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
