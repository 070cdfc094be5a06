"""Every 0/1 program of the plan stage solves through ``rebalancer.plan.highs``: in a child process killed past its
time limit, because HiGHS overruns it (the load program's case: tests/test_load_planner.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from rebalancer.plan import highs, lp


def _count_program() -> tuple[lp.CountProgram, lp.LpInput]:
    """Two brokers full and one empty (three racks): the count program moves replicas onto the third."""
    replicas = {("t", i): ((0, 1) if i % 2 else (1, 0)) for i in range(6)}
    inp = lp.LpInput(replicas=replicas, sizes={k: 10 for k in replicas}, rack={0: "a", 1: "b", 2: "c"},
                     candidates=frozenset({0, 1, 2}), keep=frozenset({0, 1, 2}),
                     count_lo={0: 4, 1: 4, 2: 4}, count_hi={0: 4, 1: 4, 2: 4},
                     leader_lo={0: 2, 1: 2, 2: 2}, leader_hi={0: 2, 1: 2, 2: 2}, time_limit=30.0)
    return lp.build(inp), inp


def test_the_count_program_solves_in_a_child_and_reads_its_solution_back() -> None:
    program, inp = _count_program()
    _status, outcome, have, _dual, _gap = lp.solve(program, 30.0, warm=False)
    assert (outcome, have) == ("optimal", True)
    placed, slack = lp.extract(program, inp)
    counts = {b: sum(b in reps for reps in placed.values()) for b in (0, 1, 2)}
    assert counts == {0: 4, 1: 4, 2: 4} and slack == 0


def test_the_count_programs_solver_is_killed_at_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The count program solved in this process, as it did, kept HiGHS's own clock: HiGHS 1.15 ran on for minutes
    past it. Now it is killed ``KILL_GRACE`` after the limit; with no grace and a limit shorter than the child takes
    to start, the kill is certain: the solve returns at once with no solution and says the planner stopped it."""
    monkeypatch.setattr(highs, "KILL_GRACE", 0.0)
    program, _ = _count_program()
    started = time.monotonic()
    status, outcome, have, _dual, _gap = lp.solve(program, 0.01, warm=False)
    assert time.monotonic() - started < 2.0
    assert not have
    assert outcome == "time_limit", status
    assert highs.timed_out({"outcome": outcome})
    assert all(v.varValue == 0.0 for v in program.prob.variables())


def _knapsack() -> tuple[Any, dict[str, Any]]:
    """max 5a + 4b + 3c with 2a + 3b + c <= 5, a, b, c in {0, 1}: a and b (9), as scipy's own ``milp`` says."""
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint

    return np.array([-5.0, -4.0, -3.0]), {"constraints": LinearConstraint(np.array([[2.0, 3.0, 1.0]]), -np.inf, 5.0),
                                          "integrality": np.ones(3), "bounds": Bounds(0.0, 1.0)}


def test_the_milp_worker_solves_program_after_program_in_one_child() -> None:
    import numpy as np
    from scipy.optimize import milp

    cost, kw = _knapsack()
    worker = highs.MilpWorker()
    try:
        child = worker.start()  # started ahead, as the failover order does before its local search
        assert worker.start() is child and child.poll() is None
        first = worker.solve(cost, time_limit=30.0, **kw)
        second = worker.solve(-cost, time_limit=30.0, options={"node_limit": 10}, **kw)
        assert worker._proc is child and child is not None and child.poll() is None  # the same child, still up
    finally:
        worker.close()
    assert first is not None and second is not None
    assert first["status"] == 0 and np.array_equal(first["x"].round(), milp(cost, **kw).x.round())
    assert first["x"].round().tolist() == [1.0, 1.0, 0.0]
    assert second["x"].round().tolist() == [0.0, 0.0, 0.0]  # minimising the positive cost: nothing
    assert child.wait(timeout=10) == 0  # closing its stdin ended it


def test_the_milp_workers_child_is_killed_at_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """As ``solve``'s: with no grace and a limit shorter than the child takes to start, the kill is certain; the
    solve returns at once with nothing, and the next one starts a child again."""
    monkeypatch.setattr(highs, "KILL_GRACE", 0.0)
    cost, kw = _knapsack()
    worker = highs.MilpWorker()
    started = time.monotonic()
    assert worker.solve(cost, time_limit=0.01, **kw) is None
    assert time.monotonic() - started < 2.0 and worker._proc is None
    monkeypatch.setattr(highs, "KILL_GRACE", 2.0)
    try:
        again = worker.solve(cost, time_limit=30.0, **kw)
    finally:
        worker.close()
    assert again is not None and again["x"].round().tolist() == [1.0, 1.0, 0.0]


def test_a_forked_process_starts_its_own_milp_child_and_leaves_its_parents_alone() -> None:
    """A fork shares the worker's pipes and its child's pid: the fork starts a child of its own, and stopping the
    worker there (even killing) does not stop the parent's."""
    import os

    cost, kw = _knapsack()
    worker = highs.MilpWorker()
    try:
        assert worker.solve(cost, time_limit=30.0, **kw) is not None
        parents = worker._proc
        assert parents is not None
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the fork: stop the worker (as after a kill), solve, report whether its child was its own
            ok = False
            try:
                worker.close(kill=True)
                answer = worker.solve(cost, time_limit=30.0, **kw)
                ok = answer is not None and worker._proc is not parents
                worker.close()
            finally:
                os.write(write, b"1" if ok else b"0")
                os._exit(0)
        os.close(write)
        assert os.read(read, 1) == b"1"
        os.waitpid(pid, 0)
        os.close(read)
        assert worker._proc is parents and parents.poll() is None
        again = worker.solve(cost, time_limit=30.0, **kw)
        assert again is not None and worker._proc is parents
    finally:
        worker.close()
