"""Where leadership goes when a broker fails, and a follower order that spreads it (issue 46).

When a broker fails, each partition it led elects the first replica of its assignment that is alive and in sync
(Kafka's offline-partition election, ZooKeeper and KRaft alike: ``assignment.find(live && isr)``). So the second
replica of every partition a broker leads decides where that broker's leadership lands; left to chance, one
survivor takes far more than its share exactly when the cluster is under stress. The order of followers copies no
data: reordering them is a metadata change.

``failover_figures`` measures it from the plan's final replica order, every replica assumed in sync: for each
broker failing alone (and each rack failing whole), the survivors' leader counts and leader load against their
mean (the largest deviation, in percent), the partitions left with no replica, and those left with a single one.
Single failures come from one matrix: ``N[b, c]`` = partitions led by b whose second replica is c (and ``W`` the
same weighted by leader load), so survivor c leads ``L_c + N[b, c]`` once b is gone. Racks are counted partition
by partition (the first replica outside the failed rack).

``order_followers`` chooses each partition's second replica among its followers so that, for every broker b, the
partitions b leads fail over evenly: per leader b, a local search over the partitions with a choice (two or more
followers outside b's rack) moves a partition's second from the survivor furthest above its mean to another
follower, or to the survivor furthest below its mean from the partition's current second, where that brings both
nearer than the furthest stands: leader counts first (no survivor's load taken further off than the worst one
stands), then load (no count further off than the worst one then stands); with racks, the failure of b's own rack
keeps every survivor within its worst too. A dry run first finds how far each failure can be evened; no broker's
order then changes past what the worst of them leaves (a plan reorders what the worst case needs, not more), and a
plan made again on its own result reorders nothing. Leaders, replica sets and bytes moved never change; only the
followers' order does (the second first, the others in their current order).

Where the search stops, the worst failure may still stand above what an order reaches (``order_floor``: the
simulator's wix scenario, leader counts 7.25 % where 5.43 % is reachable): moving one partition at a time cannot
get there. So the broker whose failure is worst then gets its partitions' seconds chosen all at once by a small 0/1
program (``_exact_worst``), counts first, then load, none of that failure's or its rack's figures further off than
they stand; then the next worst, until the worst cannot be lowered, and the search runs again on the result.

``order_floor`` says how far any order can go: for one broker failing, the least deviation some choice of the
replicas taking over its partitions leaves (counts exactly; load as a small 0/1 program of those choices proves
it, exactly where its nodes close the gap), and ``order_floors`` the largest of them, the floor of the worst
single failure, which every plan's summary records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict

from .highs import milp_worker

__all__ = ["FailoverFigures", "failover_figures", "failover_overload", "order_followers", "leader_weights",
           "order_floor", "order_floors"]

ORDER = "load"
MOVES_PER_PARTITION = 2  # the local search's work limit per partition with a choice (a bound, not a clock)


class Scenario(TypedDict):
    """One failure: the survivors' largest deviation from their mean (percent) in leader counts and leader load,
    the partitions it leaves with no replica, or with a single one (of two or more), and those it leaves with fewer
    live replicas than their ``min.insync.replicas`` (not offline: producers with acks=all are refused there)."""

    leaders_dev_pct: float
    load_dev_pct: float
    offline: int
    single_replica: int
    under_min_isr: int


class FailoverFigures(TypedDict):
    """``failover_figures``: every scenario, and the worst of each figure over the single-broker and rack ones."""

    brokers: dict[int, Scenario]
    racks: dict[str, Scenario]
    worst_broker: dict[str, Any]
    worst_rack: dict[str, Any]
    weighted_by: str


def leader_weights(cluster: Any, model: Any | None) -> tuple[list[float], str]:
    """Each partition's load as leader: its network out where the model has rates, else its bytes; (weights, what
    they are)."""
    if model is not None:
        from ..load import DIMENSIONS

        out = DIMENSIONS["nw_out"].leader
        weights = [float(out(model.loads[p.tp])) for p in cluster.partitions]
        if any(w > 0 for w in weights):
            return weights, "network out"
    return [float(p.size_bytes) for p in cluster.partitions], "bytes"


def _dev(values: Any, alive: Any) -> float:
    """The largest |value - mean| / mean over the alive entries, in percent (0 when the mean is 0)."""
    import numpy as np

    v = values[alive]
    if not v.size:
        return 0.0
    mean = float(v.mean())
    return 0.0 if mean <= 0 else round(float(np.abs(v - mean).max()) / mean * 100, 2)


def _replica_matrix(replicas: Sequence[Sequence[int]], brokers: Sequence[int]) -> tuple[list[int], Any]:
    """(every broker id, sorted; a partitions x RF matrix of each replica's broker as an index into them, -1 past a
    partition's last replica), built without a Python pass per replica."""
    import itertools

    import numpy as np

    parts = len(replicas)
    sizes = np.fromiter(map(len, replicas), np.int64, parts)
    flat = np.fromiter(itertools.chain.from_iterable(replicas), np.int64, int(sizes.sum()))
    ids = np.union1d(np.asarray(sorted(brokers), dtype=np.int64), flat)
    reps = np.full((parts, max(1, int(sizes.max()) if parts else 1)), -1, dtype=np.int64)
    row = np.repeat(np.arange(parts, dtype=np.int64), sizes)
    col = np.arange(len(flat), dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    reps[row, col] = np.searchsorted(ids, flat)
    return ids.tolist(), reps


def _handed_over(reps: Any, w: Any, n: int) -> tuple[Any, Any]:
    """(each broker's leader load, ``P[b, c]``: the load b leads whose second replica is c, which c takes over when b
    fails alone) from a ``_replica_matrix`` and each partition's weight."""
    import numpy as np

    leader = reps[:, 0]
    second = reps[:, 1] if reps.shape[1] > 1 else np.full(reps.shape[0], -1)
    has2 = second >= 0
    pair = np.zeros((n, n))
    np.add.at(pair, (leader[has2], second[has2]), w[has2])
    return np.bincount(leader, weights=w, minlength=n), pair


def failover_figures(replicas: Sequence[Sequence[int]], brokers: Sequence[int], rack: Mapping[int, str | None],
                     weight: Sequence[float] | None = None, weighted_by: str = "bytes",
                     min_isr: Sequence[int] | None = None) -> FailoverFigures:
    """The figures of every single-broker and single-rack failure (module doc). ``replicas``: each partition's final
    replicas, the preferred leader first; ``brokers``: the brokers alive after the plan; ``weight``: each
    partition's load as leader (default 1 each); ``min_isr``: each partition's ``min.insync.replicas`` (default 1).
    A partition counts under its min.insync.replicas where the failure takes it there (one whose replicas are
    fewer than it with every broker up is misconfigured, not failed: not counted)."""
    import numpy as np

    ids, reps = _replica_matrix(replicas, brokers)
    index = {b: i for i, b in enumerate(ids)}
    n, parts, width = len(ids), reps.shape[0], reps.shape[1]
    w = np.ones(parts) if weight is None else np.asarray(weight, dtype=np.float64)
    rf = (reps >= 0).sum(axis=1)
    needs = np.ones(parts, dtype=np.int64) if min_isr is None else np.asarray(min_isr, dtype=np.int64)
    needs = np.where(needs <= rf, needs, 0)  # more than its replicas: under with every broker up, not counted
    alive_all = np.zeros(n, dtype=bool)
    alive_all[[index[b] for b in brokers]] = True
    counts, pair_n = _handed_over(reps, np.ones(parts), n)
    loads, pair_w = _handed_over(reps, w, n)
    # partitions holding each broker, by replica count: a failure of b leaves RF-1 replicas of each
    holds = np.zeros((n, width + 1))
    tight = np.zeros(n)  # partitions holding each broker with min.insync.replicas = RF >= 2: one failure is too many
    for k in range(width):
        col = reps[:, k]
        ok = col >= 0
        np.add.at(holds, (col[ok], rf[ok]), 1.0)
        at = ok & (needs == rf) & (rf >= 2)
        np.add.at(tight, col[at], 1.0)
    out: FailoverFigures = {"brokers": {}, "racks": {}, "worst_broker": {}, "worst_rack": {}, "weighted_by": weighted_by}
    for b in brokers:
        i = index[b]
        alive = alive_all.copy()
        alive[i] = False
        out["brokers"][b] = {"leaders_dev_pct": _dev(counts + pair_n[i], alive),
                             "load_dev_pct": _dev(loads + pair_w[i], alive),
                             "offline": int(holds[i, 1]), "single_replica": int(holds[i, 2]) if width >= 2 else 0,
                             "under_min_isr": int(tight[i])}
    names = sorted({str(rack[b]) for b in brokers if rack.get(b) is not None})
    for name in names:
        down = np.array([rack.get(b) == name for b in ids], dtype=bool)
        new_leader, remaining = _first_up(reps, down)
        ok = new_leader >= 0
        alive = alive_all & ~down
        out["racks"][name] = {
            "leaders_dev_pct": _dev(np.bincount(new_leader[ok], minlength=n).astype(np.float64), alive),
            "load_dev_pct": _dev(np.bincount(new_leader[ok], weights=w[ok], minlength=n), alive),
            "offline": int((remaining == 0).sum()), "single_replica": int(((remaining == 1) & (rf > 1)).sum()),
            "under_min_isr": int(((remaining > 0) & (remaining < needs)).sum())}
    out["worst_broker"] = _worst(out["brokers"])
    out["worst_rack"] = _worst(out["racks"])
    return out


def _first_up(reps: Any, down: Any) -> tuple[Any, Any]:
    """Per partition of a ``_replica_matrix``, with the brokers in the mask ``down`` failed: its new leader (the first
    replica up, an index into the ids; -1 where none is) and how many of its replicas are up."""
    import numpy as np

    valid = reps >= 0
    left = valid & ~down[np.where(valid, reps, 0)]
    remaining = left.sum(axis=1)
    first = np.argmax(left, axis=1)
    return np.where(remaining > 0, reps[np.arange(len(reps)), first], -1), remaining


def failover_overload(replicas: Sequence[Sequence[int]], brokers: Sequence[int], band: float,
                      weight: Sequence[float] | None = None) -> dict[int, float]:
    """Per broker b failing alone: how far the busiest survivor ends above what a failure may leave it, in percent of
    the survivors' mean (0 within): at most ``band`` (a fraction) over the mean, widened to a whole unit and by the
    heaviest partition that survivor leads once b is gone: the one partition of slack the network gate gives every
    broker with all up (``load.accepted_range``), as the count gates allow one replica. A survivor that leads a
    partition heavier than the band stands above the band whichever broker fails (fuzz small seed 7), and a
    partition b hands over lands whole on one survivor: each is one partition. Only the high side: a survivor left
    light takes no failover traffic. ``weight``: each partition's load as leader (default 1: leader counts)."""
    import math

    import numpy as np

    ids, reps = _replica_matrix(replicas, brokers)
    index = {b: i for i, b in enumerate(ids)}
    n, parts = len(ids), reps.shape[0]
    w = np.ones(parts) if weight is None else np.asarray(weight, dtype=np.float64)
    alive = np.zeros(n, dtype=bool)
    alive[[index[b] for b in brokers]] = True
    loads, pair = _handed_over(reps, w, n)
    heaviest = np.zeros(n)  # the heaviest partition each broker leads, and each pair hands over (b's, to c)
    np.maximum.at(heaviest, reps[:, 0], w)
    heaviest_pair = np.zeros((n, n))
    if reps.shape[1] > 1:
        has2 = reps[:, 1] >= 0
        np.maximum.at(heaviest_pair, (reps[has2, 0], reps[has2, 1]), w[has2])
    out = {}
    for b in brokers:
        i = index[b]
        survivors = alive.copy()
        survivors[i] = False
        after = (loads + pair[i])[survivors]
        mean = float(after.mean()) if after.size else 0.0
        if mean <= 0:
            out[b] = 0.0
            continue
        high = math.ceil(mean * (1 + band) - 1e-9) + np.maximum(heaviest, heaviest_pair[i])[survivors]
        out[b] = round(max(0.0, float((after - high).max())) / mean * 100, 3)
    return out


def order_floor(replicas: Sequence[Sequence[int]], brokers: Sequence[int], failed: int,
                weight: Sequence[float] | None = None) -> float | None:
    """The least deviation any order of followers leaves when ``failed`` fails alone: the survivors' largest
    |value - mean| / mean in percent, as ``failover_figures`` measures it, over every choice of the replica that takes
    over each partition ``failed`` leads (any of its other replicas); the leaders and replica sets as given, so the
    survivors' own leaderships and their mean are fixed. ``weight`` None: leader counts, exactly (the smallest
    deviation some choice of whole leaders meets: a flow of whole units, ``leader_exact.band_relaxation``, whose
    maximum is whole); else leader load, a floor (the same flow with a leadership split among its replicas, which no
    whole choice beats), raised to what the 0/1 program of whole choices proves (``_whole_floor``), rounded down to
    0.01 %. None where a partition ``failed`` leads has a replica on a broker outside ``brokers``
    (``failover_figures`` hands it to no survivor)."""
    import math

    from ..load import Band
    from .leader_exact import band_relaxation

    handed = _handed_over_to(replicas, set(brokers) - {failed}, failed, weight)
    if handed is None:
        return None
    base, units, candidates = handed
    mean = (sum(base.values()) + sum(units)) / len(base) if base else 0.0
    if mean <= 0:
        return 0.0
    whole = weight is None
    if not whole:  # loads in millionths of the mean: the flow's whole units (its bands' rounding) stay negligible
        base = {b: x * 1e6 / mean for b, x in base.items()}
        units, mean = [x * 1e6 / mean for x in units], 1e6

    def reachable(delta: float) -> bool:
        bands = {}
        for b, x in base.items():
            low, high = mean - delta - x, mean + delta - x
            if high < -1e-9 * mean:  # a survivor already above: it loses no leadership
                return False
            bands[b] = (Band(math.ceil(low - 1e-9), math.floor(high + 1e-9), mean) if whole
                        else Band(math.floor(low), math.ceil(high), mean))  # a relaxation: its band widened
        return band_relaxation(units, candidates, bands, whole=whole) is True

    takes = dict.fromkeys(base, 0.0)  # what each survivor could take at most: every partition it may lead
    for x, options in zip(units, candidates, strict=True):
        for b in set(options):
            takes[b] += x
    low = max((abs(x - mean) if not takes[b] else max(0.0, x - mean) for b, x in base.items()), default=0.0)
    high = max(max(abs(x - mean), abs(x + takes[b] - mean)) for b, x in base.items())
    floor = _least(reachable, low, high, mean, whole)
    if whole or all(len(set(options)) < 2 for options in candidates):  # exact already: nothing is split
        return floor
    return max(floor, _whole_floor(base, units, candidates, mean))


def _whole_floor(base: Mapping[int, float], units: Sequence[float], candidates: Sequence[Sequence[int]],
                 mean: float) -> float:
    """``order_floor``'s load floor with every leadership whole: the least largest deviation (percent, rounded
    down to 0.01 %) the 0/1 program of the choices proves, ``y[p, c]`` = survivor c takes partition p (one each),
    ``|base_c + sum_p units_p y[p, c] - mean| <= d x mean`` for every survivor, ``d`` minimised. Its dual bound (the
    optimum, where ``EXACT_NODES`` nodes close the gap) is a floor however the search ends; 0 where the child gave
    none or its clock cut it (the split floor then stands, the same on any machine). The simulator's wix scenario:
    broker 20's failure, 12.2 % split, 15.47 % whole, which its order has."""
    import math

    import numpy as np

    cols = [(k, c) for k, options in enumerate(candidates) for c in sorted(set(options))]
    rows = _Rows(len(cols) + 1)  # the last column: d
    each: dict[int, list[tuple[int, float]]] = {}
    takes: dict[int, list[tuple[int, float]]] = {}
    for j, (k, c) in enumerate(cols):
        each.setdefault(k, []).append((j, 1.0))
        takes.setdefault(c, []).append((j, units[k] / mean))
    for entries in each.values():
        rows.add(entries, 1.0, 1.0)
    for c, x in base.items():
        _within_d(rows, takes.get(c, []), x / mean)
    cost = np.zeros(rows.width)
    cost[-1] = 1.0
    res = milp_worker().solve(cost, constraints=(rows.matrix(), rows.low, rows.high),
                              integrality=np.r_[np.ones(len(cols)), 0.0],
                              bounds=(0.0, np.r_[np.ones(len(cols)), np.inf]),
                              options={"node_limit": EXACT_NODES, "mip_rel_gap": 0.0}, time_limit=EXACT_SECONDS)
    dual = None if res is None or res["seconds"] >= EXACT_SECONDS else res.get("dual_bound")  # a cut: the machine's
    if dual is None or not math.isfinite(dual):
        return 0.0
    return math.floor(max(0.0, float(dual)) * 1e4 + 1e-6) / 100


def _handed_over_to(replicas: Sequence[Sequence[int]], alive: set[int], failed: int, weight: Sequence[float] | None
                    ) -> tuple[dict[int, float], list[float], list[list[int]]] | None:
    """``order_floor``'s input: the survivors' own leaderships (``alive``: broker -> count or load), and each partition
    ``failed`` leads with a replica to hand it to, its weight and those replicas; weights over the heaviest (the same
    deviations, and a scale that stays finite however light they are). None where such a replica is not alive."""
    w = [1.0] * len(replicas) if weight is None else [float(x) for x in weight]
    heaviest = max(w, default=0.0)
    if heaviest > 0:
        w = [x / heaviest for x in w]
    base = dict.fromkeys(alive, 0.0)
    units: list[float] = []
    candidates: list[list[int]] = []
    for i, reps in enumerate(replicas):
        if reps and reps[0] in alive:
            base[reps[0]] += w[i]
        elif reps and reps[0] == failed and len(reps) > 1:
            if not set(reps[1:]) <= alive:
                return None
            units.append(w[i])
            candidates.append(list(reps[1:]))
    return base, units, candidates


def _least(reachable: Callable[[float], bool], low: float, high: float, mean: float, whole: bool) -> float:
    """The least deviation ``reachable`` says some choice meets, between ``low`` and ``high`` (which it meets), in
    percent of ``mean``: with whole counts the first of the values a count can stand off the mean (exact), else by
    halving down to a 1e-5 of the mean, the largest known out of reach (a floor), rounded down to 0.01 %."""
    import math

    if whole:  # the deviations whole counts can have, from the least possible up
        steps = sorted({abs(k - mean) for k in range(math.floor(mean - high), math.ceil(mean + high) + 1)
                        if low - 1e-9 <= abs(k - mean) <= high + 1e-9})
        lo, hi = 0, len(steps) - 1
        while lo < hi:  # the first step reachable (the last one is: any choice stands within it)
            mid = (lo + hi) // 2
            if reachable(steps[mid]):
                hi = mid
            else:
                lo = mid + 1
        return round(steps[lo] / mean * 100, 2)
    if reachable(low):
        return math.floor(low / mean * 1e4 + 1e-6) / 100
    while high - low > 1e-5 * mean:  # ``low`` out of reach, ``high`` within it
        half = (low + high) / 2
        low, high = (low, half) if reachable(half) else (half, high)
    return math.floor(low / mean * 1e4 + 1e-6) / 100


def order_floors(replicas: Sequence[Sequence[int]], brokers: Sequence[int], figures: FailoverFigures,
                 weight: Sequence[float] | None = None) -> dict[str, Any]:
    """How far an order of followers alone could bring the worst single-broker failure, the leaders and replica sets
    as given, in counts and in load (``figures``: ``failover_figures`` of that order): the largest ``order_floor``
    over the brokers, and whose failure that is (``<figure>_by``). No order's worst failure stands below it; where it
    equals the worst figure, the order is as good as any. A broker's floor is at most its figure, so only the
    brokers whose figure stands above the largest floor found so far are asked, the worst first."""
    out: dict[str, Any] = {}
    scenarios = figures["brokers"]
    for fig, w in (("leaders_dev_pct", None), ("load_dev_pct", weight)):
        best: tuple[float, int] | None = None
        for b in sorted(scenarios, key=lambda b: (-float(scenarios[b][fig]), b)):  # type: ignore[literal-required]
            if best is not None and float(scenarios[b][fig]) <= best[0]:  # type: ignore[literal-required]
                break
            floor = order_floor(replicas, brokers, b, w)
            if floor is not None and (best is None or floor > best[0]):
                best = (floor, b)
        if best is not None:
            out[fig], out[f"{fig}_by"] = best
    return out


def _worst(scenarios: Mapping[Any, Scenario]) -> dict[str, Any]:
    """Each figure's largest value over the scenarios, and the scenario with it (``<figure>_by``)."""
    worst: dict[str, Any] = {}
    if not scenarios:
        return worst
    for fig in ("leaders_dev_pct", "load_dev_pct", "offline", "single_replica", "under_min_isr"):
        who = max(sorted(scenarios, key=str), key=lambda s: float(scenarios[s][fig]))
        worst[fig] = scenarios[who][fig]
        worst[f"{fig}_by"] = who
    return worst


ORDER_ROUNDS = 8  # order_followers' rounds on its own result at most (one more is almost never needed)


def order_followers(replicas: Sequence[tuple[int, ...]], brokers: Sequence[int],
                    weight: Sequence[float] | None = None,
                    rack: Mapping[int, str | None] | None = None) -> dict[int, tuple[int, ...]]:
    """New orders (partition index -> replicas) for the partitions whose second replica the local search changed
    (module doc): leaders and replica sets as given, the chosen second next, the other followers in their order.
    ``rack``: brokers' racks; where every broker has one, a second changes only between followers outside its
    leader's rack, and never takes a rack failure's survivor further from its mean than the worst one stands.

    The search runs again on its own result until a round changes nothing (``ORDER_ROUNDS`` at most): a round's
    dry run starts from where the previous round left every failure, so it can find more; each round takes no
    failure further off than it found it, and a plan made again on the result reorders nothing."""
    if len(set(brokers)) >= 3 and replicas:
        milp_worker().start()  # the exact step's child: its start overlaps the local search that comes first
    current = list(replicas)
    out: dict[int, tuple[int, ...]] = {}
    kept: dict[int, tuple[_Spread, tuple[float, float]]] = {}
    for _ in range(ORDER_ROUNDS):
        step = _order_once(current, brokers, weight, rack, kept) or _exact_worst(current, brokers, weight, rack)
        if not step:
            break
        for i, reps in step.items():
            kept.pop(reps[0], None)  # its leader's search starts from another order: built and dry-run again
            current[i] = reps
            if reps == tuple(replicas[i]):
                out.pop(i, None)
            else:
                out[i] = reps
    return out


def _order_once(replicas: Sequence[tuple[int, ...]], brokers: Sequence[int], weight: Sequence[float] | None,
                rack: Mapping[int, str | None] | None,
                kept: dict[int, tuple[_Spread, tuple[float, float]]]) -> dict[int, tuple[int, ...]]:
    """One round of ``order_followers``: the local search from the orders given. ``kept``: per leader, its search
    and where its dry run ended, from an earlier round whose orders of its partitions stand: the same inputs give
    the same search and the same dry run (the leaders, so every failure's base, never change), so it is restarted,
    not built and dry-run again (600k replicas: the round that confirms nothing changes took as long as the first);
    updated with this round's."""
    alive = set(brokers)
    w = [1.0] * len(replicas) if weight is None else [float(x) for x in weight]
    base: dict[int, tuple[float, float]] = dict.fromkeys(alive, (0.0, 0.0))
    led: dict[int, list[int]] = {}
    for i, reps in enumerate(replicas):
        if reps and reps[0] in alive:
            n, load = base[reps[0]]
            base[reps[0]] = (n + 1.0, load + w[i])
            led.setdefault(reps[0], []).append(i)
    if len(alive) < 2:
        return {}
    racks = dict(rack) if rack and all(rack.get(b) is not None for b in alive) else None
    rack_tally = _rack_tallies(replicas, alive, base, w, racks, led) if racks else {}
    # Where every failure ends once each is spread as evenly as it can be (a dry run, rack caps aside): no
    # broker's order changes past what the worst one leaves, so a plan reorders no more than the worst case needs.
    # A search only lowers its failure's worst figures, so a failure already within what the worst one leaves
    # (``_start_worst``: every leader's at once) neither raises that floor nor changes an order: its search is not
    # built (the worst failures first, so the floor rises soonest; 600k replicas: 116 of 300 leaders, a
    # 265k-replica cluster whose worst failure cannot be evened: 39 of 40).
    floor = [0.0, 0.0]
    for _, end in kept.values():
        floor = [max(floor[0], end[0]), max(floor[1], end[1])]
    totals, rank = _totals(base), _rank(w)
    start = _start_worst(replicas, alive, w, led, totals)
    for b in sorted(led, key=lambda b: (-start[b][0], -start[b][1], b)):
        if b in kept or (start[b][0] <= floor[0] and start[b][1] <= floor[1]):
            continue
        search = _Spread(b, led[b], replicas, alive, base, w, racks, totals, rank)
        if search.by_option:
            for phase in (0, 1):
                search.search(phase, 0.0)
        kept[b] = (search, search.tally.worst())
        end = kept[b][1]
        floor = [max(floor[0], end[0]), max(floor[1], end[1])]
    searches = {b: kept[b][0] for b in sorted(led) if b in kept}
    for b, search in searches.items():
        search.restart(rack_tally.get(racks[b]) if racks else None)
    second: dict[int, int] = {}
    for b in searches:
        if searches[b].by_option:
            for phase in (0, 1):
                searches[b].search(phase, floor[phase])
            second.update(searches[b].changed)
    out: dict[int, tuple[int, ...]] = {}
    for i, c in second.items():
        reps = replicas[i]
        if len(reps) > 1 and reps[1] != c:
            out[i] = (reps[0], c, *(x for x in reps[1:] if x != c))
    return out


EXACT_NODES = 200      # a failure's program stops at this many branch-and-bound nodes: work, the same on any machine
EXACT_SECONDS = 20.0   # its wall-clock safety net; a program it cut is not used (the cut depends on the machine)
EXACT_ROUNDS = 64      # failures' programs per call at most


def _exact_worst(replicas: Sequence[tuple[int, ...]], brokers: Sequence[int], weight: Sequence[float] | None,
                 rack: Mapping[int, str | None] | None) -> dict[int, tuple[int, ...]]:
    """The worst single failure's order made exact, where the local search left it above what an order reaches:
    counts, then load, the broker whose failure is worst in that figure has the second of each partition it leads
    chosen by a small 0/1 program (``_failure_program``) that brings that figure as low as its choices allow while
    no other figure of that failure, nor of its rack's failure, ends further off than it stands (not asked where the
    figure stands at its ``order_floor`` already). Kept only where it lowers the figure; then the next worst, until
    the worst cannot be lowered (``EXACT_ROUNDS`` programs at most).
    Only that broker's partitions change, and only their second replica (outside its rack, as the search's), so every
    other single failure stands as it was. New orders (partition index -> replicas), as ``_order_once``'s."""
    import numpy as np

    alive = sorted(set(brokers))
    if len(alive) < 3 or not replicas:
        return {}
    table = _Failures(replicas, alive, weight, rack)
    figures = {b: (f["leaders_dev_pct"], f["load_dev_pct"])
               for b, f in failover_figures(replicas, alive, rack or {}, weight)["brokers"].items()}
    tried: set[tuple[int, int]] = set()
    out: dict[int, tuple[int, ...]] = {}
    for _ in range(EXACT_ROUNDS):
        step: dict[int, tuple[int, ...]] = {}
        for phase in (0, 1):
            b = max(alive, key=lambda x: (figures[x][phase], -x))
            if (phase, b) in tried or not figures[b][phase]:
                continue
            tried.add((phase, b))
            floor = order_floor(table.replicas, alive, b, None if phase == 0 else weight)
            if floor is not None and floor >= figures[b][phase] - 0.005:  # as low as any order makes it
                continue
            step = _failure_program(table, b, phase)
            if step:
                break
        if not step:
            break
        for i, reps in step.items():
            table.reorder(i, reps)
            out[i] = reps
        figures[b] = table.figures({b})
    return {i: reps for i, reps in out.items() if not np.array_equal(reps, replicas[i])}


class _Failures:
    """The orders as a ``_replica_matrix``, read for what a failure hands to whom: per failure (a set of brokers
    down), each partition's new leader (its first replica up), and the survivors' leader counts and load."""

    def __init__(self, replicas: Sequence[tuple[int, ...]], alive: Sequence[int], weight: Sequence[float] | None,
                 rack: Mapping[int, str | None] | None) -> None:
        import numpy as np

        self.replicas = list(replicas)
        self.ids, self.reps = _replica_matrix(replicas, alive)
        self.index = {b: i for i, b in enumerate(self.ids)}
        self.w = np.ones(len(replicas)) if weight is None else np.asarray(weight, dtype=np.float64)
        self.up = np.zeros(len(self.ids), dtype=bool)
        self.up[[self.index[b] for b in alive]] = True
        self.alive = list(alive)
        self.rack = dict(rack) if rack and all(rack.get(b) is not None for b in alive) else None

    def takers(self, down: set[int]) -> Any:
        """Each partition's leader once ``down`` fails (an index into ``ids``; -1 where none of its replicas is up)."""

        dead = ~self.up
        dead[[self.index[b] for b in down]] = True
        return _first_up(self.reps, dead)[0]

    def shares(self, down: set[int], skip: Any = None) -> tuple[Any, Any, Any]:
        """(survivors' mask, leader counts, leader load) once ``down`` fails; ``skip``: partitions left out."""
        import numpy as np

        lead = self.takers(down)
        keep = lead >= 0
        if skip is not None:
            keep[skip] = False
        survivors = self.up.copy()
        survivors[[self.index[b] for b in down]] = False
        n = len(self.ids)
        return (survivors, np.bincount(lead[keep], minlength=n).astype(np.float64),
                np.bincount(lead[keep], weights=self.w[keep], minlength=n))

    def figures(self, down: set[int]) -> tuple[float, float]:
        """The survivors' largest deviation from their mean in counts and in load (``failover_figures``'s)."""
        survivors, counts, load = self.shares(down)
        return _dev(counts, survivors), _dev(load, survivors)

    def reorder(self, i: int, reps: tuple[int, ...]) -> None:
        self.replicas[i] = reps
        self.reps[i, :len(reps)] = [self.index[b] for b in reps]


def _failure_program(table: _Failures, failed: int, phase: int) -> dict[int, tuple[int, ...]]:
    """New orders of the partitions ``failed`` leads (a second among their followers outside its rack) that bring its
    failure's largest deviation in counts (``phase`` 0) or load (1) lower than it stands, with the other figure of
    that failure, and both of its rack's failure (every broker of the rack down; where every broker has a rack), no
    survivor further off than the worst stands now; empty where none does or the program stops without one.

    The program: ``y[p, c]`` = follower c takes over partition p (one each); per survivor its leaders and leader load
    once ``failed`` is down (its own, plus what the partitions fixed hand it, plus the ``y`` it takes) and, for the
    rack, once the rack is down; ``d`` = the phase's largest deviation, minimised. scipy's HiGHS (``milp``) with a
    node limit (``EXACT_NODES``), in the process's ``highs.milp_worker()`` child (killed past its time limit, as
    every program of the plan stage is; one child for many programs, each small: at most ~1,300 columns on the
    600k-replica bench case)."""
    import numpy as np

    racks = table.rack
    down_rack = {b for b in table.alive if racks[b] == racks[failed]} if racks else {failed}
    choice: dict[int, list[int]] = {}  # partition -> its followers that may take over
    for i in np.flatnonzero(table.reps[:, 0] == table.index[failed]).tolist():
        reps = table.replicas[i]
        options = [c for c in reps[1:] if c not in down_rack and c in table.index and table.up[table.index[c]]]
        if len(options) > 1:
            choice[i] = options
    if not choice:
        return {}
    cols = [(i, c) for i, options in sorted(choice.items()) for c in options]
    rows = _Rows(len(cols) + 1)  # the last column: d
    at = 0
    for options in choice.values():
        rows.add([(at + k, 1.0) for k in range(len(options))], 1.0, 1.0)
        at += len(options)
    skip = np.asarray(sorted(choice), dtype=np.int64)
    for down in [{failed}] + ([down_rack] if down_rack != {failed} else []):
        _failure_rows(rows, table, down, skip, cols, phase if down == {failed} else None)
    cost = np.zeros(rows.width)
    cost[-1] = 1.0
    # constraints and bounds as the tuples ``milp`` converts itself: this process then never imports scipy.optimize
    # (0.4 s, which the planning time of a small cluster would pay; the child imported it as it started)
    res = milp_worker().solve(cost, constraints=(rows.matrix(), rows.low, rows.high),
                              integrality=np.r_[np.ones(len(cols)), 0.0],
                              bounds=(0.0, np.r_[np.ones(len(cols)), np.inf]),
                              options={"node_limit": EXACT_NODES}, time_limit=EXACT_SECONDS)
    if res is None or res["x"] is None or res["seconds"] >= EXACT_SECONDS:  # killed, none, or cut by the clock
        return {}
    out: dict[int, tuple[int, ...]] = {}
    for j, (i, c) in enumerate(cols):
        if res["x"][j] > 0.5 and table.replicas[i][1] != c:
            out[i] = (failed, c, *(x for x in table.replicas[i][1:] if x != c))
    if not out:
        return {}
    was = table.figures({failed})[phase]
    undo = {i: table.replicas[i] for i in out}
    for i, reps in out.items():
        table.reorder(i, reps)
    now = table.figures({failed})[phase]
    for i, reps in undo.items():  # the caller applies what is kept
        table.reorder(i, reps)
    return out if now < was - 0.005 else {}


class _Rows:
    """A sparse program's rows as they are added: ``low <= row . x <= high``."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.row: list[int] = []
        self.col: list[int] = []
        self.val: list[float] = []
        self.low: list[float] = []
        self.high: list[float] = []

    def add(self, entries: Sequence[tuple[int, float]], low: float, high: float) -> None:
        for j, v in entries:
            self.row.append(len(self.low))
            self.col.append(j)
            self.val.append(v)
        self.low.append(low)
        self.high.append(high)

    def matrix(self) -> Any:
        from scipy.sparse import coo_array

        return coo_array((self.val, (self.row, self.col)), shape=(len(self.low), self.width)).tocsr()


def _failure_rows(rows: _Rows, table: _Failures, down: set[int], skip: Any, cols: Sequence[tuple[int, int]],
                  minimised: int | None) -> None:
    """``_failure_program``'s rows of the failure of ``down``: per survivor, in counts and in load (over their
    means), |its own + what the fixed partitions hand it + the ``y`` it takes - 1| within the worst deviation the
    failure has now, or, for the figure ``minimised``, within ``d``."""

    survivors, now_n, now_w = table.shares(down)
    _, base_n, base_w = table.shares(down, skip)
    for dim, now, base in ((0, now_n, base_n), (1, now_w, base_w)):
        live = now[survivors]
        mean = float(live.mean()) if live.size else 0.0
        if mean <= 0:
            continue
        worst = float(abs(live / mean - 1.0).max())
        takes: dict[int, list[tuple[int, float]]] = {}
        for j, (i, c) in enumerate(cols):
            takes.setdefault(table.index[c], []).append((j, (1.0 if dim == 0 else float(table.w[i])) / mean))
        for k in survivors.nonzero()[0].tolist():
            b0 = float(base[k]) / mean
            if dim == minimised:
                _within_d(rows, takes.get(k, []), b0)
            else:  # no survivor further off than the worst stands now
                rows.add(takes.get(k, []), 1.0 - worst - 1e-9 - b0, 1.0 + worst + 1e-9 - b0)


def _within_d(rows: _Rows, takes: Sequence[tuple[int, float]], own: float) -> None:
    """A survivor's two rows of a failure program whose last column is ``d``: |own + what it takes - 1| <= d (its
    share over the survivors' mean)."""
    import math

    rows.add([*takes, (rows.width - 1, -1.0)], -math.inf, 1.0 - own)
    rows.add([*takes, (rows.width - 1, 1.0)], 1.0 - own, math.inf)


def _start_worst(replicas: Sequence[tuple[int, ...]], alive: set[int], w: Sequence[float],
                 led: Mapping[int, list[int]], totals: tuple[float, float]) -> dict[int, tuple[float, float]]:
    """Per leader b, its failure's survivors' largest deviation from their mean in counts and in load as the orders
    stand: what ``_Spread(b, ...).tally.worst()`` reads before any move, for every leader at once from
    ``_handed_over``'s matrices, to the bit (each sum taken in the partitions' order as ``_Tally`` takes them,
    ``totals`` its own, the same operations on the same floats, rounded as it rounds)."""
    import numpy as np

    ids, reps = _replica_matrix(replicas, sorted(alive))
    n, index = len(ids), {b: i for i, b in enumerate(ids)}
    pos = np.asarray([index[b] for b in sorted(alive)], dtype=np.int64)
    up = np.zeros(n, dtype=bool)
    up[pos] = True
    led_up = (reps[:, 0] >= 0) & up[reps[:, 0]]  # a leader that is up: the only partitions a failure hands over
    reps, weight = reps[led_up], np.asarray(w, dtype=np.float64)[led_up]
    counts, pair_n = _handed_over(reps, np.ones(len(weight)), n)
    loads, pair_w = _handed_over(reps, weight, n)
    single = reps[:, 1] < 0 if reps.shape[1] > 1 else np.ones(len(weight), dtype=bool)
    lost_n = np.bincount(reps[single, 0], minlength=n)
    lost_w = np.bincount(reps[single, 0], weights=weight[single], minlength=n)
    (total_n, total_w), survivors = totals, max(1, len(pos) - 1)
    out: dict[int, tuple[float, float]] = {}
    for b in led:
        i = index[b]
        keep = up.copy()
        keep[i] = False
        mean_n, mean_w = (total_n - lost_n[i]) / survivors, (total_w - lost_w[i]) / survivors
        r = float(np.abs((counts + pair_n[i])[keep] / mean_n - 1.0).max()) if mean_n > 0 and keep.any() else 0.0
        q = float(np.abs((loads + pair_w[i])[keep] / mean_w - 1.0).max()) if mean_w > 0 and keep.any() else 0.0
        out[b] = (round(r, 9), round(q, 9))
    return out


def _rank(w: Sequence[float]) -> list[int]:
    """Each partition's place when sorted by weight, heaviest first, then by index."""
    import numpy as np

    order = np.lexsort((np.arange(len(w)), -np.asarray(w, dtype=float)))
    rank = np.empty(len(w), dtype=np.int64)
    rank[order] = np.arange(len(w))
    return list(rank.tolist())


def _totals(base: Mapping[int, tuple[float, float]]) -> tuple[float, float]:
    """Leaders and leader load over every broker, with everything up."""
    return sum(n for n, _ in base.values()), sum(x for _, x in base.values())


class _Tally:
    """One failure's survivors: their leaders and leader load with everything up (``base``) plus what they take over
    (``extra``), against the means once the failure happened."""

    def __init__(self, base: Mapping[int, tuple[float, float]], survivors: set[int], lost_n: float,
                 lost_w: float, totals: tuple[float, float] | None = None) -> None:
        """``totals``: the sums of ``base`` (``_totals``), where the caller has them."""
        self.base = dict(base)
        for c in self.base.keys() - survivors:
            del self.base[c]
        for c in survivors - self.base.keys():
            self.base[c] = (0.0, 0.0)
        total_n, total_w = totals or _totals(base)
        self.mean_n = (total_n - lost_n) / max(1, len(survivors))
        self.mean_w = (total_w - lost_w) / max(1, len(survivors))
        self.extra: dict[int, list[float]] = {}
        self.cap = (0.0, 0.0)

    def add(self, c: int, dn: float, dw: float) -> None:
        e = self.extra.setdefault(c, [0.0, 0.0])
        e[0] += dn
        e[1] += dw

    def ratios(self, c: int, dn: float = 0.0, dw: float = 0.0) -> tuple[float, float]:
        n, load = self.base.get(c, (0.0, 0.0))
        e = self.extra.get(c, (0.0, 0.0))
        r = (n + e[0] + dn) / self.mean_n - 1.0 if self.mean_n > 0 else 0.0
        q = (load + e[1] + dw) / self.mean_w - 1.0 if self.mean_w > 0 else 0.0
        return r, q

    def dev(self, c: int, dn: float = 0.0, dw: float = 0.0) -> tuple[float, float]:
        r, q = self.ratios(c, dn, dw)
        return round(abs(r), 9), round(abs(q), 9)

    def worst(self) -> tuple[float, float]:
        """The survivors' largest deviation in counts and in load (``dev``'s, written out: it reads every one)."""
        mean_n, mean_w, extra = self.mean_n, self.mean_w, self.extra
        worst_r = worst_q = 0.0
        for c, (n, load) in self.base.items():
            e = extra.get(c)
            if e is not None:
                n, load = n + e[0], load + e[1]
            if mean_n > 0:
                worst_r = max(worst_r, abs(n / mean_n - 1.0))
            if mean_w > 0:
                worst_q = max(worst_q, abs(load / mean_w - 1.0))
        return round(worst_r, 9), round(worst_q, 9)

    def within(self, c: int, dn: float, dw: float, cap: tuple[float, float]) -> bool:
        r, q = self.dev(c, dn, dw)
        return r <= cap[0] and q <= cap[1]


def _rack_tallies(replicas: Sequence[tuple[int, ...]], alive: set[int], base: Mapping[int, tuple[float, float]],
                  w: Sequence[float], racks: Mapping[int, str | None], led: Mapping[int, list[int]]
                  ) -> dict[str | None, _Tally]:
    """Each rack's failure as the order stands: where the partitions its brokers lead land (their first replica
    outside it), capped at its worst survivor."""
    out: dict[str | None, _Tally] = {}
    for name in sorted({racks[b] for b in alive}, key=str):
        down = {b for b in alive if racks[b] == name}
        stay = alive - down
        lost: list[int] = []
        extra: dict[int, list[float]] = {}  # as ``_Tally.add`` sums what each survivor takes over, in this order
        for b in sorted(down):
            for i in led.get(b, ()):
                for x in replicas[i]:  # the first replica that stays takes it
                    if x in stay:
                        break
                else:
                    lost.append(i)
                    continue
                if (e := extra.get(x)) is None:
                    extra[x] = [1.0, w[i]]
                else:
                    e[0] += 1.0
                    e[1] += w[i]
        tally = _Tally(base, stay, float(len(lost)), sum(w[i] for i in lost))
        tally.extra = extra
        tally.cap = tally.worst()
        out[name] = tally
    return out


def _seconds(mine: list[int], replicas: Sequence[tuple[int, ...]], w: Sequence[float], may: set[int],
             ) -> tuple[dict[int, int], dict[int, list[float]], dict[int, list[int]], list[int]]:
    """For a leader's partitions (``mine``): each one's second, the leaders and load each second takes over (as
    ``_Tally.add`` sums them, in the partitions' order), the followers each partition's second may be (those in
    ``may``; only where there are two, the second among them) and the partitions no survivor takes over."""
    sec: dict[int, int] = {}
    extra: dict[int, list[float]] = {}
    options: dict[int, list[int]] = {}
    lost: list[int] = []
    for i in mine:
        reps = replicas[i]
        if len(reps) < 2:
            lost.append(i)  # offline while its leader is down
            continue
        sec[i] = c = reps[1]
        e = extra.get(c)
        if e is None:
            extra[c] = [1.0, w[i]]
        else:
            e[0] += 1.0
            e[1] += w[i]
        if len(reps) > 2 and c in may:  # a choice needs another follower that may take it
            others = [x for x in reps[2:] if x in may]
            if others:
                options[i] = [c, *others]
    return sec, extra, options, lost


class _Spread:
    """One leader b's partitions and where each fails over (its second replica). A survivor's deviation once b is
    gone is (|counts / mean - 1|, |load / mean - 1|). Phase 0 brings the survivor furthest off in counts nearer,
    phase 1 the one furthest off in load, each keeping the other figure within its worst; a partition b leads
    with a choice sheds its second to another follower (the survivor stands above its mean) or takes it from the
    current second (below), where both end nearer than the survivor stands and, with racks, the rack failure of b's
    rack keeps every survivor within its worst; first such move in order of load; until the furthest survivor is
    within ``floor`` or cannot be helped, or the work limit."""

    def __init__(self, b: int, mine: list[int], replicas: Sequence[tuple[int, ...]], alive: set[int],
                 base: Mapping[int, tuple[float, float]], w: Sequence[float],
                 racks: Mapping[int, str | None] | None, totals: tuple[float, float] | None = None,
                 rank: Sequence[int] | None = None) -> None:
        """``totals``: ``_totals(base)``; ``rank``: each partition's place in the order of (-w, index), where the
        caller has them (once for every leader)."""
        self.w = w
        self.rack_tally: _Tally | None = None  # the failure of b's rack, once ``restart`` names it
        home = racks[b] if racks else None
        may = {x for x in alive if x != b and (home is None or racks is None or racks[x] != home)}
        self.sec, extra, self.options, lost = _seconds(mine, replicas, w, may)
        self.tally = _Tally(base, alive - {b}, float(len(lost)), sum(w[i] for i in lost), totals)
        self.tally.extra = extra
        # survivor -> the partitions its second may move to or from, heaviest first (each move lowers the most)
        self.by_option: dict[int, list[int]] = {}
        for i in sorted(self.options, key=(lambda i: (-w[i], i)) if rank is None else rank.__getitem__):
            for x in self.options[i]:
                self.by_option.setdefault(x, []).append(i)
        self.changed: dict[int, int] = {}
        self._start = (dict(self.sec), {c: list(e) for c, e in self.tally.extra.items()})
        # Each phase's survivors as ``search`` takes them, furthest off first, as they stand at the start: every
        # search starts there (the dry run, the search after ``restart``, in every round that keeps this one), and
        # only the survivors a move touched since (``dirty``) stand elsewhere.
        devs = [(self.tally.dev(x), x) for x in sorted(self.by_option)]  # one reading serves both phases' orders
        self._orders = (sorted([((-r, -q), x) for (r, q), x in devs]), sorted([((-q, -r), x) for (r, q), x in devs]))
        self._start_worst = self.tally.worst()
        self.dirty: set[int] = set()

    def restart(self, rack_tally: _Tally | None) -> None:
        """Back to the order it started from (after a dry run), the failure of b's rack to keep within its worst."""
        sec, extra = self._start
        self.sec, self.tally.extra, self.changed = dict(sec), {c: list(e) for c, e in extra.items()}, {}
        self.rack_tally, self.dirty = rack_tally, set()

    def _key(self, c: int, phase: int) -> tuple[float, float]:
        r, q = self.tally.dev(c)
        return (r, q) if phase == 0 else (q, r)

    def _entry(self, c: int, phase: int) -> tuple[tuple[float, float], int]:
        """Survivor c's place in the search's order: its key negated (furthest off first), then its id."""
        a, b = self._key(c, phase)
        return (-a, -b), c

    def _move_from(self, x: int, phase: int, cap: tuple[float, float]) -> tuple[int, int, int] | None:
        """The first move (partition, from, to) that brings survivor x and the one it trades with nearer than x
        stands, every cap kept."""
        t, w, top = self.tally, self.w, self._key(x, phase)
        r, q = t.ratios(x)
        above = (r if phase == 0 else q) > 0
        for i in self.by_option.get(x, ()):
            c = self.sec[i]
            if above != (c == x):
                continue
            moves = [(x, d) for d in self.options[i] if d != x] if above else [(c, x)]
            for src, dst in moves:
                a, b = t.dev(src, -1.0, -w[i]), t.dev(dst, 1.0, w[i])
                after = max(a if phase == 0 else a[::-1], b if phase == 0 else b[::-1])
                if after >= top or max(a[1 - phase], b[1 - phase]) > cap[1 - phase]:
                    continue
                rt = self.rack_tally
                if rt is not None and not (rt.within(src, -1.0, -w[i], rt.cap) and rt.within(dst, 1.0, w[i], rt.cap)):
                    continue
                return i, src, dst
        return None

    def search(self, phase: int, floor: float) -> None:
        """One phase (0: counts, 1: load) until the furthest survivor is within ``floor``. The furthest comes from
        the start's order (``_orders``) where no move touched it, else from a heap of those a move did: the same
        survivor a heap of every one would give, without building that heap in every search (600k replicas: half
        the time of the order)."""
        import heapq

        static, pos, dirty = self._orders[phase], 0, self.dirty
        # the other figure's worst survivor stays the worst it may become (no move since the start: as it started)
        cap = self.tally.worst() if dirty else self._start_worst
        heap = [self._entry(x, phase) for x in dirty]
        heapq.heapify(heap)
        budget = MOVES_PER_PARTITION * len(self.options)
        while budget > 0:
            while pos < len(static) and static[pos][1] in dirty:
                pos += 1
            if heap and (pos == len(static) or heap[0] < static[pos]):
                key, x = heapq.heappop(heap)
                entry = self._entry(x, phase)
                if key != entry[0]:  # stale: its deviation changed since
                    heapq.heappush(heap, entry)
                    continue
            elif pos < len(static):
                key, x = static[pos]
                pos += 1
            else:
                break
            if -key[0] <= floor:
                break  # within what the worst failure leaves anyway
            found = self._move_from(x, phase, cap)
            budget -= 1
            if found is None:
                break  # the survivor furthest off cannot be helped: the worst case stands
            i, src, dst = found
            self.tally.add(src, -1.0, -self.w[i])
            self.tally.add(dst, 1.0, self.w[i])
            if self.rack_tally is not None:
                self.rack_tally.add(src, -1.0, -self.w[i])
                self.rack_tally.add(dst, 1.0, self.w[i])
            self.sec[i] = self.changed[i] = dst
            for c in (src, dst):
                dirty.add(c)
                heapq.heappush(heap, self._entry(c, phase))
