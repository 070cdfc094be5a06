"""Benchmark: a layout a rack's failure leaves under min.insync.replicas, planned with and without ``--repair-racks``
(issue 46, ``rebalancer.plan.rack_repair``).

Each case is a cluster of the simulator's scenarios or of the fuzz families (``load_cases``) made to lean: a share
of its partitions (``--share``, default 15 %, chosen by a seeded draw) get one follower moved onto a broker of the
leader's rack, as a layout placed before the brokers had racks would hold them; every topic's min.insync.replicas is
RF - 1 (at least 1). Each is planned with every default, then with ``repair_racks``. Per row: the partitions left
leaning, the worst single rack's failure before the plan and after it (partitions offline, under
min.insync.replicas: ``summary.failover``), bytes against their bound, the plan's state and seconds.

    .venv/bin/python bench/bench_racks.py                      # sim new-brokers and wix, fuzz small seeds 0-3
    .venv/bin/python bench/bench_racks.py --case wix --share 0.3
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

SIM = {"new-brokers": ("add-brokers", [12, 13, 14, 15]), "wix": ("rebalance", None)}
FUZZ = [f"small-{seed}" for seed in range(4)]


def build(case: str):  # noqa: ANN201 - (Cluster, mode, brokers)
    if case in SIM:
        from rebalancer.sim.scenarios import ScenarioParams, build_scenario

        mode, brokers = SIM[case]
        return build_scenario(case, ScenarioParams()), mode, brokers
    import load_cases

    family, seed = case.rsplit("-", 1)
    cluster, mode, new = load_cases.family(family, int(seed))
    return cluster, mode, new or None


def lean(cluster, share: float, seed: int = 0):  # noqa: ANN001, ANN201 - Cluster -> (Cluster, partitions leaned)
    """``cluster`` with ``share`` of its partitions holding a follower on a broker of the leader's rack."""
    rng = random.Random(seed)
    rack = {b.id: b.rack for b in cluster.brokers}
    by_rack: dict[object, list[int]] = {}
    for b in cluster.brokers:
        if b.alive:
            by_rack.setdefault(b.rack, []).append(b.id)
    parts, leaned = [], 0
    for p in cluster.partitions:
        reps = list(p.replicas)
        mates = [b for b in by_rack.get(rack[reps[0]], []) if b not in reps]
        if len(reps) >= 2 and len({rack[b] for b in reps}) >= 2 and mates and rng.random() < share:
            k = rng.randrange(1, len(reps))
            reps[k] = rng.choice(mates)
            p = replace(p, replicas=tuple(reps), isr=tuple(reps), leader=reps[0])
            leaned += 1
        parts.append(p)
    min_isr = {t: max(1, max(len(p.replicas) for p in cluster.partitions if p.topic == t) - 1) for t in cluster.topics}
    out = type(cluster).build(cluster.brokers, parts, {**cluster.meta, "topic_min_insync_replicas": min_isr})
    return out, leaned


def main() -> None:
    from rebalancer.plan.planner import make_plan

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", help="sim scenario (new-brokers, wix) or family-seed (small-3)")
    ap.add_argument("--share", type=float, default=0.15, help="share of the partitions made to lean (default 0.15)")
    args = ap.parse_args()
    print("| case | replicas | racks | leaning | repair | rack down before: offline / under min.isr | after |"
          " bytes moved | bytes / bound (by) | state | s |")
    print("|---|---:|---:|---:|---|---|---|---:|---|---|---:|")
    for case in args.case or [*SIM, *FUZZ]:
        cluster, mode, brokers = build(case)
        cluster, leaned = lean(cluster, args.share)
        for repair in (False, True):
            started = time.perf_counter()
            plan = make_plan(cluster, mode, brokers=brokers, repair_racks=repair)
            seconds = time.perf_counter() - started
            before, after = (plan.summary["failover"][k]["worst_rack"] for k in ("before", "after"))
            load = plan.summary.get("load") or {}
            ratio = load.get("bytes_to_bound")
            print(f"| {case} | {cluster.replica_count} | {len(cluster.racks)} | {leaned} | {'on' if repair else 'off'}"
                  f" | {before.get('offline', 0)} / {before.get('under_min_isr', 0)}"
                  f" | {after.get('offline', 0)} / {after.get('under_min_isr', 0)}"
                  f" | {plan.summary['bytes_moved'] / 1e9:.2f} GB"
                  f" | {'n/a' if ratio is None else f'{ratio:.3f}'} ({load.get('bytes_bound_by', '')})"
                  f" | {plan.solver['state']} | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
