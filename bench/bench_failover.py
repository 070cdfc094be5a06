"""Benchmark: what a broker or rack failure does to a plan's leadership, with and without the failover-aware follower
order (issue 46, ``rebalancer.plan.failover``).

Each case is planned twice with every default, in a fresh subprocess each (time and peak memory are the row's own):
without ``failover_order`` and with it. Per row: the plan's seconds and peak MiB, bytes moved, leader changes,
partitions reordered (and of them, those changed for the order alone), then from the plan's summary
(``summary.failover.after``) the worst single-broker failure (survivors' leader count and leader load deviation
from their mean, percent) and the worst rack failure, and the partitions a rack failure leaves offline.

    .venv/bin/python bench/bench_failover.py                    # every case (the 600k one takes a few minutes)
    .venv/bin/python bench/bench_failover.py --case new-brokers --case wix

The floor beside each worst figure (``summary.failover.order_floor``, ``failover.order_floor``): how far an order of
followers alone could bring that broker's failure, the leaders and replica sets as planned.

Targets (issue 46): worst leader-count deviation after any one broker fails <= 10 %, leader load <= 15 %, with the
same bytes moved and leader changes (+-1 %) as without, planning time within 20 %.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = {
    "new-brokers": ("add-brokers", [12, 13, 14, 15]),
    "wix": ("rebalance", None),
    "wix-265k": ("rebalance", None),
    "300b-600k-6racks": ("rebalance", None),
}


def build(case: str):  # noqa: ANN201 - a Cluster
    """The simulator's scenarios as they are; the large cases as ``bench_planners`` builds them."""
    from rebalancer.sim.scenarios import ScenarioParams, build_scenario

    if case in ("new-brokers", "wix"):
        return build_scenario(case, ScenarioParams())
    sys.path.insert(0, str(HERE))
    import bench_planners

    return bench_planners.build(case)


def run_one(case: str, ordered: bool) -> dict:
    import resource
    import time

    from rebalancer.plan.planner import make_plan

    mode, brokers = CASES[case]
    cluster = build(case)
    started = time.perf_counter()
    plan = make_plan(cluster, mode, brokers=brokers, failover_order=ordered)
    seconds = time.perf_counter() - started
    after = plan.summary["failover"]["after"]
    fo = dict(plan.solver.get("failover") or {})
    return {"case": case, "ordered": ordered, "seconds": round(seconds, 1),
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "bytes": plan.summary["bytes_moved"], "leader_changes": plan.summary["leader_changes"],
            "reordered": fo.get("reordered", 0), "order_only": fo.get("order_only", 0),
            "order_seconds": fo.get("seconds", 0.0),
            "broker_leaders": after["worst_broker"]["leaders_dev_pct"],
            "broker_load": after["worst_broker"]["load_dev_pct"],
            "floor": plan.summary["failover"].get("order_floor") or {},
            "rack_leaders": after["worst_rack"].get("leaders_dev_pct"),
            "rack_load": after["worst_rack"].get("load_dev_pct"),
            "rack_offline": after["worst_rack"].get("offline"),
            "weighted_by": plan.summary["failover"]["weighted_by"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", choices=list(CASES), help="case(s) to run (default: all)")
    ap.add_argument("--one", nargs=2, metavar=("CASE", "ORDERED"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        sys.path.insert(0, str(HERE.parent))
        print(json.dumps(run_one(args.one[0], args.one[1] == "1")))
        return
    print("| case | order | plan s | peak MiB | bytes moved | leader changes | reordered (order only) | "
          "1 broker down: leaders % (floor) | load % (floor) | 1 rack down: leaders % | load % | offline |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for case in args.case or list(CASES):
        for ordered in (False, True):
            out = subprocess.run([sys.executable, __file__, "--one", case, "1" if ordered else "0"],
                                 capture_output=True, text=True, check=False)
            if out.returncode != 0:
                print(f"| {case} | {'yes' if ordered else 'no'} | failed: {out.stderr.strip().splitlines()[-1:]} |")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"| {case} | {'yes' if ordered else 'no'} | {r['seconds']} | {r['peak_mib']} | {r['bytes'] / 1e9:.1f} GB"
                  f" | {r['leader_changes']} | {r['reordered']} ({r['order_only']}) | {r['broker_leaders']:.1f}"
                  f" ({_floor(r, 'leaders_dev_pct')}) | {r['broker_load']:.1f} ({_floor(r, 'load_dev_pct')})"
                  f" | {r['rack_leaders']} | {r['rack_load']} | {r['rack_offline']} |", flush=True)
    print("load: each partition's network out as leader where the model has rates, else its bytes "
          "(plan.summary.failover.weighted_by); floor: the least the worst single failure's broker can be brought "
          "to by an order of followers alone, leaders and replica sets as planned (summary.failover.order_floor: "
          "counts exact, load what the 0/1 program of whole choices proves)")


def _floor(row: dict, fig: str) -> str:
    value = (row.get("floor") or {}).get(fig)
    return "-" if value is None else f"{value:.1f}"


if __name__ == "__main__":
    main()
