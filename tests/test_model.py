"""The cluster model's invariants and the two input file formats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rebalancer.errors import InputError, ModelError
from rebalancer.formats import (
    cluster_from_dict,
    cluster_to_dict,
    load_cluster_file,
    parse_log_dirs,
    reassignment_json,
    write_cluster_json,
)
from rebalancer.model import Broker, Cluster, Partition


def desc(partitions, brokers=None):
    return {"brokers": brokers if brokers is not None else [{"id": 0, "rack": "a"}, {"id": 1, "rack": "b"}, {"id": 2}],
            "partitions": partitions}


@pytest.mark.parametrize(
    ("partition", "message"),
    [
        ({"topic": "t", "partition": 0, "replicas": [0, 7]}, "partition t-0: replica on unknown broker 7"),
        ({"topic": "t", "partition": 0, "replicas": [0, 1, 0]}, "partition t-0: duplicate replica on broker 0"),
        ({"topic": "t", "partition": 3, "replicas": [0, 1], "leader": 2}, "partition t-3: leader 2 is not one of its replicas"),
        ({"topic": "t", "partition": 0, "replicas": [0, 1], "isr": [0, 2]}, "partition t-0: ISR broker 2 is not one of its replicas"),
        ({"topic": "t", "partition": 0, "replicas": []}, "partition t-0: empty replica list"),
        ({"topic": "t", "partition": 0, "replicas": [0], "size_bytes": -5}, "partition t-0: size_bytes -5 is not an integer from 0 to"),
        ({"topic": "t", "partition": 0, "replicas": [0, 1], "leader": 1, "isr": [0]}, "leader 1 is not in the ISR"),
        ({"topic": "t", "partition": -1, "replicas": [0]}, "partition -1 is negative"),
        ({"topic": "", "partition": 0, "replicas": [0]}, "topic name '' is empty or not a string"),
        ({"topic": "t", "partition": 0, "replicas": "0,1"}, "replicas must be a list"),
        ({"topic": "t", "replicas": [0]}, "missing required key 'partition'"),
    ],
)
def test_each_invariant_violation_is_a_named_error(partition, message):
    with pytest.raises(ModelError) as err:
        cluster_from_dict(desc([partition]))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_duplicate_partition_and_duplicate_broker_are_rejected():
    p = {"topic": "t", "partition": 0, "replicas": [0, 1]}
    with pytest.raises(ModelError, match="duplicate partition t-0"):
        cluster_from_dict(desc([p, dict(p)]))
    with pytest.raises(ModelError, match="duplicate broker id 1"):
        cluster_from_dict(desc([p], brokers=[{"id": 0}, {"id": 1}, {"id": 1}]))


def test_minimal_description_gets_kafka_defaults_and_ignores_unknown_keys():
    cluster = cluster_from_dict({
        "brokers": [{"id": 0, "rack": "a", "colour": "blue"}, {"id": 1}],
        "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 0], "extra": True}],
        "whatever": 1,
    })
    p = cluster.partition("t", 0)
    assert p.leader == 1 and p.isr == (1, 0) and p.size_bytes == 0
    assert cluster.broker(0).rack == "a" and cluster.broker(1).rack is None


def test_issue_example_description_loads(tmp_path: Path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"brokers": [{"id": 0, "rack": "a"}, {"id": 1, "rack": "b"}],
                                "partitions": [{"topic": "t", "partition": 0, "replicas": [0, 1], "leader": 0,
                                                "isr": [0, 1], "size_bytes": 123}]}))
    cluster = load_cluster_file(path)
    assert cluster.partitions == (Partition("t", 0, (0, 1), 0, (0, 1), 123),)
    assert cluster.meta["source"].startswith("file://")


def test_offline_leader_is_accepted_as_none():
    cluster = cluster_from_dict(desc([{"topic": "t", "partition": 0, "replicas": [0, 1], "leader": -1, "isr": [1]}]))
    assert cluster.partition("t", 0).leader is None


def test_kafka_reassignment_json_is_read_with_preferred_leaders(tmp_path: Path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(reassignment_json([("x", 1, [8, 19]), ("x", 0, [7, 18])])))
    cluster = load_cluster_file(path)
    assert cluster.broker_ids == (7, 8, 18, 19)
    assert [(p.partition, p.replicas, p.leader) for p in cluster.partitions] == [(0, (7, 18), 7), (1, (8, 19), 8)]


def test_reassignment_json_with_bad_version_or_duplicates_is_rejected(tmp_path: Path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"version": 2, "partitions": []}))
    with pytest.raises(ModelError, match="unsupported version 2"):
        load_cluster_file(path)
    path.write_text(json.dumps({"version": 1, "partitions": [{"topic": "x", "partition": 0, "replicas": [1, 1]}]}))
    with pytest.raises(ModelError, match="duplicate replica on broker 1"):
        load_cluster_file(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"brokers": [', "malformed JSON at line 1"),
        ("[1, 2]", "neither a cluster description"),
        ('{"topics": []}', "neither a cluster description"),
        ('{"brokers": {}, "partitions": []}', "'brokers' must be a list"),
    ],
)
def test_unusable_files_are_input_errors(tmp_path: Path, text: str, message: str):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        load_cluster_file(path)


def test_missing_file_is_input_error(tmp_path: Path):
    with pytest.raises(InputError, match="no such file"):
        load_cluster_file(tmp_path / "nope.json")


def test_snapshot_json_round_trips(tmp_path: Path):
    cluster = Cluster.build(
        [Broker(0, "a", disk_capacity_bytes=10**12), Broker(1, "b", network_capacity_bytes_per_s=10**8), Broker(2, alive=False)],
        [Partition("t", 0, (0, 1, 2), 1, (1, 0), 10, bytes_in_per_s=2.5, adding=(2,)), Partition("u", 3, (2, 0), None, (2,), 0)],
        {"source": "test"},
    )
    path = tmp_path / "snap.json"
    write_cluster_json(cluster, path)
    again = cluster_from_dict(json.loads(path.read_text()))
    assert again == cluster
    assert cluster_to_dict(again)["partitions"] == cluster_to_dict(cluster)["partitions"]


def test_log_dirs_sizes_are_per_replica_and_skip_future_replicas():
    doc = {"version": 1, "brokers": [
        {"broker": 0, "logDirs": [{"logDir": "/d", "error": None, "partitions": [
            {"partition": "my-topic-3", "size": 100, "offsetLag": 0, "isFuture": False},
            {"partition": "my-topic-3", "size": 7, "offsetLag": 0, "isFuture": True}]}]},
        {"broker": 1, "logDirs": [{"logDir": "/d", "error": None, "partitions": [
            {"partition": "my-topic-3", "size": 90, "offsetLag": 10, "isFuture": False}]}]},
    ]}
    assert parse_log_dirs(doc) == {("my-topic-3"[:-2], 3): {0: 100, 1: 90}}
    with pytest.raises(InputError, match="malformed entry for broker 0"):
        parse_log_dirs({"brokers": [{"broker": 0, "logDirs": [{"partitions": [{"partition": "t-0"}]}]}]})


def test_sizes_and_meta_replace_without_revalidating_and_a_bad_size_is_refused() -> None:
    """``with_sizes`` / ``with_meta`` (the snapshot's last steps, a half-minute each at a million partitions when
    they built a new Cluster): the cluster ``Cluster.build`` would give, lookups included, a bad size refused."""
    from dataclasses import replace

    brokers = [Broker(0, "a"), Broker(1, "b"), Broker(2)]
    parts = [Partition("t", i, (i % 3, (i + 1) % 3), i % 3, (i % 3,), 10 * i) for i in range(6)]
    c = Cluster.build(brokers, parts, {"source": "x"})
    sized = c.with_sizes({("t", 1): 7, ("t", 4): 40}, sizes_known=True)
    expected = Cluster.build(brokers, [replace(p, size_bytes=7) if p.partition == 1 else p for p in parts],
                             {"source": "x", "sizes_known": True})
    assert sized == expected and sized.partition("t", 1).size_bytes == 7 and sized.partition("t", 4) is c.partition("t", 4)
    assert c.partition("t", 1).size_bytes == 10  # the original is unchanged
    for bad in (-1, 2**63, 1.5, True):
        with pytest.raises(ModelError, match=r"t-1: size_bytes .* is not an integer from 0 to"):
            c.with_sizes({("t", 1): bad})
    m = c.with_meta(read_seconds=1.5)
    assert m.meta == {"source": "x", "read_seconds": 1.5} and c.meta == {"source": "x"} and m == c.with_meta(read_seconds=1.5)
    assert m.partition("t", 5) is c.partition("t", 5) and m.broker(2) is c.broker(2)


def test_the_plain_partition_check_accepts_nothing_the_full_checks_refuse(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Partition.validate`` passes the common case in a few operations (``_plain``); every partition it lets
    through, the full checks pass too, and what it does not, they judge (with their one-line error). Drawn over
    hostile fields: bools and floats as ids, duplicates, unknown brokers, a leader outside its replicas, an ISR that
    differs, sizes and rates out of range, reassignments in flight, bad topic names."""
    from hypothesis import example, given, settings
    from hypothesis import strategies as st

    ids = {0: None, 1: None, 2: None, 3: None}
    broker = st.one_of(st.integers(-1, 5), st.just(True), st.just(1.0), st.just("1"))
    field = {
        "topic": st.sampled_from(["t", "a.b", "", "..", "x" * 250, "bad topic", 7]),
        "partition": st.one_of(st.integers(-1, 3), st.just(2**31), st.just(False), st.just(1.0)),
        "replicas": st.lists(broker, max_size=4).map(tuple),
        "leader": st.one_of(st.none(), broker),
        "isr": st.lists(broker, max_size=4).map(tuple),
        "size_bytes": st.one_of(st.integers(-1, 10), st.just(2**63), st.just(True), st.just(1.5)),
        "bytes_in_per_s": st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-1, 3)),
        "adding": st.lists(broker, max_size=2).map(tuple),
        "removing": st.lists(broker, max_size=2).map(tuple),
    }

    def judged(p: Partition) -> bool:
        with monkeypatch.context() as m:
            m.setattr(Partition, "_plain", lambda self, known: False)
            try:
                p.validate(ids)
            except ModelError:
                return False
        return True

    plain = {"topic": "t", "partition": 0, "replicas": (0, 1, 2), "leader": None, "isr": (0, 1, 2), "size_bytes": 5,
             "bytes_in_per_s": 1.0, "adding": (), "removing": ()}

    @settings(max_examples=400, deadline=None)
    @given(st.fixed_dictionaries(field), st.sets(st.sampled_from(sorted(field)), min_size=1, max_size=2),
           st.booleans())
    @example({**plain, "replicas": (True, 0, 2)}, {"replicas"}, True)  # True == 1 and 1.0 == 1: known broker 1
    @example({**plain, "replicas": (1.0, 2)}, {"replicas"}, True)
    @example({**plain, "leader": 3}, {"leader"}, True)
    def check(drawn: dict, hostile: set, in_sync: bool) -> None:
        kw = {**plain, **{k: drawn[k] for k in hostile}}  # the common case with one or two fields drawn
        if in_sync:
            kw["isr"] = kw["replicas"]
        p = Partition(**kw)
        if p._plain(ids):
            assert judged(p), kw

    check()
    assert Partition("t", 0, (0, 1), 0, (0, 1), 5)._plain(ids)  # the common case takes the short way


