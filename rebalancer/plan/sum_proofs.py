"""Proofs by sums that no placement meets every disk band as the disk gate judges it, at any size and without a
solver (the exact program, ``lp_load``, runs only on a few hundred replicas).

- **A size**: a replica larger than the ceiling of the broker holding it and of every broker that may take it.
- **The mode** (``add-brokers``, ``remove-brokers``): old brokers may only give and new ones only take (removed brokers
  give everything); no broker does both, so no load passes through a third broker. Every byte above the band of a
  broker that may only give must land on one that may only take, and none of those may end above its band (or
  further above it than before):

      sum over givers of max(0, disk - ceiling)  >  sum over takers of max(0, ceiling - disk)

- **The racks**: a move keeps the racks a partition spans (``racks.keeps_racks``), so a partition with a replica in
  every rack keeps each replica in its rack (three racks at RF 3: every byte stays in its rack). A rack whose
  pinned bytes exceed the sum of its brokers' ceilings cannot come down into its bands; a rack that cannot reach the
  sum of its floors, even with one replica of every partition not in it, cannot come up. Checked only where the
  gate holds every broker of the rack to that side (it may give, or it may take).

Each names the binding brokers. ``one_way`` names the brokers no placement brings inside a band at all: one that may
only give and is below its band, or may only take and is above it (the gates accept them no further from their
targets than before).

Only disk among the loads: the network gate grants each broker one partition of slack, which a sum of bands does not
see. The replica-count gate measures from the median after the plan, which no band before it fixes, so its sums
(``count_proof``) ask whether any median lets every broker in: by the mode (a broker that may only give keeps at most
its count, and the replicas must fit under the gate's ceiling), or by the racks (a rack's brokers share at least
what it pins and at most what it could reach, so one holds at least the first's share and one at most the second's).

Network out is the leaders' (leadership moves without copying), so its band is out of reach only through what the
leader gate asks (``network_out_proof``): every broker ends with at least ``fewest_leaders`` leaders (the least any
broker can lead while the gate passes at whatever median the counts end at). The broker leading partition p then
carries p's network out and at least the ``fewest - 1`` smallest of the others':

    out_p + sum of the fewest - 1 smallest outs of the other partitions  >  every broker's network-out ceiling

proves that whichever broker leads p ends above its band (the main job's 48 partitions: one carries 115 % of a
broker's target, and every broker leads at least 5, so its leader ends at least 22 % above the target).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..balance import count_allowance
from ..load import Band
from .holder_proof import explain_holders
from .load_problem import LoadInput

__all__ = ["sum_proof", "count_proof", "one_way", "explain", "explain_counts", "why_out_of_reach",
           "why_counts_out_of_reach", "fewest_leaders", "network_out_proof",
           "explain_network_out"]

DIMENSION = "disk"


def _loads(inp: LoadInput, dimension: str, brokers: Iterable[int]) -> dict[int, float]:
    load = dict.fromkeys(brokers, 0.0)
    for reps, u in zip(inp.replicas, inp.units[dimension], strict=True):
        for b in reps:
            if b in load:
                load[b] += u
    for b, extra in ((inp.fixed or {}).get(dimension) or {}).items():
        if b in load:
            load[b] += extra
    return load


def one_way(inp: LoadInput, dimensions: tuple[str, ...] = ("disk", "nw_in")) -> dict[str, list[int]]:
    """Per load dimension, the brokers the mode keeps outside their band whatever the placement: below it and may
    only give, or above it and may only take."""
    bands_of = inp.gate_bands or inp.bands
    only_give = (inp.givers - inp.receivers) - inp.removed
    only_take = (inp.receivers - inp.givers) - inp.removed
    out: dict[str, list[int]] = {}
    for d in dimensions:
        bands = bands_of.get(d)
        if not bands or d not in inp.units:
            continue
        load = _loads(inp, d, (only_give | only_take) & set(bands))
        stuck = sorted(b for b, x in load.items()
                       if (b in only_give and x < bands[b].floor) or (b in only_take and x > bands[b].ceil))
        if stuck:
            out[d] = stuck
    return out


def sum_proof(inp: LoadInput) -> dict[str, Any] | None:
    """The first of a size's, the mode's and the racks' sums that proves the disk bands out of reach (``{"by": "size" |
    "mode" | "racks", ...}``, with the binding brokers, or every rack out of reach), else None."""
    bands = (inp.gate_bands or inp.bands).get(DIMENSION)
    if not bands or DIMENSION not in inp.units:
        return None
    return _by_size(inp, bands) or _by_mode(inp, bands) or _by_racks(inp, bands)


def count_proof(inp: LoadInput, dimension: str = "replicas") -> dict[str, Any] | None:
    """The first of the mode's and the racks' sums that proves the replica-count gate out of reach (``{"by": "mode" |
    "racks", ...}``), else None. The gate measures from the median after the plan, so each asks whether any median
    lets every broker in: no band before the plan decides it."""
    band = (inp.count_gate or {}).get(dimension)
    eligible = set(inp.bands.get(dimension) or ())
    if band is None or dimension not in inp.units or not eligible:
        return None
    return _counts_by_mode(inp, dimension, band, eligible) or _counts_by_racks(inp, dimension, band, eligible)


def _some_median(band: float, top: float, fits: Callable[[float, float], bool]) -> bool:
    """Whether a median M (a half-integer from 0 to ``top``: counts are whole) passes ``fits(M, allowance)``."""
    for twice in range(0, int(2 * top) + 2):
        m = twice / 2
        if fits(m, count_allowance(m, band)):
            return True
    return False


def _counts_by_racks(inp: LoadInput, dimension: str, band: float, eligible: set[int]) -> dict[str, Any] | None:
    """Racks kept, a rack's replicas lie between what it holds whatever the placement and what it could hold at most
    (``_rack_sums``), so one of its brokers holds at least ceil(pinned / brokers) and one at most floor(reachable /
    brokers). A median must come within the gate's allowance of the highest such floor and of the lowest such
    ceiling (fuzz small seed 91: RF 3 on racks of 3, 2 and 2 brokers, each rack a third of the replicas: 231 per
    broker on one rack and 346 or 347 on the others; no median is within 15 % of both)."""
    sums = _rack_sums(inp, dimension)
    if sums is None:
        return None
    members, pinned, reachable = sums
    at_least, at_most = {}, {}
    for r, bs in members.items():
        n = sum(1 for b in bs if b in eligible)
        if n and len(members) > 1:
            at_least[r] = math.ceil(pinned[r] / n - 1e-9)
            at_most[r] = math.floor(reachable[r] / n + 1e-9)
    if not at_least:
        return None
    high = max(at_least, key=lambda r: (at_least[r], r))
    low = min(at_most, key=lambda r: (at_most[r], r))
    if not _some_median(band, max(at_least.values()) + 1,
                        lambda m, a: at_least[high] <= m + a and at_most[low] >= m - a):
        return {"by": "racks", "dimension": dimension, "high_rack": high, "at_least": at_least[high],
                "low_rack": low, "at_most": at_most[low],
                "brokers": sorted(b for r in (high, low) for b in members[r] if b in eligible)}
    sizes = {r: (sum(1 for b in bs if b in eligible), pinned[r], reachable[r]) for r, bs in members.items()}
    total = sum(u * len(reps) for reps, u in zip(inp.replicas, inp.units[dimension], strict=True))
    # every count lies within the allowance of the median, so the median is at most mean / (1 - band) or mean + 1
    mean = total / max(1, len(eligible))
    if _some_median(band, max(mean / max(1e-9, 1 - band), mean + 1) + 2,
                    lambda m, a: _racks_around(sizes, total, m, a)):
        return None
    return {"by": "racks", "dimension": dimension, "median": True,
            "racks": {r: {"brokers": n, "pinned": round(p), "reachable": round(q)} for r, (n, p, q) in sizes.items()},
            "brokers": sorted(b for b in eligible)}


def _racks_around(sizes: Mapping[str, tuple[int, float, float]], replicas: float, m: float, allowed: float) -> bool:
    """Whether the racks (per rack: its brokers, what it pins, what it could reach) let every count lie in the gate
    about a median m with the median where it is: whole counts in [lo, hi] = [ceil(m - allowed), floor(m + allowed)],
    each rack holding at least what it pins and at most what it could reach, and at least half of the brokers at or
    below m and half at or above it (an odd number of counts has a whole median). A rack of n brokers pinning P has
    at most the largest k with k x floor(m) + (n - k) x hi >= P of them at or below m, and one that could reach R
    at most the largest k with k x ceil(m) + (n - k) x lo <= R at or above it (fuzz small seed 123: RF 3 on racks of
    5, 4 and 4 brokers, 134 replicas in each rack; the first rack's brokers hold 26-27, so the median is at most 30,
    and at 30 a rack of 4 holding 134 with one broker at or below it puts another above 34)."""
    total = sum(n for n, _, _ in sizes.values())
    lo, hi = max(0, math.ceil(m - allowed - 1e-9)), math.floor(m + allowed + 1e-9)
    if (total % 2 and m != int(m)) or lo > hi or not total * lo <= replicas + 1e-9 <= total * hi + 2e-9:
        return False
    below = above = 0
    for n, pins, reach in sizes.values():
        if n == 0:
            continue
        if n * lo > reach + 1e-9 or n * hi < pins - 1e-9:
            return False
        # the k brokers at or below m hold at most floor(m) each, those above at most hi (and the reverse for above)
        down, up = hi - math.floor(m), math.ceil(m) - lo
        below += n if down <= 0 else min(n, math.floor((n * hi - pins + 1e-9) / down))
        above += n if up <= 0 else min(n, math.floor((reach - n * lo + 1e-9) / up))
    half = math.ceil(total / 2)
    return below >= half and above >= half


def _counts_by_mode(inp: LoadInput, dimension: str, band: float, eligible: set[int]) -> dict[str, Any] | None:
    """The replica-count gate out of reach by the mode (``add-brokers``, ``remove-brokers``): old brokers may only give
    and new ones only take, so a broker that may only give keeps at most its count and one that may only take at
    least its own. The gate holds every count within ``count_allowance(M)`` of the median M after the plan, so at
    some M every giver must still reach down to M - allowance, every taker up to M + allowance, and the replicas
    must fit: at most sum over givers of min(count, M + allowance) + takers x (M + allowance), at least givers x
    max(0, M - allowance) + sum over takers of max(count, M - allowance). No half-integer M from 0 to the largest
    count passing all four proves it (fuzz small seed 80: one new broker beside 31 old ones holding 96 to 1,069
    replicas, a median near 420). Returns the sums (``{"by": "mode", ...}``) or None."""
    givers = (inp.givers - inp.receivers) - inp.removed
    takers = (inp.receivers - inp.givers) - inp.removed
    if eligible - givers - takers:
        return None
    held = _loads(inp, dimension, eligible)
    total = sum(u * len(reps) for reps, u in zip(inp.replicas, inp.units[dimension], strict=True))
    low_giver = min((held[b] for b in givers), default=math.inf)
    high_taker = max((held[b] for b in takers), default=0.0)

    def fits(m: float, allowed: float) -> bool:
        if low_giver < m - allowed or high_taker > m + allowed:
            return False
        most = sum(min(held[b], m + allowed) for b in givers) + len(takers) * (m + allowed)
        least = len(givers) * max(0.0, m - allowed) + sum(max(held[b], m - allowed) for b in takers)
        return least <= total <= most

    if _some_median(band, max(held.values(), default=0.0) + total / len(eligible), fits):
        return None
    return {"by": "mode", "dimension": dimension, "replicas": round(total), "lowest_giver": round(low_giver),
            "highest_taker": round(high_taker), "givers": sorted(givers), "takers": sorted(takers)}


def _by_size(inp: LoadInput, bands: Any) -> dict[str, Any] | None:
    """A replica larger than the ceiling of its broker (which the gate holds to it: the broker may give) and of
    every broker that may take it."""
    takers = [r for r in inp.receivers - inp.removed if r in bands]
    roomiest = max((float(bands[r].ceil) for r in takers), default=-1.0)
    for i, (reps, u) in enumerate(zip(inp.replicas, inp.units[DIMENSION], strict=True)):
        if u <= roomiest:
            continue
        for b in reps:
            if b in inp.removed or (b in bands and b in inp.givers and u > bands[b].ceil):
                return {"by": "size", "dimension": DIMENSION, "topic": inp.topics[i], "bytes": round(u),
                        "ceiling": round(max(roomiest, float(bands[b].ceil) if b in bands else 0.0)), "broker": b}
    return None


def _by_mode(inp: LoadInput, bands: Any) -> dict[str, Any] | None:
    givers = inp.givers | inp.removed
    takers = inp.receivers - inp.removed
    if not takers or givers & takers:
        return None
    load = _loads(inp, DIMENSION, givers | takers)
    excess = {}
    for b in givers:
        ceiling = 0.0 if b in inp.removed else (float(bands[b].ceil) if b in bands else None)
        if ceiling is not None and load[b] > ceiling:
            excess[b] = load[b] - ceiling
    room = sum(max(0.0, float(bands[b].ceil) - load[b]) for b in takers if b in bands)
    must_leave = sum(excess.values())
    if must_leave <= room + len(load):  # one byte per broker of tolerance: the bands are whole bytes
        return None
    return {"by": "mode", "dimension": DIMENSION, "must_leave": round(must_leave), "room": round(room),
            "givers": sorted(excess, key=lambda b: (-excess[b], b)), "takers": sorted(takers)}


def _rack_sums(inp: LoadInput, dimension: str) -> tuple[dict[str, list[int]], dict[str, float], dict[str, float]] | None:
    """Per rack (where racks are kept and every broker has one): its brokers, what it holds whatever the placement
    (the partitions with a replica in every rack keep each in its rack) and what it could hold at most (all it has,
    one replica of every partition not in it); None where the racks pin nothing."""
    if not inp.keep_racks or any(r is None for r in inp.rack.values()):
        return None
    racks = sorted({str(r) for r in inp.rack.values()})
    members: dict[str, list[int]] = {r: [] for r in racks}
    for b, r in inp.rack.items():
        members[str(r)].append(b)
    units = inp.units[dimension]
    pinned = dict.fromkeys(racks, 0.0)
    reachable = dict.fromkeys(racks, 0.0)
    for reps, u in zip(inp.replicas, units, strict=True):
        spans = {str(inp.rack[b]) for b in reps}
        for b in reps:
            reachable[str(inp.rack[b])] += u
            if len(spans) == len(racks):
                pinned[str(inp.rack[b])] += u
        if len(spans) < len(racks):
            for r in racks:
                if r not in spans:
                    reachable[r] += u
    for b, extra in ((inp.fixed or {}).get(dimension) or {}).items():
        r = str(inp.rack.get(b))
        if r in pinned:
            pinned[r] += extra
            reachable[r] += extra
    return members, pinned, reachable


def _by_racks(inp: LoadInput, bands: Any) -> dict[str, Any] | None:
    sums = _rack_sums(inp, DIMENSION)
    if sums is None:
        return None
    members, pinned, reachable = sums
    out = []
    for r in sorted(members):
        bs = members[r]
        if not all(b in bands for b in bs):
            continue  # a broker outside the plan keeps its load: its rack's sum says nothing of the others
        ceiling = sum(float(bands[b].ceil) for b in bs)
        floor = sum(float(bands[b].floor) for b in bs)
        tolerance = len(bs)
        if all(b in inp.givers for b in bs) and pinned[r] > ceiling + tolerance:
            out.append({"rack": r, "side": "above", "pinned": round(pinned[r]), "ceiling": round(ceiling),
                        "brokers": sorted(bs)})
        elif all(b in inp.receivers for b in bs) and reachable[r] < floor - tolerance:
            out.append({"rack": r, "side": "below", "reachable": round(reachable[r]), "floor": round(floor),
                        "brokers": sorted(bs)})
    return {"by": "racks", "dimension": DIMENSION, "racks": out} if out else None


def explain(found: Mapping[str, Any]) -> str:
    """Why a proof of ``sum_proof`` puts the disk bands out of reach, in one plain sentence (no markdown)."""
    from ..balance import human_bytes

    def ids(bs: Any) -> str:
        bs = list(bs) if isinstance(bs, list) else []
        return ", ".join(map(str, bs[:8])) + (f" and {len(bs) - 8} more" if len(bs) > 8 else "")

    def size(x: Any) -> str:
        return human_bytes(x) if isinstance(x, (int, float)) else "?"

    if found.get("by") == "size":
        return (f"no placement can meet them: a replica of topic {found.get('topic')} ({size(found.get('bytes'))}, on "
                f"broker {found.get('broker')}) is larger than the {size(found.get('ceiling'))} any broker that may "
                f"hold it has up to its disk band's ceiling")
    if found.get("by") == "mode":
        return (f"no placement can meet them: this mode lets broker(s) {ids(found.get('givers'))} only give and "
                f"{ids(found.get('takers'))} only take; {size(found.get('must_leave'))} must leave the first above "
                f"their disk bands and {size(found.get('room'))} fit below the others' (a rebalance may move load "
                f"between the old brokers)")
    racks = [r for r in found.get("racks") or [] if isinstance(r, dict)]
    where = "; ".join(f"rack {r.get('rack')} (broker(s) {ids(r.get('brokers'))}) "
                      + (f"keeps {size(r.get('pinned'))} above the {size(r.get('ceiling'))} its disk bands allow"
                         if r.get("side") == "above" else
                         f"can reach {size(r.get('reachable'))}, below the {size(r.get('floor'))} its disk bands need")
                      for r in racks[:4])
    return f"no placement can meet them: a partition with a replica in every rack keeps each replica in its rack, so {where}"


def why_out_of_reach(proof: Mapping[str, Any]) -> str | None:
    """The reason a plan's ``bands_proof`` gives for its bands being out of reach (a sum, a hot partition's brokers,
    or the exact program's "Infeasible"), or None when it proved no such thing."""
    if proof.get("feasible") is not False:
        return None
    if isinstance(proof.get("by_sum"), dict):
        return explain(proof["by_sum"])
    if isinstance(proof.get("by_holders"), dict):
        return explain_holders(proof["by_holders"])
    if proof.get("by_relaxation"):
        return ("the exact program's linear relaxation has no solution: no placement meets every disk and network-in "
                "band at once, even with replicas split across brokers (racks, the change cap and the thresholds)")
    return ("the exact program proved that no placement meets every disk, network-in and replica band at once "
            "(racks, the change cap and the partitions' sizes)")


