"""Baseline: what ``kafka-reassign-partitions --generate`` proposes, re-implemented from Kafka's source.

``--generate`` ignores the current placement: ``ReassignPartitionsCommand.calculateAssignment`` groups the
partitions by topic (a ``HashMap``, so topics come in Java's hash order) and places each topic's partition count at
its replication factor over the given brokers from scratch, drawing from one ``java.util.Random``:

- Kafka 3.9 (``kafka`` = ``"3.9"``): ``AdminUtils.assignReplicasToBrokers`` (kafka-server-common), rack-unaware
  (``assign_rack_unaware``) or rack-aware over ``getRackAlternatedBrokerList`` (``assign_rack_aware``), with a
  start index and a replica shift drawn independently (``RAND.nextInt(#brokers)`` each; a fixed start index is
  used for both).
- Kafka 4.x (``"4.x"``): ``AdminUtils.assignReplicasToBrokers`` is gone; the tool uses KRaft's
  ``StripedReplicaPlacer`` (kafka-metadata) instead (``striped_place``): racks and the brokers within each rack
  taken round-robin from random offsets, reshuffled after every ``#brokers`` partitions.

Verified against Kafka's own code (``tests/test_kafka_generate_real.py``, jars of Kafka 3.9.2 and 4.3.1 from
``scripts/fetch_kafka.sh``): ``bench/java/GenerateHarness.java`` calls Kafka by reflection and every output must be
identical: ``assign_rack_unaware``/``assign_rack_aware`` against 3.9's ``AdminUtils.assignReplicasToBrokers`` with a
fixed start index (3,570 cases: 3-60 brokers, none or 1-6 uneven racks, 1-500 partitions, RF 1-4, start indices and
start partitions), and ``generate(..., seed=s, kafka=v)`` against the tool's private ``calculateAssignment`` with its
``Random`` reseeded to ``s`` (560 cases of 1-30 topics, on both versions). The real ``--generate`` run on a local
cluster of each version proposes, for every topic, one of the outputs this module gives for some value of the random
draws. Used by the benchmark only, to show how much more ``--generate`` moves than a minimal plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

__all__ = ["assign_rack_unaware", "assign_rack_aware", "rack_alternated", "striped_place", "generate", "topic_order",
           "JavaRandom", "JavaHashMap", "java_hashmap_order", "java_string_hash", "topic_partition_hash",
           "KAFKA_VERSIONS"]

KAFKA_VERSIONS = ("3.9", "4.x")
K = TypeVar("K")


# -- java.util.Random, java.util.Collections.shuffle, java.util.HashMap's iteration order -------------------------
class JavaRandom:
    """``java.util.Random``: the same 48-bit linear congruential generator, so the same draws for the same seed."""

    _MULT = 0x5DEECE66D
    _MASK = (1 << 48) - 1

    def __init__(self, seed: int) -> None:
        self._seed = (seed ^ self._MULT) & self._MASK

    def _next(self, bits: int) -> int:
        self._seed = (self._seed * self._MULT + 0xB) & self._MASK
        r = self._seed >> (48 - bits)
        return r - (1 << 32) if r >= 1 << 31 else r

    def next_int(self, bound: int) -> int:
        if bound <= 0:
            raise ValueError("bound must be positive")
        r = self._next(31)
        m = bound - 1
        if bound & m == 0:
            return (bound * r) >> 31
        u = r
        while True:
            r = u % bound
            if u - r + m < 1 << 31:  # Java loops while this int sum overflows
                return r
            u = self._next(31)

    def shuffle(self, items: list[K]) -> None:
        """``Collections.shuffle(list, random)`` on a random-access list."""
        for i in range(len(items), 1, -1):
            j = self.next_int(i)
            items[i - 1], items[j] = items[j], items[i - 1]


def java_string_hash(s: str) -> int:
    """``String.hashCode()`` (over UTF-16 code units), as an unsigned 32-bit value."""
    h = 0
    data = s.encode("utf-16-le")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] | data[i + 1] << 8)) & 0xFFFFFFFF
    return h


def topic_partition_hash(tp: tuple[str, int]) -> int:
    """``TopicPartition.hashCode()``: ``31 * (31 + partition) + topic.hashCode()``, unsigned 32-bit."""
    return (31 * (31 + tp[1]) + java_string_hash(tp[0])) & 0xFFFFFFFF


class JavaHashMap(Generic[K]):
    """The key order of a ``java.util.HashMap`` (default capacity and load factor): by bucket of the table, and
    within a bucket in the order ``put`` appended or ``computeIfAbsent`` prepended the keys. Resizes happen where
    Java's do (``put``: once the size passes 3/4 of the table; ``computeIfAbsent``: at the start of a call that finds
    it past; either: a bucket growing past 8 keys in a table under 64). A bucket that Java would turn into a tree
    (past 8 keys in a table of 64 or more) keeps the list order here: Java's order there depends on identity hash
    codes, and ``exact`` turns False."""

    def __init__(self, hash_of: Callable[[K], int]) -> None:
        self._hash_of = hash_of
        self._cap = 16
        self._table: list[list[tuple[int, K]]] = [[] for _ in range(16)]
        self._keys: set[K] = set()
        self.exact = True

    def _bucket(self, key: K) -> list[tuple[int, K]]:
        h = self._hash_of(key) & 0xFFFFFFFF
        return self._table[(h ^ (h >> 16)) & (self._cap - 1)]

    def _resize(self) -> None:
        self._cap *= 2
        table: list[list[tuple[int, K]]] = [[] for _ in range(self._cap)]
        for bucket in self._table:
            for h, k in bucket:
                table[(h ^ (h >> 16)) & (self._cap - 1)].append((h, k))
        self._table = table

    def _treeify_bin(self) -> None:
        if self._cap < 64:
            self._resize()
        else:
            self.exact = False

    def put(self, key: K) -> None:
        if key in self._keys:
            return
        self._keys.add(key)
        bucket = self._bucket(key)
        bucket.append((self._hash_of(key) & 0xFFFFFFFF, key))
        if len(bucket) > 8:
            self._treeify_bin()
        if len(self._keys) > self._cap * 3 // 4:
            self._resize()

    def compute_if_absent(self, key: K) -> None:
        if len(self._keys) > self._cap * 3 // 4:
            self._resize()
        if key in self._keys:
            return
        self._keys.add(key)
        bucket = self._bucket(key)
        bucket.insert(0, (self._hash_of(key) & 0xFFFFFFFF, key))
        if len(bucket) > 7:
            self._treeify_bin()

    def keys(self) -> list[K]:
        return [k for bucket in self._table for _, k in bucket]


def java_hashmap_order(keys: Iterable[K], hash_of: Callable[[K], int]) -> list[K]:
    """The iteration order of a ``HashMap`` after ``put``-ting ``keys`` in this order."""
    m = JavaHashMap(hash_of)
    for k in keys:
        m.put(k)
    return m.keys()


def topic_order(topics: Mapping[str, tuple[int, int]]) -> list[str]:
    """The order in which ``calculateAssignment`` places the topics (each drawing from the one Random): its
    ``groupedByTopic`` (``computeIfAbsent(topic)`` for every entry of the current assignment, a
    ``HashMap<TopicPartition, ...>`` filled topic by topic from a ``HashMap<String, ...>`` of the topics, ``topics``'
    order standing for the order the Admin client put them in, which only matters for colliding hashes)."""
    by_name = java_hashmap_order(topics, java_string_hash)
    current = JavaHashMap(topic_partition_hash)
    for t in by_name:
        for p in range(topics[t][0]):
            current.put((t, p))
    grouped: JavaHashMap[str] = JavaHashMap(java_string_hash)
    for t, _ in current.keys():
        grouped.compute_if_absent(t)
    return grouped.keys()


# -- Kafka 3.9: AdminUtils.assignReplicasToBrokers -----------------------------------------------------------------
def _replica_index(first: int, second_shift: int, index: int, n: int) -> int:
    shift = 1 + (second_shift + index) % (n - 1)
    return (first + shift) % n


def assign_rack_unaware(n_partitions: int, rf: int, brokers: Sequence[int], start_index: int,
                        replica_shift: int, start_partition: int = 0) -> dict[int, list[int]]:
    """``AdminUtils.assignReplicasToBrokersRackUnaware`` over ``brokers`` in this order."""
    out: dict[int, list[int]] = {}
    n = len(brokers)
    shift = replica_shift
    pid = max(0, start_partition)
    for _ in range(n_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start_index) % n
        replicas = [brokers[first]]
        for j in range(rf - 1):
            replicas.append(brokers[_replica_index(first, shift, j, n)])
        out[pid] = replicas
        pid += 1
    return out


def rack_alternated(rack_of: Mapping[int, str]) -> list[int]:
    """Kafka's getRackAlternatedBrokerList: one broker from each rack (racks sorted, brokers sorted) in turn."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(rack_of):
        by_rack.setdefault(rack_of[b], []).append(b)
    racks = sorted(by_rack)
    iters = {r: iter(by_rack[r]) for r in racks}
    result: list[int] = []
    i = 0
    while len(result) < len(rack_of):
        nxt = next(iters[racks[i]], None)
        if nxt is not None:
            result.append(nxt)
        i = (i + 1) % len(racks)
    return result


