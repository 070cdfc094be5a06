"""Clusters for the load benchmarks (issue 13): heavy-tailed partition sizes, unequal starting loads, mixed
hardware, a network-hot topic. Deterministic (seeded); plain ``Cluster`` objects, no Kafka needed.

- ``heavy_tailed(cluster, sigma)``: the same placement with lognormal sizes (median 64 MiB; sigma 1.4 puts the
  largest of 100k partitions a few hundred times above the median);
- ``unequal(brokers, racks, partitions, light, ...)``: a rack-safe placement where the ``light`` brokers were
  picked four times less often (a quarter of the others' load), heavy-tailed sizes;
- ``mixed_hardware(cluster, fraction)``: a capacity file giving ``fraction`` of the brokers twice the disk and
  network of the others;
- ``network_hot(cluster, topic, partitions, factor)``: bytes-in history where a few partitions of one topic carry
  ``factor`` times the rate their size would give.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

from rebalancer.model import Broker, Cluster, Partition

MiB = 1024 * 1024
MEDIAN = 64 * MiB


def heavy_tailed(cluster: Cluster, sigma: float = 1.4, seed: int = 13) -> Cluster:
    rng = random.Random(seed)
    parts = [replace(p, size_bytes=max(1, int(MEDIAN * math.exp(rng.gauss(0.0, sigma))))) for p in cluster.partitions]
    return Cluster.build(list(cluster.brokers), parts, dict(cluster.meta))


def unequal(brokers: int, racks: int, partitions: int, light: int, topics: int = 1000, rf: int = 3,
            sigma: float = 1.4, seed: int = 13) -> Cluster:
    """``light`` brokers (spread over the racks) start with about a quarter of the others' replicas and bytes."""
    rng = random.Random(seed)
    names = [chr(ord("a") + i) for i in range(racks)]
    bs = [Broker(id=i, rack=names[i % racks]) for i in range(brokers)]
    light_ids = set(random.Random(seed + 1).sample(range(brokers), light))
    weight = [0.25 if i in light_ids else 1.0 for i in range(brokers)]
    by_rack = {r: [b.id for b in bs if b.rack == r] for r in names}
    rack_w = {r: [weight[b] for b in by_rack[r]] for r in names}
    parts = []
    for k in range(partitions):
        chosen_racks = rng.sample(names, rf)
        reps = tuple(rng.choices(by_rack[r], rack_w[r])[0] for r in chosen_racks)
        size = max(1, int(MEDIAN * math.exp(rng.gauss(0.0, sigma))))
        parts.append(Partition(topic=f"t{k % topics:04d}", partition=k // topics, replicas=reps, isr=reps,
                               leader=reps[0], size_bytes=size))
    return Cluster.build(bs, parts, {"scenario": "unequal"})


def add_shape_arguments(ap: Any) -> None:
    """The ``2600b-3m`` case's shape as options (``--partitions --brokers --racks --topics --light``; ``--light 50
    --brokers 300 --racks 6 --partitions 200000 --topics 1000`` is ``300b-600k``), for the benches that
    take it to a real ZooKeeper, Airflow or spark-submit; ``shaped(args)`` builds it."""
    ap.add_argument("--partitions", type=int, default=1_000_000)
    ap.add_argument("--brokers", type=int, default=2600)
    ap.add_argument("--racks", type=int, default=13)
    ap.add_argument("--topics", type=int, default=5000)
    ap.add_argument("--light", type=int, default=0, help="brokers starting with a quarter of the others' load")


def shaped(args: Any) -> Cluster:
    """The cluster of ``add_shape_arguments``' options: rack-safe, heavy-tailed sizes, ``--light`` brokers light."""
    return unequal(args.brokers, args.racks, args.partitions, light=args.light, topics=args.topics)


def mixed_hardware(cluster: Cluster, path: Path, fraction: float = 0.25) -> Path:
    """A Cruise Control capacity file: ``fraction`` of each rack's brokers have twice the others' disk and network."""
    total = sum(p.size_bytes * len(p.replicas) for p in cluster.partitions)
    n = len(cluster.brokers)
    by_rack: dict[str | None, list[int]] = {}
    for b in cluster.brokers:
        by_rack.setdefault(b.rack, []).append(b.id)
    big = {i for ids in by_rack.values() for i in sorted(ids)[: round(len(ids) * fraction)]}  # in every rack
    unit_disk = total / (n + len(big)) / 0.5 / MiB  # about half full on average
    entries = [{"brokerId": "-1", "capacity": {"DISK": str(int(unit_disk)), "NW_IN": "100000", "NW_OUT": "200000",
                                                "CPU": "100"}}]
    entries += [{"brokerId": str(b), "capacity": {"DISK": str(int(2 * unit_disk)), "NW_IN": "200000",
                                                   "NW_OUT": "400000", "CPU": "100"}} for b in sorted(big)]
    path.write_text(json.dumps({"brokerCapacities": entries}))
    return path


def network_hot(cluster: Cluster, topic: str | None = None, partitions: int = 6, factor: float = 20.0,
                retention_s: float = 7 * 24 * 3600) -> Cluster:
    """Every partition gets a bytes-in history rate (size / retention); ``partitions`` of ``topic`` get ``factor``
    times that, as a hot topic's history would show."""
    topic = topic or cluster.partitions[0].topic
    hot = [p.tp for p in cluster.partitions if p.topic == topic][:partitions]
    mean_rate = sum(p.size_bytes for p in cluster.partitions) / len(cluster.partitions) / retention_s
    parts = [replace(p, bytes_in_per_s=(factor * mean_rate if p.tp in hot else p.size_bytes / retention_s))
             for p in cluster.partitions]
    return Cluster.build(list(cluster.brokers), parts, dict(cluster.meta))
