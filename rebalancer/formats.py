"""Reading and writing the JSON formats the tool exchanges with people and with Kafka.

- Cluster description (the project's own, also the body of ``snapshot.json``)::

      {"brokers": [{"id": 0, "rack": "a"}],
       "partitions": [{"topic": "t", "partition": 0, "replicas": [0, 1],
                       "leader": 0, "isr": [0, 1], "size_bytes": 123}]}

  ``leader``, ``isr``, ``size_bytes`` and ``rack`` are optional; unknown keys are ignored.
- Kafka's reassignment JSON, as read and written by ``kafka-reassign-partitions``::

      {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [0, 1]}]}

- Kafka's ``kafka-log-dirs --describe`` JSON, used as a source of partition sizes.

Every malformed input is an ``InputError`` (or ``ModelError``) that names the file and the offending entry.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, TextIO, TypeVar

import msgspec

from .errors import InputError, ModelError
from .model import Broker, Cluster, Partition, TopicPartition, topic_name_problem

T = TypeVar("T")

__all__ = [
    "SNAPSHOT_FORMAT",
    "read_json",
    "read_text",
    "loads_json",
    "atomic_write_text",
    "atomic_write_json",
    "StagedFiles",
    "cluster_from_dict",
    "read_cluster_json",
    "read_decoded",
    "cluster_from_reassignment",
    "load_cluster_file",
    "cluster_to_dict",
    "write_cluster_json",
    "reassignment_json",
    "parse_log_dirs",
]

SNAPSHOT_FORMAT = "kafka-rebalancer/cluster"
SNAPSHOT_VERSION = 1


# -- generic helpers ------------------------------------------------------------------------------------------
def _regular_file(p: Path) -> None:
    """Only regular files are read: a device or a FIFO (``/dev/zero``, a named pipe) would never end."""
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"{p}: is a directory, expected a JSON file")
    if not stat.S_ISREG(mode):
        raise InputError(f"{p}: not a regular file")


def read_text(path: str | os.PathLike[str]) -> str:
    """A small UTF-8 text file (a client config, say); every failure is a one-line ``InputError`` naming it."""
    p = Path(path)
    _regular_file(p)
    try:
        return p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read: {exc.strerror or exc}") from None


def loads_json(text: str, where: str) -> Any:
    """Parse JSON text; malformed, too deeply nested or absurd numbers are a one-line ``InputError``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer literal of thousands of digits
        raise InputError(f"{where}: malformed JSON: {exc}") from None
    except MemoryError:
        raise InputError(f"{where}: too large to read into memory") from None


def _read_bytes(p: Path) -> bytes:
    _regular_file(p)
    try:
        return p.read_bytes()
    except PermissionError:
        raise InputError(f"{p}: permission denied") from None
    except MemoryError:
        raise InputError(f"{p}: too large to read into memory") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read: {exc.strerror or exc}") from None


def _json_of(data: bytes, p: Path) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return loads_json(text, str(p))


def read_json(path: str | os.PathLike[str]) -> Any:
    """Parse a JSON file; a missing, unreadable or malformed file is a one-line ``InputError``."""
    p = Path(path)
    return _json_of(_read_bytes(p), p)


