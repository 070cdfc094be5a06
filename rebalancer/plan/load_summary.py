"""How a plan leaves the load: for every balance dimension (``rebalancer.load``), each eligible broker against its
band before and after the plan, and the bytes moved against the fewest any plan meeting those bands must move
(``bounds.bytes_moved_bound``). Part of plan.json's summary (``summary.load``) and of the printed summary."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..load import (
    DIMENSIONS,
    Band,
    CapacityError,
    LoadModel,
    dimension_loads,
    gate_excess_pct,
    headroom_excess_pct,
    held_one_way,
    largest_replica,
    replica_table,
)
from ..model import Cluster, TopicPartition
from ..planfile.load_types import DimensionSummary, LoadSummary
from .bounds import bytes_moved_bound
from .rack_repair import SPREAD_BY, spread_bytes
from .targets import Targets

__all__ = ["load_summary", "bytes_bound", "LoadSummary", "DimensionSummary"]


def _deviation(value: int, band: Band) -> float:
    """Percent above (+) or below (-) the broker's target."""
    if band.average == 0:
        return 0.0 if value == 0 else 100.0
    return round((value - band.average) / band.average * 100, 2)


def _bands(model: LoadModel, before: Mapping[str, Mapping[int, int]],
           eligible: list[int]) -> tuple[dict[str, dict[int, Band]], dict[str, str]]:
    """Every dimension's bands over the eligible brokers, and why a dimension has none (a capacity too small)."""
    bands: dict[str, dict[int, Band]] = {}
    errors: dict[str, str] = {}
    for name in DIMENSIONS:
        try:
            bands[name] = model.bands(name, sum(before[name].values()), eligible)
        except CapacityError as exc:
            errors[name] = str(exc)
    return bands, errors


GATED = ("disk", "nw_in", "nw_out")  # the dimensions with a deviation gate (``rebalancer.validate``)


def _gate_verdicts(name: str, model: LoadModel, targets: Targets, bands: Mapping[int, Band],
                   before: Mapping[int, int], after: Mapping[int, int],
                   largest: Mapping[int, int]) -> DimensionSummary:
    """The brokers the validation's gates will fail in this dimension, judged by the gates' own predicates: the
    deviation gate (disk, network: ``gate_excess_pct``, network with one partition of slack and "no further off than
    before", a broker the mode moves one way held where it started) and the capacity gate
    (``headroom_excess_pct``)."""
    out: DimensionSummary = {}
    if name in GATED:
        network = name != "disk"
        one_way = targets.mode == "add-brokers"
        gate = []
        for b, x in bands.items():
            held = held_one_way(after[b], x.average, not one_way or b in targets.givers,
                                not one_way or b in targets.receivers)
            if gate_excess_pct(after[b], before[b], x.average, model.band[name], not_worse=network,
                               largest=largest.get(b, 0), held=held) > 0:
                gate.append(b)
        out["outside_gate"] = sorted(gate)
    capacity = model.capacity.get(name)
    if capacity and name in model.threshold:
        out["over_threshold"] = sorted(b for b in bands if capacity.get(b) and headroom_excess_pct(
            after[b], before[b], capacity[b], model.threshold[name]) > 0)
    return out


def bytes_bound(cluster: Cluster, model: LoadModel, targets: Targets,
                assignment: Mapping[TopicPartition, tuple[int, ...]] | None = None) -> int:
    """The lower bound on bytes moved that ``load_summary`` records, without the rest of the summary (the
    validation's bytes gate recomputes it); with the plan's ``assignment``, at least what its racks' spread needs
    (``rack_repair.spread_bytes``)."""
    table = replica_table(cluster, model.loads)
    before = dimension_loads(cluster, model.loads, table=table)
    bands, _ = _bands(model, before, sorted(targets.eligible))
    bound = bytes_moved_bound(cluster, model.loads, bands, targets, table=table)
    return int(_with_spread(bound, cluster, assignment or {}, targets)["bound"])


