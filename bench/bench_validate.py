"""Benchmark: the Great Expectations gates on a Wix-scale plan (40 brokers, ~263,600 replicas, ~11,000 changes).

Plans the case with the greedy planner (not timed here), then times `validate_run_dir` (frames, 12 GX gates,
Data Docs) and prints the gate count, changed partitions, seconds and peak RSS. Target (issue 5): under 60 s.

    .venv/bin/python bench/bench_validate.py
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    import bench_planners

    from rebalancer.formats import write_cluster_json
    from rebalancer.plan import plan_run_dir
    from rebalancer.validate import validate_run_dir

    cluster = bench_planners.build("wix-265k")
    with tempfile.TemporaryDirectory() as tmp:
        write_cluster_json(cluster, Path(tmp) / "snapshot.json")
        plan = plan_run_dir(tmp, "rebalance", strategy="greedy")
        start = time.perf_counter()
        result = validate_run_dir(tmp)
        secs = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{'replicas':>9} {'changes':>8} {'gates':>6} {'passed':>7} {'seconds':>8} {'peak MiB':>9}  target")
    print(f"{cluster.replica_count:>9} {len(plan.changes):>8} {len(result['gates']):>6} {str(result['passed']):>7}"
          f" {secs:>8.1f} {rss:>9.0f}  {'ok' if secs < 60 else 'MISSED (< 60 s)'}")


if __name__ == "__main__":
    main()
