"""The validation stage: Great Expectations gates that every plan must pass before an approver sees it.

Frames built from ``snapshot.json``, ``plan.json``, ``reassignment.json`` and ``rollback.json``:

- ``partitions``: one row per changed partition (replica changes, RF before/after, distinct brokers, racks before
  and after, whether the partition exists in the snapshot);
- ``placements``: one row per broker of every changed partition's new replica list, with a status (``ok``,
  ``unknown``, ``removed``, ``not-live``: a new replica on a broker that is down);
- ``brokers``: one row per eligible broker after the plan (|deviation| from the median of replicas and leaders);
- ``topics``: one row per topic, with the per-topic preferred-leader spread after the plan;
- ``inventory``: one row with the snapshot's topic and broker counts;
- ``load``: one row per (disk / network in / network out, eligible broker): load before and after, target,
  deviations and utilisation (cut into ``disk``, ``network`` and ``capacity`` for their gates);
- ``plan``: one row with the recorded hash, the hash recomputed from plan.json's changes and the hash recomputed
  from reassignment.json + rollback.json.

One GX expectation per gate, so the result reads as gates (the numbers are the issue's gate list):

1. ``max-changes-per-partition``  partitions.replica_changes <= N
2. ``replica-balance``            brokers.replica_dev_excess <= 0 (see below)
3. ``known-live-brokers``         placements.status in {ok}
4. ``leader-balance``             brokers.leader_dev_excess <= 0; ``topic-leader-balance`` when the plan claims it
5. ``replication-factor``         partitions.rf_before == partitions.rf_check (RF unchanged, no duplicate broker)
6. ``rack-diversity``             partitions.racks_after >= partitions.racks_before
7. ``topics-not-empty``, ``brokers-not-empty``, ``partitions-in-snapshot``
8. ``plan-hash``, ``reassignment-files-hash``
9. ``disk-balance``               load.dev_excess_pct <= 0 for disk (every replica plan over known sizes, whatever
                                  its planner balanced; in add-brokers an old broker below its band, which may only
                                  give, passes when no worse than before)
10. ``network-balance``           the same for network in and out, with the busiest partition the broker carries as
                                  slack (counts have one replica), a broker no further from its target than
                                  before passing too (rates are estimates; a broker leads few partitions)
11. ``capacity-headroom``         utilisation after <= threshold, or not above what it was (where capacities are known);
                                  ``transient-disk``: the same for each broker's disk at its peak during the
                                  execution's batches (``batches.peak_disk``, the caps the plan's estimate recorded;
                                  a plan estimated rolling: ``schedule.rolling_peak_disk``)
12. ``bytes-vs-bound``            replica plans over known sizes: the bytes the plan copies (the snapshot's sizes) at most
                                  the factor (default 1.15) times their lower bound (``plan.bounds``, recomputed from
                                  the snapshot and the recorded load model, at least what the plan's spread over the
                                  racks needs: ``rack_repair.spread_bytes``), plus the largest partition it moves
13. ``failover-balance``          every plan: after any one broker fails, every survivor's leader load (network out
                                  where rates are known, else bytes, else leader counts) within the % (default 25)
                                  over the survivors' mean plus the heaviest partition it then leads, or no
                                  further above it than the worst single failure before the plan (``failover``, from
                                  the final replica order as Kafka elects: ``plan.failover``); a rack's failure:
                                  ``rack-diversity``

Load gates measure each broker against its target (its capacity's share of the total) with the load model the plan
recorded (``params.load``), at the plan's band unless a threshold says otherwise; the band is widened to whole
units as the planners' is.

Deviation gates: a broker passes when |count - median| <= max(threshold% x median, 1), because counts are
integers (19 brokers cannot share 20 replicas within 15%); ``*_dev_excess`` is how far beyond that it is. In
``leaders`` mode replica counts cannot change, so the replica gate's threshold is the larger of the option and the
deviation before the plan (not made worse).

Writes ``validation/result.json`` and GX Data Docs under ``validation/docs/``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .balance import count_excess
from .bulk import collector_paused
from .errors import GateFailure, InputError
from .formats import StagedFiles, atomic_write_json, read_json
from .load import dimension_loads, gate_excess_pct, headroom_excess_pct, held_one_way, largest_replica, replica_table
from .model import Cluster
from .plan.sum_proofs import why_counts_out_of_reach, why_out_of_reach
from .planfile.result import Change, Plan, content_hash, load_plan
from .rundir import DOCS_DIR, RESULT_FILE, VALIDATION_DIR, RunDir
from .snapshot import load_snapshot

# (gate name, frame, expectation, threshold shown, description)
_GateRow = tuple[str, str, Any, Any, str]

__all__ = ["Thresholds", "GateFailure", "build_frames", "run_gates", "validate_run_dir", "format_gate_table"]

log = logging.getLogger(__name__)


BYTES_TO_BOUND = 1.15  # the bytes gate's default factor: a load plan copies at most this much more than its bound
FAILOVER_DEVIATION_PCT = 25.0  # the failover gate's default: survivors' leader load after one broker fails


@dataclass(frozen=True)
class Thresholds:
    max_changes_per_partition: int | None = None  # None: 1, or the plan's own cap in remove-brokers mode
    max_deviation_pct: float = 15.0
    max_leader_deviation_pct: float = 15.0
    # Load gates (replica plans over known sizes); None: the band / capacity threshold the plan was made with
    max_disk_deviation_pct: float | None = None
    max_network_deviation_pct: float | None = None
    max_disk_utilisation_pct: float | None = None
    max_network_utilisation_pct: float | None = None
    max_bytes_to_bound: float | None = None  # None: BYTES_TO_BOUND
    # N-1 (issue 46): the survivors' leader load after any one broker fails, % off their mean; None: 25
    max_failover_deviation_pct: float | None = None
    sample_rows: int = 10

    def check(self) -> None:
        """Every threshold a finite number in range (utilisation at most 100 %), before anything is read."""
        for name in ("max_deviation_pct", "max_leader_deviation_pct", "max_disk_deviation_pct",
                     "max_network_deviation_pct", "max_disk_utilisation_pct", "max_network_utilisation_pct",
                     "max_failover_deviation_pct"):
            value = getattr(self, name)
            top = 100.0 if "utilisation" in name else math.inf
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value <= top):
                raise InputError(f"{name}: {value!r} is not a percentage from 0 to {top:g}")
        factor = self.max_bytes_to_bound
        if factor is not None and not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor >= 1):
            raise InputError(f"max_bytes_to_bound: {factor!r} is not a factor of at least 1 (no plan copies less "
                             "than the bound)")


def _excess(value: float, median: float, pct: float) -> float:
    return round(count_excess(value, median, pct / 100.0), 6)


def _changes_hash_from_files(run: Path) -> str | None:
    re_path, rb_path = RunDir(run).reassignment, RunDir(run).rollback
    if not re_path.exists() or not rb_path.exists():
        return None
    after = {(e["topic"], e["partition"]): tuple(e["replicas"]) for e in read_json(re_path).get("partitions", [])}
    before = {(e["topic"], e["partition"]): tuple(e["replicas"]) for e in read_json(rb_path).get("partitions", [])}
    if set(after) != set(before):
        return "mismatch: reassignment.json and rollback.json name different partitions"
    return content_hash(Change(t, p, before[(t, p)], after[(t, p)], None, 0) for (t, p) in after)


def build_frames(cluster: Cluster, plan: Plan, run: Path | None = None,
                 failover_pct: float = FAILOVER_DEVIATION_PCT) -> dict[str, Any]:
    """The data frames the gates look at (pandas); ``failover_pct``: the failover gate's band, percent."""
    import pandas as pd

    rack = {b.id: b.rack for b in cluster.brokers}
    alive = {b.id for b in cluster.brokers if b.alive}
    removed = set(plan.params.get("brokers") or []) if plan.mode == "remove-brokers" else set()
    rows, placements = [], []
    for c in plan.changes:
        in_snapshot = cluster.has_partition(c.topic, c.partition)
        current = cluster.partition(c.topic, c.partition).replicas if in_snapshot else c.replicas_before
        distinct = len(set(c.replicas_after))
        rows.append({
            "topic": c.topic, "partition": c.partition, "in_snapshot": in_snapshot,
            "replica_changes": len([b for b in c.replicas_after if b not in c.replicas_before]),
            "rf_before": len(current), "rf_after": len(c.replicas_after),
            "rf_check": distinct if distinct == len(c.replicas_after) else -1,
            "racks_before": len({rack.get(b) for b in current}),
            "racks_after": len({rack.get(b) for b in c.replicas_after}),
        })
        for b in c.replicas_after:
            status = "ok"
            if b not in rack:
                status = "unknown"
            elif b in removed:
                status = "removed"
            elif b not in current and b not in alive:
                status = "not-live"
            placements.append({"topic": c.topic, "partition": c.partition, "broker": b, "status": status})
    after = {p.tp: p.replicas for p in cluster.partitions}
    for c in plan.changes:
        if (c.topic, c.partition) in after:
            after[(c.topic, c.partition)] = c.replicas_after
    eligible = [b.id for b in cluster.brokers if b.alive and b.id not in removed]
    reps = {b: 0 for b in eligible}
    leads = {b: 0 for b in eligible}
    before_reps = {b: 0 for b in eligible}
    topic_leads: dict[tuple[str, int], int] = {}
    topic_hosts: dict[str, set[int]] = {}
    for p in cluster.partitions:
        for b in p.replicas:
            if b in before_reps:
                before_reps[b] += 1
        new = after[p.tp]
        for b in new:
            if b in reps:
                reps[b] += 1
            if b in leads:
                topic_hosts.setdefault(p.topic, set()).add(b)
        if new[0] in leads:
            leads[new[0]] += 1
            topic_leads[(p.topic, new[0])] = topic_leads.get((p.topic, new[0]), 0) + 1
    med_r = statistics.median(reps.values()) if reps else 0
    med_l = statistics.median(leads.values()) if leads else 0
    med_before = statistics.median(before_reps.values()) if before_reps else 0
    brokers = pd.DataFrame([{
        "broker": b, "replicas": reps[b], "leaders": leads[b],
        "replica_dev_pct": round(abs(reps[b] - med_r) / med_r * 100, 3) if med_r else 0.0,
        "leader_dev_pct": round(abs(leads[b] - med_l) / med_l * 100, 3) if med_l else 0.0,
        "replica_dev_before_pct": round(abs(before_reps[b] - med_before) / med_before * 100, 3) if med_before else 0.0,
        "med_replicas": med_r, "med_leaders": med_l,
    } for b in eligible], columns=["broker", "replicas", "leaders", "replica_dev_pct", "leader_dev_pct",
                                   "replica_dev_before_pct", "med_replicas", "med_leaders"])
    topics = pd.DataFrame([{
        "topic": t,
        "leader_spread": (max(topic_leads.get((t, b), 0) for b in hosts) - min(topic_leads.get((t, b), 0) for b in hosts)),
    } for t, hosts in sorted(topic_hosts.items())], columns=["topic", "leader_spread"])
    plan_row = {
        "recorded_hash": plan.hash,
        "changes_hash": content_hash(plan.changes),
        "files_hash": (_changes_hash_from_files(run) if run is not None else None) or "missing files",
    }
    return {
        **_load_frames(cluster, plan, eligible, after, run, failover_pct),
        "partitions": pd.DataFrame(rows, columns=["topic", "partition", "in_snapshot", "replica_changes", "rf_before",
                                                  "rf_after", "rf_check", "racks_before", "racks_after"]),
        "placements": pd.DataFrame(placements, columns=["topic", "partition", "broker", "status"]),
        "brokers": brokers,
        "topics": topics,
        "plan": pd.DataFrame([plan_row]),
        "inventory": pd.DataFrame([{"topics": len(cluster.topics), "brokers": len(cluster.brokers)}]),
    }


