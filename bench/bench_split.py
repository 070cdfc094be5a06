"""Benchmark: the split load placement (``rebalancer.plan.split``, issue 26) against the single ``load_greedy`` pass.

Each row runs in a fresh subprocess (its wall time and peak RSS are its own): it builds the case's ``LoadInput``
(``load_input``, timed apart), then places replicas with ``load_greedy`` (groups = 1: the single pass) or with
``split_greedy`` over N groups (in process: the builtin ``map``), and prints

- the brokers outside the gates' bands after placement (placement dimensions: disk, network in, replica count),
  and the largest |deviation| from target in disk and of the replica count;
- bytes moved against the bound (``plan.load_summary``), the most replicas added to a partition;
- the input's seconds, the placement's seconds, the groups' seconds summed and the slowest group's (what a parallel
  map would wait for; the rest of the placement is the driver's: targets, merge, repair), the repair pass's moves,
  and the row's peak MiB.

    .venv/bin/python bench/bench_split.py                 # the 263k and 600k cases, 1 / 4 / 8 groups
    .venv/bin/python bench/bench_split.py --case 300b-600k-unequal --groups 1 3
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

CASES = ("wix-263k-heavy", "300b-600k-unequal")
HUGE = ("2600b-3m-defaults",)  # only with --case


def run_one(case: str, groups: int) -> dict:
    from bench_load import build

    from rebalancer.load import load_model
    from rebalancer.plan.load_greedy import load_greedy
    from rebalancer.plan.load_problem import load_input
    from rebalancer.plan.load_summary import load_summary
    from rebalancer.plan.split import split_greedy
    from rebalancer.plan.targets import make_targets

    cluster, brokers = build(case)
    model = load_model(cluster)
    targets = make_targets(cluster, "rebalance", brokers)
    started = time.monotonic()
    inp = load_input(cluster, model, targets, 1)
    input_s = time.monotonic() - started
    started = time.monotonic()
    if groups == 1:
        changed, stats = load_greedy(inp)
        slowest, repair, groups_s = time.monotonic() - started, 0, time.monotonic() - started
    else:
        changed, sstats = split_greedy(inp, groups=groups)
        slowest, repair = max(sstats["group_seconds"]), sstats["repair_moves"]
        groups_s = sum(sstats["group_seconds"])
    place_s = time.monotonic() - started
    parts = cluster.partitions
    moved = sum(parts[i].size_bytes * sum(1 for b in new if b not in parts[i].replicas) for i, new in changed.items())
    summary = load_summary(cluster, {parts[i].tp: r for i, r in changed.items()}, targets, model, moved)
    dims = summary["dimensions"]
    outside = sum(len(dims[d]["outside_after"]) for d in inp.bands)
    return {"case": case, "groups": groups, "replicas": cluster.replica_count, "outside": outside,
            "disk": dims["disk"]["max_deviation_pct_after"], "replicas_dev": dims["replicas"]["max_deviation_pct_after"],
            "ratio": summary["bytes_to_bound"],
            "chg": max((sum(1 for b in new if b not in parts[i].replicas) for i, new in changed.items()), default=0),
            "input_s": input_s, "place_s": place_s, "slowest_s": slowest, "groups_s": groups_s, "repair": repair,
            "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", action="append", choices=CASES + HUGE)
    ap.add_argument("--groups", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one[0], int(args.one[1]))))
        return
    head = (f"{'case':<20} {'groups':>6} {'replicas':>9} {'outside':>7} {'disk%':>6} {'rep%':>6} {'ratio':>6} {'chg':>3} "
            f"{'input s':>8} {'place s':>8} {'groups s':>8} {'slowest':>8} {'repair':>6} {'peakMiB':>8}")
    print(head)
    print("-" * len(head))
    for case in args.case or CASES:
        for g in args.groups:
            proc = subprocess.run([sys.executable, __file__, "--one", case, str(g)], capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{case:<20} {g:>6} failed: {proc.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            print(f"{r['case']:<20} {r['groups']:>6} {r['replicas']:>9} {r['outside']:>7} {r['disk']:>6.2f} "
                  f"{r['replicas_dev']:>6.2f} {r['ratio']:>6.3f} {r['chg']:>3} {r['input_s']:>8.1f} {r['place_s']:>8.1f} "
                  f"{r['groups_s']:>8.1f} {r['slowest_s']:>8.1f} {r['repair']:>6} {r['peak']:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
