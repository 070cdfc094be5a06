"""Benchmark: ``--time-limit`` bounds the whole plan stage, on clusters far too large to plan completely in time.

Each case writes a generated snapshot to a temporary run directory (in its own subprocess), then runs
``plan_run_dir(RUN_DIR, mode, time_limit=LIMIT)`` in a fresh subprocess, so the peak RSS is the plan stage's alone
(loading the snapshot included, as the limit includes it). Printed per case: the stage's wall time (load, plan and
writing the plan files), the seconds the budget recorded (load + plan, without writing), peak MiB, the phase the
limit ran out in and the phases it cut short, replica moves and leader changes against their lower bounds, and the
seconds of each phase.

    .venv/bin/python bench/bench_plan_budget.py                 # every case (the 2M ones: ~15 min, ~4 GiB)
    .venv/bin/python bench/bench_plan_budget.py --case 200k-rebalance-60s

The clusters: ``brokers`` brokers in ``racks`` racks, RF 3 over three distinct racks, replica counts skewed like the
Wix article's "before" counts (stretched over the brokers), ``topics`` topics of equal size, log-normal sizes.
Built directly (``sim.scenarios.wix`` picks replicas in O(brokers) each: hours at 2M partitions and 300 brokers).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# cluster: (partitions, brokers, racks, topics)
CLUSTERS = {
    "200k": (200_000, 100, 4, 500),
    "2m": (2_000_000, 300, 6, 1000),
}
# case: (cluster, mode, time limit in seconds); cases on one cluster share its snapshot
CASES = {
    "200k-rebalance-60s": ("200k", "rebalance", 60.0),
    "2m-rebalance-60s": ("2m", "rebalance", 60.0),
    "2m-rebalance-300s": ("2m", "rebalance", 300.0),
}
MiB = 1024 * 1024


def build(partitions: int, brokers: int, racks: int, topics: int, seed: int = 7):
    from rebalancer.model import Broker, Cluster, Partition
    from rebalancer.sim.scenarios import WIX_BEFORE

    rng = random.Random(seed)
    names = [f"r{i}" for i in range(racks)]
    bs = [Broker(i, names[i % racks]) for i in range(brokers)]
    weight = [WIX_BEFORE[i * len(WIX_BEFORE) // brokers] for i in range(brokers)]
    in_rack = [[b.id for b in bs if b.rack == r] for r in names]
    cum = [list(itertools.accumulate(weight[b] for b in ids)) for ids in in_rack]
    parts = []
    per_topic = partitions // topics
    for t in range(topics):
        topic = f"bench.events.{t:04d}"
        mean = 256 * MiB * rng.uniform(0.25, 2.0)
        for num in range(per_topic + (1 if t < partitions % topics else 0)):
            reps = tuple(rng.choices(in_rack[r], cum_weights=cum[r])[0] for r in rng.sample(range(racks), 3))
            size = max(1, int(rng.lognormvariate(-0.32, 0.8) * mean))
            parts.append(Partition(topic, num, reps, reps[0], reps, size))
    return Cluster.build(bs, parts, {"scenario": "bench-plan-budget"})


def write_snapshot(cluster: str, run_dir: str) -> None:
    from rebalancer.formats import write_cluster_json

    write_cluster_json(build(*CLUSTERS[cluster]), Path(run_dir) / "snapshot.json")


def run_one(case: str, run_dir: str) -> dict:
    from rebalancer.plan import PlanError, plan_run_dir

    _cluster, mode, limit = CASES[case]
    started = time.monotonic()
    try:
        plan = plan_run_dir(run_dir, mode, time_limit=limit)
    except PlanError as exc:
        return {"wall": time.monotonic() - started, "error": str(exc)}
    s, budget = plan.summary, plan.solver["budget"]
    return {
        "wall": time.monotonic() - started,
        "budget_seconds": budget["seconds"],
        "expired_in": budget["expired_in"],
        "cut_short": [name for name, p in budget["phases"].items() if p["cut_short"]],
        "phases": {name: p["seconds"] for name, p in budget["phases"].items()},
        "moves": s["replica_moves"], "bound": s["lower_bounds"]["replica_moves"],
        "leader_changes": s["leader_changes"], "leader_bound": s["lower_bounds"]["leader_changes"],
        "spread": (s["replica_spread"]["before"], s["replica_spread"]["after"]),
        "status": plan.solver["status"],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", help="only this case")
    ap.add_argument("--write", nargs=2, metavar=("CLUSTER", "RUN_DIR"), help=argparse.SUPPRESS)
    ap.add_argument("--one", nargs=2, metavar=("CASE", "RUN_DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write:
        write_snapshot(*args.write)
        return
    if args.one:
        print(json.dumps(run_one(*args.one)))
        return
    header = (f"{'case':<20} {'partitions':>10} {'limit':>5} {'wall s':>7} {'budget s':>8} {'peakMiB':>8} "
              f"{'expired in':<10} {'cut short':<16} {'moves':>8} {'bound':>8} {'ratio':>6} {'leaders':>8} "
              f"{'bound':>8}  phases (s)")
    print(header)
    print("-" * len(header))
    for cluster, (partitions, *_rest) in CLUSTERS.items():
        cases = [c for c, (on, _mode, _limit) in CASES.items() if on == cluster and args.case in (None, c)]
        if not cases:
            continue
        with tempfile.TemporaryDirectory(prefix="bench-plan-budget-") as run_dir:
            built = time.monotonic()
            proc = subprocess.run([sys.executable, __file__, "--write", cluster, run_dir], capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{cluster:<20} snapshot FAILED: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
                continue
            print(f"# {cluster}: snapshot of {partitions:,} partitions written in {time.monotonic() - built:.0f} s",
                  flush=True)
            for case in cases:
                _report(case, partitions, run_dir)


def _report(case: str, partitions: int, run_dir: str) -> None:
    """Plan ``case`` in a fresh process and print its row."""
    limit = CASES[case][2]
    child = subprocess.Popen([sys.executable, __file__, "--one", case, run_dir], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(child.pid, 0)
    out = child.stdout.read() if child.stdout else ""
    err = child.stderr.read() if child.stderr else ""
    peak = usage.ru_maxrss / 1024
    if os.waitstatus_to_exitcode(status) != 0:
        print(f"{case:<20} FAILED: {(err.strip().splitlines() or ['?'])[-1]}  (peak {peak:.0f} MiB)")
        return
    r = json.loads(out.strip().splitlines()[-1])
    if "error" in r:
        print(f"{case:<20} {partitions:>10} {limit:>5g} {r['wall']:>7.1f} {'':>8} {peak:>8.0f}  PlanError: {r['error']}",
              flush=True)
        return
    ratio = f"{r['moves'] / r['bound']:.3f}" if r["bound"] else ""
    phases = " ".join(f"{k} {v:.1f}" for k, v in r["phases"].items())
    print(f"{case:<20} {partitions:>10} {limit:>5g} {r['wall']:>7.1f} {r['budget_seconds']:>8.1f} {peak:>8.0f} "
          f"{str(r['expired_in']):<10} {','.join(r['cut_short']) or '-':<16} {r['moves']:>8} {r['bound']:>8} "
          f"{ratio:>6} {r['leader_changes']:>8} {r['leader_bound']:>8}  {phases}", flush=True)
    print(f"#   status: {r['status']}; replica spread {r['spread'][0]} -> {r['spread'][1]}", flush=True)


if __name__ == "__main__":
    main()