LOAD_COLUMNS = ["dimension", "broker", "before", "after", "target", "band_pct", "dev_before_pct", "dev_after_pct",
                "largest", "may_give", "may_take", "capacity", "limit_pct", "util_before_pct", "util_after_pct"]
NETWORK = ("nw_in", "nw_out")


def _load_frames(cluster: Cluster, plan: Plan, eligible: list[int],
                 after: Mapping[tuple[str, int], tuple[int, ...]], run: Path | None,
                 failover_pct: float = FAILOVER_DEVIATION_PCT) -> dict[str, Any]:
    """``load``: one row per (dimension with a load, eligible broker) for disk, network in and out: its load before and
    after the plan, its target (its capacity's share of the total), deviations and utilisation, measured with the
    load model the plan recorded (``params.load``: capacities, bands, thresholds, fan-outs) over this snapshot; and
    the frames measured with that model too: ``bytes``, ``transient``, ``failover``."""
    import pandas as pd

    from .load import load_model, model_from_params, read_history

    known = set(cluster.broker_ids)
    if not eligible or not cluster.partitions or any(b not in known for r in after.values() for b in r):
        return {"load": pd.DataFrame([], columns=LOAD_COLUMNS)}  # nothing to measure, or known-live-brokers fails
    recorded = plan.params.get("load")
    history = read_history(run) if run is not None else None  # the rates the plan was made with
    model = (model_from_params(cluster, recorded, history) if recorded is not None
             else load_model(cluster, history=history))
    dims = ["disk", *NETWORK]
    changed = {tp: r for tp, r in after.items() if r != cluster.partition(*tp).replicas}
    table = replica_table(cluster, model.loads, changed, dims)
    now = dimension_loads(cluster, model.loads, dimensions=dims, table=table)
    table_before = replica_table(cluster, model.loads, None, dims)
    before = dimension_loads(cluster, model.loads, dimensions=dims, table=table_before)
    largest = largest_replica(cluster, [table, table_before], dims)  # the busiest replica, before or after
    # What the mode lets a broker do: in add-brokers the others only give and the new ones only take, so an old
    # broker that was light before cannot be helped (nor a new one that is heavy).
    named = {int(b) for b in plan.params.get("brokers") or []}
    one_way = plan.mode == "add-brokers"
    rows = []
    for d in dims:
        total = sum(before[d].values())
        if not total or not eligible:
            continue
        cap = model.capacity.get(d)
        cap_total = sum(cap.get(b, 0) for b in eligible) if cap else len(eligible)
        for b in eligible:
            c = cap.get(b) if cap else None
            target = total * (c if c else 1) / cap_total
            rows.append({
                "dimension": d, "broker": b, "before": before[d][b], "after": now[d][b], "target": round(target, 3),
                "band_pct": round(model.band[d] * 100, 3),
                "dev_before_pct": round((before[d][b] - target) / target * 100, 3) if target else 0.0,
                "dev_after_pct": round((now[d][b] - target) / target * 100, 3) if target else 0.0,
                "largest": largest[d][b],
                "may_give": not one_way or b not in named, "may_take": not one_way or b in named,
                "capacity": c, "limit_pct": round(model.threshold[d] * 100, 3) if c else None,
                "util_before_pct": round(before[d][b] / c * 100, 3) if c else None,
                "util_after_pct": round(now[d][b] / c * 100, 3) if c else None,
            })
    return {"load": pd.DataFrame(rows, columns=LOAD_COLUMNS), **_bytes_frame(cluster, plan, model, changed),
            **_transient_frame(plan, model, before["disk"], eligible),
            "failover": _failover_frame(cluster, eligible, after, model, failover_pct)}


