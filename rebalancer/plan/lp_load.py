"""Replica placement on load as a 0/1 program (``--balance load``, strategy ``lp``; ``auto`` where greedy falls
short on a small cluster). Same input as ``load_greedy`` (``LoadInput``), three steps:

- ``build``: for each partition i and each broker b that may hold it (its current brokers that stay, plus the
  receivers), ``x[i,b]`` = replica of i on b. Constraints: ``rf`` (sum_b x = RF), ``changes`` (at most N new
  brokers), ``rack`` (at most one replica per rack where the partition had one per rack, else never fewer racks),
  ``low_/high_<dim>_<b>`` for every placement dimension (each broker's load within its band, with a slack),
  ``limit_<dim>_<b>`` (the capacity threshold, hard; never above what the broker holds now if it is already over).
  Only givers lose replicas and only receivers gain them; a removed broker has no variable, so it ends empty.
- ``solve``: HiGHS (through PuLP), time-limited, warm-started from the greedy placement.
- ``extract``: each partition's new replica list (survivors in place, new brokers where the old ones were).

Objective (minimise): bytes moved (in units of the mean disk target) + ``M`` x sum over dimensions of priority x
slack (in units of each broker's target). With ``M`` = 1000, one percent of a disk band outside costs more than
moving a whole broker's bytes: the bands come first, in the dimensions' order, then the fewest bytes. An infeasible
program (a hard rule cannot hold) raises ``PlanError``; a time limit without a solution returns ``None`` and the
caller keeps the greedy placement.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NotRequired

from ..load import Band
from . import highs
from .budget import Work
from .load_problem import LoadInput, add_fixed
from .program import add_change_cap, add_racks, add_rf, in_place
from .targets import PlanError

__all__ = ["LoadProgram", "LoadProgramStats", "build", "solve", "extract", "lp_load", "relaxation"]


class LoadProgramStats(highs.SolveResult):
    """One load program's record (``solver["lp"]`` of a load plan, a ladder step's, a neighbourhood's): the solve
    (``highs.SolveResult``), the program's size, the seconds spent building it, and (a program with the gates' bands
    as constraints) the fewest bytes its dual bound proves any placement within them copies."""

    variables: int
    constraints: int
    build_seconds: NotRequired[float]
    bytes_lower_bound: NotRequired[int]
    node_limit: NotRequired[int]  # the nodes it was allowed, where the work left chose them (``place_load``)

M = 1000.0
GAP = 0.002  # relative MIP gap at which HiGHS stops: 0.2 % of the objective, which the bands dominate
COUNTS = ("replicas", "leaders")  # dimensions whose gate band is hard in all but name (GATE_WEIGHT)
SHARE = 1e-6  # a relaxation's variable above this holds a share of its replica (HiGHS's feasibility tolerance is 1e-7)
GATE_WEIGHT = 1000.0  # priority of a count beyond its gate band: above every load dimension (disk is 100)


@dataclass
class LoadProgram:
    prob: Any
    x: dict[tuple[int, int], Any]
    cand: dict[int, list[int]]
    slacks: list[Any]
    parts: list[int]
    hard: bool = False
    unit: float = 1.0      # bytes per unit of the objective's bytes term (the mean disk target)
    empty: int = 0         # replicas of empty partitions that may be added (each costs 1 byte in the objective)


@dataclass
class _Rows:
    """What ``build`` adds rows with: the program so far, the load of replicas that cannot move per (dimension,
    broker), and per broker its placement variables."""

    prob: Any
    inp: LoadInput
    dims: list[str]
    fixed: dict[str, dict[int, float]]
    movers: frozenset[int]
    x: dict[tuple[int, int], Any] = field(default_factory=dict)
    cand: dict[int, list[int]] = field(default_factory=dict)
    parts: list[int] = field(default_factory=list)
    objective: list[Any] = field(default_factory=list)
    slacks: list[Any] = field(default_factory=list)
    by_broker: dict[int, list[tuple[int, Any]]] = field(default_factory=dict)

    def now(self, d: str, b: int) -> float:
        """Broker ``b``'s load in ``d`` as the problem starts."""
        return self.fixed[d][b] + sum(self.inp.units[d][i] for i, _ in self.by_broker.get(b, ())
                                      if b in self.inp.replicas[i])


