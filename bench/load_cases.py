"""Clusters for the load benchmarks (issue 13): heavy-tailed partition sizes, unequal starting loads, mixed
hardware, a network-hot topic. Deterministic (seeded); plain ``Cluster`` objects, no Kafka needed.

- ``heavy_tailed(cluster, sigma)``: the same placement with lognormal sizes (median 64 MiB; sigma 1.4 puts the
  largest of 100k partitions a few hundred times above the median);
- ``unequal(brokers, racks, partitions, light, ...)``: a rack-safe placement where the ``light`` brokers were
  picked four times less often (a quarter of the others' load), heavy-tailed sizes;
- ``mixed_hardware(cluster, fraction)``: a capacity file giving ``fraction`` of the brokers twice the disk and
  network of the others;
- ``network_hot(cluster, topic, partitions, factor)``: bytes-in history where a few partitions of one topic carry
  ``factor`` times the rate their size would give;
- ``production(brokers, racks, replicas, rf, ...)`` (issue 41): a production-shaped cluster from one seed: brokers
  of unequal (lognormal) starting weight with a few recently added ones at a quarter of it, optionally empty new
  brokers (``meta["new_brokers"]``); a heavy-tailed (discrete Pareto) number of partitions per topic; sizes alike
  within a topic and heavy-tailed across topics, a few topics empty; rack-safe replicas placed by weight; optionally
  a bytes-in history correlated with size, a few topics hot;
- ``family(name, seed)`` (its draws: ``family_params``): a ``production`` cluster of the ``small`` or ``medium``
  family, with its mode and new brokers: what ``bench/bench_fuzz.py`` plans by the hundred.
"""

from __future__ import annotations

import json
import math
import random
from bisect import bisect_right
from dataclasses import replace
from itertools import accumulate
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


WEEK_S = 7 * 24 * 3600  # Kafka's default retention (log.retention.hours 168)


