"""The snapshot stage: read a cluster from a source and write the run directory's first artifacts.

``RUN_DIR/snapshot.json``    the cluster model (``formats.write_cluster_json``), reloadable with ``load_snapshot``
``RUN_DIR/replicas.parquet`` one row per replica, for the Spark analysis stage
``RUN_DIR/brokers.parquet``  one row per broker (id, rack, alive, capacities), empty brokers included

Sources: ``file://PATH`` (cluster description or Kafka reassignment JSON) and ``zk://HOST:PORT[/chroot]``
(ZooKeeper-mode Kafka metadata). ZooKeeper holds no sizes: ``sizes`` names a ``kafka-log-dirs --describe`` JSON
(``file://PATH``) whose per-replica sizes fill them in.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import InputError, ModelError
from .formats import StagedFiles, load_cluster_file, parse_log_dirs, read_json, write_cluster_json
from .model import Cluster, TopicPartition
from .rundir import BROKERS_FILE, REPLICAS_FILE, SNAPSHOT_FILE
from .urls import redact_url

__all__ = ["SNAPSHOT_FILE", "REPLICAS_FILE", "BROKERS_FILE", "read_source", "take_snapshot", "load_snapshot",
           "write_replicas_parquet", "write_brokers_parquet"]



def _file_path(url: str) -> Path:
    path = url[len("file://") :]
    if not path:
        raise InputError(f"{url!r} names no file")
    return Path(path)


def read_sizes(url: str) -> dict[TopicPartition, dict[int, int]]:
    if not url.startswith("file://"):
        raise InputError(f"--sizes takes file://PATH to kafka-log-dirs --describe JSON, got {redact_url(url)!r}")
    path = _file_path(url)
    return parse_log_dirs(read_json(path), where=str(path))


def read_source(source: str, *, sizes: str | None = None, timeout: float = 10.0,
                kafka_config: Mapping[str, Any] | None = None, kafka_config_file: str | None = None) -> Cluster:
    """Read a cluster from ``file://``, ``zk://`` or ``kafka://``; raises ``InputError``/``SourceError`` with one line.

    ``kafka://`` reads sizes through DescribeLogDirs; ``--sizes`` overrides them when given."""
    from .urls import source_scheme

    source = source.strip()
    scheme = source_scheme(source)  # one line saying what is wrong, never echoing a password
    size_map = read_sizes(sizes) if sizes else None
    if scheme == "file":
        cluster = load_cluster_file(_file_path(source))
        if size_map:
            cluster = _apply_sizes(cluster, size_map)
        return cluster
    from .access.connect import open_backend  # zk:// and kafka://: the one registry of backends

    with open_backend(source, timeout=timeout, kafka_config=kafka_config,
                      kafka_config_file=kafka_config_file) as backend:
        cluster = backend.read_cluster()
    return _apply_sizes(cluster, size_map) if size_map else cluster


def _apply_sizes(cluster: Cluster, size_map: dict[TopicPartition, dict[int, int]]) -> Cluster:
    """Each partition's size: its leader's replica, else its largest replica (a partition without a leader)."""
    chosen = {}
    for p in cluster.partitions:
        sizes = size_map.get(p.tp)
        if sizes:
            chosen[p.tp] = sizes.get(p.leader, max(sizes.values())) if p.leader is not None else max(sizes.values())
    return cluster.with_sizes(chosen, sizes_known=True)


