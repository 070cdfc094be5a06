"""A proof that no placement meets every load band, from the brokers that must keep a hot partition.

A partition whose replica carries most of a broker's share of a load (fuzz small seed 157: one replica carries
94,095 bytes/s of network in against a target of 103,590 and a ceiling of 113,949) leaves each broker holding it
room for little else, while the broker's disk band still asks for its share of bytes. The linear relaxation of the
exact program does not see it: there the hot replica may be split across brokers. The change cap keeps at least
``RF - max_changes`` of its replicas where they are, so for every such set ``S`` of the partition's current brokers
this asks a small linear program whether the brokers of ``S`` can all end inside their bands with the partition on
each of them::

    for each broker b in S and load dimension d:   floor_db <= u_d(p) + fixed_db + sum_i u_d(i) y_ib <= ceil_db
    for each other partition i:                    replicas arriving on S (b not among i's brokers) <= max_changes
                                                   replicas leaving S (b among i's brokers, y_ib = 0) <= max_changes
    0 <= y_ib <= 1 (1 where b holds i and may not give, 0 where it does not and may not take)

``y_ib``: partition i ends on broker b. Everything else the real problem asks (racks, the other brokers' bands,
whole replicas, capacity thresholds, counts) is left out, so the program only relaxes it: when it has no solution
for every ``S``, no placement of the whole cluster meets the bands either. A floor binds only a broker that may take
and a ceiling one that may give (the gates judge a broker the mode moves one way no further off than before).
The partitions tried are the hottest in each load dimension relative to its mean target, ``TRIES`` in all.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from .load_problem import LoadInput, mean_target

__all__ = ["holder_proof", "explain_holders", "TRIES", "MAX_PARTITIONS", "LOAD_DIMENSIONS"]

TRIES = 3                          # hot partitions tried, hottest share first
MAX_PARTITIONS = 250_000           # tried up to this many partitions: a program over 200k partitions (600k replicas
#                                    at RF 3) took 3.9 s and 1 GB here, and up to TRIES x 3 of them may run
LOAD_DIMENSIONS = ("disk", "nw_in")  # what the proof covers (counts: their gate measures from a median no band fixes)


def _hottest(inp: LoadInput, dims: Sequence[str]) -> list[tuple[float, int, str]]:
    """(share of the dimension's mean target, partition, dimension) of the ``TRIES`` hottest partitions."""
    import numpy as np

    gate = inp.gate_bands or inp.bands
    best: dict[int, tuple[float, str]] = {}
    for d in dims:
        target = mean_target(gate[d])
        if target <= 0:
            continue
        units = np.asarray(inp.units[d], dtype=np.float64) / target
        for i in np.argsort(-units, kind="stable")[:TRIES].tolist():
            if units[i] > best.get(i, (0.0, ""))[0]:
                best[i] = (float(units[i]), d)
    return sorted(((s, i, d) for i, (s, d) in best.items()), key=lambda t: (-t[0], t[1]))[:TRIES]


def _holders_feasible(inp: LoadInput, p: int, keep: Sequence[int], dims: Sequence[str]) -> bool:
    """Whether the linear program above has a solution for partition ``p`` kept on brokers ``keep``."""
    import numpy as np
    from scipy.optimize import linprog
    from scipy.sparse import coo_array

    gate = inp.gate_bands or inp.bands
    origin = inp.baseline
    n, k, mc = len(origin), len(keep), inp.max_changes
    col = np.arange(n * k).reshape(n, k)  # y_ib's column: partition i, the j-th broker of keep
    held = np.array([[b in reps for b in keep] for reps in origin], dtype=bool).reshape(n, k)
    lower = np.where(held & np.array([b not in inp.givers for b in keep]), 1.0, 0.0)
    upper = np.where(~held & np.array([b not in inp.receivers for b in keep]), 0.0, 1.0)
    lower[p, :] = upper[p, :] = 0.0  # the partition itself is counted as fixed load below
    rows: list[Any] = []  # each row as "<= high" (a band's floor negated)
    cols: list[Any] = []
    vals: list[Any] = []
    high: list[float] = []
    units_of = {d: np.asarray(inp.units[d], dtype=np.float64) for d in dims}
    for j, b in enumerate(keep):
        for d in dims:
            units = units_of[d]
            fixed = units[p] + float(((inp.fixed or {}).get(d) or {}).get(b, 0.0))
            for sign, bound, binds in ((1.0, gate[d][b].ceil - fixed, b in inp.givers),
                                       (-1.0, fixed - gate[d][b].floor, b in inp.receivers)):
                if binds:
                    rows.append(np.full(n, len(high)))
                    cols.append(col[:, j])
                    vals.append(sign * units)
                    high.append(bound)
    # per partition: replicas arriving on keep at most the change cap, those leaving it too, and no more replicas
    # than it has: each a row over the partition's columns where the mask holds
    rf = np.array([len(reps) for reps in origin], dtype=np.float64)
    others = np.arange(n) != p
    arriving, leaving = (~held).sum(axis=1), held.sum(axis=1)
    for entry, sign, bound, needed in ((~held, 1.0, np.full(n, float(mc)), arriving > mc),
                                       (held, -1.0, (mc - leaving).astype(np.float64), leaving > mc),
                                       (np.ones_like(held), 1.0, rf, rf < k)):
        idx = np.flatnonzero(needed & others)
        if not len(idx):
            continue
        at_row, at_col = np.nonzero(entry[idx])
        rows.append(len(high) + at_row)
        cols.append(col[idx[at_row], at_col])
        vals.append(np.full(len(at_row), sign))
        high.extend(bound[idx].tolist())
    a = coo_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(len(high), n * k))
    res = linprog(np.zeros(n * k), A_ub=a.tocsr(), b_ub=np.asarray(high, dtype=np.float64),
                  bounds=np.column_stack([lower.ravel(), upper.ravel()]), method="highs")
    return bool(res.status != 2)