def _write_error(path: Path, exc: OSError) -> InputError:
    return InputError(f"cannot write {path}: {exc.strerror or exc}")


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` so that readers see either the old file or the whole new one, never a torn write; a failure
    (a full disk, a read-only directory) leaves no temporary file and is a one-line ``InputError``."""
    _atomic_write(path, lambda fh: fh.write(text))


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, compact: bool = False) -> None:
    """``obj`` as indented JSON, atomically (``atomic_write_text``), streamed to the file as it is encoded: a plan of
    millions of changes is never one string in memory (the same bytes as ``json.dumps``). ``compact``: on one line,
    encoded by the json module's C encoder (streaming and indenting both run its pure-Python one, ten times slower):
    for a file rewritten many times a run, an execution's state."""

    def write(fh: TextIO) -> None:
        if compact:
            fh.write(json.dumps(obj))
        else:
            json.dump(obj, fh, indent=2, sort_keys=False)
        fh.write("\n")
    _atomic_write(path, write)


def _atomic_write(path: str | os.PathLike[str], write: Callable[[TextIO], object]) -> None:
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError as exc:
        raise _write_error(target, exc) from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; run files are read by other users (approver, web UI)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise _write_error(target, exc) from None
        raise


def check_writable(directory: str | os.PathLike[str]) -> None:
    """A one-line ``InputError`` unless files can be created in ``directory`` (permissions, a read-only mount, an
    immutable attribute): a stage that computes for minutes checks it first, not when it writes."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-check.", dir=directory)
    except OSError as exc:
        raise InputError(f"cannot write to {directory}: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(probe)


class StagedFiles:
    """The files of one stage, all or none: each is written under a temporary name beside its final one
    (``path(name)``), and only when the whole stage succeeded are they renamed into place (``commit``); on failure
    every temporary file or directory is removed (``discard``), and so is the run directory if the stage created it.
    A reader never sees half a stage: files are renamed in the order given, a stage's main file last."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.dir = Path(directory)
        self.created_dir = False
        self._staged: list[tuple[Path, Path]] = []

    def __enter__(self) -> StagedFiles:
        try:
            if self.dir.exists() and not self.dir.is_dir():
                raise InputError(f"{self.dir} exists and is not a directory")
            if not self.dir.exists():
                self.dir.mkdir(parents=True)
                self.created_dir = True
        except OSError as exc:  # a parent that is a file, a name too long, a read-only parent
            raise InputError(f"cannot create {_short(self.dir)}: {exc.strerror or exc}") from None
        check_writable(self.dir)
        return self

    def path(self, name: str) -> Path:
        """Where to write ``name`` (relative to the directory; a file or a directory) until the stage commits."""
        final = self.dir / name
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}-{len(self._staged)}")
        _remove(tmp)
        self._staged.append((tmp, final))
        return tmp

    def commit(self) -> None:
        for tmp, final in self._staged:
            if final.is_dir() and not final.is_symlink():
                old = final.with_name(f".{final.name}.old-{os.getpid()}")
                _remove(old)
                os.replace(final, old)
                os.replace(tmp, final)
                _remove(old)
            else:
                os.replace(tmp, final)
        self._staged.clear()

    def discard(self) -> None:
        for tmp, _final in self._staged:
            _remove(tmp)
        self._staged.clear()
        if self.created_dir:
            import shutil

            shutil.rmtree(self.dir, ignore_errors=True)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            try:
                self.commit()
                return
            except OSError as err:
                self.discard()
                raise InputError(f"cannot write the files of {self.dir}: {err.strerror or err}") from None
        self.discard()
        if isinstance(exc, OSError):
            where = getattr(exc, "filename", None) or self.dir
            raise InputError(f"cannot write {where}: {exc.strerror or exc}") from None


def _short(path: Path) -> str:
    text = str(path)
    return text if len(text) <= 200 else text[:100] + "..." + text[-60:]


def _remove(path: Path) -> None:
    import shutil

    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


# -- field parsing ------------------------------------------------------------------------------------------
def _req(obj: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in obj:
        raise ModelError(f"{where}: missing required key {key!r}")
    return obj[key]


def _int(value: Any, what: str, where: str, *, minimum: int | None = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelError(f"{where}: {what} {value!r} is not an integer")
    if minimum is not None and value < minimum:
        raise ModelError(f"{where}: {what} {value} is negative" if minimum == 0 else f"{where}: {what} {value} < {minimum}")
    return value


def _int_list(value: Any, what: str, where: str) -> tuple[int, ...]:
    if type(value) is list and all(type(v) is int and v >= 0 for v in value):  # the common case, checked at once
        return tuple(value)
    if not isinstance(value, list):
        raise ModelError(f"{where}: {what} must be a list of broker ids, got {type(value).__name__}")
    return tuple(_int(v, f"{what} entry", where) for v in value)


def _opt_positive(obj: Mapping[str, Any], key: str, where: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return _int(value, key, where, minimum=1)


def _broker_from_dict(obj: Any, i: int) -> Broker:
    where = f"brokers[{i}]"
    if not isinstance(obj, dict):
        raise ModelError(f"{where}: expected an object, got {type(obj).__name__}")
    bid = _int(_req(obj, "id", where), "id", where)
    where = f"broker {bid}"
    rack = obj.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise ModelError(f"{where}: rack {rack!r} is not a string")
    alive = obj.get("alive", True)
    if not isinstance(alive, bool):
        raise ModelError(f"{where}: alive {alive!r} is not true/false")
    port = obj.get("port")
    return Broker(
        id=bid,
        rack=rack or None,
        disk_capacity_bytes=_opt_positive(obj, "disk_capacity_bytes", where),
        network_capacity_bytes_per_s=_opt_positive(obj, "network_capacity_bytes_per_s", where),
        alive=alive,
        host=obj.get("host") if isinstance(obj.get("host"), str) else None,
        port=port if isinstance(port, int) and not isinstance(port, bool) else None,
    )


_Id = Annotated[int, msgspec.Meta(ge=0)]


class _PlainPartition(msgspec.Struct):
    """A snapshot's common partition entry: a topic name, a partition number, replica and ISR lists and a leader of
    non-negative integers, a whole size, a numeric rate (``_plain_cluster``)."""

    topic: str
    partition: _Id
    replicas: list[_Id]
    isr: list[_Id]
    leader: _Id
    size_bytes: int = 0
    bytes_in_per_s: float | None = None
    adding_replicas: list[_Id] = msgspec.field(default_factory=list)
    removing_replicas: list[_Id] = msgspec.field(default_factory=list)


class _PlainCluster(msgspec.Struct):
    brokers: list[Any]
    partitions: list[_PlainPartition]
    meta: Any = None


_PLAIN = msgspec.json.Decoder(_PlainCluster)


def _plain_cluster(data: bytes, meta: Mapping[str, Any] | None) -> Cluster | None:
    """A cluster description whose every partition entry is a common one (``_PlainPartition``), decoded and
    validated by msgspec in C: about 2.5x faster than ``json`` and a check per entry on a 3M-replica snapshot
    (``bench/bench_snapshot.py --read``). None for anything else (malformed JSON, a field of another type, a
    leader of -1, a missing ISR, a bad topic name): ``cluster_from_dict`` then reads it field by field, for its
    one-line error or its defaults. The brokers and the cluster are checked as that reading checks them."""
    try:
        doc = _PLAIN.decode(data)
    except (ValueError, RecursionError):  # msgspec's DecodeError and ValidationError; UnicodeDecodeError in a string
        return None
    if any(topic_name_problem(t) is not None for t in {p.topic for p in doc.partitions}):
        return None
    brokers = [_broker_from_dict(b, i) for i, b in enumerate(doc.brokers)]
    partitions = []
    for e in doc.partitions:
        reps = tuple(e.replicas)
        partitions.append(Partition(e.topic, e.partition, reps, e.leader, reps if e.isr == e.replicas else tuple(e.isr),
                                    e.size_bytes, e.bytes_in_per_s, tuple(e.adding_replicas),
                                    tuple(e.removing_replicas)))
    merged: dict[str, Any] = dict(doc.meta) if isinstance(doc.meta, dict) else {}
    merged.update(meta or {})
    return Cluster.build(brokers, partitions, merged)


def read_cluster_json(path: str | os.PathLike[str], *, meta: Mapping[str, Any] | None = None) -> Cluster:
    """A cluster description file (or ``snapshot.json``) as a validated cluster: decoded by msgspec when every
    entry is a common one (``_plain_cluster``), else read by ``json`` and ``cluster_from_dict``, whose one-line
    errors name the entry and field."""
    return read_decoded(path, lambda data: _plain_cluster(data, meta), lambda doc: cluster_from_dict(doc, meta=meta))


def read_decoded(path: str | os.PathLike[str], fast: Callable[[bytes], T | None], slow: Callable[[Any], T]) -> T:
    """A JSON file read by ``fast`` (a validating decoder, msgspec's: None for anything it does not take), else
    parsed by ``json`` and read by ``slow``, whose one-line errors name the entry and field: the common file at the
    decoder's speed, any other with the field-by-field reading's words."""
    p = Path(path)
    data = _read_bytes(p)
    got = fast(data)
    return got if got is not None else slow(_json_of(data, p))


def _partition_from_dict(obj: Any, i: int) -> Partition:
    if not isinstance(obj, dict):
        raise ModelError(f"partitions[{i}]: expected an object, got {type(obj).__name__}")
    topic = _req(obj, "topic", f"partitions[{i}]")
    problem = topic_name_problem(topic)
    if problem:
        shown = repr(topic) if len(repr(topic)) <= 60 else repr(topic)[:57] + "..."
        raise ModelError(f"partitions[{i}]: topic name {shown} {problem}")
    num = _int(_req(obj, "partition", f"topic {topic}, partitions[{i}]"), "partition", f"topic {topic}")
    where = f"partition {topic}-{num}"
    replicas = _int_list(_req(obj, "replicas", where), "replicas", where)
    isr_raw = obj.get("isr")
    isr = replicas if isr_raw is None else _int_list(isr_raw, "isr", where)
    leader_raw = obj.get("leader", "default")
    if leader_raw == "default":
        leader: int | None = next((b for b in replicas if b in isr), replicas[0] if replicas else None)
    elif leader_raw is None or leader_raw == -1:
        leader = None
    else:
        leader = _int(leader_raw, "leader", where)
    size = obj.get("size_bytes", 0)
    if size is None:
        size = 0
    if isinstance(size, float) and size.is_integer():
        size = int(size)
    size = _int(size, "size_bytes", where, minimum=None)
    rate = obj.get("bytes_in_per_s")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float))):
        raise ModelError(f"{where}: bytes_in_per_s {rate!r} is not a number")
    adding, removing = obj.get("adding_replicas"), obj.get("removing_replicas")
    adding = _int_list(adding, "adding_replicas", where) if adding else ()
    removing = _int_list(removing, "removing_replicas", where) if removing else ()
    return Partition(
        topic=topic,
        partition=num,
        replicas=replicas,
        leader=leader,
        isr=isr,
        size_bytes=size,
        bytes_in_per_s=None if rate is None else float(rate),
        adding=adding,
        removing=removing,
    )


# -- cluster description ------------------------------------------------------------------------------------
def cluster_from_dict(doc: Any, *, meta: Mapping[str, Any] | None = None) -> Cluster:
    """Build a validated cluster from the project's cluster description (or a snapshot.json body)."""
    if not isinstance(doc, dict):
        raise ModelError(f"cluster description must be a JSON object, got {type(doc).__name__}")
    brokers_raw = _req(doc, "brokers", "cluster description")
    parts_raw = _req(doc, "partitions", "cluster description")
    if not isinstance(brokers_raw, list):
        raise ModelError("cluster description: 'brokers' must be a list")
    if not isinstance(parts_raw, list):
        raise ModelError("cluster description: 'partitions' must be a list")
    brokers = [_broker_from_dict(b, i) for i, b in enumerate(brokers_raw)]
    partitions = [_partition_from_dict(p, i) for i, p in enumerate(parts_raw)]
    merged: dict[str, Any] = dict(doc.get("meta") or {}) if isinstance(doc.get("meta"), dict) else {}
    merged.update(meta or {})
    return Cluster.build(brokers, partitions, merged)


def cluster_from_reassignment(doc: Any, *, meta: Mapping[str, Any] | None = None) -> Cluster:
    """Build a cluster from Kafka's reassignment JSON: brokers are those named, leaders the preferred ones."""
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise ModelError("reassignment JSON must be an object with a 'partitions' list")
    version = doc.get("version", 1)
    if version != 1:
        raise ModelError(f"reassignment JSON: unsupported version {version!r} (Kafka writes version 1)")
    partitions = []
    for i, entry in enumerate(doc["partitions"]):
        if not isinstance(entry, dict):
            raise ModelError(f"partitions[{i}]: expected an object, got {type(entry).__name__}")
        clean = {k: entry[k] for k in ("topic", "partition", "replicas") if k in entry}
        partitions.append(_partition_from_dict(clean, i))
    broker_ids = sorted({b for p in partitions for b in p.replicas})
    return Cluster.build((Broker(id=b) for b in broker_ids), partitions, meta)


def load_cluster_file(path: str | os.PathLike[str]) -> Cluster:
    """Load either format, telling them apart by the presence of a 'brokers' list."""
    p = Path(path)
    data = _read_bytes(p)
    try:
        plain = _plain_cluster(data, {"source": f"file://{p.resolve()}"})
    except ModelError as exc:
        raise ModelError(f"{path}: {exc}") from None
    if plain is not None:
        return plain
    doc = _json_of(data, p)
    try:
        if isinstance(doc, dict) and "brokers" in doc:
            return cluster_from_dict(doc, meta={"source": f"file://{Path(path).resolve()}"})
        if isinstance(doc, dict) and "partitions" in doc:
            return cluster_from_reassignment(doc, meta={"source": f"file://{Path(path).resolve()}", "format": "kafka-reassignment"})
    except ModelError as exc:
        raise ModelError(f"{path}: {exc}") from None
    raise InputError(
        f"{path}: neither a cluster description (needs 'brokers' and 'partitions') "
        "nor a Kafka reassignment JSON (needs 'version' and 'partitions')"
    )


def _broker_to_dict(b: Broker) -> dict[str, Any]:
    d: dict[str, Any] = {"id": b.id, "rack": b.rack}
    if b.disk_capacity_bytes is not None:
        d["disk_capacity_bytes"] = b.disk_capacity_bytes
    if b.network_capacity_bytes_per_s is not None:
        d["network_capacity_bytes_per_s"] = b.network_capacity_bytes_per_s
    if not b.alive:
        d["alive"] = False
    if b.host is not None:
        d["host"] = b.host
        d["port"] = b.port
    return d


def _partition_to_dict(p: Partition) -> dict[str, Any]:
    d: dict[str, Any] = {
        "topic": p.topic,
        "partition": p.partition,
        "replicas": list(p.replicas),
        "leader": p.leader,
        "isr": list(p.isr),
        "size_bytes": p.size_bytes,
    }
    if p.bytes_in_per_s is not None:
        d["bytes_in_per_s"] = p.bytes_in_per_s
    if p.adding:
        d["adding_replicas"] = list(p.adding)
    if p.removing:
        d["removing_replicas"] = list(p.removing)
    return d


def cluster_to_dict(cluster: Cluster) -> dict[str, Any]:
    return {
        "format": SNAPSHOT_FORMAT,
        "version": SNAPSHOT_VERSION,
        "meta": dict(cluster.meta),
        "brokers": [_broker_to_dict(b) for b in cluster.brokers],
        "partitions": [_partition_to_dict(p) for p in cluster.partitions],
    }


def write_cluster_json(cluster: Cluster, path: str | os.PathLike[str]) -> None:
    """Write the cluster description, one broker or partition per line (readable, diffable, fast)."""
    dumps = json.dumps
    lines = [
        "{",
        f'"format": {dumps(SNAPSHOT_FORMAT)},',
        f'"version": {SNAPSHOT_VERSION},',
        f'"meta": {dumps(dict(cluster.meta), sort_keys=True)},',
        '"brokers": [',
        ",\n".join(dumps(_broker_to_dict(b)) for b in cluster.brokers),
        "],",
        '"partitions": [',
        ",\n".join(dumps(_partition_to_dict(p)) for p in cluster.partitions),
        "]",
        "}",
    ]
    atomic_write_text(path, "\n".join(lines) + "\n")


def reassignment_json(assignments: Iterable[tuple[str, int, Iterable[int]]]) -> dict[str, Any]:
    """Kafka's reassignment document for (topic, partition, replicas) triples."""
    return {
        "version": 1,
        "partitions": [
            {"topic": t, "partition": p, "replicas": list(r)} for t, p, r in sorted(assignments, key=lambda x: (x[0], x[1]))
        ],
    }


# -- kafka-log-dirs --describe ------------------------------------------------------------------------------
def parse_log_dirs(doc: Any, where: str = "log-dirs JSON") -> dict[TopicPartition, dict[int, int]]:
    """Sizes per replica from ``kafka-log-dirs --describe`` output: {(topic, partition): {broker: bytes}}.

    Future replicas (``isFuture``: a move between log dirs on one broker) are ignored.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("brokers"), list):
        raise InputError(f"{where}: expected kafka-log-dirs --describe output with a 'brokers' list")
    out: dict[TopicPartition, dict[int, int]] = {}
    for b in doc["brokers"]:
        try:
            broker = int(b["broker"])
            for d in b.get("logDirs") or []:
                for entry in d.get("partitions") or []:
                    if entry.get("isFuture"):
                        continue
                    topic, _, num = str(entry["partition"]).rpartition("-")
                    size = int(entry["size"])
                    if not topic or size < 0:
                        raise ValueError(entry["partition"])
                    out.setdefault((topic, int(num)), {})[broker] = size
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{where}: malformed entry for broker {b.get('broker') if isinstance(b, dict) else b!r}: {exc}") from None
    return out