FAILOVER_COLUMNS = ["failed", "weighed_by", "before", "after"]


def _failover_frame(cluster: Cluster, eligible: list[int], after: Mapping[tuple[str, int], tuple[int, ...]],
                    model: Any, pct: float) -> Any:
    """``failover``: one row per broker failing alone, before the plan and after it (from the snapshot and the final
    replica order, as Kafka elects: the first replica alive): how far the busiest survivor ends above ``pct`` % over
    the survivors' mean plus the heaviest partition it then leads, in percent of the mean
    (``plan.failover.failover_overload``; leader load weighed as the plan weighs it: network out where rates are
    known, else bytes, else leader counts). A rack's failure needs no row: a partition it leaves without a replica
    spans one rack, and ``rack-diversity`` already holds each partition to its racks before."""
    import pandas as pd

    from .plan.failover import failover_overload, leader_weights

    weights, weighted_by = leader_weights(cluster, model)
    if not any(weights):
        weights, weighted_by = [1.0] * len(weights), "leaders"
    alive = sorted(eligible)
    orders = ([p.replicas for p in cluster.partitions], [after[p.tp] for p in cluster.partitions])
    before, now = (failover_overload(reps, alive, pct / 100, weights) for reps in orders)
    rows = [{"failed": b, "weighed_by": weighted_by, "before": before[b], "after": now[b]} for b in alive]
    return pd.DataFrame(rows, columns=FAILOVER_COLUMNS)


