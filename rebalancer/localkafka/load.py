"""Loading a scenario into a running local cluster: topics with the scenario's exact replica lists, real data.

1. ``create_topics``: CreateTopics with an explicit replica assignment per partition (the scenario's order, first
   replica = preferred leader), then Metadata is read back and must show exactly those lists.
2. ``produce``: random bytes (``os.urandom``, compression none: incompressible on disk) written with an explicit
   partition to every partition, ``acks=all``, so that each partition holds its share of the total, in proportion
   to the scenario's sizes. kafka-python is used rather than Kafka's ProducerPerformance because the latter cannot
   aim at a partition (its default partitioner spreads records as it likes), and was no faster here
   (docs/real-kafka.md has the numbers).
3. ``wait_in_sync``: every partition's ISR holds all its replicas and every replica's log has the leader's size.
4. ``write_log_dirs``: the real ``kafka-log-dirs --describe`` (``org.apache.kafka.tools.LogDirsCommand``) writes
   ``DIR/log-dirs.json``: the ``--sizes file://`` input of ``rebalancer snapshot`` for zk:// sources.
"""

from __future__ import annotations

import os
import random
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import InputError, SimulationError
from ..formats import atomic_write_text, loads_json, parse_log_dirs
from ..model import Cluster, TopicPartition
from ..retry import poll
from .nodes import LOG_DIRS_FILE, admin_client, jvm

__all__ = ["partition_targets", "create_topics", "producer_method", "produce", "key_for", "wait_in_sync",
           "replica_sizes", "check_sizes", "write_log_dirs", "load_cluster", "bootstrap_of", "RECORD_BYTES",
           "SteadyProducer"]

MiB = 1024 * 1024
RECORD_OVERHEAD = 12  # bytes of record framing beside the value (lengths, deltas, attributes), about
RECORD_BYTES = 16 * 1024  # big enough that kafka-python's per-record cost does not limit the rate, small enough
                          # that partition sizes land within a fraction of a percent of their target
_POOL_BYTES = 8 * MiB


def bootstrap_of(state: Mapping[str, Any], alive_only: bool = True) -> str:
    from .nodes import is_ours

    nodes = [n for n in state["nodes"] if not alive_only or is_ours(n.get("process"))] or state["nodes"]
    return ",".join(f"127.0.0.1:{n['port']}" for n in nodes)


