"""The load placement problem as plain data, and how a placement stands against it: what the load engines (the
greedy search ``load_greedy``, the 0/1 program ``lp_load``, the neighbourhoods, the split groups and the sums of
``sum_proofs``) take and measure.

``LoadInput``: each partition's replicas and what one of its replicas weighs in each placement dimension (those a
follower carries: disk bytes, bytes in per second, the replica count; leader-only dimensions are the leader pass's
job), and each eligible broker's ``Band`` per dimension (``rebalancer.load``), aimed a little inside the bands the
gates measure (``LOAD_MARGIN``, ``COUNT_MARGIN``). ``load_input`` builds it from a cluster; the count bands
(``count_gate_band``, ``median_safe_band``, ``median_gate_band``) say which counts pass the count gates, which
measure from the median; ``evaluate`` and ``broker_violation`` measure a placement: how far each broker lies outside
its bands, weighted by the dimension's priority, in units of its target.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..balance import count_allowance
from ..load import Band, beyond

if TYPE_CHECKING:
    from ..load import LoadModel
    from ..model import Cluster
    from .targets import Targets

__all__ = ["LoadInput", "add_fixed", "load_input", "placement_dimensions", "evaluate", "broker_violation",
           "violation_sides", "mean_target", "violation_unit", "count_gate_band", "median_safe_band",
           "median_gate_band", "REMOVED_WEIGHT", "COUNT_MARGIN", "LOAD_MARGIN"]

REMOVED_WEIGHT = 1000.0  # a removed broker's violation weighs this much more: it must end empty


@dataclass(frozen=True)
class LoadInput:
    replicas: Sequence[tuple[int, ...]]                 # per partition index: replicas, leader first
    topics: Sequence[str]                               # per partition index
    units: Mapping[str, Sequence[float]]                # dimension -> per partition: one replica's load
    bands: Mapping[str, Mapping[int, Band]]             # dimension -> eligible broker -> band
    rack: Mapping[int, str | None]
    receivers: frozenset[int]
    givers: frozenset[int]
    removed: frozenset[int]
    max_changes: int = 1
    keep_racks: bool = True
    weight: Mapping[str, float] = field(default_factory=dict)  # dimension -> weight of its violation (default 1)
    gate_bands: Mapping[str, Mapping[int, Band]] | None = None  # the bands the gates measure (``bands`` lie inside)
    origin: Sequence[tuple[int, ...]] | None = None  # a repair pass over a placement planned already (``split``):
    #   the partitions' replicas before any planning; max_changes then counts the replicas not in ``origin`` (a
    #   replica added by the earlier planning may move again: the plan still adds it once)
    safe_bands: Mapping[str, Mapping[int, Band]] | None = None  # counts: bands any counts inside of pass the count
    #   gates, which measure from the median (``median_safe_band``); the exact program holds counts to them
    fixed: Mapping[str, Mapping[int, float]] | None = None  # dimension -> broker -> load this problem cannot move
    #   (other groups' replicas, ``split``'s repair): counted in the broker's load, so its bands are the cluster's
    count_gate: Mapping[str, float] | None = None  # count -> the count gate's band (a fraction of the median:
    #   ``median_gate_band``), where a phase judges counts as the gate will

    @property
    def baseline(self) -> Sequence[tuple[int, ...]]:
        """The replicas changes and bytes count from: ``origin`` where given, else ``replicas``."""
        return self.origin if self.origin is not None else self.replicas


def add_fixed(inp: LoadInput, load: dict[str, dict[int, float]]) -> None:
    """Add to ``load`` (dimension -> broker -> load, in place) what ``inp.fixed`` holds on the brokers."""
    for d, extra in (inp.fixed or {}).items():
        if d in load:
            for b, x in extra.items():
                load[d][b] += x


COUNT_MARGIN = 2 / 3  # the planner keeps counts within this share of the gate's band (the gate measures from the median)
LOAD_MARGIN = 0.95    # and loads within this share of theirs: a broker stuck at the edge of its band is inside the gate's


def count_gate_band(total: int, eligible: Iterable[int], band: float) -> dict[int, Band]:
    """The count gates' band as whole counts: within band x the average, one count of slack (the validation gates
    measure from the median, which the average stands for before the plan exists)."""
    ids = sorted(eligible)
    mean = total / max(1, len(ids))
    allowed = count_allowance(mean, band)
    lo, hi = math.ceil(mean - allowed - 1e-9), math.floor(mean + allowed + 1e-9)
    return {b: Band(max(0, lo), max(lo, hi), mean) for b in ids}


def median_safe_band(total: int, eligible: Iterable[int], band: float) -> dict[int, Band]:
    """Whole counts [L, L + w] around the average such that any counts inside pass the count gate, which measures
    from the median (|count - median| <= max(band x median, 1)): the median lies in [L, L + w] too, so no count is
    further than w from it, and w = floor(max(band x L, 1)) <= the gate's allowance at any median >= L. A band around
    the average alone (``count_gate_band``) does not promise that: counts 14-18 around an average of 15.6 have a
    median of 15, and 18 fails."""
    ids = sorted(eligible)
    mean = total / max(1, len(ids))
    guess = math.floor(count_allowance(mean, band) + 1e-9)
    low = max(0, min(math.floor(mean - guess / 2 + 1e-9), math.floor(mean + 1e-9)))
    width = math.floor(count_allowance(low, band) + 1e-9)  # the allowance at the lowest median: valid above it too
    low = max(low, math.ceil(mean - 1e-9) - width)   # the band must hold the average (the counts sum to the total)
    return {b: Band(low, low + width, mean) for b in ids}


def median_gate_band(counts: Mapping[int, float], band: float) -> dict[int, Band]:
    """The count gate's band at these counts' median, as whole counts: what ``rebalancer.validate`` accepts
    (|count - median| <= max(band x median, 1)) while the median stays where it is."""
    if not counts:
        return {}
    med = statistics.median(counts.values())
    allowed = count_allowance(med, band)
    lo, hi = math.ceil(med - allowed - 1e-9), math.floor(med + allowed + 1e-9)
    mean = sum(counts.values()) / len(counts)
    return {b: Band(max(0, lo), max(lo, hi), mean) for b in counts}


def placement_dimensions(model: LoadModel) -> list[str]:
    """The dimensions a replica placement balances: those a follower carries (leader-only ones are the leader pass's)."""
    from ..load import DIMENSIONS

    return [name for name, d in DIMENSIONS.items() if any(d.follower(x) for x in model.loads.values())]


def load_input(cluster: Cluster, model: LoadModel, targets: Targets, max_changes: int | None,
               origin: Cluster | None = None) -> LoadInput:
    """The load placement problem of ``cluster`` for ``targets`` (raises ``CapacityError`` when a capacity cannot
    hold its load); ``origin``: the cluster as it is where ``cluster`` is a step already planned on it (the racks'
    repair, ``rack_repair``): changes and bytes then count from it (``LoadInput.origin``)."""
    from ..load import DIMENSIONS, dimension_loads, load_bands, replica_table

    dims = placement_dimensions(model)
    table = replica_table(cluster, model.loads, dimensions=dims)
    totals = dimension_loads(cluster, model.loads, dimensions=dims, table=table)
    bands: dict[str, dict[int, Band]] = {}
    gate_bands: dict[str, dict[int, Band]] = {}
    safe_bands: dict[str, dict[int, Band]] = {}
    for d in dims:
        total = sum(totals[d].values())
        if DIMENSIONS[d].capacity_key is not None:  # aimed a little inside the band the gates measure
            bands[d] = load_bands(d, total, targets.eligible, model.capacity.get(d), band=model.band[d] * LOAD_MARGIN,
                                  max_utilisation=model.threshold.get(d))
            gate_bands[d] = model.bands(d, total, targets.eligible)
        else:  # a count: kept inside the gate's band with a margin
            bands[d] = load_bands(d, total, targets.eligible, band=model.band[d] * COUNT_MARGIN)
            gate_bands[d] = count_gate_band(total, targets.eligible, model.band[d])
            safe_bands[d] = median_safe_band(total, targets.eligible, model.band[d])
    parts = cluster.partitions
    # a follower's weight per partition (Dimension.replica, vectorised by the table)
    units = {d: table.per_partition[d][1].astype(float).tolist() for d in dims}
    return LoadInput(replicas=[p.replicas for p in parts], topics=[p.topic for p in parts], units=units, bands=bands,
                     rack={b.id: b.rack for b in cluster.brokers}, receivers=targets.receivers, givers=targets.givers,
                     removed=targets.removed, max_changes=max_changes if max_changes is not None else 10**9,
                     keep_racks=targets.keep_racks, weight={d: DIMENSIONS[d].priority for d in dims},
                     gate_bands=gate_bands, safe_bands=safe_bands,
                     count_gate={d: model.band[d] for d in safe_bands},
                     origin=None if origin is None else [p.replicas for p in origin.partitions])


def evaluate(inp: LoadInput, changed: Mapping[int, tuple[int, ...]], gates: bool = False) -> tuple[float, float]:
    """(total weighted violation, bytes moved) of a placement: how two placements of one problem compare. ``gates``:
    the violation of the bands the gates measure (``gate_bands``) instead of the planner's."""
    bands_of = inp.gate_bands if gates and inp.gate_bands is not None else inp.bands
    dims = [d for d in bands_of if d in inp.units]
    load = {d: {b: 0.0 for b in inp.rack} for d in dims}
    before = {d: {b: 0.0 for b in inp.rack} for d in dims}
    moved = 0.0
    add_fixed(inp, load)
    add_fixed(inp, before)
    for i, reps in enumerate(inp.replicas):
        new = changed.get(i, reps)
        for d in dims:
            u = inp.units[d][i]
            for b in new:
                load[d][b] += u
            for b in reps:
                before[d][b] += u
        if "disk" in inp.units:
            moved += inp.units["disk"][i] * sum(1 for b in new if b not in reps)
    total = 0.0
    for d in dims:
        mean = mean_target(bands_of[d])
        for b, band in bands_of[d].items():
            total += broker_violation(inp, d, b, band, mean, load[d].get(b, 0.0),
                                      before[d].get(b, 0.0) if gates else None)
    return total, moved


def mean_target(bands: Mapping[int, Band]) -> float:
    """A dimension's mean target over its brokers' bands: the floor under the unit of a broker with a tiny target
    (``violation_unit``), and the unit of a removed broker's whole load."""
    return max(1e-9, sum(x.average for x in bands.values()) / max(1, len(bands)))


def violation_unit(average: float, mean: float, weight: float = 1.0) -> float:
    """The load one unit of a broker's band violation stands for: its target (at least a thousandth of the
    dimension's ``mean_target``), over the dimension's weight (its priority). The one scale of every search's
    violation: ``broker_violation`` (``evaluate``, the neighbourhoods, the split), ``load_greedy``, ``leader_load``."""
    return max(average, mean * 1e-3) / weight


def violation_sides(b: int, dims: Sequence[str], load: Mapping[str, Mapping[int, float]],
                    low: Mapping[str, Mapping[int, float]], high: Mapping[str, Mapping[int, float]],
                    scale: Mapping[str, Mapping[int, float]]) -> tuple[float, float]:
    """Broker b's violation above its bands and below them (each dimension's ``load.beyond`` in units of its
    ``scale``, summed by side): the local search's and the leader pass's incremental tallies."""
    up = down = 0.0
    for d in dims:
        v, top = load[d][b], high[d][b]
        x = beyond(v, low[d][b], top) / scale[d][b]
        if v > top:
            up += x
        else:
            down += x
    return up, down


def broker_violation(inp: LoadInput, d: str, b: int, band: Band, mean: float, value: float,
                     before: float | None = None) -> float:
    """How far broker b's load ``value`` in dimension d lies outside ``band``, weighted by the dimension's priority,
    in units of its target (``mean``: the dimension's mean target, a floor under a tiny target); a removed broker's
    whole load counts ``REMOVED_WEIGHT`` times; 0 for a broker this plan does not move. ``before``: judged as the
    gates judge a broker the mode lets move one way: on the side it cannot correct, no further from its target than
    it was before (``load.accepted_range``)."""
    if b in inp.removed:
        return REMOVED_WEIGHT * value / mean
    if b not in inp.givers and b not in inp.receivers:
        return 0.0
    low, high = float(band.floor), float(band.ceil)
    if before is not None:
        away = abs(before - band.average)
        low = low if b in inp.receivers else min(low, band.average - away)
        high = high if b in inp.givers else max(high, band.average + away)
    return inp.weight.get(d, 1.0) * beyond(value, low, high) / violation_unit(band.average, mean)
