"""Benchmark: the Spark skew analysis on 500k to 5M replica rows with local[2], through spark-submit.

Writes synthetic run directories (replicas.parquet + brokers.parquet: 1,000 brokers in 10 racks, RF 3, 2,000
topics, skewed placement) with pyarrow, runs `rebalancer analyze --master local[2]` on each and prints rows,
wall seconds (spark-submit included), the job's own seconds, rows/s, and seconds per million rows (flat = linear).
Target (issue 4): 5,000,000 rows in under 3 minutes.

    .venv/bin/python bench/bench_analysis.py [--sizes 500000,1000000,2500000,5000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def make_run(run: Path, rows: int, brokers: int = 1000, racks: int = 10, rf: int = 3, topics: int = 2000) -> None:
    rng = np.random.default_rng(rows)
    n_parts = rows // rf
    weights = np.linspace(1.0, 2.0, brokers)
    weights /= weights.sum()
    topic_of = rng.integers(0, topics, n_parts)
    part_no = np.zeros(n_parts, dtype=np.int32)
    # partition numbers within each topic
    order = np.argsort(topic_of, kind="stable")
    counts = np.bincount(topic_of, minlength=topics)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    part_no[order] = np.arange(n_parts) - np.repeat(starts, counts)
    first = rng.choice(brokers, n_parts, p=weights)
    step = rng.integers(1, brokers // rf, n_parts)
    reps = np.stack([(first + k * step) % brokers for k in range(rf)], axis=1)
    size = rng.lognormal(18, 1.0, n_parts).astype(np.int64)
    isr_ok = rng.random(n_parts) > 0.001
    table = pa.table({
        "topic": pa.array(np.char.add("topic-", topic_of.astype(str)).repeat(rf)).dictionary_encode(),
        "partition": pa.array(part_no.repeat(rf), pa.int32()),
        "broker": pa.array(reps.reshape(-1), pa.int32()),
        "position": pa.array(np.tile(np.arange(rf, dtype=np.int16), n_parts), pa.int16()),
        "is_leader": pa.array(np.tile(np.arange(rf) == 0, n_parts)),
        "in_isr": pa.array(np.stack([np.ones(n_parts, bool), np.ones(n_parts, bool), isr_ok], axis=1).reshape(-1)),
        "size_bytes": pa.array(size.repeat(rf), pa.int64()),
        "rack": pa.array(np.char.add("rack", (reps.reshape(-1) % racks).astype(str))),
        "bytes_in_per_s": pa.array(np.full(n_parts * rf, None, dtype=object), pa.float64()),
    })
    run.mkdir(parents=True)
    pq.write_table(table, run / "replicas.parquet", compression="zstd")
    pq.write_table(pa.table({"broker": pa.array(np.arange(brokers, dtype=np.int32)),
                             "rack": pa.array([f"rack{b % racks}" for b in range(brokers)]),
                             "alive": pa.array(np.ones(brokers, bool))}), run / "brokers.parquet")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="500000,1000000,2500000,5000000")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    print(f"{'rows':>9} {'wall s':>8} {'job s':>8} {'rows/s':>10} {'s per M rows':>12}  target")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.sizes.split(",")):
            run = Path(tmp) / f"run-{n}"
            make_run(run, n)
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "rebalancer", "analyze", str(run), "--master", args.master],
                                  capture_output=True, text=True)
            wall = time.perf_counter() - start
            if proc.returncode != 0:
                print(f"{n:>9} FAILED: {proc.stderr.strip().splitlines()[-1]}")
                continue
            job = json.loads((run / "analysis" / "summary.json").read_text())["spark"]["seconds"]
            verdict = "ok" if n < 5_000_000 or wall < 180 else "MISSED (< 180 s)"
            print(f"{n:>9} {wall:>8.1f} {job:>8.1f} {n / wall:>10.0f} {wall / (n / 1e6):>12.1f}  {verdict}", flush=True)


if __name__ == "__main__":
    main()
