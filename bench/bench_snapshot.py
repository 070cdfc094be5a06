"""Benchmark: `rebalancer snapshot --source file://X.json` on large cluster descriptions.

Generates descriptions (brokers in 6 racks, RF 3, rack-distinct replicas, ISR/leader/sizes filled in), runs the
real CLI in a subprocess for each, and prints a table: replicas, input size, wall time, peak RSS of the process.
Targets (issue 2): 300 brokers / 600,000 replicas in under 60 s and under 2 GiB.

``--read`` instead compares the two readings of a snapshot (issue 45): the hand parser (``json`` and
``cluster_from_dict``, field by field) against the msgspec decoder (``formats.read_cluster_json``, what
``load_snapshot`` uses), each in a process of its own on the same file, one run: seconds and peak RSS.

    .venv/bin/python bench/bench_snapshot.py [--sizes 60000,600000]
    .venv/bin/python bench/bench_snapshot.py --read --sizes 3000000 --brokers 2600
    .venv/bin/python bench/bench_snapshot.py --read-plan --sizes 300000,1000000 --brokers 2600

``--read-plan``: the same for ``plan.json`` (``planfile.result.load_plan``: the msgspec decoder against ``_plan_of``,
``json`` and field by field), on a generated plan of that many changes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_description(path: Path, brokers: int, replicas: int, racks: int = 6, rf: int = 3, seed: int = 1) -> None:
    rng = random.Random(seed)
    by_rack = [[b for b in range(brokers) if b % racks == r] for r in range(racks)]
    partitions = replicas // rf
    per_topic = 500
    with path.open("w") as fh:
        fh.write('{"brokers": [')
        fh.write(",".join(json.dumps({"id": b, "rack": f"rack{b % racks}"}) for b in range(brokers)))
        fh.write('], "partitions": [\n')
        for i in range(partitions):
            chosen_racks = rng.sample(range(racks), rf)
            reps = [rng.choice(by_rack[r]) for r in chosen_racks]
            entry = {"topic": f"topic-{i // per_topic:04d}", "partition": i % per_topic, "replicas": reps,
                     "leader": reps[0], "isr": reps, "size_bytes": rng.randint(1, 2**34)}
            fh.write(("," if i else "") + json.dumps(entry) + "\n")
        fh.write("]}\n")


def run(path: Path, out: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of the CLI process, measured by /proc-free wait4 accounting."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "rebalancer", "snapshot", "--source", f"file://{path}",
                             "--out", str(out), "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"snapshot failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return elapsed, usage.ru_maxrss / 1024


READERS = {
    "hand (json, field by field)": "from rebalancer.formats import cluster_from_dict, read_json\n"
                                   "c = cluster_from_dict(read_json(PATH))\nN = c.replica_count",
    "decoder (msgspec)": "from rebalancer.formats import read_cluster_json\nc = read_cluster_json(PATH)\n"
                         "N = c.replica_count",
}
PLAN_READERS = {
    "hand (json, field by field)": "from pathlib import Path\nfrom rebalancer.formats import read_json\n"
                                   "from rebalancer.planfile.result import _plan_of\n"
                                   "c = _plan_of(read_json(PATH), Path(PATH))\nN = len(c.changes)",
    "decoder (msgspec)": "from pathlib import Path\nfrom rebalancer.planfile.result import load_plan\n"
                         "c = load_plan(Path(PATH).parent)\nN = len(c.changes)",
}


def make_plan_file(path: Path, brokers: int, changes: int, seed: int = 1) -> None:
    """A plan.json of ``changes`` changes (one replica each moved to another broker), as ``write_plan`` writes it."""
    from rebalancer.planfile.result import PLAN_FORMAT

    rng = random.Random(seed)
    with path.open("w") as fh:
        fh.write(json.dumps({"format": PLAN_FORMAT, "version": 1, "mode": "rebalance", "strategy": "greedy",
                             "params": {}, "solver": {}, "content_hash": "0" * 64, "summary": {}})[:-1])
        fh.write(', "changes": [\n')
        for i in range(changes):
            before = rng.sample(range(brokers), 3)
            after = [*before[:2], next(b for b in rng.sample(range(brokers), 4) if b not in before)]
            size = rng.randint(1, 2**34)
            entry = {"topic": f"topic-{i // 200:04d}", "partition": i % 200, "replicas_before": before,
                     "replicas_after": after, "leader_before": before[0], "leader_after": after[0],
                     "added": after[2:], "removed": before[2:], "size_bytes": size, "bytes_to_copy": size}
            fh.write(("," if i else "") + json.dumps(entry, indent=2) + "\n")
        fh.write("]}\n")


def read_once(path: Path, code: str) -> tuple[float, float, int]:
    """Seconds to read ``path`` (inside the process), its peak RSS (MiB) and the replicas or changes read."""
    script = (f"import time, gc\nPATH = {str(path)!r}\ngc.disable()\nt = time.perf_counter()\n{code}\n"
              "print(time.perf_counter() - t, N)")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    out = proc.stdout.read().decode() if proc.stdout else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"read failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    seconds, replicas = out.split()
    return float(seconds), usage.ru_maxrss / 1024, int(replicas)


def compare_readers(sizes: list[int], brokers: int) -> None:
    print(f"{'replicas':>9} {'input MiB':>9}  {'reader':<28} {'seconds':>8} {'peak MiB':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            src = Path(tmp) / f"cluster-{n}.json"
            make_description(src, brokers, n)
            for name, code in READERS.items():
                secs, rss, read = read_once(src, code)
                assert read == n // 3 * 3, (read, n)
                print(f"{n:>9} {src.stat().st_size / 2**20:>9.1f}  {name:<28} {secs:>8.2f} {rss:>9.0f}", flush=True)


def compare_plan_readers(sizes: list[int], brokers: int) -> None:
    print(f"{'changes':>9} {'input MiB':>9}  {'reader':<28} {'seconds':>8} {'peak MiB':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            src = Path(tmp) / str(n) / "plan.json"
            src.parent.mkdir()
            make_plan_file(src, brokers, n)
            for name, code in PLAN_READERS.items():
                secs, rss, read = read_once(src, code)
                assert read == n, (read, n)
                print(f"{n:>9} {src.stat().st_size / 2**20:>9.1f}  {name:<28} {secs:>8.2f} {rss:>9.0f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="60000,600000", help="replica counts to benchmark (300 brokers each)")
    ap.add_argument("--brokers", type=int, default=300)
    ap.add_argument("--read", action="store_true", help="compare the hand parser and the decoder instead")
    ap.add_argument("--read-plan", action="store_true",
                    help="the same for plan.json (sizes: changes; a tenth of a 3M-replica plan moves 300,000)")
    args = ap.parse_args()
    if args.read_plan:
        compare_plan_readers([int(x) for x in args.sizes.split(",")], args.brokers)
        return
    if args.read:
        compare_readers([int(x) for x in args.sizes.split(",")], args.brokers)
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.sizes.split(",")):
            src = Path(tmp) / f"cluster-{n}.json"
            make_description(src, args.brokers, n)
            secs, rss = run(src, Path(tmp) / f"run-{n}")
            rows.append((args.brokers, n, src.stat().st_size / 2**20, secs, rss))
    print(f"{'brokers':>7} {'replicas':>9} {'input MiB':>9} {'seconds':>8} {'peak MiB':>9}  target")
    for b, n, mib, secs, rss in rows:
        verdict = "ok" if (secs < 60 and rss < 2048) else "MISSED (<60 s, <2048 MiB)"
        print(f"{b:>7} {n:>9} {mib:>9.1f} {secs:>8.2f} {rss:>9.0f}  {verdict}")


if __name__ == "__main__":
    main()