def write_replicas_parquet(cluster: Cluster, path: str | os.PathLike[str]) -> None:
    """One row per replica: topic, partition, broker, position, is_leader, in_isr, size_bytes, rack, bytes_in."""
    import pyarrow as pa

    rack_of = {b.id: b.rack for b in cluster.brokers}
    topic, part, broker, pos, is_leader, in_isr, size, rack, rate = ([] for _ in range(9))
    for p in cluster.partitions:
        isr = set(p.isr)
        for i, b in enumerate(p.replicas):
            topic.append(p.topic)
            part.append(p.partition)
            broker.append(b)
            pos.append(i)
            is_leader.append(b == p.leader)
            in_isr.append(b in isr)
            size.append(p.size_bytes)
            rack.append(rack_of[b])
            rate.append(p.bytes_in_per_s)
    table = pa.table(
        {
            "topic": pa.array(topic, pa.string()).dictionary_encode(),
            "partition": pa.array(part, pa.int32()),
            "broker": pa.array(broker, pa.int32()),
            "position": pa.array(pos, pa.int16()),
            "is_leader": pa.array(is_leader, pa.bool_()),
            "in_isr": pa.array(in_isr, pa.bool_()),
            "size_bytes": pa.array(size, pa.int64()),
            "rack": pa.array(rack, pa.string()),
            "bytes_in_per_s": pa.array(rate, pa.float64()),
        }
    )
    _write_parquet(table, Path(path), compression="zstd")


def write_brokers_parquet(cluster: Cluster, path: str | os.PathLike[str]) -> None:
    import pyarrow as pa

    table = pa.table({
        "broker": pa.array([b.id for b in cluster.brokers], pa.int32()),
        "rack": pa.array([b.rack for b in cluster.brokers], pa.string()),
        "alive": pa.array([b.alive for b in cluster.brokers], pa.bool_()),
        "disk_capacity_bytes": pa.array([b.disk_capacity_bytes for b in cluster.brokers], pa.int64()),
        "network_capacity_bytes_per_s": pa.array([b.network_capacity_bytes_per_s for b in cluster.brokers], pa.int64()),
    })
    _write_parquet(table, Path(path))


def _write_parquet(table: Any, target: Path, **kwargs: Any) -> None:
    """Write a parquet file atomically (temporary name, then rename); no temporary file survives a failure."""
    import pyarrow.parquet as pq

    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        pq.write_table(table, tmp, **kwargs)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write {target}: {exc.strerror or exc}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def take_snapshot(source: str, out_dir: str | os.PathLike[str], *, sizes: str | None = None, timeout: float = 10.0,
                  kafka_config: Mapping[str, Any] | None = None, kafka_config_file: str | None = None) -> Cluster:
    """Read the source and write ``snapshot.json`` and ``replicas.parquet`` into ``out_dir``.

    Nothing is written unless the whole cluster was read and validated.
    """
    started = time.monotonic()
    cluster = read_source(source, sizes=sizes, timeout=timeout, kafka_config=kafka_config,
                          kafka_config_file=kafka_config_file)
    if not cluster.brokers:
        raise ModelError(f"{redact_url(source)} describes no broker: not a Kafka cluster to rebalance")
    meta = dict(cluster.meta)
    meta.setdefault("source", redact_url(source))
    meta.setdefault("taken_at", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    meta["read_seconds"] = round(time.monotonic() - started, 3)
    cluster = cluster.with_meta(**meta)
    # All three files or none: a failed snapshot (a full disk, say) must not leave a snapshot.json to plan from.
    with StagedFiles(out_dir) as stage:
        replicas, brokers, snapshot = (stage.path(n) for n in (REPLICAS_FILE, BROKERS_FILE, SNAPSHOT_FILE))
        write_replicas_parquet(cluster, replicas)
        write_brokers_parquet(cluster, brokers)
        write_cluster_json(cluster, snapshot)
    return cluster


def load_snapshot(run_dir: str | os.PathLike[str]) -> Cluster:
    """Load ``RUN_DIR/snapshot.json`` written by ``take_snapshot``."""
    from .formats import read_cluster_json

    path = Path(run_dir) / SNAPSHOT_FILE
    if not path.exists():
        raise InputError(f"{path}: no snapshot in this run directory (run 'rebalancer snapshot' first)")
    try:
        return read_cluster_json(path)
    except InputError as exc:
        if str(exc).startswith(str(path)):
            raise
        raise type(exc)(f"{path}: {exc}") from None