def test_the_decoded_reading_of_a_snapshot_is_the_field_by_field_one() -> None:
    """``formats._plain_cluster`` decodes a snapshot whose entries are all common ones with msgspec: whatever it
    reads gives the cluster (or the one-line error) the field-by-field reading (``json``, ``cluster_from_dict``)
    gives, and it reads nothing that reading refuses; what it does not read, that reading reads."""
    from hypothesis import example, given, settings
    from hypothesis import strategies as st

    from rebalancer import formats

    number = st.one_of(st.integers(-2, 4), st.just(True), st.just(1.0), st.just("1"), st.none(), st.just(2**64))
    field = {
        "topic": st.sampled_from(["t", "", "..", "bad topic", 7, None]),
        "partition": number,
        "replicas": st.one_of(st.lists(number, max_size=4), st.just("0,1"), st.none()),
        "isr": st.one_of(st.lists(number, max_size=4), st.none()),
        "leader": number,
        "size_bytes": st.one_of(number, st.just(2.0), st.just(2.5), st.just(-5)),
        "bytes_in_per_s": st.one_of(number, st.floats(allow_nan=True)),
        "adding_replicas": st.one_of(st.just([]), st.lists(number, max_size=2)),
        "removing_replicas": st.one_of(st.just([]), st.lists(number, max_size=2)),
    }
    plain = {"topic": "t", "partition": 0, "replicas": [0, 1, 2], "isr": [0, 1, 2], "leader": 0, "size_bytes": 5,
             "bytes_in_per_s": 1.5}

    def outcome(read: Any) -> Any:
        try:
            return read()
        except Exception as exc:  # noqa: BLE001 - compared, not hidden
            return f"{type(exc).__name__}: {exc}"

    @settings(max_examples=400, deadline=None)
    @given(st.fixed_dictionaries(field), st.sets(st.sampled_from(sorted(field)), min_size=1, max_size=2),
           st.sets(st.sampled_from(sorted(plain)), max_size=1), st.booleans())
    @example({**plain, "replicas": [True, 0]}, {"replicas"}, set(), False)
    @example({**plain, "leader": -1}, {"leader"}, set(), False)
    @example({**plain, "size_bytes": 2.0}, {"size_bytes"}, set(), False)
    @example({**plain, "adding_replicas": [3]}, {"adding_replicas"}, set(), False)
    @example({**plain, "leader": 3}, {"leader"}, set(), True)
    def check(drawn: dict, hostile: set, missing: set, twice: bool) -> None:
        entry = {k: v for k, v in {**plain, **{k: drawn[k] for k in hostile}}.items() if k not in missing}
        doc = {"brokers": [{"id": b} for b in range(4)], "partitions": [entry, entry] if twice else [entry],
               "meta": {"source": "x"}}
        data = json.dumps(doc).encode()
        fast = outcome(lambda: formats._plain_cluster(data, None))
        slow = outcome(lambda: formats.cluster_from_dict(json.loads(data)))
        if fast is not None:
            assert fast == slow, entry

    check()
    cluster = formats._plain_cluster(json.dumps({"brokers": [{"id": 0}, {"id": 1}, {"id": 2}],
                                                 "partitions": [plain]}).encode(), {"source": "s"})
    assert cluster is not None and cluster.partitions == (Partition("t", 0, (0, 1, 2), 0, (0, 1, 2), 5, 1.5),)
    assert cluster.meta == {"source": "s"}
    # what msgspec refuses in its own words is left to the field-by-field reading, for its one-line error
    assert formats._plain_cluster(b'{"brokers": [{"id": 0, "rack": "\xff"}], "partitions": []}', None) is None
    assert formats._plain_cluster(b'{"brokers": [], "partitions": [' * 2 + b"]}", None) is None