TRANSIENT_COLUMNS = ["broker", "capacity", "limit_pct", "before", "peak", "peak_batch", "util_before_pct",
                     "util_peak_pct"]


def _transient_frame(plan: Plan, model: Any, held: Mapping[int, int], eligible: list[int]) -> dict[str, Any]:
    """``transient``: one row per broker with a disk capacity, the most bytes it holds at any moment of the
    execution (``batches.peak_disk``: a batch's new replicas fill their brokers before the old ones free theirs),
    batched as the executor batches (the caps the plan's estimate recorded, ``summary.execution``); for a plan
    estimated rolling, its moves as the rolling schedule starts and finishes them (``schedule.rolling_peak_disk``
    over ``estimate.rolling_run``), ``peak_batch`` then the round of starts."""
    import pandas as pd

    from .movement.batches import TOTAL, NoRoom, make_batches, peak_disk, steps_of
    from .movement.estimate import MODEL_STEPS, batch_cost, rolling_run
    from .movement.schedule import DiskRoom, per_broker_of, rolling_peak_disk

    cap = model.capacity.get("disk")
    if not cap or not plan.changes:
        return {}
    execution = plan.summary.get("execution") or {}
    steps = [st for c in plan.changes
             for st in steps_of(c.topic, c.partition, tuple(c.replicas_before), tuple(c.replicas_after), c.size_bytes)]
    total = int(execution.get("total") or TOTAL)
    schedule = execution.get("schedule")
    per_broker = per_broker_of(schedule, execution.get("per_broker"))
    # Moves wait for disk room, as the executor's do; where no order makes room for one, the run as if they did not
    # wait shows the broker it would overfill (and the gate fails on it).
    room = DiskRoom(held, {b: int(c * model.threshold["disk"]) for b, c in cap.items()})
    if schedule == "rolling" and len(steps) <= MODEL_STEPS:
        moving = [st for st in steps if not st.leader_only]
        rate = int(execution["throttle_bytes_per_s"])
        run = rolling_run(moving, rate, per_broker, total, room=room)
        peak = rolling_peak_disk(run if run.stuck is None else rolling_run(moving, rate, per_broker, total), held)
    else:  # batches; above the model's size, rolling as batches of its caps (moves at once per broker)
        cost = batch_cost(int(execution["throttle_bytes_per_s"])) if execution.get("throttle_bytes_per_s") else None
        try:
            batches = make_batches(steps, per_broker=per_broker, total=total, room=room, batch_cost=cost)
        except NoRoom:
            batches = make_batches(steps, per_broker=per_broker, total=total, batch_cost=cost)
        peak = peak_disk(batches, held)
    rows = [{"broker": b, "capacity": cap[b], "limit_pct": round(model.threshold["disk"] * 100, 3),
             "before": held.get(b, 0), "peak": peak.get(b, (0, -1))[0], "peak_batch": peak.get(b, (0, -1))[1] + 1,
             "util_before_pct": round(held.get(b, 0) / cap[b] * 100, 3),
             "util_peak_pct": round(peak.get(b, (0, -1))[0] / cap[b] * 100, 3)}
            for b in eligible if cap.get(b)]
    return {"transient": pd.DataFrame(rows, columns=TRANSIENT_COLUMNS)} if rows else {}