def build(inp: LoadInput, warm_start: dict[int, tuple[int, ...]] | None = None, hard: bool = False,
          widen: float = 1.0, lenient: bool = False,
          allowed: Mapping[int, frozenset[int]] | None = None) -> LoadProgram:
    """The program; ``hard``: every band is the one the gates measure (``gate_bands``), as a constraint without slack,
    and the objective is the bytes alone: feasible exactly when a placement meets every gate's band. ``widen``: the
    load dimensions' bands (not the counts') that many times as wide around their targets."""
    import pulp

    dims = [d for d in inp.bands if d in inp.units]
    brokers = sorted(set(inp.rack))
    fixed = {d: {b: 0.0 for b in brokers} for d in dims}  # load of replicas that cannot move
    add_fixed(inp, fixed)  # and of those outside this problem (a neighbourhood's, ``neighbourhoods``)
    rows = _Rows(pulp.LpProblem("load_placement", pulp.LpMinimize), inp, dims, fixed,
                 frozenset(inp.givers | inp.receivers | inp.removed))
    mean_disk = 1.0
    if "disk" in inp.bands and inp.bands["disk"]:
        mean_disk = max(1.0, sum(b.average for b in inp.bands["disk"].values()) / len(inp.bands["disk"]))
    _partition_rows(rows, mean_disk, warm_start, allowed)
    for (i, b), v in rows.x.items():
        rows.by_broker.setdefault(b, []).append((i, v))
    start_load = _start_load(rows, brokers, warm_start)
    for d in dims:
        for b in brokers:
            band = (inp.gate_bands or inp.bands)[d].get(b) if hard else inp.bands[d].get(b)
            if band is None or b in inp.removed or b not in rows.movers:
                continue
            if hard:
                _hard_rows(rows, d, b, band, widen, lenient)
            else:
                _soft_rows(rows, d, b, band, start_load.get((d, b)))
    prob, x, cand, parts, origin = rows.prob, rows.x, rows.cand, rows.parts, inp.origin
    prob += pulp.lpSum(rows.objective), "objective"
    if warm_start is not None:
        for i in parts:
            reps = warm_start.get(i, inp.replicas[i])
            for b in cand[i]:
                x[(i, b)].setInitialValue(1 if b in reps else 0)
    empty = sum(1 for i in parts for b in cand[i] if b not in (inp.replicas[i] if origin is None else origin[i])
                and "disk" in inp.units and inp.units["disk"][i] < 1.0)
    return LoadProgram(prob, x, cand, rows.slacks, parts, hard, unit=mean_disk if "disk" in inp.units else 0.0,
                       empty=empty)


def _partition_rows(rows: _Rows, mean_disk: float, warm_start: Mapping[int, tuple[int, ...]] | None,
                    allowed: Mapping[int, frozenset[int]] | None = None) -> None:
    """Each partition that may change: its variables (the brokers it may end on) and its rules (``program``: RF, the
    change cap, racks), its bytes in the objective; the load of the replicas that cannot move, in ``rows.fixed``."""
    prob, inp, dims, fixed, movers = rows.prob, rows.inp, rows.dims, rows.fixed, rows.movers
    receivers = sorted(inp.receivers - inp.removed)
    origin = inp.origin
    for i, reps in enumerate(inp.replicas):
        ref = reps if origin is None else origin[i]  # what the changes and the bytes count against
        # a replica the plan added (not in ``origin``) may move on from any broker of this problem
        may_leave = [b for b in reps if b in inp.givers or b in inp.removed or (b not in ref and b in movers)]
        stay = [b for b in reps if b not in may_leave]   # may not lose it
        if not may_leave and all(b not in movers for b in reps):
            for b in reps:
                for d in dims:
                    fixed[d][b] += inp.units[d][i]
            continue
        for b in stay:
            for d in dims:
                fixed[d][b] += inp.units[d][i]
        options = [b for b in may_leave if b not in inp.removed] + [b for b in receivers if b not in reps]
        # back where it was before the plan (a broker that may only give, too: that undoes a move)
        options += [b for b in ref if b not in reps and b in movers and b not in inp.removed and b not in options]
        if allowed is not None:  # only these brokers may take it (it may always stay where it is)
            options = [b for b in options if b in may_leave or b in allowed.get(i, ())]
        free = len(reps) - len(stay)
        rows.parts.append(i)
        rows.cand[i] = options
        x = rows.x
        for b in options:
            x[(i, b)] = prob.add_variable(f"x_{i}_{b}", cat="Binary")
        add_rf(prob, (x[(i, b)] for b in options), free, str(i))
        added = [x[(i, b)] for b in options if b not in ref]
        left = inp.max_changes - sum(1 for b in stay if b not in ref)  # changes the plan made that stay
        add_change_cap(prob, added, max(0, left) if left < len(reps) else None, str(i))
        size = inp.units["disk"][i] if "disk" in inp.units else 0.0
        rows.objective.extend((max(size, 1.0) / mean_disk) * v for v in added)
        if inp.keep_racks:
            by_rack: dict[Any, list[Any]] = {}
            for b in options:
                by_rack.setdefault(inp.rack.get(b), []).append(x[(i, b)])
            add_racks(prob, by_rack, len({inp.rack.get(b) for b in reps}), len(reps), str(i),
                      held={inp.rack.get(b) for b in stay},
                      warm_racks=None if warm_start is None else {inp.rack.get(b) for b in warm_start.get(i, reps)})


