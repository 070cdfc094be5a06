"""Benchmark: plans on load (issue 13), every must-show case, through the whole plan stage and the GX gates.

Each row runs in a fresh subprocess (its wall time and peak RSS are that row's alone): it writes the case's
snapshot into a temporary run directory, runs ``plan_run_dir`` (``--balance auto`` unless the row says otherwise)
and then ``validate_run_dir`` (every gate, the disk / network / capacity ones included), and prints

- bytes moved, their lower bound and the ratio (``summary.load``), and which resource set the bound;
- the largest |deviation| from each broker's target after the plan in disk, network in and network out (by
  capacity where the case has capacities: utilisation), and of replica and leader counts from the median (the
  gates' measure);
- the most replicas added to one partition, partitions that lost a rack, gates passed / run;
- plan seconds (the plan stage, snapshot read included), validation seconds, peak MiB of the row's process.

    .venv/bin/python bench/bench_load.py           # every case (the 600k-replica one takes a few minutes)
    .venv/bin/python bench/bench_load.py --quick   # skip the two largest cases
    .venv/bin/python bench/bench_load.py --case wix-263k-heavy
    .venv/bin/python bench/bench_load.py --case 2600b-3m-defaults   # 2,600 brokers / 3M replicas (issue 26)
    .venv/bin/python bench/bench_load.py --case 300b-600k-production  # production-shaped (issue 41)

Targets (issue 13): main job add-brokers: disk within 5 %, counts within the 15 % gates, bytes <= 1.10 x bound;
Wix 263k heavy-tailed: disk within 5 %, counts within 15 %, <= 1 change per partition, bytes <= 1.15 x bound, plan
< 120 s; 300 brokers / 600k replicas / 6 racks, unequal: every gate, disk within 5 %, rack-safe, < 300 s and
< 4096 MiB; 13k replicas under auto: < 15 s and the quality of lp; mixed hardware: utilisation within the band;
network-hot: no broker beyond its network band; impossible capacity: a one-line error before any file; an
unreachable band: a plan that names the brokers outside and why. Production-shaped (issue 41): 300 brokers / 600k
replicas every gate, disk within 5 %, <= 1.10 x bound, < 300 s and < 4096 MiB; 2,600 brokers / 3M replicas (with
--huge) < 600 s and < 8192 MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

# case -> (mode, strategy, plan options); the cluster comes from build()
CASES: dict[str, tuple[str, str, dict]] = {
    "main-job-add-brokers": ("add-brokers", "auto", {}),
    "wix-263k-heavy": ("rebalance", "auto", {"time_limit": 120}),
    "300b-600k-unequal": ("rebalance", "auto", {"time_limit": 290}),
    "13k-rebalance-auto": ("rebalance", "auto", {}),
    "13k-rebalance-lp": ("rebalance", "lp", {"time_limit": 60}),
    "mixed-hardware": ("rebalance", "auto", {"capacity": "mixed"}),
    "network-hot": ("rebalance", "auto", {}),
    "capacity-too-small": ("rebalance", "auto", {"capacity": "small"}),
    "band-unreachable": ("remove-brokers", "auto", {}),
    # Defaults (issue 21): no --time-limit at all, against the limit lifted; the note says where a limit cut.
    "wix-263k-defaults": ("rebalance", "auto", {}),
    "wix-263k-counts-dflt": ("rebalance", "auto", {"balance": "counts"}),
    "300b-600k-defaults": ("rebalance", "auto", {}),
    "300b-600k-lifted": ("rebalance", "auto", {"time_limit": 7200}),
    # LinkedIn scale (issue 26): defaults split the placement in groups planned as Spark tasks (local[*]).
    "2600b-3m-defaults": ("rebalance", "auto", {}),
    # Shaped like production (issue 41, load_cases.production): topic-correlated heavy-tailed sizes, unequal
    # partition counts, lognormal starting weights with a tenth of the brokers recently added; defaults.
    "300b-600k-production": ("rebalance", "auto", {}),
    "2600b-3m-production": ("rebalance", "auto", {}),
}
HUGE = {"2600b-3m-defaults", "2600b-3m-production"}  # only with --huge or --case: minutes and gigabytes
LARGE = {"wix-263k-heavy", "300b-600k-unequal", "wix-263k-defaults", "wix-263k-counts-dflt", "300b-600k-defaults",
         "300b-600k-lifted", "300b-600k-production"}


def build(case: str):
    """(cluster, brokers for the mode)."""
    import load_cases

    from rebalancer.sim.scenarios import WIX_BEFORE, ScenarioParams, build_scenario

    if case == "band-unreachable":  # 10 partitions on 20 brokers: no placement gets disk within +-5 %
        return build_scenario("sqooba"), [19]
    if case == "main-job-add-brokers":
        c = build_scenario("new-brokers")
        return c, c.meta["new_brokers"]
    if case.startswith("wix-263k"):
        return load_cases.heavy_tailed(build_scenario("wix", ScenarioParams(partitions=sum(WIX_BEFORE) // 3,
                                                                            topics=400))), None
    if case == "300b-600k-production":
        return load_cases.production(300, 6, 600_000, seed=1), None
    if case == "2600b-3m-production":
        return load_cases.production(2600, 13, 3_000_000, seed=1), None
    if case.startswith("2600b-3m"):
        return load_cases.unequal(2600, 13, 1_000_000, light=0, topics=5000), None
    if case.startswith("300b-600k"):
        return load_cases.unequal(300, 6, 200_000, light=50), None
    if case.startswith("13k-"):
        return load_cases.heavy_tailed(build_scenario("wix", ScenarioParams(partitions=4_400, topics=100))), None
    if case in ("mixed-hardware", "capacity-too-small"):
        return load_cases.heavy_tailed(build_scenario("wix", ScenarioParams(partitions=20_000, topics=200))), None
    if case == "network-hot":
        c = load_cases.heavy_tailed(build_scenario("wix", ScenarioParams(partitions=20_000, topics=200)))
        return load_cases.network_hot(c, partitions=6, factor=20.0), None
    raise SystemExit(f"unknown case {case}")


def run_one(case: str) -> dict:
    import load_cases

    from rebalancer.errors import RebalancerError
    from rebalancer.plan.planner import plan_run_dir
    from rebalancer.snapshot import write_cluster_json
    from rebalancer.validate import GateFailure, validate_run_dir

    mode, strategy, options = CASES[case]
    options = dict(options)
    cluster, brokers = build(case)
    run = Path(tempfile.mkdtemp(prefix=f"bench-load-{case}-"))
    write_cluster_json(cluster, run / "snapshot.json")
    if options.get("capacity") == "mixed":
        options["capacity"] = load_cases.mixed_hardware(cluster, run.parent / f"{run.name}-capacity.json")
    elif options.get("capacity") == "small":
        path = run.parent / f"{run.name}-capacity.json"
        path.write_text(json.dumps({"brokerCapacities": [{"brokerId": "-1", "capacity": {"DISK": "1000"}}]}))
        options["capacity"] = path
    # The plan reads the snapshot as the CLI does, without the generated cluster alive beside it (the cyclic
    # collector would scan its millions of objects wherever it runs: reading the snapshot, writing the plan).
    rack, replicas = {b.id: b.rack for b in cluster.brokers}, cluster.replica_count
    del cluster
    started = time.perf_counter()
    try:
        plan = plan_run_dir(run, mode, brokers=brokers, strategy=strategy, **options)
    except RebalancerError as exc:
        written = sorted(p.name for p in run.iterdir() if p.name != "snapshot.json")
        return {"error": str(exc), "lines": len(str(exc).splitlines()), "written": written,
                "seconds": time.perf_counter() - started, "replicas": replicas}
    plan_seconds = time.perf_counter() - started
    started = time.perf_counter()
    try:
        result = validate_run_dir(run)
    except GateFailure:
        result = json.loads((run / "validation" / "result.json").read_text())
    validate_seconds = time.perf_counter() - started
    s = plan.summary
    load = s["load"]
    dims = load["dimensions"]
    fewer_racks = sum(1 for c in plan.changes
                      if len({rack[b] for b in c.replicas_after}) < len({rack[b] for b in c.replicas_before}))

    def dev(name: str) -> float | None:
        d = dims.get(name) or {}
        return d.get("max_deviation_pct_after") if d.get("total") else None

    failed = [g["name"] for g in result["gates"] if not g["passed"]]
    outside = plan.solver.get("outside_bands") or {}
    note = f"{plan.strategy}; {plan.solver.get('status')}"
    budget = plan.solver.get("budget") or {}
    note += f"; limit {budget.get('limit'):g} s" + (" (default)" if not plan.params.get("time_limit_given") else "")
    cut = [p for p, rec in (budget.get("phases") or {}).items() if rec.get("cut_short")]
    note += f"; CUT SHORT in {', '.join(cut)}" if cut else "; not cut"
    work = budget.get("work") or {}
    if work.get("stopped_in"):  # the programs' work limit (``budget.Work``) left a program unrun: no clock did
        note += f"; work limit ({work['limit']:,} LP iterations) reached in {work['stopped_in']}"
    lead = plan.solver.get("leaders") or {}
    if lead.get("groups"):  # the exact leader flow: where the time of a cluster that moves little goes
        note += f"; leader flow {lead.get('seconds', 0):.1f} s over {lead['groups']} group(s)"
    if outside:
        note += "; outside: " + ", ".join(f"{k} {len(v)}" for k, v in outside.items())
    if failed:
        note += "; FAILED gates: " + ", ".join(failed)
    if plan.solver.get("outside_why") and case == "band-unreachable":
        note += "; why given"
    return {
        "replicas": replicas, "bytes": load["bytes_moved"], "bound": load["bytes_bound"],
        "ratio": load["bytes_to_bound"], "by": load["bytes_bound_by"],
        "disk": dev("disk"), "nw_in": dev("nw_in"), "nw_out": dev("nw_out"),
        "by_capacity": bool(dims.get("disk", {}).get("by_capacity")),
        "rep": s["max_deviation_pct"]["replicas_after"], "lead": s["max_deviation_pct"]["leaders_after"],
        "chg": s["max_changes_in_a_partition"], "racks_lost": fewer_racks,
        "gates": f"{len(result['gates']) - len(failed)}/{len(result['gates'])}",
        "seconds": plan_seconds, "validate_seconds": validate_seconds, "note": note,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the two largest cases")
    ap.add_argument("--case", help="only this case")
    ap.add_argument("--huge", action="store_true", help="also the 3M-replica case (issue 26)")
    ap.add_argument("--one", metavar="CASE", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one)))
        return
    header = (f"{'case':<22} {'replicas':>8} {'moved GiB':>9} {'bound':>8} {'ratio':>6} {'disk%':>6} {'nwin%':>6}"
              f" {'nwout%':>6} {'rep%':>5} {'lead%':>5} {'chg':>3} {'rk-':>3} {'gates':>6} {'plan s':>7}"
              f" {'gx s':>5} {'peakMiB':>7}  note")
    print(header)
    print("-" * len(header))
    gib = 1024 ** 3
    for case in CASES:
        if (args.quick and case in LARGE) or (args.case and case != args.case) or \
                (case in HUGE and not (args.huge or args.case)):
            continue
        proc = subprocess.Popen([sys.executable, __file__, "--one", case], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        out = proc.stdout.read() if proc.stdout else ""
        peak = usage.ru_maxrss / 1024
        if os.waitstatus_to_exitcode(status) != 0:
            err = (proc.stderr.read() if proc.stderr else "").strip().splitlines()
            print(f"{case:<22} FAILED: {err[-1] if err else '?'}", flush=True)
            continue
        r = json.loads(out.strip().splitlines()[-1])
        if "error" in r:
            print(f"{case:<22} {r['replicas']:>8} error in {r['seconds']:.1f} s, {r['lines']} line, files written: "
                  f"{r['written'] or 'none'}: {r['error']}", flush=True)
            continue
        f = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
        print(f"{case:<22} {r['replicas']:>8} {r['bytes'] / gib:>9.1f} {r['bound'] / gib:>8.1f} {f(r['ratio'], '.3f'):>6}"
              f" {f(r['disk'], '.2f'):>6} {f(r['nw_in'], '.2f'):>6} {f(r['nw_out'], '.2f'):>6} {f(r['rep'], '.1f'):>5}"
              f" {f(r['lead'], '.1f'):>5} {r['chg']:>3} {r['racks_lost']:>3} {r['gates']:>6} {r['seconds']:>7.1f}"
              f" {r['validate_seconds']:>5.1f} {peak:>7.0f}  {r['note']}"
              + ("; disk by capacity" if r["by_capacity"] else ""), flush=True)


if __name__ == "__main__":
    main()