def partition_targets(cluster: Cluster, data_bytes: int) -> dict[TopicPartition, int]:
    """Bytes per partition: ``data_bytes`` shared in proportion to the scenario's sizes (evenly if it has none)."""
    parts = [p for p in cluster.partitions if not p.topic.startswith("__")]
    total = sum(p.size_bytes for p in parts)
    if not parts or data_bytes <= 0:
        return {p.tp: 0 for p in parts}
    if total <= 0:
        return {p.tp: data_bytes // len(parts) for p in parts}
    return {p.tp: int(data_bytes * p.size_bytes / total) for p in parts}


def _assignments_everywhere(admin: Any, topics: list[str]) -> dict[TopicPartition, tuple[int, ...]] | None:
    """The partitions with a leader as every live broker's metadata shows them, or None while the brokers differ."""
    from ..execute.consistency import same_views
    from ..kafka_admin import metadata, metadata_seen_by

    views = {}
    for b in sorted(x["node_id"] for x in metadata(admin, [])["brokers"]):
        seen = {}
        for t in metadata_seen_by(admin, b, topics)["topics"]:
            if t.get("error_code"):
                continue
            for p in t["partitions"]:
                if p.get("leader_id", -1) >= 0 and not p.get("error_code"):
                    seen[(t["name"], p["partition_index"])] = tuple(p["replica_nodes"])
        views[b] = seen
    return same_views(views)


def create_topics(state: Mapping[str, Any], cluster: Cluster, *, timeout: float = 60.0) -> None:
    """Create every topic of ``cluster`` with its partitions' exact replica lists; wait until every broker's Metadata
    shows them all, each with a leader (a producer may ask any broker, and a broker learns of a new topic a moment
    after the controller), and check the lists came back as given (order too)."""
    import kafka.errors as ke
    from kafka.admin import NewTopic

    wanted = {p.tp: tuple(p.replicas) for p in cluster.partitions if not p.topic.startswith("__")}
    topics = sorted({t for t, _ in wanted})
    if not topics:
        return
    new = [NewTopic(t, replica_assignments={n: list(r) for (tt, n), r in sorted(wanted.items()) if tt == t})
           for t in topics]
    deadline = time.monotonic() + timeout
    with admin_client(bootstrap_of(state), timeout=min(30.0, timeout)) as admin:
        for start in range(0, len(new), 50):
            try:
                admin.create_topics(new[start:start + 50], timeout_ms=int(timeout * 1000))
            except ke.KafkaError as exc:
                raise SimulationError(f"creating the scenario's topics failed: {type(exc).__name__} {exc}") from None
        def assigned() -> dict[TopicPartition, tuple[int, ...]]:
            try:
                return _assignments_everywhere(admin, topics) or {}
            except ke.KafkaError:
                return {}

        seen, _ = poll(assigned, lambda got: got.keys() >= wanted.keys(), timeout=max(0.0, deadline - time.monotonic()),
                       interval=0.2)
    missing = sorted(wanted.keys() - seen.keys())
    if missing:
        raise SimulationError(f"{len(missing)} partitions (first {missing[0][0]}-{missing[0][1]}) have no leader "
                              f"{timeout:g} s after creating them")
    wrong = sorted(tp for tp in wanted if seen[tp] != wanted[tp])
    if wrong:
        tp = wrong[0]
        raise SimulationError(f"{tp[0]}-{tp[1]} was created with replicas {list(seen[tp])}, not {list(wanted[tp])}")


def producer_method(method: str = "auto") -> str:
    """``kafka-python`` when its C CRC32C (the ``crc32c`` package, kafka-python's ``crc32c`` extra) is installed,
    else ``console``: without it kafka-python checksums every batch in pure Python at about 4 MiB/s."""
    if method not in ("auto", "kafka-python", "console"):
        raise InputError(f"producer {method!r}: choose auto, kafka-python or console")
    if method != "auto":
        return method
    try:
        import crc32c  # noqa: F401
    except ImportError:
        return "console"
    return "kafka-python"


def produce(state: Mapping[str, Any], targets: Mapping[TopicPartition, int], *, method: str = "auto",
            record_bytes: int = RECORD_BYTES, timeout: float = 600.0, seed: int = 0) -> dict[str, Any]:
    """Write about ``targets[tp]`` bytes (record overhead included) of random data to each partition, acks=all,
    compression none. Returns the method, bytes and seconds; the sizes are checked later (``check_sizes``)."""
    method = producer_method(method)
    counts: dict[str, int] = {}  # partitions per topic (targets name them all), for Kafka's key partitioner
    for topic, num in targets:
        counts[topic] = max(counts.get(topic, 0), num + 1)
    left = {tp: n for tp, n in targets.items() if n > 0}
    total = sum(left.values())
    started = time.monotonic()
    if total:
        (_produce_python if method == "kafka-python" else _produce_console)(state, left, record_bytes, timeout, seed, counts)
    seconds = time.monotonic() - started
    return {"method": method, "bytes": total, "seconds": round(seconds, 2),
            "mib_per_s": round(total / MiB / max(seconds, 1e-9), 1)}


def _rounds(left: Mapping[TopicPartition, int], record_bytes: int,
            overhead: Mapping[TopicPartition, int] | None = None) -> Iterator[tuple[TopicPartition, int]]:
    """(partition, value size) of every record to write, a few per partition in turn, so that every partition (and
    so every leader) fills at once and batches stay full. A record costs its value plus its overhead: framing, and
    the key where there is one."""
    left = dict(left)
    order = sorted(left)
    while left:
        for tp in order:
            n = left.get(tp)
            if n is None:
                continue
            extra = RECORD_OVERHEAD + (overhead or {}).get(tp, 0)
            for _ in range(8):
                size = max(1, min(record_bytes, n - extra))
                yield tp, size
                n -= size + extra
                if n <= 0:
                    break
            if n <= 0:
                del left[tp]
            else:
                left[tp] = n


def _produce_python(state: Mapping[str, Any], left: dict[TopicPartition, int], record_bytes: int, timeout: float,
                    seed: int, counts: Mapping[str, int]) -> None:
    """kafka-python's producer, explicit partition per record."""
    import kafka.errors as ke

    from kafka import KafkaProducer

    rng = random.Random(seed)
    pool = os.urandom(_POOL_BYTES)
    failures: list[BaseException] = []
    started = time.monotonic()
    producer = KafkaProducer(bootstrap_servers=bootstrap_of(state), acks="all", compression_type=None,
                             batch_size=512 * 1024, linger_ms=5, max_request_size=2 * MiB,
                             request_timeout_ms=60_000, retries=5, client_id="localkafka-loader")
    try:
        for i, (tp, size) in enumerate(_rounds(left, record_bytes)):
            off = rng.randrange(0, _POOL_BYTES - size + 1)
            producer.send(tp[0], value=pool[off:off + size], partition=tp[1]).add_errback(failures.append)
            if i % 256 == 0 and (failures or time.monotonic() - started > timeout):
                break
        producer.flush(timeout=max(1.0, timeout - (time.monotonic() - started)))
    except ke.KafkaError as exc:
        raise SimulationError(f"producing the scenario's data failed: {type(exc).__name__} {exc}") from None
    finally:
        producer.close(timeout=10)
    if failures:
        first = failures[0]
        raise SimulationError(f"producing the scenario's data failed ({len(failures)} records): "
                              f"{type(first).__name__} {first}")
    if time.monotonic() - started > timeout:
        raise SimulationError(f"producing the scenario's data took more than {timeout:g} s")


class SteadyProducer:
    """Producers' traffic: random bytes written into one partition at ``bytes_per_s`` from a thread, until ``stop``
    (which returns the bytes written and raises ``SimulationError`` if a write failed). Paced in 100 ms slices.
    ``acked`` counts the bytes the leader acknowledged; ``wait_flowing`` waits until traffic reaches the broker."""

    def __init__(self, state: Mapping[str, Any], tp: TopicPartition, bytes_per_s: float) -> None:
        import threading

        if not bytes_per_s > 0:
            raise InputError(f"a producer's rate must be positive, got {bytes_per_s}")
        self.tp, self.rate, self.written, self.acked = tp, float(bytes_per_s), 0, 0
        self._bootstrap = bootstrap_of(state)
        self._failures: list[BaseException] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"produce-{tp[0]}-{tp[1]}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import kafka.errors as ke

        from kafka import KafkaProducer

        pool = os.urandom(_POOL_BYTES)
        rng = random.Random(0)
        try:
            producer = KafkaProducer(bootstrap_servers=self._bootstrap, acks=1, compression_type=None, linger_ms=5,
                                     max_request_size=2 * MiB, retries=5, client_id="localkafka-steady-producer")
        except ke.KafkaError as exc:
            self._failures.append(exc)
            return
        started = time.monotonic()
        try:
            while not self._done.is_set() and not self._failures:
                due = int(self.rate * (time.monotonic() - started + 0.1))  # bytes owed by the end of this slice
                while self.written < due:
                    size = min(RECORD_BYTES, due - self.written)
                    off = rng.randrange(0, _POOL_BYTES - size + 1)
                    sent = producer.send(self.tp[0], value=pool[off:off + size], partition=self.tp[1])
                    sent.add_callback(self._count_acked, size)
                    sent.add_errback(self._failures.append)
                    self.written += size
                self._done.wait(0.1)
            producer.flush(timeout=30)
        finally:
            producer.close(timeout=10)

    def _count_acked(self, size: int, _metadata: Any) -> None:
        self.acked += size  # (only the producer's sender thread calls this)

    def wait_flowing(self, seconds: float = 1.0, timeout: float = 60.0) -> SteadyProducer:
        """Returns once the leader has acknowledged ``seconds`` worth of traffic at the rate: a producer's first
        bytes wait for its metadata, more so on a loaded machine, and until then the partition receives nothing.
        Raises ``SimulationError`` (the producer stopped) if a write failed or the traffic did not come in time."""
        deadline = time.monotonic() + timeout
        while self.acked < self.rate * seconds:
            if self._failures or not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise SimulationError(f"producing into {self.tp[0]}-{self.tp[1]}: {self.acked} of "
                                      f"{self.rate * seconds:.0f} bytes acknowledged within {timeout:.0f} s")
            self._done.wait(0.05)
        return self

    def stop(self) -> int:
        self._done.set()
        self._thread.join(60)
        if self._failures:
            exc = self._failures[0]
            raise SimulationError(f"producing into {self.tp[0]}-{self.tp[1]} failed: {type(exc).__name__} {exc}")
        return self.written


def key_for(partition: int, partitions: int) -> bytes:
    """The smallest decimal key that Kafka's default partitioner (murmur2 of the key, positive, modulo the partition
    count) sends to ``partition``."""
    from kafka.partitioner.default import murmur2

    k = 0
    while (murmur2(str(k).encode()) & 0x7FFFFFFF) % partitions != partition:
        k += 1
    return str(k).encode()


def _produce_console(state: Mapping[str, Any], left: dict[TopicPartition, int], record_bytes: int, timeout: float,
                     seed: int, counts: Mapping[str, int]) -> None:
    """Kafka's own console producer, one per topic (two at a time: a machine of 2 cores), fed ``KEY<TAB>VALUE``
    lines whose keys Kafka's default partitioner sends to the wanted partition; values are base64 of random bytes
    (the console producer reads text lines)."""
    import base64
    import threading

    d = Path(state["directory"])
    kraft = state["kraft"]
    config = d / "loader-producer.properties"
    # The console producer's own 1.5 s request timeout is too short for brokers this busy; the file wins over it.
    config.write_text("acks=all\ncompression.type=none\nbatch.size=524288\nlinger.ms=5\nmax.request.size=2097152\n"
                      "request.timeout.ms=60000\ndelivery.timeout.ms=300000\nretries=2147483647\n")
    write_tools_logging(d)
    pool = base64.b64encode(os.urandom(_POOL_BYTES * 3 // 4))
    by_topic: dict[str, dict[int, int]] = {}
    for (topic, num), n in left.items():
        by_topic.setdefault(topic, {})[num] = n
    errors: list[str] = []
    gate = threading.Semaphore(2)
    deadline = time.monotonic() + timeout

    def one(topic: str, parts: dict[int, int]) -> None:
        keys = {num: key_for(num, counts[topic]) for num in parts}
        if kraft:
            main, opts = "org.apache.kafka.tools.ConsoleProducer", ["--command-config", str(config),
                                                                     "--reader-property", "parse.key=true",
                                                                     "--reader-property", "key.separator=\t"]
        else:
            main, opts = "kafka.tools.ConsoleProducer", ["--producer.config", str(config), "--property",
                                                         "parse.key=true", "--property", "key.separator=\t"]
        cmd = jvm(Path(state["libs"]), main, "--bootstrap-server", bootstrap_of(state), "--topic", topic, *opts,
                  heap_mib=256, props=tools_logging(d))
        rng = random.Random(f"{seed}:{topic}")
        with gate:
            if errors:
                return
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=d)
            assert proc.stdin is not None
            # A producer that stops reading would block our writes for ever: past the deadline it is killed.
            watchdog = threading.Timer(max(1.0, deadline - time.monotonic()), proc.kill)
            watchdog.start()
            try:
                for (_, num), size in _rounds({(topic, k): v for k, v in parts.items()}, record_bytes,
                                              {(topic, k): len(key) for k, key in keys.items()}):
                    off = rng.randrange(0, len(pool) - size + 1)
                    proc.stdin.write(keys[num] + b"\t" + pool[off:off + size] + b"\n")
                proc.stdin.close()
                code = proc.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                errors.append(f"the console producer of {topic} took more than {timeout:g} s")
                return
            except BrokenPipeError:
                code = proc.wait()
            finally:
                watchdog.cancel()
            if code == -9 and time.monotonic() >= deadline:
                errors.append(f"the console producer of {topic} took more than {timeout:g} s")
                return
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            # A record that could not be sent is logged at ERROR (and the producer goes on): that is a failure.
            bad = [ln for ln in err.splitlines() if ln.startswith(("ERROR", "FATAL")) or "Exception in thread" in ln]
            if code != 0 or bad:
                errors.append(f"the console producer of {topic} failed (exit {code}): {(bad or err.splitlines() or ['?'])[-1][:300]}")

    threads = [threading.Thread(target=one, args=(t, p), daemon=True) for t, p in sorted(by_topic.items())]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SimulationError(errors[0])


def tools_logging(d: Path) -> dict[str, str]:
    """System properties that make a Kafka tool log warnings to stderr (either logging library)."""
    return {"log4j.configuration": f"file:{d / 'tools-log4j.properties'}",
            "log4j2.configurationFile": str(d / "tools-log4j2.properties")}


def write_tools_logging(d: Path) -> None:
    (d / "tools-log4j.properties").write_text("log4j.rootLogger=WARN, stderr\n"
                                              "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
                                              "log4j.appender.stderr.Target=System.err\n"
                                              "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
                                              "log4j.appender.stderr.layout.ConversionPattern=%p %m (%c)%n\n")
    (d / "tools-log4j2.properties").write_text("status = warn\nappender.err.type = Console\nappender.err.name = ERR\n"
                                               "appender.err.target = SYSTEM_ERR\nappender.err.layout.type = PatternLayout\n"
                                               "appender.err.layout.pattern = %p %m (%c)%n\n"
                                               "rootLogger.level = WARN\nrootLogger.appenderRef.err.ref = ERR\n")


def check_sizes(state: Mapping[str, Any], targets: Mapping[TopicPartition, int], *, tolerance: float = 0.03) -> dict[str, float]:
    """Every partition's size against its target (leader replica): ``SimulationError`` naming the first one off by
    more than ``tolerance`` (plus one record). Returns the smallest and largest relative error."""
    sizes = replica_sizes(state)
    errors = []
    for tp, want in sorted(targets.items()):
        got = max((sizes.get(tp) or {0: 0}).values())
        if abs(got - want) > tolerance * want + RECORD_BYTES + 1024:
            raise SimulationError(f"{tp[0]}-{tp[1]} holds {got:,} bytes after loading, not about {want:,}")
        if want:
            errors.append(got / want - 1)
    return {"min_error": round(min(errors, default=0.0), 5), "max_error": round(max(errors, default=0.0), 5)}


def replica_sizes(state: Mapping[str, Any], *, timeout: float = 10.0) -> dict[TopicPartition, dict[int, int]]:
    """Bytes per replica from DescribeLogDirs of every running broker: {(topic, partition): {broker: bytes}}."""
    from .nodes import is_ours

    live = [n["id"] for n in state["nodes"] if is_ours(n.get("process"))]
    sizes: dict[TopicPartition, dict[int, int]] = {}
    with admin_client(bootstrap_of(state), timeout=timeout) as admin:
        for entry in admin.describe_log_dirs(brokers=live):
            for d in entry["log_dirs"]:
                if d.get("error_code"):
                    continue
                for t in d["topics"]:
                    for p in t["partitions"]:
                        if not p.get("is_future_key"):
                            sizes.setdefault((t["name"], p["partition_index"]), {})[entry["broker"]] = int(p["partition_size"])
    return sizes


def wait_in_sync(state: Mapping[str, Any], cluster: Cluster, *, timeout: float = 300.0) -> float:
    """Wait until every partition of ``cluster`` has all its replicas in the ISR and equally long logs."""
    import kafka.errors as ke

    wanted = {p.tp: set(p.replicas) for p in cluster.partitions if not p.topic.startswith("__")}
    topics = sorted({t for t, _ in wanted})
    started = time.monotonic()

    def lag() -> str | None:  # why the replicas are not in sync yet; None once they are
        try:
            with admin_client(bootstrap_of(state), timeout=10.0) as admin:
                isr = {(t["name"], p["partition_index"]): set(p["isr_nodes"])
                       for t in admin.describe_topics(topics) for p in t["partitions"]}
            short = sorted(tp for tp, reps in wanted.items() if isr.get(tp) != reps)
            if short:
                return f"{len(short)} partitions lack replicas in their ISR (first {short[0][0]}-{short[0][1]})"
            sizes = replica_sizes(state)
        except ke.KafkaError as exc:
            return f"{type(exc).__name__} reading the cluster"
        uneven = sorted(tp for tp, reps in wanted.items()
                        if set(sizes.get(tp, {})) != reps or len(set(sizes[tp].values())) > 1)
        if uneven:
            return f"{len(uneven)} partitions have replicas of unequal size (first {uneven[0][0]}-{uneven[0][1]})"
        return None

    why, _ = poll(lag, lambda found: found is None, timeout=timeout, interval=0.5)
    if why is not None:
        raise SimulationError(f"replicas not in sync {timeout:g} s after loading: {why}")
    return time.monotonic() - started


def write_log_dirs(state: Mapping[str, Any], *, timeout: float = 60.0) -> Path:
    """Run the real ``kafka-log-dirs --describe`` and keep its JSON as ``DIR/log-dirs.json`` (checked readable by
    ``rebalancer.formats.parse_log_dirs``, the reader of ``snapshot --sizes``)."""
    d = Path(state["directory"])
    write_tools_logging(d)
    cmd = jvm(Path(state["libs"]), "org.apache.kafka.tools.LogDirsCommand", "--describe",
              "--bootstrap-server", bootstrap_of(state), heap_mib=128, props=tools_logging(d))
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=d)
    except subprocess.TimeoutExpired:
        raise SimulationError(f"kafka-log-dirs --describe took more than {timeout:g} s") from None
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip() or done.stdout.strip() or "(no output)").splitlines()[-1]
        raise SimulationError(f"kafka-log-dirs --describe failed (exit {done.returncode}): {tail[:300]}")
    path = d / LOG_DIRS_FILE
    parse_log_dirs(loads_json(lines[-1], "kafka-log-dirs output"), where="kafka-log-dirs output")
    atomic_write_text(path, lines[-1] + "\n")
    return path


def load_cluster(state: Mapping[str, Any], cluster: Cluster, data_mib: float, *, producer: str = "auto",
                 timeout: float = 900.0) -> dict[str, Any]:
    """Create the topics, produce ``data_mib`` MiB in total (leader bytes, before replication) shared in proportion
    to the scenario's sizes, wait until every replica is in sync, check each partition's size, write
    log-dirs.json. Returns what was done, with timings."""
    started = time.monotonic()
    create_topics(state, cluster, timeout=min(timeout, 120.0))
    created = time.monotonic() - started
    targets = partition_targets(cluster, int(data_mib * MiB))
    produced = produce(state, targets, method=producer, timeout=timeout)
    sync = wait_in_sync(state, cluster, timeout=timeout)
    errors = check_sizes(state, targets)
    path = write_log_dirs(state)
    return {"topics": len({t for t, _ in targets}), "partitions": len(targets), "bytes": produced["bytes"],
            "producer": produced["method"], "create_seconds": round(created, 2),
            "produce_seconds": produced["seconds"], "mib_per_s": produced["mib_per_s"],
            "sync_seconds": round(sync, 2), **errors, "seconds": round(time.monotonic() - started, 2),
            "log_dirs": str(path)}