def explain_counts(found: Mapping[str, Any]) -> str:
    """Why ``count_proof`` puts the replica-count gate out of reach, in one plain sentence (no markdown)."""
    if found.get("by") == "mode":
        givers = list(found.get("givers") or [])
        return (f"no placement can pass the replica-count gate: this mode lets broker(s) "
                f"{', '.join(map(str, givers[:8]))}{f' and {len(givers) - 8} more' if len(givers) > 8 else ''} only "
                f"give, one of them holds {found.get('lowest_giver')} replicas, and no median the gate would let it "
                f"within leaves room for all {found.get('replicas')} replicas on the brokers (a rebalance may move "
                f"replicas between the old brokers)")
    if found.get("median"):
        racks = found.get("racks") or {}
        held = ", ".join(f"rack {r}: {x.get('brokers')} brokers, {x.get('pinned')}"
                         + (f"-{x.get('reachable')}" if x.get("reachable") != x.get("pinned") else "")
                         for r, x in list(racks.items())[:6])
        return (f"no placement can pass the replica-count gate: a partition with a replica in every rack keeps each "
                f"replica in its rack ({held} replicas), and at no median can every count lie within the gate's "
                f"allowance with half the brokers at or below it and half at or above")
    return (f"no placement can pass the replica-count gate: a partition with a replica in every rack keeps each "
            f"replica in its rack, so a broker of rack {found.get('high_rack')} holds at least "
            f"{found.get('at_least')} replicas and one of rack {found.get('low_rack')} at most {found.get('at_most')}, "
            f"further apart than the gate allows around any median")


