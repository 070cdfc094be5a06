"""The hostile-user probe's fault rows (bench/probe_hostile.py --only faults), each on a simulator of its own: a
rollback around a dead kept replica refuses at once, the throttle advice of a stalled execution runs as printed, a
destination restarting within the grace completes. Apart from the quick probe's file, so that the fast tier runs the
two on different workers."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO
from test_probe_hostile import GOAL_ZERO, parse_table


@pytest.mark.timeout(900)
def test_fault_rows_find_no_bug() -> None:
    # Issue 42 items 6-8 on simulators of their own: a rollback around a dead kept replica refuses at once, the
    # throttle advice of a stalled execution runs as printed, a destination restarting within the grace completes.
    result = subprocess.run([sys.executable, str(REPO / "bench" / "probe_hostile.py"), "--only", "faults"],
                            cwd=REPO, capture_output=True, text=True, timeout=880)
    report = result.stdout + "\n" + result.stderr[-3000:]
    total = parse_table(result.stdout)["TOTAL"]
    assert total["cases"] == 3 and total["clean-errors"] == 1 and total["expected-ok"] == 2, report
    for column in (*GOAL_ZERO, "other-unclean"):
        assert total[column] == 0, f"{column}: {total[column]}\n{report}"
    assert result.returncode == 0, report
