"""The production-shaped cluster generator of the fuzz benchmark (bench/load_cases.py ``production`` and ``family``,
issue 41): deterministic, rack-safe, sizes alike within a topic and heavy-tailed across topics, new brokers empty,
the families' draws in their ranges. The generator only: bench/bench_fuzz.py plans its clusters."""

from __future__ import annotations

import functools
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.model import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from load_cases import FAMILIES, family, family_params, production  # noqa: E402


def _topics(cluster: Cluster) -> dict[str, list]:
    by: dict[str, list] = defaultdict(list)
    for p in cluster.partitions:
        by[p.topic].append(p)
    return by


@functools.cache
def _large() -> Cluster:
    """A large draw (50,000 partitions, about 6,700 topics) for the tails, built once per process (a cache, not a
    module fixture: the fast tier hands out these tests one at a time, scheduling.FAST_TOGETHER)."""
    return production(60, 6, 150_000, 3, new=3, bytes_in=True, seed=41)


def test_the_same_seed_gives_the_same_cluster() -> None:
    a = production(20, 4, 3000, 3, new=2, bytes_in=True, seed=7)
    assert a == production(20, 4, 3000, 3, new=2, bytes_in=True, seed=7)
    assert a.partitions != production(20, 4, 3000, 3, new=2, bytes_in=True, seed=8).partitions
    assert family("small", 3) == family("small", 3)
    assert family_params("medium", 3) == family_params("medium", 3) != family_params("medium", 4)


@settings(max_examples=examples(60), deadline=None)
@given(brokers=st.integers(2, 40), racks=st.integers(1, 13), rf=st.integers(1, 4), replicas=st.integers(1, 3000),
       new=st.integers(0, 5), bytes_in=st.booleans(), first_id=st.sampled_from([0, 1, 1001]),
       seed=st.integers(0, 2**32))
def test_every_partition_is_rack_safe_and_new_brokers_are_empty(brokers: int, racks: int, rf: int, replicas: int,
                                                                new: int, bytes_in: bool, first_id: int,
                                                                seed: int) -> None:
    racks = min(racks, brokers)
    rf = min(rf, racks)
    c = production(brokers, racks, replicas, rf, new=new, bytes_in=bytes_in, first_id=first_id, seed=seed)
    rack = {b.id: b.rack for b in c.brokers}
    assert len(c.brokers) == brokers + new and len(c.racks) == racks
    assert min(rack) == first_id
    assert len(c.partitions) == max(1, round(replicas / rf)) and c.replica_count == rf * len(c.partitions)
    for p in c.partitions:
        assert len(p.replicas) == rf == len(set(p.replicas)) == len({rack[b] for b in p.replicas})
        assert p.leader == p.replicas[0] and p.isr == p.replicas
        assert p.size_bytes >= 0
        assert (p.bytes_in_per_s is not None) == bytes_in
    new_ids = c.meta["new_brokers"]
    assert len(new_ids) == new and set(new_ids) <= set(rack)
    assert not set(new_ids) & {b for p in c.partitions for b in p.replicas}  # empty
    assert len({rack[b] for b in new_ids}) == min(new, racks)  # spread over the existing racks
    assert {rack[b] for b in new_ids} <= {rack[b] for b in set(rack) - set(new_ids)}


def test_a_rack_safe_cluster_needs_racks_for_its_rf() -> None:
    with pytest.raises(ValueError, match="racks >= rf"):
        production(10, 2, 100, 3)


def test_one_topics_partitions_are_alike_in_size() -> None:
    large = _large()
    spread = math.exp(6 * 0.15) * 1.001  # the partition noise is cut at 3 sigma (0.15)
    empty = 0
    for parts in _topics(large).values():
        sizes = [p.size_bytes for p in parts]
        if max(sizes) == 0:
            empty += 1
            continue
        assert min(sizes) > 0 and max(sizes) <= spread * min(sizes)
    assert 0 < empty < 0.1 * len(_topics(large))  # a few empty topics, as real clusters have


def test_topics_are_heavy_tailed_in_partitions_and_size() -> None:
    large = _large()
    topics = _topics(large)
    counts = sorted(len(v) for v in topics.values())
    means = sorted(statistics.fmean(p.size_bytes for p in v) for v in topics.values()
                   if any(p.size_bytes for p in v))
    assert counts[-1] >= 100 * statistics.median(counts)
    assert sum(1 for n in counts if n <= 12) >= 0.85 * len(counts)  # most topics small
    assert 5 <= sum(1 for n in counts if n >= 100) <= 0.05 * len(counts)  # a few with hundreds
    assert means[-1] >= 100 * statistics.median(means) >= 10_000 * means[0]
    assert 16 * 2**20 < statistics.median(means) < 256 * 2**20  # about the 64 MiB median


def test_recent_brokers_start_light_and_rates_follow_size() -> None:
    large = _large()
    replicas: dict[int, int] = defaultdict(int)
    for p in large.partitions:
        for b in p.replicas:
            replicas[b] += 1
    recent = set(large.meta["recent_brokers"])
    old = [b.id for b in large.brokers if b.id not in recent and b.id not in large.meta["new_brokers"]]
    assert len(recent) == 6  # 10 % of 60
    assert statistics.fmean(replicas[b] for b in recent) < 0.5 * statistics.fmean(replicas[b] for b in old)
    hot = set(large.meta["hot_topics"])
    assert hot
    ratio = {t: statistics.median(p.bytes_in_per_s / p.size_bytes for p in v)
             for t, v in _topics(large).items() if all(p.size_bytes for p in v)}
    assert all(p.bytes_in_per_s == 0 for p in large.partitions if p.size_bytes == 0)
    assert statistics.median(ratio[t] for t in hot) > 3 * statistics.median(ratio.values())


@settings(max_examples=examples(200), deadline=None)
@given(name=st.sampled_from(sorted(FAMILIES)), seed=st.integers(0, 10**9))
def test_family_draws_stay_in_their_ranges(name: str, seed: int) -> None:
    p = family_params(name, seed)
    brokers = (6, 40) if name == "small" else (40, 300)
    replicas = (100, 20_000) if name == "small" else (20_000, 600_000)
    assert brokers[0] <= p["brokers"] <= brokers[1]
    assert replicas[0] <= p["replicas"] <= replicas[1]
    assert p["rf"] in (2, 3) and max(3, p["rf"]) <= p["racks"] <= 13
    if name == "small":
        assert p["racks"] <= max(3, p["brokers"] // 2)
    assert p["mode"] in ("rebalance", "add-brokers")
    assert (p["new"] == 0) == (p["mode"] == "rebalance")
    assert p["new"] <= (4 if name == "small" else max(4, p["brokers"] // 20))


@settings(max_examples=examples(20), deadline=None)
@given(seed=st.integers(0, 10**6))
def test_a_small_family_cluster_is_its_draws(seed: int) -> None:
    p = family_params("small", seed)
    cluster, mode, new = family("small", seed)
    assert mode == p["mode"] and len(new) == p["new"] and new == cluster.meta["new_brokers"]
    assert len(cluster.brokers) == p["brokers"] + p["new"] and len(cluster.racks) == p["racks"]
    assert cluster.replica_count == p["rf"] * round(p["replicas"] / p["rf"])
    assert cluster.meta["family"] == "small" and cluster.meta["family_seed"] == seed