def why_counts_out_of_reach(proof: Mapping[str, Any]) -> str | None:
    """The reason a plan's ``bands_proof`` gives for the replica-count gate being out of reach (``count_proof``), or
    None when it proved no such thing."""
    found = proof.get("counts")
    return explain_counts(found) if isinstance(found, dict) else None


def fewest_leaders(total: int, brokers: int, band: float) -> int:
    """The fewest leaders (of ``total``) any of ``brokers`` can end with while every count passes the leader gate:
    |count - median| <= max(band x median, 1) (``rebalancer.validate``), at whatever median the counts end at. For
    each median m, sorted counts c_1 <= ... <= c_n summing to ``total`` with c_1 as low as the gate lets it be: the
    lower half between c_1 and the median, the upper half between it and the gate's ceiling."""
    if brokers <= 0 or total <= 0:
        return 0
    if brokers == 1:
        return total
    k = brokers // 2
    mean = total / brokers
    best: int | None = None
    # the median lies within the gate's reach of the mean (every count is within max(band x m, 1) of it)
    low_m = max(0, math.floor(2 * (mean / (1 + band) - 2)))
    for twice in range(low_m, math.ceil(2 * (mean + count_allowance(mean, band) + 2)) + 1):
        m = twice / 2
        if brokers % 2 and twice % 2:
            continue  # an odd number of counts has a whole median
        allowed = count_allowance(m, band)
        lo, hi = max(0, math.ceil(m - allowed - 1e-9)), math.floor(m + allowed + 1e-9)
        mid = math.floor(m)  # even: c_k = mid and c_k+1 = 2m - mid, the pair leaving the widest room
        if brokers % 2 == 0 and 2 * m - mid > hi:
            continue
        for c in range(lo, mid + 1):
            if best is not None and c >= best:
                break
            if brokers % 2:  # c_1 = c, k - 1 more in [c, m], the median m, k in [m, hi]
                least, most = c + (k - 1) * c + m + k * m, c + (k - 1) * m + m + k * hi
            elif k == 1:     # two counts: c and 2m - c
                least = most = 2 * m if 2 * m - c <= hi else -1
            else:            # c_1 = c, k - 2 more in [c, mid], mid, 2m - mid, k - 1 in [2m - mid, hi]
                least = c + (k - 2) * c + 2 * m + (k - 1) * (2 * m - mid)
                most = c + (k - 2) * mid + 2 * m + (k - 1) * hi
            if least <= total <= most:
                best = c
                break
    return best if best is not None else 0


