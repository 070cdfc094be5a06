"""Benchmark: how near the execution bound the executor's batches come (issue 43), per way of forming them, and the
rolling schedule that starts each move as soon as its brokers have room (``rebalancer.movement.schedule``).

The throttle caps each broker's replication in and out, so no execution of a plan beats the busiest broker's bytes
over the whole plan (``rebalancer.movement.estimate``). Batches run one after another, each waiting for its slowest
move, so batching alone puts a floor under the run: the sum over batches of each batch's busiest throttle's bytes
(a broker's in or out: ``batches.batch_floor``). This prints floor / bound for each ``make_batches`` order
(``bound``, the default: the critical throttle kept busy or the largest first, whichever is lower; ``smallest``;
``largest``) with the executor's default caps (5 moves per broker, 50 per batch); then, in the fluid model of the
throttles (``schedule.simulate``: each throttle's rate shared max-min fairly among the copies through it), the
makespan / bound of the default batches one after another (split where that pays at ``--throttle``:
``batches.untangle``) and of the rolling schedule (its own cap: 2 moves per
broker, ``schedule.ROLLING_PER_BROKER``, 50 in all), over:

- the simulator's ``new-brokers`` (add-brokers) and ``wix`` (weekly rebalance) scenarios and the main job's cluster
  (``load_cases.main_job``), planned with every default;
- two production-shaped clusters with heavy-tailed topic sizes (``load_cases.production``): an add-brokers plan on
  16 brokers (12 + 4 new) and a weekly rebalance on 40 brokers, planned with every default;
- ``--count`` clusters of the ``small`` fuzz family (``load_cases.family``: heavy-tailed topic sizes, uneven starting
  loads, new brokers), planned with ``--balance`` (default ``counts``: seconds per cluster, the same kind of moves;
  ``auto`` plans them as the planner's defaults do, minutes for the whole family).

    .venv/bin/python bench/bench_batches.py [--count 40] [--seed-base 0] [--balance counts|auto] [--rows]
        [--throttle 50MB/s]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

ORDERS = ("bound", "smallest", "largest")
MODELLED = ("batches", "rolling")  # makespan / bound in the fluid model: the default batches, the rolling schedule


def ratios(changes: Any, throttle: float) -> dict[str, tuple[float, int]]:
    """order -> (floor / bound, batches); "batches" and "rolling" -> (modelled makespan / bound, batches or moves);
    the executor's batches are split where the fluid model says that pays at ``throttle`` (``batches.untangle``)."""
    from rebalancer.movement.batches import batch_floor, make_batches, steps_of
    from rebalancer.movement.estimate import batch_cost, transfer
    from rebalancer.movement.fluid import simulate_batches
    from rebalancer.movement.schedule import simulate

    steps = [s for c in changes
             for s in steps_of(c.topic, c.partition, tuple(c.replicas_before), tuple(c.replicas_after), c.size_bytes)]
    bound = max((max(v) for v in transfer(steps).values()), default=0)
    out = {}
    for order in ORDERS:
        batches = make_batches(steps, order=order)
        out[order] = (batch_floor(batches) / bound if bound else 1.0, len(batches))
    batches = make_batches(steps, batch_cost=batch_cost(throttle))
    out["batches"] = (simulate_batches(batches, 1.0).makespan / bound if bound else 1.0, len(batches))
    out["rolling"] = (simulate(steps, 1.0).makespan / bound if bound else 1.0,
                      sum(1 for s in steps if not s.leader_only))
    return out


def main() -> int:
    import load_cases

    from rebalancer.plan import make_plan
    from rebalancer.sim.scenarios import build_scenario

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=40, help="clusters of the small fuzz family (default 40)")
    ap.add_argument("--seed-base", type=int, default=0)
    ap.add_argument("--balance", choices=("counts", "auto"), default="counts",
                    help="how the fuzz clusters are planned (default counts: fast)")
    ap.add_argument("--rows", action="store_true", help="one row per plan")
    ap.add_argument("--throttle", default="50MB/s",
                    help="the run's throttle: where a batch split in two pays for its boundary (default 50MB/s)")
    args = ap.parse_args()
    from rebalancer.execute import parse_rate

    throttle = parse_rate(args.throttle)
    main_job = load_cases.main_job(0)
    cases: list[tuple[str, Any, str, Any, dict[str, Any]]] = [
        ("sim new-brokers, add-brokers", build_scenario("new-brokers"), "add-brokers", [12, 13, 14, 15], {}),
        ("sim wix, weekly rebalance", build_scenario("wix"), "rebalance", None, {}),
        ("main job (6 + 2 brokers)", main_job, "add-brokers", main_job.meta["new_brokers"], {}),
    ]
    add16 = load_cases.production(12, 4, 2_400, new=4, seed=1)
    cases.append(("heavy-tailed, 16 brokers, add-brokers", add16, "add-brokers", add16.meta["new_brokers"], {}))
    cases.append(("heavy-tailed, 40 brokers, weekly rebalance", load_cases.production(40, 4, 4_800, seed=2),
                  "rebalance", None, {}))
    for seed in range(args.seed_base, args.seed_base + args.count):
        cluster, mode, new = load_cases.family("small", seed)
        cases.append((f"small {seed} ({len(cluster.brokers)} brokers, {mode})", cluster, mode, new or None,
                      {"balance": args.balance}))
    rows = []
    print("batch floor / execution bound (batches), per order; modelled makespan / bound (batches or moves)")
    print("| plan | changes | " + " | ".join(ORDERS) + " | batches, modelled | rolling, modelled |")
    print("|---|---:|" + "---:|" * (len(ORDERS) + len(MODELLED)))
    for name, cluster, mode, new, kw in cases:
        plan = make_plan(cluster, mode, brokers=new, **kw)
        if not plan.changes:
            continue
        r = ratios(plan.changes, throttle)
        rows.append((name, len(plan.changes), r))
        if args.rows or not name.startswith("small"):
            print(f"| {name} | {len(plan.changes)} | "
                  + " | ".join(f"{r[o][0]:.3f} ({r[o][1]})" for o in (*ORDERS, *MODELLED)) + " |", flush=True)
    fuzz = [r for name, _, r in rows if name.startswith("small")]
    print()
    print(f"batch floor / execution bound (per order), modelled makespan / bound (batches, rolling), {len(fuzz)} small "
          f"fuzz plans ({args.balance}), caps 5 per broker, 50 a batch")
    print("| order | median | mean | p90 | max | plans within 1.10 |")
    print("|---|---:|---:|---:|---:|---:|")
    for order in (*ORDERS, *MODELLED):
        v = sorted(r[order][0] for r in fuzz)
        if not v:
            continue
        p90 = v[min(len(v) - 1, int(0.9 * len(v)))]
        print(f"| {order} | {statistics.median(v):.3f} | {statistics.mean(v):.3f} | {p90:.3f} | {max(v):.3f} | "
              f"{sum(1 for x in v if x <= 1.10)}/{len(v)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
