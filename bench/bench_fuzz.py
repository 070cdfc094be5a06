"""Benchmark: the planner's defaults on many seeded production-shaped clusters (issue 41).

Each cluster is ``load_cases.family(family, seed)`` (``small``: 6-40 brokers, 100-20,000 replicas; ``medium``:
40-300 brokers, 20,000-600,000 replicas; rf 2 or 3, rebalance or add-brokers, heavy-tailed topics and sizes,
unequal starting loads), planned in this process by ``make_plan(cluster, mode, brokers=new brokers)`` with every
default (balance auto, strategy auto, the default time limit unless ``--time-limit``). Per cluster it records the
largest deviation after the plan in disk, network in and network out (from each broker's target), of replica and
leader counts (from the median), bytes moved over their lower bound, and the verdict:

- ``met``: every band of the family met: disk <= 5 %, network in <= 10 % (small only), replica and leader counts
  within the count gates (|count - median| <= max(15 % x median, 1)), bytes <= 1.10 x the bound;
- ``proven``: not met, and the planner proved the bands cannot all be met (``plan.solver["bands_proof"]``:
  ``{"feasible": False, ...}``, by its exact program or by the mode's sum), or every broker outside a missed band
  is one the mode keeps there (``bands_proof["one_way"]``: it may only give and is below, or only take and above).
  A proof of the bands together need not reach the count gate (a 10 GB partition proves disk out of reach and says
  nothing of the counts): ``counts_unproven`` marks a cluster whose counts missed their gate with no proof that
  covers them (``proven_dimensions``: the counts' own sum, ``bands_proof["counts"]``, or the exact ladder, which
  holds the counts to their gates, finding nothing at any widening), the plans a count gate within reach failed;
- ``neither``: not met and not proven infeasible (the seeds the planner should answer for);
- ``error``: a ``PlanError`` (the message is the row's); ``crash``: any other exception (its traceback on stderr).

Network out is judged apart (``nw_out_verdict``, every family): within its 10 % band, proven out of reach by the
plan (``plan.solver["network_out_proof"]``: a partition too hot for whichever broker leads it, or no choice of
leaders over the plan's replica sets, even a fractional one, meeting every band, or none of whole leaders that the
leader gate passes), or neither.

Per family it prints a markdown table (clusters, each verdict, the ``neither`` seeds, median / max plan seconds and
bytes-to-bound, the worst deviations, the seeds the programs' work limit ended: ``budget.Work``), then a row per
cluster not met (every cluster with ``--rows all``).

    .venv/bin/python bench/bench_fuzz.py                              # 200 small, 20 medium
    .venv/bin/python bench/bench_fuzz.py --family small --count 5
    .venv/bin/python bench/bench_fuzz.py --family medium --seed-base 100 --csv /tmp/medium.csv
    .venv/bin/python bench/bench_fuzz.py --from-csv /tmp/part-*.csv   # the tables of a run made in parts
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

DEFAULT_COUNT = {"small": 200, "medium": 20}
# family -> band: the largest deviation (percent) or bytes-to-bound a met cluster may have
BANDS: dict[str, dict[str, float]] = {
    "small": {"disk": 5.0, "nw_in": 10.0, "counts": 15.0, "bytes": 1.10},
    "medium": {"disk": 5.0, "counts": 15.0, "bytes": 1.10},
}
FIELDS = ["family", "seed", "brokers", "new", "replicas", "topics", "racks", "rf", "mode", "rates", "balance",
          "strategy", "fallback", "seconds", "status", "disk_before", "disk", "nw_in", "nw_out", "counts_before",
          "replicas_dev", "leaders_dev", "bytes_to_bound", "missed", "proof", "verdict", "nw_out_verdict",
          "counts_unproven", "work_stopped_in", "error"]
NW_OUT_BAND = 10.0  # percent: network out's band (reported apart, on every family: the issue asks it where feasible)


def _dimension(dims: dict[str, Any], name: str) -> tuple[float | None, str | None]:
    """(largest deviation after, or None when the dimension carries nothing; why it has no bands)."""
    d = dims.get(name) or {}
    if "error" in d:
        return None, str(d["error"])
    if not d.get("total"):
        return None, None
    return float(d["max_deviation_pct_after"]), None


def run_one(family: str, seed: int, time_limit: float | None) -> dict[str, Any]:
    import load_cases

    from rebalancer.plan.planner import make_plan
    from rebalancer.plan.targets import PlanError

    cluster, mode, new = load_cases.family(family, seed)
    params = cluster.meta["params"]
    row: dict[str, Any] = {
        "family": family, "seed": seed, "brokers": len(cluster.brokers), "new": len(new),
        "replicas": cluster.replica_count, "topics": len(cluster.topics), "racks": len(cluster.racks),
        "rf": params["rf"], "mode": mode, "rates": "history" if params["bytes_in"] else "size",
    }
    options: dict[str, Any] = {} if time_limit is None else {"time_limit": time_limit}
    started = time.perf_counter()
    try:
        plan = make_plan(cluster, mode, brokers=new or None, **options)
    except PlanError as exc:
        return {**row, "seconds": time.perf_counter() - started, "verdict": "error", "error": str(exc)}
    except Exception as exc:  # a bug: recorded, so that one cluster does not stop the run
        traceback.print_exc(file=sys.stderr)
        return {**row, "seconds": time.perf_counter() - started, "verdict": "crash",
                "error": f"{type(exc).__name__}: {exc}"}
    seconds = time.perf_counter() - started
    s = plan.summary
    load = s.get("load") or {}
    dims = load.get("dimensions") or {}
    dev = s["max_deviation_pct"]
    row.update(seconds=seconds, status=plan.solver.get("status"), balance=plan.params.get("balance"),
               strategy=plan.strategy, fallback="load_attempt" in plan.solver,
               replicas_dev=dev["replicas_after"], leaders_dev=dev["leaders_after"],
               disk_before=(dims.get("disk") or {}).get("max_deviation_pct_before"),
               counts_before=max(dev["replicas_before"], dev["leaders_before"]),
               bytes_to_bound=load.get("bytes_to_bound"),
               work_stopped_in=((plan.solver.get("budget") or {}).get("work") or {}).get("stopped_in"))
    missed = []
    for name in ("disk", "nw_in", "nw_out"):
        row[name], why = _dimension(dims, name)
        band = BANDS[family].get(name)
        if band is not None and (why is not None or (row[name] is not None and row[name] > band)):
            missed.append(name)
    if "counts" in BANDS[family]:
        # as the count gates measure it: |count - median| <= max(band x median, 1) (counts are whole numbers)
        from rebalancer.load import load_model
        from rebalancer.plan.planner import _counts_outside_gate

        model = load_model(cluster, band={"replicas": BANDS[family]["counts"] / 100,
                                          "leaders": BANDS[family]["counts"] / 100})
        if _counts_outside_gate(plan, model):
            missed.append("counts")
    ratio = row["bytes_to_bound"]
    if "bytes" in BANDS[family] and (ratio is None or ratio > BANDS[family]["bytes"]):  # None: moved, bound 0
        missed.append("bytes")
    proof = plan.solver.get("bands_proof")
    # a miss the mode explains broker by broker (only giving and below the band, or only taking and above it)
    one_way = (proof or {}).get("one_way") or {}
    explained = {name for name in missed if name in one_way
                 and set((dims.get(name) or {}).get("outside_after") or []) <= set(one_way[name])}
    proven = isinstance(proof, dict) and proof.get("feasible") is False
    proven = proven or bool(missed) and len(explained) == len(missed)
    covered = proven_dimensions(proof if isinstance(proof, dict) else None)
    # a proof of the bands together need not reach the count gate: counts missed with no proof of their own
    row["counts_unproven"] = "counts" in missed and "counts" not in covered
    row["missed"] = " ".join(missed)
    if proof is None:
        row["proof"] = ""
    elif proof.get("feasible") is False or covered:
        widen = proof.get("reachable_widen")
        row["proof"] = ("infeasible (covers " + (" ".join(d for d in ("disk", "nw_in", "counts") if d in covered)
                                                 or "none") + ")"
                        + (f" (reachable x{widen:g})" if isinstance(widen, (int, float)) else ""))
    elif proven:
        row["proof"] = "one-way brokers"
    else:
        row["proof"] = f"feasible={proof.get('feasible')}"
    row["verdict"] = "met" if not missed else ("proven" if proven else "neither")
    # network out: within its band, or proven out of reach by the plan (``solver["network_out_proof"]``: a partition
    # too hot for any leader, or no fractional choice of leaders over the plan's replica sets), or neither
    if row["nw_out"] is not None:
        row["nw_out_verdict"] = ("met" if row["nw_out"] <= NW_OUT_BAND else
                                 "proven" if plan.solver.get("network_out_proof") else "neither")
    if not missed and (proven or covered - {"bytes"}):  # the bands met by a plan a proof calls impossible: say so
        row["error"] = "bands met, yet bands_proof says infeasible"
    elif missed and isinstance(proof, dict) and proof.get("feasible") is True:
        row["error"] = "bands missed, yet bands_proof found a placement meeting them"
    return row


def proven_dimensions(proof: dict[str, Any] | None) -> set[str]:
    """The bands a plan's ``bands_proof`` puts out of reach, each only by a proof that covers it: a sum covers its
    own dimension (disk); a hot partition's brokers (``holder_proof``) and the linear relaxation the load bands
    together (counts aside); the exact ladder, which
    holds the counts to their gates, the load bands together, and the counts too where no widening found a placement;
    ``counts`` (``sum_proofs.count_proof``: the mode or the racks) the counts. The bytes bound presumes the load
    bands met: a proof of them covers it. What ``counts_unproven`` reads (fuzz small seed 101 ends with counts 100 %
    off under a proof of disk alone)."""
    if not proof:
        return set()
    covered: set[str] = set()
    if proof.get("feasible") is False:
        by_sum = proof.get("by_sum")
        if isinstance(by_sum, dict):
            covered.add(str(by_sum.get("dimension", "disk")))
        if isinstance(proof.get("by_holders"), dict):  # not the ladder's: its steps settled nothing
            covered |= set(proof["by_holders"].get("dimensions") or ())
        elif proof.get("by_relaxation"):
            covered |= {"disk", "nw_in"}
        elif any(st.get("widen") == 1.0 for st in proof.get("steps") or []):
            covered |= {"disk", "nw_in"} | (set() if proof.get("reachable_widen") else {"counts"})
    if proof.get("counts"):
        covered.add("counts")
    if covered & {"disk", "nw_in"}:
        covered.add("bytes")
    return covered


INTS = ("seed", "brokers", "new", "replicas", "topics", "racks", "rf")
FLOATS = ("seconds", "disk_before", "disk", "nw_in", "nw_out", "counts_before", "replicas_dev", "leaders_dev",
          "bytes_to_bound")


def read_rows(paths: list[Path]) -> dict[str, list[dict[str, Any]]]:
    """The rows of earlier runs' ``--csv`` files, by family (a long run split in parts, each its own process)."""
    by: dict[str, list[dict[str, Any]]] = {}
    for path in paths:
        with path.open(newline="") as f:
            for raw in csv.DictReader(f):
                r: dict[str, Any] = {k: (None if v == "" else v) for k, v in raw.items()}
                for k in INTS:
                    r[k] = None if r.get(k) is None else int(r[k])
                for k in FLOATS:
                    r[k] = None if r.get(k) is None else float(r[k])
                for k in ("fallback", "counts_unproven"):  # flags: their text in the CSV
                    r[k] = r.get(k) == "True"
                by.setdefault(r["family"], []).append(r)
    return {f: sorted(rows, key=lambda r: r["seed"]) for f, rows in by.items()}