def _start_load(rows: _Rows, brokers: list[int],
                warm_start: Mapping[int, tuple[int, ...]] | None) -> dict[tuple[str, int], float]:
    """The warm start's load per (dimension, broker), to give the slacks their values too: HiGHS drops a MIP start
    that leaves a constraint unmet, and a start with zero slacks outside a band is one."""
    if warm_start is None:
        return {}
    inp = rows.inp
    return {(d, b): rows.fixed[d][b] + sum(inp.units[d][i] for i, _ in rows.by_broker.get(b, ())
                                           if b in warm_start.get(i, inp.replicas[i]))
            for d in rows.dims for b in brokers}


def _scaled(rows: _Rows, d: str, b: int, real: Band) -> tuple[Any, float, bool]:
    """Broker ``b``'s load in ``d`` as an expression, every row in units of its target (``real``, before any
    widening): bytes as coefficients (1e10) beside slack costs and counts leave HiGHS badly scaled, and its MIP
    search then stalls past its time limit. (expression, scale, whether any variable is in it.)"""
    import pulp

    k = 1.0 / max(real.average, 1.0)
    units = rows.inp.units[d]
    terms = [units[i] * k * v for i, v in rows.by_broker.get(b, ()) if units[i]]
    return pulp.lpSum(terms) + rows.fixed[d][b] * k, k, bool(terms)


def _hard_rows(rows: _Rows, d: str, b: int, band: Band, widen: float, lenient: bool) -> None:
    """The gate's band as a constraint. A broker the mode lets move one way only, outside its band on the side it
    cannot correct before the plan (an old broker below it in add-brokers), may stay where it is; every other broker
    ends inside. ``lenient``: as the disk gate judges a one-way broker on that side, no further from its target than
    before (``load.accepted_range``), wherever it started. Counts: a band any counts inside of pass their gate, which
    measures from the median (``median_safe_band``); load bands ``widen`` times as wide."""
    inp, prob = rows.inp, rows.prob
    if d in COUNTS:
        band = (inp.safe_bands or inp.bands).get(d, inp.bands[d])[b]
    real = band
    if widen != 1.0 and d not in COUNTS:
        band = Band(math.floor(band.average - widen * (band.average - band.floor)),
                    math.ceil(band.average + widen * (band.ceil - band.average)), band.average, band.limit)
    expr, k, moving = _scaled(rows, d, b, real)
    now = rows.now(d, b)
    low = band.floor if b in inp.receivers or now >= band.floor else now
    high = band.ceil if b in inp.givers or now <= band.ceil else now
    if lenient and d not in COUNTS:
        away = abs(now - real.average)
        low = low if b in inp.receivers else min(low, math.floor(real.average - away))
        high = high if b in inp.givers else max(high, math.ceil(real.average + away))
    prob += expr >= low * k, f"low_{d}_{b}"
    prob += expr <= high * k, f"high_{d}_{b}"
    if band.limit is not None and moving:
        prob += expr <= max(float(band.limit), now) * k, f"limit_{d}_{b}"