def network_out_proof(units: Sequence[float], bands: Mapping[int, Band], fewest: int,
                      names: Sequence[str] | None = None) -> dict[str, Any] | None:
    """Network out's band out of reach for whichever broker leads a partition (module doc): ``units``, each
    partition's network out when it leads; ``bands``, each eligible broker's network-out band; ``fewest``, the fewest
    leaders the leader gate lets a broker keep (``fewest_leaders``). The partition that needs it most, with the least
    its leader carries and how far above the largest target that is; None when no partition proves it."""
    if not units or not bands:
        return None
    ceiling = max(b.ceil for b in bands.values())
    target = max(b.average for b in bands.values())
    order = sorted(range(len(units)), key=lambda i: units[i])
    extra = max(0, fewest - 1)
    smallest = [units[i] for i in order[:extra + 1]]
    worst = max(range(len(units)), key=lambda i: (units[i], -i))
    # the others' smallest: without the partition itself when it is among them
    others = sum(smallest[:extra]) if worst not in order[:extra] else sum(smallest) - units[worst]
    least = units[worst] + others
    if least <= ceiling or target <= 0:
        return None
    return {"partition": names[worst] if names else worst, "network_out": round(units[worst]),
            "share_pct": round(100 * units[worst] / target, 1), "fewest_leaders": fewest, "least": round(least),
            "ceiling": ceiling, "above_pct": round(100 * (least - target) / target, 1)}


def explain_network_out(found: Mapping[str, Any]) -> str:
    """Why ``network_out_proof`` (or, ``by``, the leaders' linear relaxation or their 0/1 program) puts the network-out
    band out of reach, in one plain sentence."""
    if found.get("by") == "0/1 program":
        return ("network out's band is out of reach: no choice of leaders among each partition's replicas that the "
                "leader gate passes puts every broker within it (a 0/1 program over every leader is infeasible)")
    if found.get("by") == "linear relaxation":
        return ("network out's band is out of reach: no choice of leaders among each partition's replicas, even one "
                "splitting a partition's leadership between them, puts every broker within it (the linear relaxation "
                "of the leader choice is infeasible)")
    return (f"network out's band is out of reach: partition {found.get('partition')} alone carries "
            f"{found.get('share_pct')}% of a broker's target, and the leader gate holds every broker to at least "
            f"{found.get('fewest_leaders')} leader(s), so the broker leading it ends at least "
            f"{found.get('above_pct')}% above its target (the network gate widens its band by that partition)")
