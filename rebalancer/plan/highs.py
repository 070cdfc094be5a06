"""HiGHS through PuLP for every 0/1 program of the plan stage (the count program ``lp``, the load program
``lp_load``, the exact leader program ``leader_exact``): the solver with warm starts, its status read back, and the
solve in a child process that is killed past its time limit.

HiGHS does not check its time limit everywhere (its MIP search can run on for minutes past it after a sub-MIP:
ERGO-Code/HiGHS#885, #2226, still open in 1.15), so ``solve`` runs the program in a child process (``python -m
rebalancer.plan.highs``, the problem pickled to its stdin) that is killed ``KILL_GRACE`` seconds after the limit: the
plan stage keeps its time limit whatever the solver does, and a killed solve counts as a time limit without a
solution (the caller keeps what it had). A fresh interpreter, not a fork: a HiGHS that ran in this process leaves a
thread pool that a forked child inherits without its threads, and waits on for ever. The child also keeps HiGHS's
thread pool, one per process, away from the planner's: a second thread count in one process failed every later
solve in it.

A node limit (``mip_max_nodes``) is work, not time: with one thread and a fixed seed HiGHS gives the same solution
on any machine, busy or not; the time limit is then only the safety net, and the status says when it cut.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypedDict

from .targets import PlanError

__all__ = ["KILL_GRACE", "EXTRACT_SHARE", "Outcome", "SolveResult", "solver", "status_of", "solve", "timed_out", "infeasible",
           "write_lp"]

# How a solve ended, read from the solver's own status code (never from its prose): ``optimal`` (proven, within the
# gap asked for), ``infeasible`` (proven: no solution exists), ``time_limit`` (stopped by its wall clock, or killed
# past it: what it returned depends on how busy the machine was), ``node_limit`` (stopped by its work limit: the
# same on any machine), ``feasible`` (a solution, not proven optimal, for another reason), ``no_solution`` (none,
# for another reason), ``failed`` (the solver's process died).
Outcome = Literal["optimal", "infeasible", "time_limit", "node_limit", "feasible", "no_solution", "failed"]


class SolveResult(TypedDict):
    """One solve, as ``solve`` returns it: the solver's words, the ``Outcome`` read from its model status code,
    whether it has a solution, the objective and dual bound (None without them), the relative gap and the seconds."""

    status: str
    outcome: Outcome
    have_solution: bool
    objective: float | None
    dual_bound: float | None
    gap: float | None
    seconds: float
    lp_iterations: int | None  # HiGHS's LP iterations in all (a MIP's: every node's, strong branching's, heuristics')
    nodes: int | None          # its branch-and-bound nodes (a MIP)

KILL_GRACE = 2.0     # seconds past the solve's time limit before the solver's process is killed
EXTRACT_SHARE = 0.1  # of the solve's time, kept for PuLP to read the solution back


def write_lp(prob: Any, target: Path) -> None:
    """The program as a debugging artifact, written whole or not at all (temporary name, then rename)."""
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        prob.writeLP(str(tmp))
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise PlanError(f"cannot write --write-lp {target}: {exc.strerror or exc}") from None


def work_of(prob: Any) -> tuple[int | None, int | None]:
    """(LP iterations, branch-and-bound nodes) HiGHS spent on a solved PuLP problem: its work, the same on any
    machine (None where HiGHS did not run). After a MIP, HiGHS's ``simplex_iteration_count`` is the total over its
    nodes, strong branching and heuristics (-1 past its int range)."""
    model = getattr(prob, "solverModel", None)
    if model is None or not hasattr(model, "getInfo"):
        return None, None
    info = model.getInfo()
    iterations = int(info.simplex_iteration_count)
    return (iterations if iterations >= 0 else None), max(0, int(info.mip_node_count))


def status_of(prob: Any) -> tuple[str, bool, float | None, float | None, Outcome]:
    """(status, whether a feasible solution is at hand, dual bound, relative gap, outcome) of a solved PuLP problem:
    HiGHS's own model status and info where HiGHS ran (PuLP's status says "Not Solved" on a time limit with a
    solution); the outcome from the status code (``_outcome``)."""
    import pulp

    model = getattr(prob, "solverModel", None)
    if model is not None and hasattr(model, "getInfo"):
        info = model.getInfo()
        code = model.getModelStatus()
        have = int(info.primal_solution_status) == 2  # kSolutionStatusFeasible
        return (model.modelStatusToString(code), have, float(info.mip_dual_bound), float(info.mip_gap),
                _outcome(code.name, have))
    have = prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    cbc = {pulp.LpStatusOptimal: "kOptimal", pulp.LpStatusInfeasible: "kInfeasible"}.get(prob.status, "")
    return pulp.LpStatus[prob.status], have, None, None, _outcome(cbc, have)


def _outcome(code: str, have: bool) -> Outcome:
    """The outcome of a HiGHS model status (``HighsModelStatus``'s name): an empty model is solved; "infeasible or
    unbounded" is infeasible for these programs, whose variables are all bounded; a solution limit is the node
    limit (``mip_max_nodes``), as is an iteration limit."""
    if code in ("kOptimal", "kModelEmpty"):
        return "optimal"
    if code in ("kInfeasible", "kUnboundedOrInfeasible"):
        return "infeasible"
    if code == "kTimeLimit":
        return "time_limit"
    if code in ("kSolutionLimit", "kIterationLimit"):
        return "node_limit"
    return "feasible" if have else "no_solution"


def solver(time_limit: float, warm: bool, gap: float | None = None, ends: float | None = None) -> Any:
    """HiGHS with warm starts (CBC where HiGHS is missing); ``gap``: stop at this relative MIP gap. ``ends``: a
    ``time.monotonic()`` instant by which HiGHS must stop: its time limit is set from it just before it runs, so the
    time PuLP spends handing a large model over (tens of seconds on 100k+ variables) is not added to the limit."""
    import pulp

    if "HiGHS" not in pulp.listSolvers(onlyAvailable=True):
        return pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit, warmStart=warm, threads=2, gapRel=gap)

    class WarmHiGHS(pulp.HiGHS):  # type: ignore[misc]  # PuLP is untyped: pulp.HiGHS is Any
        """PuLP's HiGHS API ignores warm starts; hand the variables' initial values to HiGHS as a MIP start."""

        def callSolver(self, lp: Any) -> None:
            if warm:
                import highspy

                sol = highspy.HighsSolution()
                values = [0.0] * lp.solverModel.getNumCol()
                for var in lp.variables():
                    if var.varValue is not None:
                        values[var.index] = float(var.varValue)
                sol.col_value = values
                sol.value_valid = True
                lp.solverModel.setSolution(sol)
            if ends is not None:
                lp.solverModel.setOptionValue("time_limit", max(0.1, ends - time.monotonic()))
            lp.solverModel.run()

        def findSolutionValues(self, lp: Any) -> Any:
            """PuLP 3.3 maps no status for a node limit (``mip_max_nodes``: HiGHS's kSolutionLimit) and raises a
            KeyError after reading the values back: a node limit is a time limit in work, with or without a
            solution."""
            try:
                return super().findSolutionValues(lp)
            except KeyError:
                found = int(lp.solverModel.getInfo().primal_solution_status) == 2
                return (pulp.LpStatusNotSolved,
                        pulp.LpSolutionIntegerFeasible if found else pulp.LpSolutionNoSolutionFound)

    return WarmHiGHS(msg=False, timeLimit=time_limit, threads=2, gapRel=gap)


def _solve_here(prob: Any, time_limit: float, warm: bool, ends: float, gap: float | None,
                options: dict[str, Any]) -> dict[str, Any]:
    """Solve ``prob`` in this process; the stats and the non-zero variable values (by name)."""
    import pulp

    chosen = solver(max(0.1, time_limit), warm, gap=gap, ends=ends)
    chosen.optionsDict.update(options)
    prob.solve(chosen)
    status, have, dual, rel_gap, outcome = status_of(prob)
    values = {v.name: v.varValue for v in prob.variables() if v.varValue} if have else {}
    iterations, nodes = work_of(prob)
    return {"status": status, "outcome": outcome, "have_solution": have,
            "objective": pulp.value(prob.objective) if have else None, "dual_bound": dual, "gap": rel_gap,
            "lp_iterations": iterations, "nodes": nodes, "values": values}


def _child_main(out_path: str) -> None:
    """``python -m rebalancer.plan.highs OUT``: solve the pickled (problem, time limit, warm, ends, gap, options)
    read from stdin, write the pickled result (or the error) to OUT."""
    prob, time_limit, warm, ends, gap, options = pickle.load(sys.stdin.buffer)
    try:
        result = _solve_here(prob, time_limit, warm, ends, gap, options)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
        result = {"error": f"{type(exc).__name__}: {exc}"}
    with open(out_path, "wb") as f:
        pickle.dump(result, f)


def solve(prob: Any, time_limit: float, *, warm: bool, gap: float | None = None,
          options: dict[str, Any] | None = None, write_to: str | None = None) -> SolveResult:
    """HiGHS on ``prob`` until ``time_limit`` seconds from now, the model's hand-over included (``EXTRACT_SHARE`` of
    it is kept for reading the solution back), in a child process killed ``KILL_GRACE`` seconds past the limit
    (module doc). ``warm``: the variables' initial values are a MIP start; ``gap``: the relative MIP gap to stop at;
    ``options``: HiGHS's own (``mip_max_nodes``, ``threads``, ``random_seed``); ``write_to``: the program written
    there first (``--write-lp``). Returns {"status" (the solver's words), "outcome" (``Outcome``), "have_solution",
    "objective", "dual_bound", "gap", "seconds"} and sets every variable's value (0 where the solver gave none). A solver that fails raises
    ``PlanError``."""
    started = time.monotonic()
    if write_to:
        write_lp(prob, Path(write_to))
    limit = max(0.1, time_limit)
    ends = started + limit * (1.0 - EXTRACT_SHARE)  # CLOCK_MONOTONIC: one clock for the whole machine
    payload = pickle.dumps((prob, limit, warm, ends, gap, dict(options or {})), protocol=pickle.HIGHEST_PROTOCOL)
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    result: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="rebalancer-lp-") as tmp:
        out = Path(tmp) / "result.pickle"
        proc = subprocess.Popen([sys.executable, "-m", "rebalancer.plan.highs", str(out)], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        killed = False
        try:
            _, err = proc.communicate(payload, timeout=max(0.1, started + limit + KILL_GRACE - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            killed = True
        if not killed and proc.returncode == 0 and out.exists():
            with open(out, "rb") as f:
                result = pickle.load(f)
    if result is None:
        why = ("stopped by the planner: HiGHS overran its time limit" if killed else
               f"the solver's process exited {proc.returncode}: "
               f"{(err or b'').decode(errors='replace').strip().splitlines()[-1:] or ''}")
        result = {"status": f"Time limit reached ({why})" if killed else why,
                  "outcome": "time_limit" if killed else "failed", "have_solution": False,
                  "objective": None, "dual_bound": None, "gap": None, "lp_iterations": None, "nodes": None,
                  "values": {}}
    elif "error" in result:
        raise PlanError(f"the 0/1 program's solver failed: {result['error']}")
    values = result.pop("values")
    for v in prob.variables():
        v.varValue = values.get(v.name, 0.0)
    return SolveResult(status=result["status"], outcome=result["outcome"], have_solution=result["have_solution"],
                       objective=result["objective"], dual_bound=result["dual_bound"], gap=result["gap"],
                       seconds=round(time.monotonic() - started, 3), lp_iterations=result["lp_iterations"],
                       nodes=result["nodes"])


def timed_out(stats: Mapping[str, Any]) -> bool:
    """Whether the program stopped at its wall clock (its safety net, or the phase's time) rather than its node limit
    or an answer: what it returned then depends on how busy the machine was, and the caller says so."""
    return stats.get("outcome") == "time_limit"


def infeasible(stats: Mapping[str, Any]) -> bool:
    """Whether the solver proved that no solution exists."""
    return stats.get("outcome") == "infeasible"


if __name__ == "__main__":
    _child_main(sys.argv[1])