def print_family(family: str, rows: list[dict[str, Any]], which: str) -> None:
    print("\n".join(_summary(family, rows)))
    shown = rows if which == "all" else [] if which == "none" else [r for r in rows if r["verdict"] != "met"]
    if shown:
        print()
        print("\n".join(_table(shown)))
    print(flush=True)


def _fmt(v: Any, spec: str) -> str:
    return "-" if v is None or v == "" else format(v, spec)


def _summary(family: str, rows: list[dict[str, Any]]) -> list[str]:
    def values(key: str) -> list[float]:
        return [r[key] for r in rows if r.get(key) is not None and r["verdict"] not in ("error", "crash")]

    verdicts = {v: sum(1 for r in rows if r["verdict"] == v) for v in ("met", "proven", "neither", "error", "crash")}
    seconds, ratios = values("seconds"), values("bytes_to_bound")
    counts = [max(r["replicas_dev"], r["leaders_dev"]) for r in rows if r.get("replicas_dev") is not None]

    def worst(xs: list[float]) -> str:
        return _fmt(max(xs), ".2f") if xs else "-"

    def med(xs: list[float], spec: str) -> str:
        return _fmt(statistics.median(xs), spec) if xs else "-"

    bands = ", ".join(f"{k} <= {v:g}" + ("" if k == "bytes" else " %") for k, v in BANDS[family].items())
    lines = [f"### {family}: {len(rows)} clusters (bands: {bands})", "",
             "| clusters | met | proven infeasible | neither | error | crash | median s | max s | median b/bound "
             "| max b/bound | worst disk % | worst nw_in % | worst nw_out % | worst counts % |",
             "|" + "---:|" * 14,
             f"| {len(rows)} | {verdicts['met']} | {verdicts['proven']} | {verdicts['neither']} | {verdicts['error']} "
             f"| {verdicts['crash']} | {med(seconds, '.1f')} | {_fmt(max(seconds, default=None), '.1f')} "
             f"| {med(ratios, '.3f')} | {_fmt(max(ratios, default=None), '.3f')} | {worst(values('disk'))} "
             f"| {worst(values('nw_in'))} | {worst(values('nw_out'))} | {worst(counts)} |", ""]
    neither = [str(r["seed"]) for r in rows if r["verdict"] == "neither"]
    lines.append(f"neither (seeds): {', '.join(neither) or 'none'}")
    unproven = [str(r["seed"]) for r in rows if r["verdict"] == "proven" and r.get("counts_unproven")]
    lines.append(f"proven, with the counts missed and no proof of them (seeds): {', '.join(unproven) or 'none'}")
    nw_out = {v: [str(r["seed"]) for r in rows if r.get("nw_out_verdict") == v] for v in ("met", "proven", "neither")}
    if any(nw_out.values()):
        lines.append(f"network out within {NW_OUT_BAND:g} %: met {len(nw_out['met'])}, proven out of reach "
                     f"{len(nw_out['proven'])}, neither {len(nw_out['neither'])} (seeds: "
                     f"{', '.join(nw_out['neither']) or 'none'})")
    worked = [str(r["seed"]) for r in rows if r.get("work_stopped_in")]
    lines.append(f"ended by the programs' work limit (seeds): {', '.join(worked) or 'none'}")
    errors = [str(r["seed"]) for r in rows if r["verdict"] in ("error", "crash")]
    if errors:
        lines.append(f"error or crash (seeds): {', '.join(errors)}")
    return lines