def _bytes_frame(cluster: Cluster, plan: Plan, model: Any, changed: Mapping[tuple[str, int], tuple[int, ...]]) -> dict[str, Any]:
    """``bytes``: one row, the bytes the plan copies (each added replica at the snapshot's size, not the plan's
    own figure), their lower bound recomputed as the plan stage does (``load_summary.bytes_bound``), and the largest partition
    it moves. Empty when the plan's mode and brokers do not fit the snapshot (other gates say why)."""
    import pandas as pd

    from .plan.load_summary import bytes_bound
    from .plan.targets import PlanError, make_targets

    if not _moves_data(cluster, plan):
        return {}
    try:
        targets = make_targets(cluster, plan.mode, plan.params.get("brokers"))
    except PlanError:
        return {}
    added = {tp: len(set(r) - set(cluster.partition(*tp).replicas)) for tp, r in changed.items()}
    size = {tp: cluster.partition(*tp).size_bytes for tp in changed}
    moved = sum(size[tp] * n for tp, n in added.items())
    bound = bytes_bound(cluster, model, targets, changed)
    largest = max((size[tp] for tp, n in added.items() if n), default=0)
    return {"bytes": pd.DataFrame([{"moved": moved, "bound": bound, "ratio": round(moved / bound, 4) if bound else None,
                                    "largest_moved": largest}])}


def _moves_data(cluster: Cluster, plan: Plan) -> bool:
    """Is ``plan`` held to the load gates? Every replica plan over a snapshot that knows partition sizes, whatever
    the plan says it balanced (``params`` lie outside the content hash: editing them switches no gate off)."""
    return plan.mode != "leaders" and any(p.size_bytes for p in cluster.partitions)


