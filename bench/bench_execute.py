"""Benchmark: does throttled execution take the time the throttle allows, and no less?

A real ZooKeeper and the simulated cluster (16 brokers: 12 in 3 racks + 4 new in a 4th), an add-brokers plan,
executed through the ZooKeeper backend and through the Admin API (kafka://, the simulator's wire-protocol listener)
at a throttle. Prints the physical bound (for each broker, bytes in and out
during the run divided by the throttle; the largest wins), the simulated time the moves took (first start to last
finish), their ratio, and the batches and wall seconds. Target (issue 6): within 15% of the bound.

    .venv/bin/python bench/bench_execute.py [--backend both|zookeeper|kafka] [--throttle 50MB/s] [--acceleration 10]

ZooKeeper mode runs one reassignment at a time, so each batch boundary idles the brokers for the settle time and
the polling; the acceleration multiplies that idle time in simulated seconds, hence a moderate default.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def run_one(backend_name: str, args: argparse.Namespace) -> dict:  # type: ignore[type-arg]
    """One add-brokers execution on a fresh ZooKeeper and simulated cluster, through one backend."""
    from kazoo.client import KazooClient

    from rebalancer.execute import ExecOptions, approve, execute, open_backend, parse_rate, verify
    from rebalancer.plan import plan_run_dir
    from rebalancer.sim.controller import SimulatedCluster
    from rebalancer.sim.scenarios import ScenarioParams, build_scenario
    from rebalancer.snapshot import take_snapshot
    from rebalancer.zkserver import ZooKeeperServer

    rate = parse_rate(args.throttle)
    with tempfile.TemporaryDirectory() as tmp:
        server = ZooKeeperServer(Path(tmp) / "zk").start()
        zk = KazooClient(hosts=f"{server.hosts}/kafka")
        try:
            root = KazooClient(hosts=server.hosts)
            root.start()
            root.ensure_path("/kafka")
            root.stop()
            zk.start()
            cluster = build_scenario("new-brokers", ScenarioParams(partitions=args.partitions, mean_partition_mib=128))
            sim = SimulatedCluster(zk, acceleration=args.acceleration, tick=0.01, state_dir=Path(tmp) / "sim")
            sim.load(cluster)
            sim.start()
            url = f"zk://{server.hosts}/kafka" if backend_name == "zookeeper" else f"kafka://{sim.bootstrap}"
            run = Path(tmp) / "run"
            take_snapshot(f"zk://{server.hosts}/kafka", run, sizes=f"file://{Path(tmp) / 'sim' / 'log-dirs.json'}")
            plan = plan_run_dir(run, "add-brokers", brokers=[12, 13, 14, 15])
            approve(run, by="bench")
            with open_backend(url) as backend:
                wall = time.perf_counter()
                state = execute(run, backend, ExecOptions(
                    throttle=rate, poll=0.05, throttle_settle=0.3, progress=lambda _t: None,
                    per_broker=args.max_moves_per_broker, total=args.max_moves))
                wall = time.perf_counter() - wall
                verify(run, backend)
            sim.stop()
        finally:
            zk.stop()
            server.stop()
    moved_in: dict[int, int] = {}
    moved_out: dict[int, int] = {}
    for e in sim.completed:
        for b in e["target"]:
            if b not in e["original"]:
                moved_in[b] = moved_in.get(b, 0) + e["size_bytes"]
                moved_out[e["original"][0]] = moved_out.get(e["original"][0], 0) + e["size_bytes"]
    bound = max([*moved_in.values(), *moved_out.values()]) / rate
    copies = [e for e in sim.completed if e["bytes_copied"]]
    took = max(e["finished_sim_s"] for e in copies) - min(e["started_sim_s"] for e in copies)
    return {"backend": backend_name, "moves": plan.summary["replica_moves"], "gib": sum(moved_in.values()) / 2**30,
            "bound": bound, "took": took, "batches": len(state["batches"]), "wall": wall}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--throttle", default="50MB/s")
    ap.add_argument("--acceleration", type=float, default=10.0,
                    help="simulated seconds per wall second; wall-clock overheads (settle, polling) scale with it")
    ap.add_argument("--partitions", type=int, default=480)
    ap.add_argument("--max-moves-per-broker", type=int, default=25)
    ap.add_argument("--max-moves", type=int, default=100)
    ap.add_argument("--backend", choices=["zookeeper", "kafka", "both"], default="both")
    args = ap.parse_args()
    backends = ["zookeeper", "kafka"] if args.backend == "both" else [args.backend]
    print(f"{'backend':>9} {'moves':>6} {'GiB':>7} {'throttle':>10} {'bound s':>9} {'simulated s':>12} {'ratio':>6}"
          f" {'batches':>8} {'wall s':>7}  target")
    for name in backends:
        r = run_one(name, args)
        ratio = r["took"] / r["bound"]
        print(f"{name:>9} {r['moves']:>6} {r['gib']:>7.1f} {args.throttle:>10} {r['bound']:>9.1f} {r['took']:>12.1f}"
              f" {ratio:>6.3f} {r['batches']:>8} {r['wall']:>7.1f}  {'ok' if 1.0 - 1e-6 <= ratio <= 1.15 else 'MISSED (1.00-1.15)'}",
              flush=True)


if __name__ == "__main__":
    main()