def _soft_rows(rows: _Rows, d: str, b: int, band: Band, start: float | None) -> None:
    """The band with a slack on each side in units of the target, priced at ``M`` x the dimension's priority. A
    count may leave the planner's band at its own priority, but the gate's band only at a price above every load
    dimension's (``GATE_WEIGHT``): counts stay within the Wix gate unless nothing else is possible. ``start``: the
    warm start's load, which gives the slacks their start values. The capacity threshold is hard."""
    inp, prob = rows.inp, rows.prob
    expr, k, moving = _scaled(rows, d, b, band)
    w = inp.weight.get(d, 1.0)
    outer = (inp.gate_bands or {}).get(d, {}).get(b) if d in COUNTS else None
    lo = prob.add_variable(f"slo_{d}_{b}", lowBound=0,
                           upBound=None if outer is None else max(0, band.floor - outer.floor) * k)
    hi = prob.add_variable(f"shi_{d}_{b}", lowBound=0,
                           upBound=None if outer is None else max(0, outer.ceil - band.ceil) * k)
    rows.slacks += [lo, hi]
    if outer is not None:
        lo2 = prob.add_variable(f"sglo_{d}_{b}", lowBound=0)
        hi2 = prob.add_variable(f"sghi_{d}_{b}", lowBound=0)
        rows.slacks += [lo2, hi2]
        prob += expr + lo + lo2 >= band.floor * k, f"low_{d}_{b}"
        prob += expr - hi - hi2 <= band.ceil * k, f"high_{d}_{b}"
        rows.objective += [(M * GATE_WEIGHT) * lo2, (M * GATE_WEIGHT) * hi2]
    else:
        prob += expr + lo >= band.floor * k, f"low_{d}_{b}"
        prob += expr - hi <= band.ceil * k, f"high_{d}_{b}"
    rows.objective += [(M * w) * lo, (M * w) * hi]
    if start is not None:
        short = max(0.0, band.floor - start) * k
        over = max(0.0, start - band.ceil) * k
        lo.setInitialValue(min(short, lo.upBound) if lo.upBound is not None else short)
        hi.setInitialValue(min(over, hi.upBound) if hi.upBound is not None else over)
        if outer is not None:
            lo2.setInitialValue(short - (lo.varValue or 0.0))
            hi2.setInitialValue(over - (hi.varValue or 0.0))
    if band.limit is not None and moving:
        prob += expr <= max(float(band.limit), rows.now(d, b)) * k, f"limit_{d}_{b}"


def solve(program: LoadProgram, time_limit: float, warm: bool, write_lp: str | None = None,
          node_limit: int | None = None, gap: float | None = None) -> LoadProgramStats:
    """HiGHS until ``time_limit`` seconds from now, in a child process killed past it (``highs.solve``: HiGHS
    overruns its limit). A node limit is work, not time: with one thread and a fixed seed HiGHS then gives the same
    placement on any machine, busy or not; ``time_limit`` stays as the safety net (the status says when it cut).
    ``gap``: the relative MIP gap to stop at (default ``GAP``)."""
    options: dict[str, Any] = {"threads": 1, "random_seed": 0}
    if node_limit is not None:
        options["mip_max_nodes"] = int(node_limit)
    prob = program.prob
    result = highs.solve(prob, time_limit, warm=warm, gap=GAP if gap is None else float(gap), options=options,
                         write_to=write_lp)
    if highs.infeasible(result) and not program.hard:
        raise PlanError("the load program is infeasible: racks, the change cap and the capacity thresholds cannot all "
                        "hold (allow more changes per partition, or raise a --threshold)")
    return LoadProgramStats(status=result["status"], outcome=result["outcome"], have_solution=result["have_solution"],
                            objective=result["objective"], dual_bound=result["dual_bound"], gap=result["gap"],
                            seconds=result["seconds"], lp_iterations=result["lp_iterations"],
                            nodes=result["nodes"], variables=len(prob.variables()),
                            constraints=prob.numConstraints())


def extract(program: LoadProgram, inp: LoadInput) -> dict[int, tuple[int, ...]]:
    """The partitions whose replicas change, survivors in place and new brokers where the old ones were."""
    out: dict[int, tuple[int, ...]] = {}
    for i in program.parts:
        reps = inp.replicas[i]
        chosen = {b for b in program.cand[i] if (program.x[(i, b)].varValue or 0) > 0.5}
        kept = [b for b in reps if b in chosen or (b not in program.cand[i] and b not in inp.removed)]
        final = tuple(in_place(reps, kept, sorted(chosen - set(reps))))
        if final != tuple(reps):
            out[i] = final
    return out