def _load_gates(frames: dict[str, Any], plan: Plan, th: Thresholds) -> list[_GateRow]:
    """Disk and network deviation (replica plans: the load frame has rows only where the snapshot knows a load) and capacity headroom (every plan, where capacities
    are known), each on its own frame cut from ``load``."""
    import great_expectations as gx

    e = gx.expectations
    load = frames["load"]
    gates: list[_GateRow] = []
    if not len(load):
        return gates
    # The snapshot decides, never a field of the plan: any replica plan over known sizes is held to the load bands,
    # whatever its planner balanced (a counts plan meets them or fails them; params lie outside the content hash).
    balances_load = plan.mode != "leaders"
    if balances_load:
        for name, dims, pct, not_worse, what in (
                ("disk-balance", ("disk",), th.max_disk_deviation_pct, False,
                 "every eligible broker's disk bytes within the % of its target (its capacity's share of the total); "
                 "in add-brokers, an old broker below it (it may only give) or a new one above it, no further past it than "
                 "before, or than one partition past the %"),
                ("network-balance", NETWORK, th.max_network_deviation_pct, True,
                 "every eligible broker's network in and out within the % of its target (one partition of "
                 "slack), or no further from it than before the plan")):
            frame = load[load["dimension"].isin(dims)].reset_index(drop=True)
            if not len(frame):
                continue
            pcts = frame["band_pct"] if pct is None else [float(pct)] * len(frame)
            # Network: one partition of slack (the count gates' one replica, in bytes/s): a broker that serves a
            # few busy partitions cannot be balanced finer than the busiest of them.
            # A broker the mode lets move one way only, past its target on the side it cannot correct, is held to
            # where it started there, or, if the plan took it across its target, to one partition past its band: it
            # moves in whole partitions, one way (a new broker filled from -100 % to +99 % is not "no worse").
            held = [held_one_way(a, t, give, take) for a, t, give, take in
                    zip(frame["after"], frame["target"], frame["may_give"], frame["may_take"], strict=True)]
            frame["dev_excess_pct"] = [gate_excess_pct(a, b, t, p / 100, not_worse=not_worse, largest=lg, held=h)
                                       for a, b, t, p, h, lg in zip(frame["after"], frame["before"], frame["target"],
                                                                    pcts, held, frame["largest"], strict=True)]
            key = name.split("-")[0]
            frames[key] = frame
            shown = f"{pct:g}%" if pct is not None else "plan's band: " + ", ".join(
                f"{d} {frame[frame['dimension'] == d]['band_pct'].iloc[0]:g}%" for d in dims if (frame["dimension"] == d).any())
            gates.append((name, key, e.ExpectColumnValuesToBeBetween(column="dev_excess_pct", max_value=0), shown, what))
    if balances_load and "bytes" in frames:
        row = frames["bytes"]
        factor = th.max_bytes_to_bound if th.max_bytes_to_bound is not None else BYTES_TO_BOUND
        # One partition of slack: a plan moves whole partitions, so a small one cannot come nearer its bound.
        row["bytes_excess"] = [max(0, m - (factor * b + lg)) for m, b, lg in
                               zip(row["moved"], row["bound"], row["largest_moved"], strict=True)]
        gates.append(("bytes-vs-bound", "bytes", e.ExpectColumnValuesToBeBetween(column="bytes_excess", max_value=0),
                      f"{factor:g} x bound + 1 partition",
                      "bytes copied (the snapshot's sizes) at most the factor times their lower bound, plus the "
                      "largest partition moved"))
    capped = load[load["capacity"].notna()].reset_index(drop=True)
    if len(capped):
        limits = []
        for d, lim in zip(capped["dimension"], capped["limit_pct"], strict=True):
            given = th.max_disk_utilisation_pct if d == "disk" else th.max_network_utilisation_pct
            limits.append(float(given) if given is not None else float(lim))
        capped["limit_pct"] = limits
        capped["headroom_excess_pct"] = [
            headroom_excess_pct(a, b, c, lim / 100)
            for a, b, c, lim in zip(capped["after"], capped["before"], capped["capacity"], limits, strict=True)]
        frames["capacity"] = capped
        shown = ", ".join(sorted({f"{d} {lim:g}%" for d, lim in zip(capped["dimension"], limits, strict=True)}))
        gates.append(("capacity-headroom", "capacity",
                      e.ExpectColumnValuesToBeBetween(column="headroom_excess_pct", max_value=0), shown,
                      "every broker's utilisation after the plan at most the threshold, or not above what it was"))
    if "transient" in frames:
        frame = frames["transient"]
        if th.max_disk_utilisation_pct is not None:
            frame["limit_pct"] = float(th.max_disk_utilisation_pct)
        frame["transient_excess_pct"] = [
            round(max(0.0, p - max(lim / 100 * c, b)) / c * 100, 3)
            for p, b, c, lim in zip(frame["peak"], frame["before"], frame["capacity"], frame["limit_pct"], strict=True)]
        gates.append(("transient-disk", "transient",
                      e.ExpectColumnValuesToBeBetween(column="transient_excess_pct", max_value=0),
                      f"disk {frame['limit_pct'].iloc[0]:g}%",
                      "every broker's disk at most the threshold at every moment of the execution (a batch's new "
                      "replicas fill their brokers before the old ones free theirs), or not above what it held"))
    return gates


def _failover_gate(frames: dict[str, Any], th: Thresholds) -> list[_GateRow]:
    """``failover-balance``: after any one broker fails, every survivor within the % over the survivors' mean plus
    the heaviest partition it then leads, or no further above it than the worst single failure before the plan
    (the plan's worst N-1 figure made no worse: which broker's failure is the worst may change)."""
    import great_expectations as gx

    frame = frames.get("failover")
    if frame is None or not len(frame):
        return []
    worst_before = float(frame["before"].max())
    frame["excess"] = [round(max(0.0, a - worst_before), 3) for a in frame["after"]]
    return [("failover-balance", "failover", gx.expectations.ExpectColumnValuesToBeBetween(column="excess", max_value=0),
             f"{failover_pct(th):g}%", "after any one broker fails, every survivor within the % over the survivors' "
             "mean plus the heaviest partition it then leads, or no further above it than the worst failure "
             "before the plan")]


def failover_pct(th: Thresholds) -> float:
    """The failover gate's band, percent: the threshold, or ``FAILOVER_DEVIATION_PCT``."""
    return FAILOVER_DEVIATION_PCT if th.max_failover_deviation_pct is None else float(th.max_failover_deviation_pct)


