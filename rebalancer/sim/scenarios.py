"""Scenarios for the simulated cluster: deterministic (seeded) cluster models with partition sizes.

- ``wix``: replica counts proportional to the Wix article's "before" counts (its 40 brokers, stretched to any
  broker count), rack-safe; at 87,845 partitions x RF 3 they are the article's own counts to within a few.
- ``pinterest``: leader skew without replica skew, after the Pinterest posts: a 180-partition RF3 topic over 122
  brokers and a 120-partition topic over 135 brokers, whose preferred leaders crowd onto a few brokers.
- ``new-brokers``: a balanced, rack-aware cluster (12 brokers in racks a-c by default) plus empty new brokers in a
  new rack (4 in rack d by default): the "after adding brokers" case.
- ``sqooba``: the Sqooba article's example verbatim: 20 brokers in 2 AZs, topic ``x.y.z.t``, 10 partitions, RF 2.
- ``failover-skew``: nothing to move (every broker leads one partition of each topic, a topic's partitions alike in
  size, equal counts everywhere), but each broker's partitions all list the next broker second: one failure hands
  all its leadership to one survivor (9 brokers in 3 racks, RF 3 by default): the weekly run's follower order.
- ``file:PATH``: any cluster description or reassignment JSON.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import InputError
from ..model import Broker, Cluster, Partition

__all__ = ["SCENARIOS", "ScenarioParams", "build_scenario", "WIX_BEFORE"]

MiB = 1024 * 1024

# Partition counts per broker before the rebalance, from the Wix article (brokers 0-39).
WIX_BEFORE = (
    6353, 6576, 6684, 6636, 6689, 6797, 6863, 6968, 7085, 7220, 6893, 6932, 6969, 7037, 6945, 6776, 6653, 6613,
    6603, 6621, 7286, 7334, 7341, 7285, 7265, 7231, 7142, 7085, 7019, 6947, 6880, 6893, 5706, 5382, 5446, 5408,
    5281, 5089, 4821, 4823,
)


@dataclass(frozen=True)
class ScenarioParams:
    brokers: int | None = None
    racks: int | None = None
    partitions: int | None = None
    topics: int | None = None
    rf: int | None = None
    new_brokers: int | None = None
    seed: int = 42
    mean_partition_mib: float = 256.0


# A simulated cluster lives in one process on one machine: beyond these it would not finish building.
LIMITS = {"brokers": 10_000, "racks": 1_000, "partitions": 5_000_000, "topics": 1_000_000, "rf": 16,
          "new_brokers": 10_000}


def _check(p: ScenarioParams, brokers: int) -> None:
    """Refuse what cannot be built (in one line, before building anything)."""
    for name, limit in LIMITS.items():
        value = getattr(p, name)
        if value is not None and not 1 <= value <= limit and not (name == "new_brokers" and value == 0):
            raise InputError(f"scenario --{name.replace('_', '-')} {value}: must be from 1 to {limit:,}")
    rf = p.rf or 3
    if rf > brokers:
        raise InputError(f"scenario --rf {rf} is more than its {brokers} brokers")


def _rack_names(n: int) -> list[str]:
    return [chr(ord("a") + i) if n <= 26 else f"rack{i}" for i in range(n)]


def _size(rng: random.Random, mean_mib: float) -> int:
    # Log-normal sizes: most partitions near the mean, a long tail of big ones (as on real clusters).
    sigma = 0.8
    mu = 0.0 - sigma * sigma / 2  # mean of the multiplier is 1
    return max(1, int(rng.lognormvariate(mu, sigma) * mean_mib * MiB))


def _partition(topic: str, num: int, replicas: tuple[int, ...], size: int) -> Partition:
    return Partition(topic=topic, partition=num, replicas=replicas, leader=replicas[0], isr=replicas, size_bytes=size)


def _quota_replicas(rng: random.Random, rf: int, brokers: Sequence[Broker], quota: list[float]) -> tuple[int, ...]:
    """Pick ``rf`` distinct brokers weighted by their remaining quota (rack-distinct while racks remain)."""
    chosen: list[int] = []
    racks_used: set[str | None] = set()
    n_racks = len({b.rack for b in brokers})
    for _ in range(rf):
        pool = [i for i, b in enumerate(brokers) if i not in chosen and b.rack not in racks_used]
        total = sum(max(quota[i], 0.0) for i in pool)
        if total <= 0:  # quotas spent (rounding at the very end): any allowed broker
            pick = pool[int(rng.random() * len(pool))]
        else:
            x = rng.random() * total
            pick = pool[-1]
            for i in pool:
                x -= max(quota[i], 0.0)
                if x <= 0:
                    pick = i
                    break
        chosen.append(pick)
        quota[pick] -= 1
        racks_used.add(brokers[pick].rack)
        if len(racks_used) >= n_racks:
            racks_used = set()
    return tuple(brokers[i].id for i in chosen)


def wix(p: ScenarioParams) -> Cluster:
    """Replica counts per broker proportional to the Wix article's "before" counts (stretched to n brokers).

    With the defaults scaled up (40 brokers, 87,845 partitions at RF 3) the counts are the article's own.
    """
    n = p.brokers or 40
    _check(p, n)
    n_racks = p.racks or 4
    rf = p.rf or 3
    total_partitions = p.partitions or 4000
    n_topics = p.topics or 40
    rng = random.Random(p.seed)
    racks = _rack_names(n_racks)
    brokers = [Broker(id=i, rack=racks[i % n_racks]) for i in range(n)]
    profile = [float(WIX_BEFORE[min(len(WIX_BEFORE) - 1, i * len(WIX_BEFORE) // n)]) for i in range(n)]
    scale = total_partitions * rf / sum(profile)
    quota = [w * scale for w in profile]
    parts = []
    per_topic = [total_partitions // n_topics + (1 if i < total_partitions % n_topics else 0) for i in range(n_topics)]
    for t, count in enumerate(per_topic):
        topic = f"wix.events.{t:03d}"
        mean = p.mean_partition_mib * rng.uniform(0.25, 2.0)
        for num in range(count):
            parts.append(_partition(topic, num, _quota_replicas(rng, rf, brokers, quota), _size(rng, mean)))
    return Cluster.build(brokers, parts, {"scenario": "wix"})


def pinterest(p: ScenarioParams) -> Cluster:
    """Two topics with skewed leaders; replica counts stay near even."""
    rng = random.Random(p.seed)
    n = p.brokers or 135
    _check(p, min(122, n))
    n_racks = p.racks or 3
    racks = _rack_names(n_racks)
    brokers = [Broker(id=i, rack=racks[i % n_racks]) for i in range(n)]
    parts: list[Partition] = []
    layout = [("logging.pinterest.a", 180, min(122, n), p.rf or 3), ("logging.pinterest.b", 120, n, p.rf or 3)]
    for topic, count, width, rf in layout:
        span = list(range(width))
        rng.shuffle(span)
        # Replicas round-robin over the topic's brokers (even replica counts, rack-distinct because consecutive
        # ids alternate racks)...
        for num in range(count):
            start = (num * rf) % width
            replicas = [span[(start + k) % width] for k in range(rf)]
            # ...but the preferred leader is the replica on the "oldest" broker (lowest position in span), which is
            # how leader counts pile up after partition additions.
            replicas.sort(key=lambda b: span.index(b) % max(1, width // 4))
            parts.append(_partition(topic, num, tuple(replicas), _size(rng, p.mean_partition_mib)))
    return Cluster.build(brokers, parts, {"scenario": "pinterest"})


def new_brokers(p: ScenarioParams) -> Cluster:
    """A balanced rack-aware cluster plus empty new brokers in a new rack."""
    rng = random.Random(p.seed)
    n_old = p.brokers or 12
    _check(p, n_old)
    n_racks = p.racks or 3
    n_new = p.new_brokers if p.new_brokers is not None else 4
    rf = p.rf or 3
    racks = _rack_names(n_racks + (1 if n_new else 0))
    old = [Broker(id=i, rack=racks[i % n_racks]) for i in range(n_old)]
    new = [Broker(id=n_old + i, rack=racks[n_racks] if n_new else racks[0]) for i in range(n_new)]
    # Rack-alternating order, as Kafka's rack-aware assignment builds it.
    by_rack = [[b.id for b in old if b.rack == r] for r in racks[:n_racks]]
    order = [ids[i] for i in range(max(len(x) for x in by_rack)) for ids in by_rack if i < len(ids)]
    total = p.partitions or 480
    n_topics = p.topics or 8
    parts = []
    k = 0
    for t in range(n_topics):
        topic = f"orders.v{t}"
        count = total // n_topics + (1 if t < total % n_topics else 0)
        mean = p.mean_partition_mib * rng.uniform(0.5, 1.5)
        for num in range(count):
            start = k % len(order)
            shift = 1 + (k // len(order)) % max(1, len(order) - 1)
            replicas = [order[start]]
            j = start
            while len(replicas) < rf:
                j = (j + shift) % len(order)
                while order[j] in replicas:  # the shift cycled back: step on to the next broker
                    j = (j + 1) % len(order)
                replicas.append(order[j])
            parts.append(_partition(topic, num, tuple(replicas), _size(rng, mean)))
            k += 1
    return Cluster.build(old + new, parts, {"scenario": "new-brokers", "new_brokers": [b.id for b in new]})


SQOOBA_ASSIGNMENT = ((7, 18), (8, 19), (9, 10), (0, 11), (1, 12), (2, 13), (3, 14), (4, 15), (5, 16), (6, 17))


def sqooba(p: ScenarioParams) -> Cluster:
    rng = random.Random(p.seed)
    brokers = [Broker(id=i, rack="a" if i % 2 == 0 else "b") for i in range(20)]
    parts = [_partition("x.y.z.t", i, r, _size(rng, p.mean_partition_mib)) for i, r in enumerate(SQOOBA_ASSIGNMENT)]
    return Cluster.build(brokers, parts, {"scenario": "sqooba"})


def failover_skew(p: ScenarioParams) -> Cluster:
    """Broker b leads one partition of every topic, its replicas (b, b + 1, ..., b + rf - 1) around the ring: every
    broker holds rf partitions of each topic and leads one, so counts, leaders and bytes are even and a plan has
    nothing to move; but b + 1 is second on all of b's partitions. Consecutive brokers sit in distinct racks (rack
    safe where the racks divide the brokers)."""
    rng = random.Random(p.seed)
    n = p.brokers or 9
    _check(p, n)
    rf = min(p.rf or 3, n)
    racks = _rack_names(p.racks or 3)
    brokers = [Broker(id=i, rack=racks[i % len(racks)]) for i in range(n)]
    topics = p.topics or max(1, (p.partitions or 9 * n) // n)
    parts = []
    for t in range(topics):
        size = _size(rng, p.mean_partition_mib)
        parts += [_partition(f"payments.v{t}", b, tuple((b + k) % n for k in range(rf)), size) for b in range(n)]
    return Cluster.build(brokers, parts, {"scenario": "failover-skew"})


SCENARIOS: dict[str, Callable[[ScenarioParams], Cluster]] = {
    "wix": wix,
    "pinterest": pinterest,
    "new-brokers": new_brokers,
    "sqooba": sqooba,
    "failover-skew": failover_skew,
}


def build_scenario(name: str, params: ScenarioParams | None = None) -> Cluster:
    """The cluster of a named scenario, or of ``file:PATH`` (a cluster description or reassignment JSON)."""
    params = params or ScenarioParams()
    if name.startswith("file:"):
        from ..formats import load_cluster_file

        path = name[len("file:") :].removeprefix("//")
        return load_cluster_file(path).with_meta(scenario=name)
    try:
        factory = SCENARIOS[name]
    except KeyError:
        raise InputError(f"unknown scenario {name!r}: choose one of {', '.join(SCENARIOS)} or file:PATH") from None
    return factory(params)