def _with_spread(bound: dict[str, Any], cluster: Cluster, assignment: Mapping[TopicPartition, tuple[int, ...]],
                 targets: Targets) -> dict[str, Any]:
    """The balance's bytes bound, or what the plan's spread over the racks needs where that is more
    (``rack_repair.spread_bytes``): the one rule the plan's summary and the validation's bytes gate share."""
    spread = spread_bytes(cluster, assignment, targets.eligible)
    return {**bound, "bound": spread, "by": SPREAD_BY} if spread > bound["bound"] else bound


def load_summary(cluster: Cluster, assignment: Mapping[TopicPartition, tuple[int, ...]], targets: Targets,
                 model: LoadModel, bytes_moved: int, proof: Mapping[str, Any] | None = None) -> LoadSummary:
    """``assignment``: the changed partitions' replicas after the plan (first = preferred leader); ``bytes_moved``:
    the plan's (its summary's); ``proof``: a bound the planner proved (``{"bytes", "by"}``: the exact program's dual
    bound, which counts whole partitions and the change cap), recorded where it is tighter than the sum's."""
    table = replica_table(cluster, model.loads)
    before = dimension_loads(cluster, model.loads, table=table)
    table_after = replica_table(cluster, model.loads, assignment)
    after = dimension_loads(cluster, model.loads, table=table_after)
    largest = largest_replica(cluster, [table_after, table], GATED)  # the busiest replica, before or after
    eligible = sorted(targets.eligible)
    dims: dict[str, DimensionSummary] = {}
    all_bands, errors = _bands(model, before, eligible)
    per_broker: dict[int, dict[str, Any]] = {b: {} for b in eligible}
    for name, d in DIMENSIONS.items():
        total = sum(before[name].values())
        if name in errors:
            dims[name] = {"error": errors[name]}
            continue
        bands = all_bands[name]
        dev_before = {b: _deviation(before[name][b], bands[b]) for b in eligible}
        dev_after = {b: _deviation(after[name][b], bands[b]) for b in eligible}
        worst = max(eligible, key=lambda b: (abs(dev_after[b]), -b))
        dims[name] = {
            "title": d.title, "unit": d.unit, "total": total, "band_pct": round(model.band[name] * 100, 2),
            "by_capacity": name in model.capacity,
            "threshold_pct": round(model.threshold[name] * 100, 2) if name in model.threshold else None,
            "max_deviation_pct_before": max((abs(v) for v in dev_before.values()), default=0.0),
            "max_deviation_pct_after": abs(dev_after[worst]),
            "outside_before": sorted(b for b in eligible if not bands[b].contains(before[name][b])),
            "outside_after": sorted(b for b in eligible if not bands[b].contains(after[name][b])),
            "worst_after": {"broker": worst, "deviation_pct": dev_after[worst]},
            **_gate_verdicts(name, model, targets, bands, before[name], after[name], largest.get(name, {})),
        }
        for b in eligible:
            per_broker[b][name] = {"before": before[name][b], "after": after[name][b], "target": round(bands[b].average),
                                   "low": bands[b].floor, "high": bands[b].ceil,
                                   "capacity": model.capacity.get(name, {}).get(b)}
    bound = _with_spread(bytes_moved_bound(cluster, model.loads, all_bands, targets, table=table), cluster,
                         assignment, targets)
    if proof and proof["bytes"] > bound["bound"]:
        bound = {**bound, "bound": int(proof["bytes"]), "by": str(proof["by"])}
    moved = bytes_moved
    return {"dimensions": dims, "bytes_moved": moved, "bytes_bound": bound["bound"], "bytes_bound_by": bound["by"],
            "bytes_bound_per_dimension": bound["per_dimension"],
            "bytes_to_bound": (round(moved / bound["bound"], 4) if bound["bound"] else (1.0 if moved == 0 else None)),
            "rate_sources": model.rate_sources, "brokers": [{"broker": b, **per_broker[b]} for b in eligible]}