def _gates(frames: dict[str, Any], plan: Plan, th: Thresholds) -> list[dict[str, Any]]:
    """(gate name, frame, expectation, threshold, description) in gate order."""
    import great_expectations as gx

    e = gx.expectations
    cap = th.max_changes_per_partition
    if cap is None:
        cap = plan.params.get("max_changes_per_partition") if plan.mode == "remove-brokers" else 1
        cap = cap if cap is not None else max((len(c.replicas_after) for c in plan.changes), default=1)
    brokers = frames["brokers"]
    rep_pct = th.max_deviation_pct
    if plan.mode == "leaders" and len(brokers):
        rep_pct = max(rep_pct, float(brokers["replica_dev_before_pct"].max()))
    brokers["replica_dev_excess"] = [_excess(r, m, rep_pct) for r, m in zip(brokers["replicas"], brokers["med_replicas"], strict=True)]
    brokers["leader_dev_excess"] = [_excess(v, m, th.max_leader_deviation_pct)
                                    for v, m in zip(brokers["leaders"], brokers["med_leaders"], strict=True)]
    gates: list[_GateRow] = [
        ("max-changes-per-partition", "partitions", e.ExpectColumnValuesToBeBetween(column="replica_changes", max_value=cap),
         cap, "at most N replicas added per partition"),
        ("replica-balance", "brokers", e.ExpectColumnValuesToBeBetween(column="replica_dev_excess", max_value=0),
         f"{rep_pct:g}%", "every eligible broker's replica count within the % of the median (1 replica of slack)"),
        ("known-live-brokers", "placements", e.ExpectColumnValuesToBeInSet(column="status", value_set=["ok"]),
         "ok", "only known brokers, none being removed, new replicas only on live brokers"),
        ("leader-balance", "brokers", e.ExpectColumnValuesToBeBetween(column="leader_dev_excess", max_value=0),
         f"{th.max_leader_deviation_pct:g}%", "every eligible broker's leader count within the % of the median (1 of slack)"),
    ]
    leaders_info = plan.solver.get("leaders") or {}
    if leaders_info.get("topic_band_violation") == 0:
        gates.append(("topic-leader-balance", "topics", e.ExpectColumnValuesToBeBetween(column="leader_spread", max_value=1),
                      1, "the plan claims every topic's leaders within [floor, ceil]: spread <= 1"))
    gates += [
        ("replication-factor", "partitions", e.ExpectColumnPairValuesToBeEqual(column_A="rf_before", column_B="rf_check"),
         "equal", "replication factor unchanged, no duplicate broker in a replica list"),
        ("rack-diversity", "partitions", e.ExpectColumnPairValuesAToBeGreaterThanB(column_A="racks_after", column_B="racks_before", or_equal=True),
         ">=", "no partition spans fewer racks than before"),
        ("topics-not-empty", "inventory", e.ExpectColumnValuesToBeBetween(column="topics", min_value=1), ">= 1",
         "the snapshot's topic list is not empty"),
        ("brokers-not-empty", "inventory", e.ExpectColumnValuesToBeBetween(column="brokers", min_value=1), ">= 1",
         "the snapshot's broker list is not empty"),
        *_load_gates(frames, plan, th),
        *_failover_gate(frames, th),
        ("partitions-in-snapshot", "partitions", e.ExpectColumnValuesToBeInSet(column="in_snapshot", value_set=[True]),
         "true", "the plan covers only partitions of the snapshot"),
        ("plan-hash", "plan", e.ExpectColumnPairValuesToBeEqual(column_A="recorded_hash", column_B="changes_hash"),
         "equal", "plan.json's content hash matches its changes"),
        ("reassignment-files-hash", "plan", e.ExpectColumnPairValuesToBeEqual(column_A="recorded_hash", column_B="files_hash"),
         "equal", "reassignment.json and rollback.json are exactly the plan's changes"),
    ]
    return [{"name": n, "frame": f, "expectation": x, "threshold": t, "description": d} for n, f, x, t, d in gates]