def holder_proof(inp: LoadInput) -> dict[str, Any] | None:
    """The first hot partition (``_hottest``) whose brokers cannot all meet their load bands whichever
    ``RF - max_changes`` of them keep it (the module doc; clusters up to ``MAX_PARTITIONS``), as ``{"by": "holders",
    "partition": index, "dimension", "share_pct", "brokers": its current brokers, "keep": how many must keep it,
    "dimensions": those proven}``; None when no tried partition proves it."""
    gate = inp.gate_bands or inp.bands
    dims = [d for d in LOAD_DIMENSIONS if d in inp.units and gate.get(d)]
    if not dims or len(inp.replicas) > MAX_PARTITIONS:
        return None
    for share, p, d in _hottest(inp, dims):
        brokers = [b for b in inp.baseline[p] if b not in inp.removed]
        keep = len(inp.baseline[p]) - inp.max_changes
        if keep <= 0 or len(brokers) < keep or any(b not in gate[x] for b in brokers for x in dims):
            continue
        if not any(_holders_feasible(inp, p, s, dims) for s in itertools.combinations(brokers, keep)):
            return {"by": "holders", "partition": p, "dimension": d, "share_pct": round(100 * share, 1),
                    "brokers": brokers, "keep": keep, "dimensions": dims}
    return None


def explain_holders(found: dict[str, Any]) -> str:
    """Why ``holder_proof``'s finding puts the load bands out of reach, in one plain sentence (no markdown)."""
    titles = {"disk": "disk", "nw_in": "network in"}
    brokers = ", ".join(map(str, found.get("brokers") or []))
    dims = " and ".join(titles.get(d, d) for d in found.get("dimensions") or [])
    hot = str(found.get("dimension"))
    return (f"no placement can meet them: partition {found.get('partition')} alone carries "
            f"{found.get('share_pct')}% of a broker's {titles.get(hot, hot)} "
            f"target, the change cap keeps it on {found.get('keep')} of brokers {brokers} whichever moves, and no "
            f"choice of their other replicas brings those brokers inside their {dims} bands together, even with "
            f"replicas split across brokers")