def assign_rack_aware(n_partitions: int, rf: int, rack_of: Mapping[int, str], start_index: int,
                      replica_shift: int, start_partition: int = 0) -> dict[int, list[int]]:
    """``AdminUtils.assignReplicasToBrokersRackAware``."""
    arranged = rack_alternated(rack_of)
    n = len(arranged)
    n_racks = len(set(rack_of.values()))
    out: dict[int, list[int]] = {}
    shift = replica_shift
    pid = max(0, start_partition)
    for _ in range(n_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with = {rack_of[leader]}
        brokers_with = {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                broker = arranged[_replica_index(first, shift * n_racks, k, n)]
                rack = rack_of[broker]
                k += 1
                if (rack not in racks_with or len(racks_with) == n_racks) and \
                        (broker not in brokers_with or len(brokers_with) == n):
                    replicas.append(broker)
                    racks_with.add(rack)
                    brokers_with.add(broker)
                    break
        out[pid] = replicas
        pid += 1
    return out


# -- Kafka 4.x: StripedReplicaPlacer -------------------------------------------------------------------------------
class IntSource(Protocol):
    def next_int(self, bound: int) -> int: ...
    def shuffle(self, items: list[int]) -> None: ...


class _BrokerList:
    """``StripedReplicaPlacer.BrokerList`` of unfenced brokers (``--generate`` marks every broker unfenced)."""

    def __init__(self, brokers: list[int], rng: IntSource) -> None:
        self.brokers = sorted(brokers)
        self.index = 0
        self.epoch = 0
        self.offset = rng.next_int(len(self.brokers))

    def next(self, epoch: int) -> int:
        if self.epoch != epoch:
            self.epoch = epoch
            self.index = 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return -1
        broker = self.brokers[(self.index + self.offset) % len(self.brokers)]
        self.index += 1
        return broker


def striped_place(n_partitions: int, rf: int, brokers: Sequence[int], rack_of: Mapping[int, str | None],
                  rng: IntSource) -> list[list[int]]:
    """``new StripedReplicaPlacer(rng).place(new PlacementSpec(0, n_partitions, rf), brokers)`` with every broker
    unfenced, ``brokers`` in the order the cluster lists them (rack ``None`` = no rack: all in one)."""
    if not 0 < rf <= len(brokers):
        raise ValueError(f"replication factor {rf} with {len(brokers)} brokers")
    members: dict[str | None, list[int]] = {}
    for b in brokers:
        members.setdefault(rack_of.get(b), []).append(b)
    # RackList: racks in a HashMap keyed by Optional<String> (hash 0 for empty); each rack draws its offset in that
    # map's order, then the sorted rack names (empty first) draw the rack offset.
    map_order = java_hashmap_order(members, lambda r: 0 if r is None else java_string_hash(r))
    racks = {r: _BrokerList(members[r], rng) for r in map_order}
    names: list[str | None] = sorted(members, key=lambda r: (r is not None, r or ""))
    offset = rng.next_int(len(names))
    epoch = 0
    n_brokers = len(brokers)
    out: list[list[int]] = []
    for _ in range(n_partitions):
        if epoch == n_brokers and n_brokers > 1:
            rng.shuffle(names)
            for r in map_order:
                rng.shuffle(racks[r].brokers)
            epoch = 0
        if offset == len(names):
            offset = 0
        placed: list[int] = []
        first = offset
        while True:
            result = racks[names[first]].next(epoch)
            if result >= 0:
                placed.append(result)
                break
            first = (first + 1) % len(names)
        rack_index = offset
        for _ in range(1, rf):
            result = -1
            while result < 0:
                if rack_index == first:
                    first = -1
                else:
                    result = racks[names[rack_index]].next(epoch)
                rack_index = (rack_index + 1) % len(names)
            placed.append(result)
        epoch += 1
        offset += 1
        out.append(placed)
    return out


# -- the tool ------------------------------------------------------------------------------------------------------
def generate(topics: Mapping[str, tuple[int, int]], brokers: Sequence[int], rack_of: Mapping[int, str | None],
             *, rack_aware: bool = True, seed: int = 0, kafka: str = "3.9") -> dict[tuple[str, int], tuple[int, ...]]:
    """The proposal of ``--generate`` for {topic: (partitions, rf)} over ``brokers`` (in the order the cluster
    lists them), exactly what ``ReassignPartitionsCommand.calculateAssignment`` of Kafka ``kafka`` (3.9 or 4.x)
    returns when its ``java.util.Random`` is seeded with ``seed``. ``topics`` in the order Kafka read them (it only
    matters for topics whose hashes collide). Without ``rack_aware`` (``--disable-rack-aware``) racks are ignored;
    with it, some brokers without a rack is an error, as in Kafka."""
    if kafka not in KAFKA_VERSIONS:
        raise ValueError(f"kafka must be one of {KAFKA_VERSIONS}, not {kafka!r}")
    brokers = list(brokers)
    racks: dict[int, str | None] = {b: (rack_of.get(b) if rack_aware else None) for b in brokers}
    with_rack = sum(1 for b in brokers if racks[b] is not None)
    if 0 < with_rack < len(brokers):
        raise ValueError("Not all brokers have rack information for replica rack aware assignment")
    rng = JavaRandom(seed)
    out: dict[tuple[str, int], tuple[int, ...]] = {}
    for topic in topic_order(topics):
        count, rf = topics[topic]
        if kafka == "4.x":
            for p, reps in enumerate(striped_place(count, rf, brokers, racks, rng)):
                out[(topic, p)] = tuple(reps)
            continue
        if not 0 < rf <= len(brokers) or count <= 0:
            raise ValueError(f"topic {topic}: {count} partitions at replication factor {rf} over "
                             f"{len(brokers)} brokers")
        start = rng.next_int(len(brokers))
        shift = rng.next_int(len(brokers))
        if with_rack:
            assigned = assign_rack_aware(count, rf, {b: str(racks[b]) for b in brokers}, start, shift)
        else:
            assigned = assign_rack_unaware(count, rf, brokers, start, shift)
        for p, reps in assigned.items():
            out[(topic, p)] = tuple(reps)
    return out


def _self_check() -> None:
    # Kafka's AdminUtilsTest.testReplicaAssignment expectation (brokers 0-4, 10 partitions, RF 3, start 0).
    expected = {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
                5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}
    assert assign_rack_unaware(10, 3, [0, 1, 2, 3, 4], 0, 0) == expected
    # AdminRackAwareTest: rack-alternated list for racks {0:rack1,1:rack3,2:rack3,3:rack2,4:rack2,5:rack1}.
    assert rack_alternated({0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}) == [0, 3, 1, 5, 4, 2]
    # JDK 17 (jshell): r = new Random(-7); Collections.shuffle([1..7], r) -> [2, 3, 7, 6, 1, 4, 5];
    # then r.nextInt(1000000007) -> 829394584; "rack-\u00e9".hashCode() -> -938608781.
    rng, items = JavaRandom(-7), [1, 2, 3, 4, 5, 6, 7]
    rng.shuffle(items)
    assert items == [2, 3, 7, 6, 1, 4, 5] and rng.next_int(1000000007) == 829394584
    assert java_string_hash("rack-\u00e9") == -938608781 & 0xFFFFFFFF


_self_check()