def production(brokers: int, racks: int, replicas: int, rf: int = 3, *, new: int = 0, recent: float = 0.1,
               weight_sigma: float = 0.4, median_bytes: int = MEDIAN, size_sigma: float = 1.7,
               partition_sigma: float = 0.15, empty_topics: float = 0.03, topic_alpha: float = 1.0,
               max_topic_partitions: int = 1000, bytes_in: bool = False, hot_topics: float = 0.01,
               hot_factor: float = 10.0, rate_sigma: float = 0.7, retention_s: float = WEEK_S, first_id: int = 0,
               seed: int = 0, meta: dict[str, Any] | None = None) -> Cluster:
    """A production-shaped cluster (issue 41), every draw from one ``random.Random(seed)``.

    Brokers ``first_id ..`` on racks ``a, b, ...`` in turn, each with a starting weight ``lognormal(0,
    weight_sigma)``, a ``recent`` fraction of them (recently added) at a quarter of it; ``new`` more brokers, empty,
    spread over the same racks (their ids in ``meta["new_brokers"]``). Topics until ``replicas / rf`` partitions:
    each has ``min(max_topic_partitions, partitions // 4, floor(U ** (-1 / topic_alpha)))`` partitions (a discrete
    Pareto: at ``topic_alpha`` 1, half the topics have one partition, 1 in 13 more than 12, 1 in 100 a hundred or
    more) and a mean partition size ``median_bytes x lognormal(0, size_sigma)``, or 0 for an ``empty_topics``
    fraction; its partitions are that mean x ``lognormal(0, partition_sigma)`` (the noise cut at 3 sigma: one topic's
    partitions lie within ``exp(6 partition_sigma)`` of each other). Each partition's ``rf`` replicas are on distinct
    racks, picked with probability proportional to the racks' weights, and within a rack on a broker picked by
    weight; the first is the leader, the ISR is the replicas. ``bytes_in``: a bytes-in history per partition, size /
    ``retention_s`` x a topic's ``lognormal(0, rate_sigma)`` x the partition's noise, and ``hot_factor`` times that
    on a ``hot_topics`` fraction (at least one) of the non-empty topics; without it the rates are None and the
    planner derives them from size and retention. ``meta``: more entries for the cluster's meta.
    """
    if not 1 <= rf <= racks:
        raise ValueError(f"rack-safe replicas need racks >= rf: {racks} racks, rf {rf}")
    if brokers < racks:
        raise ValueError(f"{brokers} brokers cannot fill {racks} racks")
    rng = random.Random(seed)
    names = [_rack_name(i) for i in range(racks)]
    ids = list(range(first_id, first_id + brokers))
    bs = [Broker(id=b, rack=names[i % racks]) for i, b in enumerate(ids)]
    weight = {b: math.exp(rng.gauss(0.0, weight_sigma)) for b in ids}
    recent_ids = sorted(rng.sample(ids, round(brokers * recent)))
    for b in recent_ids:
        weight[b] *= 0.25
    start = rng.randrange(racks)
    new_bs = [Broker(id=first_id + brokers + j, rack=names[(start + j) % racks]) for j in range(new)]
    by_rack = {r: [b.id for b in bs if b.rack == r] for r in names}
    cum = {r: list(accumulate(weight[b] for b in by_rack[r])) for r in names}
    rack_weight = [cum[r][-1] for r in names]

    partitions = max(1, round(replicas / rf))
    cap = max(1, min(max_topic_partitions, partitions // 4))
    counts: list[int] = []
    left = partitions
    while left > 0:
        k = max(1, min(cap, int((1.0 - rng.random()) ** (-1.0 / topic_alpha))))
        counts.append(min(k, left))
        left -= counts[-1]
    width = max(4, len(str(len(counts) - 1)))
    means = [0.0 if rng.random() < empty_topics else median_bytes * math.exp(rng.gauss(0.0, size_sigma))
             for _ in counts]
    rate_factor = [math.exp(rng.gauss(0.0, rate_sigma)) for _ in counts] if bytes_in else []
    hot: set[int] = set()
    if bytes_in:
        alive = [t for t, m in enumerate(means) if m > 0]
        hot = set(rng.sample(alive, min(len(alive), max(1, round(len(counts) * hot_topics)))))

    def noise() -> float:
        return math.exp(max(-3.0, min(3.0, rng.gauss(0.0, 1.0))) * partition_sigma)

    parts = []
    for t, (count, mean) in enumerate(zip(counts, means, strict=True)):
        topic = f"t{t:0{width}d}"
        for num in range(count):
            if rf == racks:
                chosen = rng.sample(range(racks), racks)
            else:  # weighted, without replacement
                pool, w, chosen = list(range(racks)), list(rack_weight), []
                for _ in range(rf):
                    i = rng.choices(range(len(pool)), w)[0]
                    chosen.append(pool.pop(i))
                    w.pop(i)
            reps = tuple(by_rack[names[r]][_pick(cum[names[r]], rng.random())] for r in chosen)
            size = max(1, int(mean * noise())) if mean > 0 else 0
            rate = None
            if bytes_in:
                rate = size / retention_s * rate_factor[t] * noise() * (hot_factor if t in hot else 1.0)
            parts.append(Partition(topic=topic, partition=num, replicas=reps, leader=reps[0], isr=reps,
                                   size_bytes=size, bytes_in_per_s=rate))
    meta = {**(meta or {}), "scenario": "production", "seed": seed, "new_brokers": [b.id for b in new_bs],
            "recent_brokers": recent_ids, "hot_topics": sorted(f"t{t:0{width}d}" for t in hot),
            "params": {"brokers": brokers, "racks": racks, "replicas": replicas, "rf": rf, "new": new,
                       "recent": recent, "weight_sigma": weight_sigma, "median_bytes": median_bytes,
                       "size_sigma": size_sigma, "partition_sigma": partition_sigma, "empty_topics": empty_topics,
                       "topic_alpha": topic_alpha, "max_topic_partitions": max_topic_partitions,
                       "bytes_in": bytes_in, "hot_topics": hot_topics, "hot_factor": hot_factor,
                       "rate_sigma": rate_sigma, "retention_s": retention_s, "first_id": first_id}}
    return Cluster.build(bs + new_bs, parts, meta)


def _rack_name(i: int) -> str:
    """a .. z, then aa, ab, ..."""
    name = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        name = chr(ord("a") + r) + name
    return name


def _pick(cum: list[float], u: float) -> int:
    """The index a uniform ``u`` in [0, 1) picks from the cumulative weights ``cum``."""
    return min(len(cum) - 1, bisect_right(cum, u * cum[-1]))


FAMILIES = {
    # name: (brokers, replicas (log-uniform), racks (at most brokers // 2), new brokers in add-brokers mode)
    "small": ((6, 40), (100, 20_000), (3, 13), lambda brokers: 4),
    "medium": ((40, 300), (20_000, 600_000), (3, 13), lambda brokers: max(4, brokers // 20)),
}


def family_params(name: str, seed: int) -> dict[str, Any]:
    """The draws of ``family(name, seed)``: ``production``'s arguments and the ``mode``, from
    ``random.Random("<name>:<seed>")``."""
    if name not in FAMILIES:
        raise ValueError(f"unknown family {name!r}: {' or '.join(FAMILIES)}")
    (b_lo, b_hi), (r_lo, r_hi), (k_lo, k_hi), most_new = FAMILIES[name]
    rng = random.Random(f"{name}:{seed}")
    brokers = rng.randint(b_lo, b_hi)
    rf = rng.choice((2, 3))
    racks = rng.randint(max(k_lo, rf), max(k_lo, rf, min(k_hi, brokers // 2)))
    replicas = round(math.exp(rng.uniform(math.log(r_lo), math.log(r_hi))))
    mode = rng.choice(("rebalance", "add-brokers"))
    new = rng.randint(1, most_new(brokers)) if mode == "add-brokers" else 0
    return {"brokers": brokers, "racks": racks, "replicas": replicas, "rf": rf, "mode": mode, "new": new,
            "weight_sigma": rng.uniform(0.3, 0.5), "bytes_in": rng.random() < 0.5,
            "first_id": rng.choice((0, 1, 1001)), "seed": rng.randrange(2**32)}


def family(name: str, seed: int) -> tuple[Cluster, str, list[int]]:
    """A ``production`` cluster of the ``small`` or ``medium`` family for ``seed``: (cluster, mode, new broker ids).

    small: 6-40 brokers on 3 to min(13, brokers // 2) racks, 100-20,000 replicas (log-uniform); medium: 40-300
    brokers on 3-13 racks, 20,000-600,000 replicas. Both: rf 2 or 3, mode ``rebalance`` or ``add-brokers`` (with 1-4
    new brokers; medium: up to brokers // 20 when that is more), a bytes-in history on half the clusters (else the
    planner's size / retention), a starting-weight sigma from 0.3 to 0.5, broker ids from 0, 1 or 1001; the other
    shapes are ``production``'s defaults. The brokers count excludes the new ones. Deterministic
    (``family_params``); the cluster's meta names the family, its seed and the mode.
    """
    p = family_params(name, seed)
    mode = p.pop("mode")
    brokers, racks, replicas, rf = p.pop("brokers"), p.pop("racks"), p.pop("replicas"), p.pop("rf")
    cluster = production(brokers, racks, replicas, rf, **p, meta={"family": name, "family_seed": seed, "mode": mode})
    return cluster, mode, list(cluster.meta["new_brokers"])


def main_job(seed: int, noise: float = 0.03, data_mib: float = 240.0) -> Cluster:
    """The main job's cluster as ``scripts/demo.sh`` loads it into real Kafka (the ``new-brokers`` scenario: 6 loaded
    brokers in 3 racks + 2 empty ones, 6 and 7, in a 4th; 4 topics x 12 partitions at RF 3; ``data_mib`` of data
    shared in proportion to the scenario's sizes), with each partition's size off by a seeded relative ``noise``: a
    real run's sizes differ a little from run to run, which is what flipped its plan's outcome (issue 41)."""
    from rebalancer.sim.scenarios import ScenarioParams, build_scenario

    base = build_scenario("new-brokers", ScenarioParams(brokers=6, racks=3, partitions=48, topics=4, rf=3,
                                                        new_brokers=2, seed=42))
    total = sum(p.size_bytes for p in base.partitions)
    rng = random.Random(seed)
    parts = [replace(p, size_bytes=max(1, int(data_mib * MiB * p.size_bytes / total * (1 + rng.gauss(0.0, noise)))))
             for p in base.partitions]
    return Cluster.build(list(base.brokers), parts, dict(base.meta))