def _table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| seed | brokers | replicas | topics | racks | rf | mode | rates | balance | s | status "
             "| disk % before | disk % | nw_in % | nw_out % | counts % before | rep % | lead % | b/bound | missed "
             "| proof | verdict | nw_out | note |",
             "|" + "---:|" * 6 + "---|" * 3 + "---:|---|" + "---:|" * 8 + "---|" * 5]
    for r in rows:
        brokers = f"{r['brokers'] - r['new']}+{r['new']}" if r["new"] else str(r["brokers"])
        note = r.get("error") or ("load plan fell back to counts" if r.get("fallback") else "")
        if r.get("work_stopped_in"):
            note = f"{note}; " * bool(note) + f"work limit reached in {r['work_stopped_in']}"
        lines.append(
            f"| {r['seed']} | {brokers} | {r['replicas']} | {r['topics']} | {r['racks']} | {r['rf']} | {r['mode']} "
            f"| {r['rates']} | {r.get('balance') or '-'} | {r['seconds']:.1f} | {r.get('status') or '-'} "
            f"| {_fmt(r.get('disk_before'), '.1f')} | {_fmt(r.get('disk'), '.2f')} | {_fmt(r.get('nw_in'), '.2f')} "
            f"| {_fmt(r.get('nw_out'), '.2f')} | {_fmt(r.get('counts_before'), '.1f')} "
            f"| {_fmt(r.get('replicas_dev'), '.1f')} | {_fmt(r.get('leaders_dev'), '.1f')} "
            f"| {_fmt(r.get('bytes_to_bound'), '.3f')} | {r.get('missed') or '-'} | {r.get('proof') or '-'} "
            f"| {r['verdict']} | {r.get('nw_out_verdict') or '-'} | {note.replace('|', '/').replace(chr(10), ' ')} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", choices=("small", "medium", "both"), default="both")
    ap.add_argument("--count", type=int, help="clusters per family (default: 200 small, 20 medium)")
    ap.add_argument("--seed-base", type=int, default=0, help="the first seed (seeds seed-base .. + count - 1)")
    ap.add_argument("--csv", type=Path, help="write a row per cluster here")
    ap.add_argument("--time-limit", type=float, help="make_plan's time_limit (default: its own default)")
    ap.add_argument("--rows", choices=("missed", "all", "none"), default="missed",
                    help="the per-cluster rows printed under each table (default: the clusters not met)")
    ap.add_argument("--from-csv", type=Path, nargs="+", metavar="CSV",
                    help="plan nothing: print the tables of these earlier --csv files' rows")
    args = ap.parse_args()
    if args.from_csv:
        for family, rows in read_rows(args.from_csv).items():
            print_family(family, rows, args.rows)
        return
    families = ["small", "medium"] if args.family == "both" else [args.family]
    out = args.csv.open("w", newline="") if args.csv else None
    writer = csv.DictWriter(out, FIELDS, extrasaction="ignore") if out else None
    if writer:
        writer.writeheader()
    crashed = False
    try:
        for family in families:
            count = args.count if args.count is not None else DEFAULT_COUNT[family]
            rows = []
            for i in range(count):
                seed = args.seed_base + i
                r = run_one(family, seed, args.time_limit)
                rows.append(r)
                crashed |= r["verdict"] == "crash"
                if writer and out:
                    writer.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in FIELDS})
                    out.flush()
                print(f"[{family} {i + 1}/{count}] seed {seed}: {r['brokers']} brokers ({r['new']} new), "
                      f"{r['replicas']} replicas, {r['topics']} topics, {r['racks']} racks, rf {r['rf']}, "
                      f"{r['mode']}: {r['seconds']:.1f} s, {r['verdict']}"
                      + (f" ({r['missed']})" if r.get("missed") else "")
                      + (f": {r['error']}" if r.get("error") else ""), file=sys.stderr, flush=True)
            print_family(family, rows, args.rows)
    finally:
        if out:
            out.close()
    if crashed:
        sys.exit(1)


if __name__ == "__main__":
    main()
