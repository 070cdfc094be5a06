"""HiGHS for every 0/1 program of the plan stage: through PuLP for the count program ``lp``, the load program
``lp_load`` and the exact leader program ``leader_exact`` (the solver with warm starts, its status read back, and the
solve in a child process that is killed past its time limit), and through scipy's ``milp`` for the failover order's
small programs (``MilpWorker``: one such child kept for many programs, killed as well).

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

import atexit
import os
import pickle
import select
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypedDict

from .targets import PlanError

__all__ = ["KILL_GRACE", "EXTRACT_SHARE", "MilpWorker", "milp_worker", "Outcome", "SolveResult", "solver", "status_of", "solve", "timed_out", "infeasible",
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
    result: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="rebalancer-lp-") as tmp:
        out = Path(tmp) / "result.pickle"
        proc = _child(str(out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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


def _child(arg: str, **pipes: Any) -> subprocess.Popen[bytes]:
    """``python -m rebalancer.plan.highs ARG``, this package first on its path: a fresh interpreter (module doc)."""
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    return subprocess.Popen([sys.executable, "-m", "rebalancer.plan.highs", arg], stdin=subprocess.PIPE, env=env,
                            **pipes)


_FRAME = struct.Struct(">Q")  # a message's length before it, on the worker's pipes


def _write_frame(stream: Any, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_FRAME.pack(len(data)) + data)
    stream.flush()


def _read_frame(stream: Any) -> Any:
    """One message from a blocking stream; None at its end."""
    head = stream.read(_FRAME.size)
    if len(head) < _FRAME.size:
        return None
    return pickle.loads(stream.read(_FRAME.unpack(head)[0]))


def _milp_main() -> None:
    """``python -m rebalancer.plan.highs --milp``: scipy ``milp`` on each (arguments, keywords) message read from
    stdin, its result ({"x", "status", "message", "dual_bound", "seconds"}) written to stdout, until stdin ends."""
    from scipy.optimize import milp

    while (request := _read_frame(sys.stdin.buffer)) is not None:
        args, kwargs = request
        started = time.monotonic()
        try:
            res = milp(*args, **kwargs)
            dual = getattr(res, "mip_dual_bound", None)
            reply: dict[str, Any] = {"x": res.x, "status": int(res.status), "message": str(res.message),
                                     "dual_bound": None if dual is None else float(dual),
                                     "seconds": time.monotonic() - started}
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        _write_frame(sys.stdout.buffer, reply)


def _read_exactly(fd: int, n: int, deadline: float) -> bytes | None:
    """``n`` bytes from ``fd``, or None where they do not all come by ``deadline`` (or the stream ends first)."""
    data = b""
    while len(data) < n:
        wait = deadline - time.monotonic()
        if wait <= 0 or not select.select([fd], [], [], wait)[0]:
            return None
        chunk = os.read(fd, n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


class MilpWorker:
    """A child process that solves scipy ``milp`` programs one after another and is killed when one runs
    ``KILL_GRACE`` seconds past its time limit (HiGHS's overruns, module doc): ``solve`` as ``milp`` is called, with
    ``time_limit`` given apart. One interpreter for many small programs (a fresh one, about half a second, costs
    more than each program): started by ``start`` or the first ``solve``, again after a kill or in a forked process;
    stopped by ``close``. ``milp_worker()`` is this process's."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid = os.getpid()

    def start(self) -> subprocess.Popen[bytes]:
        """The child, started now where none is running, so a caller that will solve soon can have its interpreter
        start (mostly importing scipy.optimize) while it works on something else."""
        if self._pid != os.getpid():  # a forked copy: the child's pipes are its parent's
            self._proc, self._pid = None, os.getpid()
        if self._proc is None or self._proc.poll() is not None:
            self._proc = _child("--milp", stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        return self._proc

    def solve(self, *args: Any, time_limit: float, options: Mapping[str, Any] | None = None,
              **kwargs: Any) -> dict[str, Any] | None:
        """``milp(*args, options={**options, "time_limit": time_limit}, **kwargs)`` in the child: {"x" (None without
        a solution), "status" (scipy's: 0 optimal, 1 a work or time limit, 2 infeasible, ...), "message",
        "dual_bound" (HiGHS's proof: no solution's objective is lower), "seconds" (the solver's own)}; None where
        the child was killed past the limit or died. A program the solver rejects raises ``PlanError``."""
        proc = self.start()
        assert proc.stdin is not None and proc.stdout is not None
        deadline = time.monotonic() + max(0.0, time_limit) + KILL_GRACE
        try:
            _write_frame(proc.stdin, (args, {**kwargs, "options": {**(options or {}), "time_limit": time_limit}}))
            reply = self._read_until(proc, deadline)
        except (BrokenPipeError, EOFError, pickle.UnpicklingError):
            reply = None
        if reply is None:
            self.close(kill=True)
            return None
        if "error" in reply:
            raise PlanError(f"the 0/1 program's solver failed: {reply['error']}")
        return reply

    @staticmethod
    def _read_until(proc: subprocess.Popen[bytes], deadline: float) -> dict[str, Any] | None:
        """The child's next message, or None where it does not come whole by ``deadline``."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        head = _read_exactly(fd, _FRAME.size, deadline)
        body = None if head is None else _read_exactly(fd, _FRAME.unpack(head)[0], deadline)
        if body is None:
            return None
        reply: dict[str, Any] = pickle.loads(body)
        return reply

    def close(self, kill: bool = False) -> None:
        """The child stopped: its stdin closed, so it ends after what it is solving (killed where it has not ended
        ``KILL_GRACE`` seconds later, or at once with ``kill``)."""
        proc, self._proc = self._proc, None
        if proc is None or self._pid != os.getpid():  # a forked copy's: the child is its parent's to stop
            return
        if kill:
            proc.kill()
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=KILL_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


_WORKER: MilpWorker | None = None


def milp_worker() -> MilpWorker:
    """This process's ``MilpWorker`` (its child stopped when the process exits)."""
    global _WORKER
    if _WORKER is None:
        _WORKER = MilpWorker()
        atexit.register(_WORKER.close)
    return _WORKER


if __name__ == "__main__":
    if sys.argv[1] == "--milp":
        _milp_main()
    else:
        _child_main(sys.argv[1])