def _solved(inp: LoadInput, time_limit: float, warm_start: dict[int, tuple[int, ...]] | None = None, *,
            write_lp: str | None = None, hard: bool = False, widen: float = 1.0, lenient: bool = False,
            node_limit: int | None = None, gap: float | None = None, relax: bool = False,
            allowed: Mapping[int, frozenset[int]] | None = None,
            feasibility: bool = False, work: Work | None = None) -> tuple[LoadProgram, LoadProgramStats]:
    """Build and solve (``lp_load``'s arguments); a hard program's dual bound as ``bytes_lower_bound``."""
    import pulp

    started = time.monotonic()
    program = build(inp, warm_start, hard=hard, widen=widen, lenient=lenient, allowed=allowed)
    if relax:
        for v in program.prob.variables():
            v.cat = pulp.LpContinuous
    if feasibility:
        program.prob.setObjective(pulp.LpAffineExpression())
    stats = solve(program, time_limit - (time.monotonic() - started), warm_start is not None and not relax, write_lp,
                  node_limit=node_limit, gap=gap)
    stats["build_seconds"] = round(time.monotonic() - started - stats["seconds"], 3)
    if work is not None:
        work.charge(stats)
    dual = stats.get("objective") if relax and stats["have_solution"] else stats.get("dual_bound")
    if hard and dual is not None and math.isfinite(dual) and dual > 0:
        # The objective is the bytes alone (in ``unit``s, an empty partition's replica at one byte): HiGHS's dual
        # bound proves that no placement within these bands, the change cap, racks and thresholds copies less.
        stats["bytes_lower_bound"] = max(0, math.floor(dual * program.unit) - program.empty)
    return program, stats


def lp_load(inp: LoadInput, time_limit: float, warm_start: dict[int, tuple[int, ...]] | None = None,
            write_lp: str | None = None, hard: bool = False, widen: float = 1.0, lenient: bool = False,
            node_limit: int | None = None, gap: float | None = None,
            allowed: Mapping[int, frozenset[int]] | None = None, feasibility: bool = False,
            work: Work | None = None) -> tuple[dict[int, tuple[int, ...]] | None, LoadProgramStats]:
    """Build, solve, extract: (changed partitions or None when no solution came within the limit, stats).
    ``hard``: the gates' bands as constraints and the fewest bytes (``build``); its status says "Infeasible" when
    HiGHS proved that no placement meets them all. ``warm_start``: a placement HiGHS starts from (dropped when it
    breaks a constraint). ``node_limit``: HiGHS's branch-and-bound nodes (work, the same result on any machine);
    ``time_limit`` is then only a safety net. ``gap``: the relative MIP gap to stop at (default ``GAP``).
    ``allowed``: per partition, the only brokers that may take a replica of it (``relaxation_trim``).
    ``feasibility``: no objective (any placement within the constraints will do: HiGHS's search then looks for one
    alone, and a hard program it stopped at its nodes without either a placement or a proof often settles so).
    ``work``: the plan's work limit, charged with this program (``budget.Work``)."""
    program, stats = _solved(inp, time_limit, warm_start, write_lp=write_lp, hard=hard, widen=widen, lenient=lenient,
                             node_limit=node_limit, gap=gap, allowed=allowed, feasibility=feasibility, work=work)
    if not stats["have_solution"]:
        return None, stats
    return extract(program, inp), stats


def relaxation(inp: LoadInput, time_limit: float, lenient: bool = True, work: Work | None = None,
               ) -> tuple[dict[int, frozenset[int]] | None, LoadProgramStats]:
    """The linear relaxation of the hard program (a replica may be split across brokers): "Infeasible" proves that
    no placement meets the bands, and its optimum bounds the bytes from below (``bytes_lower_bound``); seconds where
    the 0/1 program's root alone may take a minute (fuzz small seed 182, 2,358 replicas: 6 s against 54 s for its
    root). Returns its support with the stats: for each partition the program could move, the brokers holding a
    share of it (None: no solution). ``work``: as ``lp_load``'s."""
    program, stats = _solved(inp, time_limit, hard=True, lenient=lenient, relax=True, work=work)
    if not stats["have_solution"]:
        return None, stats
    return {i: frozenset(b for b in program.cand[i] if (program.x[(i, b)].varValue or 0.0) > SHARE)
            for i in program.parts}, stats
