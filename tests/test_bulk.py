"""``rebalancer.bulk.collector_paused`` around a plan: no cyclic collection while the plan makes its millions of
long-lived objects (14.6 s of a 3M-replica plan before), the collector as it was afterwards, the same plan."""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path

from rebalancer.formats import write_cluster_json
from rebalancer.plan.planner import plan_run_dir

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from load_cases import unequal  # noqa: E402


def _collections_during(fn) -> int:  # type: ignore[no-untyped-def]
    """Cyclic collections started while the plan (``plan_run_dir``) was on the stack."""
    seen = []

    def count(phase: str, info: dict) -> None:  # type: ignore[type-arg]
        frame = sys._getframe(1)
        while frame is not None and phase == "start":
            if frame.f_code.co_name == "plan_run_dir":
                seen.append(info["generation"])
                break
            frame = frame.f_back  # type: ignore[assignment]

    gc.callbacks.append(count)
    try:
        fn()
    finally:
        gc.callbacks.remove(count)
    return len(seen)


def test_a_plan_runs_without_cyclic_collections_and_leaves_the_collector_as_it_was(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    write_cluster_json(unequal(30, 3, 6_000, light=6, topics=40), run / "snapshot.json")
    assert gc.isenabled()
    assert _collections_during(lambda: plan_run_dir(run, "rebalance", strategy="greedy")) == 0
    assert gc.isenabled()
    first = json.loads((run / "plan.json").read_text())["changes"]
    assert first
    gc.disable()
    try:
        plan_run_dir(run, "rebalance", strategy="greedy")
        assert not gc.isenabled()  # a host that had it off keeps it off
    finally:
        gc.enable()
    assert json.loads((run / "plan.json").read_text())["changes"] == first