def test_the_decoded_reading_of_a_plan_is_the_field_by_field_one(tmp_path: Path) -> None:
    """``planfile.result._plain_plan`` decodes a plan.json as ``write_plan`` writes it with msgspec: whatever it
    reads gives the plan (or the one-line error) the field-by-field reading (``_plan_of``) gives, and it reads nothing
    that reading refuses; what it does not read, that reading reads (``load_plan`` the same either way)."""
    from hypothesis import example, given, settings
    from hypothesis import strategies as st

    from rebalancer.planfile import result

    number = st.one_of(st.integers(-2, 4), st.just(True), st.just(1.0), st.just("1"), st.none(), st.just(2**31),
                       st.just(2**64))
    field = {
        "topic": st.sampled_from(["t", "", "..", "bad topic", 7, None]),
        "partition": number,
        "replicas_before": st.one_of(st.lists(number, max_size=3), st.just("0,1"), st.none()),
        "replicas_after": st.one_of(st.lists(number, max_size=3), st.none()),
        "leader_before": st.one_of(number, st.just(-1), st.just(2**40)),
        "size_bytes": st.one_of(number, st.just(2.0), st.just(-5), st.just(2**63)),
    }
    top = {
        "format": st.sampled_from([result.PLAN_FORMAT, "other", None]),
        "mode": st.sampled_from(["rebalance", 3, None]),
        "strategy": st.sampled_from(["greedy", None]),
        "content_hash": st.sampled_from(["abc", 5]),
        "summary": st.sampled_from([{}, {"n": 1}, [], None]),
        "params": st.sampled_from([{}, {"balance": "load"}, None, []]),
        "solver": st.sampled_from([{}, {"status": "Optimal"}, None, "x"]),
    }
    change = {"topic": "t", "partition": 0, "replicas_before": [0, 1], "replicas_after": [2, 1], "leader_before": 0,
              "size_bytes": 5, "leader_after": 2, "added": [2], "removed": [0], "bytes_to_copy": 5}
    plain = {"format": result.PLAN_FORMAT, "version": 1, "mode": "rebalance", "strategy": "greedy",
             "content_hash": "abc", "summary": {}, "params": {}, "solver": {}}

    def outcome(read: Any) -> Any:
        try:
            return read()
        except Exception as exc:  # noqa: BLE001 - compared, not hidden
            return f"{type(exc).__name__}: {exc}"

    path = tmp_path / "plan.json"

    @settings(max_examples=400, deadline=None)
    @given(st.fixed_dictionaries(field), st.sets(st.sampled_from(sorted(field)), max_size=2),
           st.fixed_dictionaries(top), st.sets(st.sampled_from(sorted(top)), max_size=1),
           st.sets(st.sampled_from(["size_bytes", "leader_before", "params", "solver", "summary", "topic"]),
                   max_size=1))
    @example({**change, "replicas_after": []}, {"replicas_after"}, plain, set(), set())
    @example({**change, "replicas_before": [True, 0]}, {"replicas_before"}, plain, set(), set())
    @example({**change, "leader_before": None}, {"leader_before"}, plain, set(), set())
    def check(drawn: dict, hostile: set, doc: dict, hostile_top: set, missing: set) -> None:
        entry = {k: v for k, v in {**change, **{k: drawn[k] for k in hostile}}.items() if k not in missing}
        whole = {k: v for k, v in {**plain, **{k: doc[k] for k in hostile_top}, "changes": [entry]}.items()
                 if k not in missing}
        data = json.dumps(whole).encode()
        fast = outcome(lambda: result._plain_plan(data))
        slow = outcome(lambda: result._plan_of(json.loads(data), path))
        if fast is not None:
            assert fast == slow, whole
        path.write_bytes(data)
        assert outcome(lambda: result.load_plan(tmp_path)) == slow

    check()
    plan = result._plain_plan(json.dumps({**plain, "changes": [change]}).encode())
    assert plan is not None and plan.changes == (result.Change("t", 0, (0, 1), (2, 1), 0, 5),)
    assert result._plain_plan(b'{"format": "\xff"}') is None
