"""The load model (rebalancer.load): per-replica load in every dimension, Cruise Control capacity files, and the
utilisation bands, each checked on small hand-computed cases; bad capacity files are one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.errors import InputError
from rebalancer.load import (
    DEFAULT_RETENTION_MS,
    DIMENSIONS,
    CapacityError,
    capacities,
    dimension_loads,
    load_bands,
    partition_loads,
    read_capacity_file,
    replica_table,
)
from rebalancer.model import Broker, Cluster, Partition

MiB = 1024 * 1024
DAY_MS = 24 * 3600 * 1000


def cluster(**broker_kw: object) -> Cluster:
    brokers = [Broker(i, rack=f"r{i}", **broker_kw) for i in range(3)]
    parts = [
        Partition("clicks", 0, (0, 1, 2), 0, (0, 1, 2), size_bytes=864 * MiB),       # retention 1 day: 10.24 KB/s
        Partition("clicks", 1, (1, 2, 0), 1, (1, 2, 0), size_bytes=432 * MiB),
        Partition("audit", 0, (2, 0), 2, (2, 0), size_bytes=100 * MiB),              # kept for ever
        Partition("metrics", 0, (0, 1), 0, (0, 1), size_bytes=10 * MiB, bytes_in_per_s=5000.0),  # from history
    ]
    return Cluster.build(brokers, parts)


def test_bytes_in_comes_from_history_else_topic_retention_else_the_brokers() -> None:
    c = cluster()
    loads = partition_loads(c, retention_ms={"clicks": DAY_MS, "audit": -1}, fanout={"clicks": 2.0})
    assert loads[("clicks", 0)].bytes_in == pytest.approx(864 * MiB / 86400) and loads[("clicks", 0)].source == "topic retention"
    assert loads[("audit", 0)].bytes_in == 0 and loads[("audit", 0)].source.startswith("none")
    assert loads[("metrics", 0)].bytes_in == 5000.0 and loads[("metrics", 0)].source == "history"
    default = partition_loads(c)[("clicks", 1)]
    assert default.source == "broker retention" and default.bytes_in == pytest.approx(432 * MiB / (DEFAULT_RETENTION_MS / 1000))


def test_each_replica_weighs_its_role_in_every_dimension() -> None:
    c = cluster()
    loads = partition_loads(c, retention_ms={"clicks": DAY_MS, "audit": -1}, fanout={"clicks": 2.0})
    per = dimension_loads(c, loads)
    rate0, rate1 = 864 * MiB / 86400, 432 * MiB / 86400
    assert per["disk"] == {0: (864 + 432 + 100 + 10) * MiB, 1: (864 + 432 + 10) * MiB, 2: (864 + 432 + 100) * MiB}
    assert per["nw_in"][0] == round(rate0) + round(rate1) + 0 + 5000
    # Only leaders send: to RF - 1 followers and to consumers (fan-out 2 for clicks, 1 by default).
    assert per["nw_out"] == {0: round(rate0 * (2 + 2)) + round(5000 * (1 + 1)), 1: round(rate1 * (2 + 2)), 2: 0}
    assert per["replicas"] == {0: 4, 1: 3, 2: 3} and per["leaders"] == {0: 2, 1: 1, 2: 1}
    # With an assignment: clicks-0 led by broker 2 now.
    moved = dimension_loads(c, loads, {("clicks", 0): (2, 1, 0)}, dimensions=["leaders", "nw_out"])
    assert moved["leaders"] == {0: 1, 1: 1, 2: 2} and moved["nw_out"][2] == round(rate0 * 4)


def test_replica_tables_kept_per_cluster_and_loads_equal_fresh_ones() -> None:
    """replica_table keeps what depends on the cluster and the loads alone (``Cluster.cached``): tables asked for
    in any order, with and without an assignment, and for another load model of the same cluster, equal those of a
    cluster that computed nothing before, and what is kept cannot be written to."""
    import numpy as np

    c = cluster()
    one = partition_loads(c, retention_ms={"clicks": DAY_MS})
    two = partition_loads(c, fanout={"clicks": 3.0})
    moved = {("clicks", 0): (2, 1, 0), ("audit", 0): (1, 0)}
    asked = [(one, None), (one, moved), (two, None), (one, None), (two, moved)]
    for loads, assignment in asked:
        kept = replica_table(c, loads, assignment)
        fresh = replica_table(cluster(), loads, assignment)
        for field in ("partition", "broker", "leads", "size"):
            assert np.array_equal(getattr(kept, field), getattr(fresh, field)), field
        for d in DIMENSIONS:
            assert all(np.array_equal(k, f) for k, f in zip(kept.per_partition[d], fresh.per_partition[d], strict=True)), d
    assert dimension_loads(c, two)["nw_out"] != dimension_loads(c, one)["nw_out"]  # each load model its own units
    kept = replica_table(c, one)
    with pytest.raises(ValueError, match="read-only"):
        kept.broker[0] = 7
    # a cluster made from this one (new sizes, new meta) keeps its own
    resized = c.with_sizes({("audit", 0): 7}).with_meta(source="test")
    audit = [p.tp for p in c.partitions].index(("audit", 0))
    assert replica_table(resized, one).size.tolist() == [7 if i == audit else x for i, x in zip(
        kept.partition.tolist(), kept.size.tolist(), strict=True)]


def test_bad_retention_and_fanout_are_named() -> None:
    with pytest.raises(InputError, match="topic clicks: retention.ms 'week' is not an integer"):
        partition_loads(cluster(), retention_ms={"clicks": "week"})
    with pytest.raises(InputError, match="retention.ms 0 is neither positive nor -1"):
        partition_loads(cluster(), retention_ms={"clicks": 0})
    with pytest.raises(InputError, match="fan-out of topic clicks"):
        partition_loads(cluster(), fanout={"clicks": float("nan")})


def write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps(doc))
    return path


def test_cruise_control_capacity_file_with_default_override_and_jbod(tmp_path: Path) -> None:
    path = write(tmp_path, {"brokerCapacities": [
        {"brokerId": "-1", "capacity": {"DISK": "100000", "CPU": "100", "NW_IN": "10000", "NW_OUT": "10000"},
         "doc": "the default"},
        {"brokerId": "1", "capacity": {"DISK": {"/data/a": "100000", "/data/b": "100000"}, "CPU": {"num.cores": "8"},
                                       "NW_IN": "20000", "NW_OUT": "20000"}}]})
    cap = read_capacity_file(path)
    assert cap[-1] == {"disk": 100000 * MiB, "nw_in": 10000 * 1024, "nw_out": 10000 * 1024}
    assert cap[1]["disk"] == 200000 * MiB and cap[1]["nw_in"] == 20000 * 1024
    per = capacities(cluster(), cap)
    assert per["disk"] == {0: 100000 * MiB, 1: 200000 * MiB, 2: 100000 * MiB}
    assert per["nw_out"][1] == 2 * per["nw_out"][0]


@pytest.mark.parametrize(("doc", "message"), [
    ([], "non-empty 'brokerCapacities' list"),
    ({"brokerCapacities": [{"brokerId": "x", "capacity": {}}]}, r"brokerCapacities\[0\]: brokerId 'x' is not a broker id"),
    ({"brokerCapacities": [{"brokerId": "-2", "capacity": {}}]}, "brokerId -2 is not a broker id"),
    ({"brokerCapacities": [{"brokerId": "1", "capacity": {"DISK": "lots"}}]}, r"capacity.DISK: 'lots' is not a number"),
    ({"brokerCapacities": [{"brokerId": "1", "capacity": {"DISK": "-5"}}]}, "is not a positive number"),
    ({"brokerCapacities": [{"brokerId": "1", "capacity": {"DISK": {}}}]}, "no log directory"),
    ({"brokerCapacities": [{"brokerId": "1", "capacity": {"GPU": "1"}}]}, "unknown resource 'GPU'"),
    ({"brokerCapacities": [{"brokerId": "1", "capacity": {}}, {"brokerId": 1, "capacity": {}}]}, "appears twice"),
    ({"brokerCapacities": [{"brokerId": "1"}]}, "expected an object with 'brokerId' and a 'capacity' object"),
])
def test_bad_capacity_files_are_one_line_errors(tmp_path: Path, doc: object, message: str) -> None:
    with pytest.raises(CapacityError, match=message) as err:
        read_capacity_file(write(tmp_path, doc))
    assert "\n" not in str(err.value) and str(tmp_path) in str(err.value)


def test_capacity_for_some_brokers_only_is_refused(tmp_path: Path) -> None:
    cap = read_capacity_file(write(tmp_path, {"brokerCapacities": [{"brokerId": "0", "capacity": {"DISK": "10"}}]}))
    with pytest.raises(CapacityError, match="disk capacity is known for broker.s. 0 but not for 1,2"):
        capacities(cluster(), cap)
    # The snapshot's reported disk totals fill in where the file is silent.
    assert capacities(cluster(disk_capacity_bytes=50 * MiB), cap)["disk"] == {0: 10 * MiB, 1: 50 * MiB, 2: 50 * MiB}
    assert capacities(cluster()) == {}


def test_bands_follow_utilisation_on_mixed_hardware() -> None:
    # Broker 3 has twice the disk: it should hold twice the bytes (40 %), the others 20 % each.
    bands = load_bands("disk", 1000, [0, 1, 2, 3], {0: 1000, 1: 1000, 2: 1000, 3: 2000}, band=0.05)
    assert bands[3].average == 400 and (bands[3].floor, bands[3].ceil) == (380, 420)
    assert bands[0].average == 200 and (bands[0].floor, bands[0].ceil) == (190, 210)
    assert bands[0].limit == 850 and bands[0].excess(215) == 5 and bands[0].deficit(180) == 10
    # No capacity: the load itself is balanced, and there is no hard limit.
    plain = load_bands("replicas", 10, [0, 1, 2])
    assert {(b.floor, b.ceil, b.limit) for b in plain.values()} == {(2, 4, None)}


def test_capacity_that_cannot_hold_the_load_is_refused() -> None:
    with pytest.raises(CapacityError, match="cannot hold the disk load: 2600 bytes needs 86.7% .* 85% threshold"):
        load_bands("disk", 2600, [0, 1, 2], {0: 1000, 1: 1000, 2: 1000})
    assert load_bands("disk", 2600, [0, 1, 2], {0: 1000, 1: 1000, 2: 1000}, max_utilisation=0.9)[0].ceil == 900
    with pytest.raises(InputError, match="band 1.5 is not a fraction"):
        load_bands("disk", 10, [0], band=1.5)


@settings(max_examples=examples(200), deadline=None)
@given(total=st.integers(0, 10**15), caps=st.lists(st.integers(1, 10**12), min_size=1, max_size=12),
       half=st.floats(0, 0.5))
def test_bands_hold_every_target_and_can_hold_the_total(total: int, caps: list[int], half: float) -> None:
    bands = load_bands("disk", total, range(len(caps)), dict(enumerate(caps)), band=half, max_utilisation=1.0) \
        if total <= sum(caps) else None
    if bands is None:
        with pytest.raises(CapacityError):
            load_bands("disk", total, range(len(caps)), dict(enumerate(caps)), band=half, max_utilisation=1.0)
        return
    assert sum(b.floor for b in bands.values()) <= total <= sum(b.ceil for b in bands.values())
    for b in bands.values():
        assert b.floor <= b.average <= b.ceil + 1e-6 * max(1.0, b.average) and b.ceil <= (b.limit or b.ceil)


def test_every_dimension_is_defined_once_with_its_units() -> None:
    assert list(DIMENSIONS) == ["disk", "nw_in", "nw_out", "replicas", "leaders"]
    assert {d.capacity_key for d in DIMENSIONS.values()} == {"DISK", "NW_IN", "NW_OUT", None}


def test_the_model_imports_no_solver_and_no_airflow() -> None:
    # The library stays a plain library: importing the model pulls in neither Airflow nor the planners' solvers.
    code = ("import sys, rebalancer.load; bad = [m for m in sys.modules if m.split('.')[0] in ('airflow', 'pulp', "
            "'pyspark', 'networkx')]; print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