def _context(docs_dir: Path) -> Any:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    # GX sets its own loggers to INFO on import; keep the CLI's stderr to our one-line errors.
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("great_expectations"):
            logging.getLogger(name).setLevel(logging.WARNING)
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    context.add_data_docs_site(site_name="run", site_config={
        "class_name": "SiteBuilder", "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir.resolve())}})
    return context


def run_gates(frames: dict[str, Any], plan: Plan, thresholds: Thresholds, docs_dir: Path) -> dict[str, Any]:
    """Validate every frame with its gates through one GX checkpoint; returns the result document."""
    import great_expectations as gx

    started = time.monotonic()
    gates = _gates(frames, plan, thresholds)
    context = _context(docs_dir)
    source = context.data_sources.add_pandas("rebalance_plan")
    definitions = []
    for frame in dict.fromkeys(g["frame"] for g in gates):
        batch = source.add_dataframe_asset(frame).add_batch_definition_whole_dataframe(frame)
        suite = context.suites.add(gx.ExpectationSuite(name=f"gates_{frame}"))
        for g in gates:
            if g["frame"] == frame:
                g["expectation"].meta = {"gate": g["name"]}
                suite.add_expectation(g["expectation"])
        definitions.append(context.validation_definitions.add(gx.ValidationDefinition(name=frame, data=batch, suite=suite)))
    by_gate: dict[str, Any] = {}
    for vd in definitions:
        res = vd.run(batch_parameters={"dataframe": frames[vd.name]},
                     result_format={"result_format": "COMPLETE", "partial_unexpected_count": thresholds.sample_rows})
        for r in res.results:
            by_gate[r.expectation_config.meta["gate"]] = r
    context.build_data_docs(site_names=["run"])
    out = []
    for g in gates:
        r = by_gate[g["name"]]
        frame = frames[g["frame"]]
        result = r.result or {}
        index = (result.get("unexpected_index_list") or [])[: thresholds.sample_rows]
        sample = json.loads(frame.loc[[i for i in index if i in frame.index]].to_json(orient="records")) if index else []
        observed: Any = result.get("observed_value")
        if observed is None and "unexpected_count" in result:
            observed = f"{result['unexpected_count']} of {result.get('element_count', len(frame))} rows fail"
        out.append({"name": g["name"], "passed": bool(r.success), "observed": observed, "threshold": g["threshold"],
                    "description": g["description"], "failing_rows_sample": sample, "frame": g["frame"]})
    return {"passed": all(g["passed"] for g in out), "gates": out, "plan_hash": plan.hash,
            "validated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds": round(time.monotonic() - started, 3),
            "thresholds": dataclasses.asdict(thresholds),
            "docs": str(docs_dir / "index.html")}


@collector_paused()  # millions of long-lived objects at scale: rebalancer.bulk
def validate_run_dir(run_dir: str | Path, thresholds: Thresholds | None = None) -> dict[str, Any]:
    """Validate RUN_DIR's plan; writes validation/result.json and Data Docs. Raises GateFailure when a gate fails."""
    thresholds = thresholds or Thresholds()
    thresholds.check()
    run = Path(run_dir)
    cluster = load_snapshot(run)
    plan = load_plan(run)
    for path in (RunDir(run).reassignment, RunDir(run).rollback):
        if path.exists():
            doc = read_json(path)
            if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
                raise InputError(f"{path}: not a Kafka reassignment document")
    out = RunDir(run).validation
    frames = build_frames(cluster, plan, run, failover_pct(thresholds))
    # The whole directory (result and Data Docs) or nothing: built aside, renamed into place when complete.
    with StagedFiles(run) as stage:
        staged = stage.path(VALIDATION_DIR)
        result = run_gates(frames, plan, thresholds or Thresholds(), staged / DOCS_DIR)
        result["docs"] = str(RunDir(run).data_docs / "index.html")
        atomic_write_json(staged / RESULT_FILE, result)
    if not result["passed"]:
        failed = [g["name"] for g in result["gates"] if not g["passed"]]
        # the plan's own word where it proved the bands out of reach (the gate fails either way)
        proof = plan.solver.get("bands_proof") or {}
        proven = why_out_of_reach(proof) if "disk-balance" in failed else None
        why = f"; the plan's proof: {proven}" if proven else ""
        counted = why_counts_out_of_reach(proof) if "replica-balance" in failed else None
        why += f"; the plan's proof: {counted}" if counted else ""
        if "transient-disk" in failed:
            why += "; " + _transient_why(result)
        raise GateFailure(f"{len(failed)} gate(s) failed: {', '.join(failed)} (see {out / RESULT_FILE}){why}")
    return result


def _transient_why(result: Mapping[str, Any]) -> str:
    """The broker the transient-disk gate names first, in words."""
    gate = next(g for g in result["gates"] if g["name"] == "transient-disk")
    rows = sorted(gate["failing_rows_sample"], key=lambda r: -float(r.get("transient_excess_pct") or 0))
    if not rows:
        return "a broker's disk would pass its threshold during the execution"
    r = rows[0]
    return (f"broker {r['broker']} would hold {r['util_peak_pct']:g}% of its disk during batch {r['peak_batch']} "
            f"(threshold {r['limit_pct']:g}%): a batch's new replicas fill it before the old ones free their bytes; "
            f"fewer moves per batch (--max-moves-per-broker, --max-moves) lower the peak")


def format_gate_table(result: Mapping[str, Any]) -> str:
    rows = [(g["name"], "PASS" if g["passed"] else "FAIL", str(g["observed"]), str(g["threshold"])) for g in result["gates"]]
    w = [max(len(r[i]) for r in rows + [("gate", "", "observed", "threshold")]) for i in range(4)]
    lines = [f"{'gate':<{w[0]}}  {'':<4}  {'observed':<{w[2]}}  threshold", "-" * (w[0] + w[2] + w[3] + 10)]
    lines += [f"{n:<{w[0]}}  {s:<4}  {o:<{w[2]}}  {t}" for n, s, o, t in rows]
    return "\n".join(lines)
