"""The fuzz benchmark's verdict (bench/bench_fuzz.py, issue 41): which bands a plan's proof covers. A proof of the bands
together counts a cluster "proven"; its count gate, the one a plan may not trade away for disk, is flagged
(``counts_unproven``) where it missed with no proof that covers it: fuzz small seed 101 ended with replica counts 100 %
off the median under "proven", a 10 GB partition having put disk out of reach."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from bench_fuzz import proven_dimensions  # noqa: E402

SIZE = {"by": "size", "dimension": "disk", "topic": "t", "bytes": 10, "ceiling": 5, "broker": 9}
STEP = {"widen": 1.0, "one_way_no_worse": False, "status": "Infeasible", "outcome": "infeasible", "seconds": 1.0}


@pytest.mark.parametrize(("proof", "covered"), [
    (None, set()),
    ({"feasible": None, "steps": []}, set()),
    ({"feasible": True, "steps": [], "counts": {"by": "mode"}}, {"counts"}),
    # a sum on disk: disk (and the bytes bound, which presumes the bands met), not network in, not the counts
    ({"feasible": False, "steps": [], "by_sum": SIZE}, {"disk", "bytes"}),
    ({"feasible": False, "steps": [], "by_sum": SIZE, "counts": {"by": "mode"}}, {"disk", "bytes", "counts"}),
    # the relaxation: the load bands together, counts aside
    ({"feasible": False, "by_relaxation": True, "steps": [STEP], "reachable_widen": None}, {"disk", "nw_in", "bytes"}),
    # the exact ladder holds counts to their gates: nothing found at any widening covers them too
    ({"feasible": False, "steps": [STEP], "reachable_widen": None}, {"disk", "nw_in", "counts", "bytes"}),
    ({"feasible": False, "steps": [STEP, {**STEP, "widen": 1.5}], "reachable_widen": 1.5}, {"disk", "nw_in", "bytes"}),
    # a hot partition's brokers: the load bands it names; the ladder's unsettled steps beside it prove nothing
    ({"feasible": False, "steps": [{**STEP, "status": "Node limit reached", "outcome": "node_limit"}],
      "reachable_widen": None, "by_holders": {"by": "holders", "dimensions": ["disk", "nw_in"]}},
     {"disk", "nw_in", "bytes"}),
    # a sum skips the ladder's first steps: its widened steps prove nothing at the gates' bands
    ({"feasible": False, "steps": [{**STEP, "widen": 1.5}], "by_sum": SIZE, "reachable_widen": None}, {"disk", "bytes"}),
])
def test_a_proof_covers_only_the_bands_it_reaches(proof: dict | None, covered: set[str]) -> None:
    assert proven_dimensions(proof) == covered
