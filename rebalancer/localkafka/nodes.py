"""Starting, watching and stopping the JVMs of a local Kafka cluster (and its ZooKeeper on 3.9).

Everything lives under one directory::

    DIR/localkafka.json        the state: version, sources, every process's identity, ports, racks
    DIR/log4j.properties       (3.9, reload4j) or DIR/log4j2.properties (4.x): every node logs to its server.log
    DIR/zookeeper/             3.9 only: zoo.cfg, data, zookeeper.log
    DIR/node-<id>/             server.properties, data/ (log.dirs), server.log, stdout.log (the JVM's own output)
    DIR/log-dirs.json          kafka-log-dirs --describe JSON after loading (``--sizes file://`` for zk:// snapshots)

A process is recorded as ``{"pid", "start_time", "cmdline"}`` (``rebalancer.procs.process_identity``) and is only
ever signalled while its pid still has that start time and command line: a pid the system gave to another process
since is left alone.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError, SimulationError
from ..formats import atomic_write_json, read_json
from ..procs import process_alive, process_identity, rss_kib, started_identity
from ..retry import poll
from ..zkserver import ZooKeeperServer, free_port

__all__ = ["VERSIONS", "STATE_FILE", "LOG_DIRS_FILE", "CHROOT", "normalize_version", "libs_dir", "read_state",
           "write_state", "is_ours", "rss_kib", "start_cluster", "stop_cluster", "status", "wait_brokers",
           "admin_client", "start_node", "stop_node", "last_log_line", "node_record", "signal_all", "jvm"]


STATE_FILE = "localkafka.json"
LOG_DIRS_FILE = "log-dirs.json"
CHROOT = "/kafka"
MiB = 1024 * 1024
REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Version:
    key: str          # the directory under kafka/ and .kafka/
    kraft: bool       # KRaft (4.x) or ZooKeeper mode (3.9)
    log4j_option: str  # the system property naming the logging config
    log4j_file: str


VERSIONS = {
    "3.9": Version("3.9", kraft=False, log4j_option="log4j.configuration", log4j_file="log4j.properties"),
    "4.x": Version("4.x", kraft=True, log4j_option="log4j2.configurationFile", log4j_file="log4j2.properties"),
}
_ALIASES = {"3": "3.9", "3.9": "3.9", "3.9.2": "3.9", "4": "4.x", "4.x": "4.x", "4.3": "4.x", "4.3.1": "4.x"}

# Logging: every node writes to its own server.log (kafka.logs.dir); request logging stays quiet.
_LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${kafka.logs.dir}/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.zookeeper=WARN
"""
_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""
_ZK_LOG4J = """\
log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.zookeeper.server.ZooKeeperServerMain=INFO
"""

# A small node: one heap size fixed at start (no resizing), the serial collector (one GC thread, no concurrent
# marking), C1 only (start-up and memory, not peak throughput, matter here), and death on OutOfMemoryError so a
# starved broker fails loudly instead of limping.
JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:+ExitOnOutOfMemoryError",
               "-Djava.awt.headless=true")
_KEY = re.compile(r"[a-z][a-z0-9._-]*")


def normalize_version(version: str) -> str:
    """``3.9`` or ``4.x`` (also ``3``, ``3.9.2``, ``4``, ``4.3``, ``4.3.1``); ``InputError`` otherwise."""
    key = _ALIASES.get(str(version).strip().lower())
    if key is None:
        raise InputError(f"unknown Kafka version {str(version)[:20]!r}: choose 3.9 (ZooKeeper mode) or 4.x (KRaft)")
    return key


def libs_dir(version: str) -> Path:
    """``.kafka/<version>/libs`` of the repository (or of ``$REBALANCER_KAFKA_HOME``), checked to hold Kafka."""
    key = normalize_version(version)
    home = Path(os.environ.get("REBALANCER_KAFKA_HOME") or REPO / ".kafka")
    libs = home / key / "libs"
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise SimulationError(f"no Kafka {key} jars in {libs}: fetch them with 'bash scripts/fetch_kafka.sh {key}'")
    return libs


def kafka_release(libs: Path) -> str:
    jar = next(libs.glob("kafka_2.13-*.jar"))
    return jar.name[len("kafka_2.13-"):-len(".jar")]


def java() -> str:
    path = shutil.which("java")
    if path is None:
        raise SimulationError("java not found on PATH: Kafka needs Java 17 (apt-get install openjdk-17-jre-headless)")
    return path


def jvm(libs: Path, main: str, *args: str, heap_mib: int | None = None, props: Mapping[str, str] = {}) -> list[str]:
    """A java command line with the Kafka jars on the classpath."""
    cmd = [java()]
    if heap_mib:
        cmd += [f"-Xms{heap_mib}m", f"-Xmx{heap_mib}m"]
    cmd += list(JVM_OPTIONS)
    cmd += [f"-D{k}={v}" for k, v in props.items()]
    return cmd + ["-cp", f"{libs}/*", main, *args]


# -- state --------------------------------------------------------------------------------------------------------
def read_state(directory: str | os.PathLike[str]) -> dict[str, Any]:
    path = Path(directory) / STATE_FILE
    if not path.exists():
        raise InputError(f"no local Kafka cluster in {directory} (start one with 'rebalancer kafka up --dir {directory}')")
    state = read_json(path)
    if not isinstance(state, dict) or "nodes" not in state or "version" not in state:
        raise InputError(f"{path} is not a local Kafka state file")
    return state


def write_state(state: Mapping[str, Any]) -> None:
    atomic_write_json(Path(state["directory"]) / STATE_FILE, state)


def node_record(state: Mapping[str, Any], node_id: int) -> dict[str, Any]:
    for node in state["nodes"]:
        if node["id"] == node_id:
            return dict(node)
    ids = ", ".join(str(n["id"]) for n in state["nodes"])
    raise InputError(f"no broker {node_id} in the local cluster of {state['directory']} (its brokers: {ids})")


# -- processes ----------------------------------------------------------------------------------------------------
def is_ours(record: Mapping[str, Any] | None) -> bool:
    """Whether the recorded process still runs as that process (same pid, start time and command line)."""
    if not record or not process_alive(record.get("pid")):
        return False
    current = process_identity(record["pid"])
    return (current is not None and record.get("start_time") == current["start_time"]
            and (not record.get("cmdline") or record["cmdline"] == current["cmdline"]))


def _spawn(cmd: list[str], cwd: Path, out: Path) -> subprocess.Popen[bytes]:
    with open(out, "ab") as fh:
        return subprocess.Popen(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def signal_all(records: Iterable[Mapping[str, Any] | None], sig: int = signal.SIGTERM, *, wait: float = 15.0) -> None:
    """Send ``sig`` to each recorded process that is still ours; wait up to ``wait`` s, then SIGKILL what is left."""
    mine = [r for r in records if r and is_ours(r)]
    for r in mine:
        try:
            os.kill(r["pid"], sig)
        except ProcessLookupError:
            pass
    def gone() -> bool:
        return not any(is_ours(r) for r in mine)

    poll(gone, bool, timeout=wait, interval=0.05)
    for r in mine:
        if is_ours(r):
            os.kill(r["pid"], signal.SIGKILL)
    poll(gone, bool, timeout=10.0, interval=0.02)


def last_log_line(node_dir: str | os.PathLike[str]) -> str:
    """The line that best says why a node failed: the JVM's own output if it wrote any (a bad option, a missing
    class), else the last ERROR of server.log with the exception under it, else its last line."""
    d = Path(node_dir)
    for name in ("stdout.log", "server.log", "zookeeper.log"):
        try:
            lines = [ln.rstrip() for ln in (d / name).read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            continue
        if not lines:
            continue
        if name == "stdout.log":
            return lines[-1].strip()[:300]
        errors = [i for i, ln in enumerate(lines) if " ERROR " in ln or " FATAL " in ln]
        if not errors:
            return lines[-1].strip()[:300]
        i = errors[-1]
        line = lines[i].strip()
        cause = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if cause and not cause.startswith(("[", "at ")):  # the exception logged with the error: "x.y.SomeException: why"
            head, sep, why = cause.partition(": ")
            line += f": {head.rsplit('.', 1)[-1]}{sep}{why}"
        return line[:400]
    return "(no log yet)"


# -- configuration ------------------------------------------------------------------------------------------------
def _properties(props: Mapping[str, Any]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())


def broker_properties(state: Mapping[str, Any], node: Mapping[str, Any], extra: Mapping[str, str]) -> dict[str, str]:
    """server.properties of one node: small thread pools and buffers, everything else Kafka's default."""
    nodes = state["nodes"]
    n = len(nodes)
    props: dict[str, str] = {
        "listeners": f"PLAINTEXT://127.0.0.1:{node['port']}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node['port']}",
        "log.dirs": str(Path(node["dir"]) / "data"),
        # Few threads: these brokers serve one client at a time on a 2-core machine.
        "num.network.threads": "2",
        "num.io.threads": "2",
        "num.replica.fetchers": "1",
        "background.threads": "2",
        "num.recovery.threads.per.data.dir": "1",
        "log.cleaner.threads": "1",
        # The cleaner's 128 MiB default dedupe buffer does not fit a 256 MiB heap; only compacted topics use it.
        "log.cleaner.dedupe.buffer.size": str(4 * MiB),
        # Internal topics sized for the cluster (created only when first used: consumer groups, transactions).
        "offsets.topic.replication.factor": str(min(3, n)),
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": str(min(3, n)),
        "transaction.state.log.min.isr": str(min(2, n)),
        "transaction.state.log.num.partitions": "10",
        "group.initial.rebalance.delay.ms": "0",
    }
    if node.get("rack"):
        props["broker.rack"] = node["rack"]
    if state["kraft"]:
        controllers = [x for x in nodes if "controller" in x["roles"]]
        props = {
            "process.roles": ",".join(node["roles"]),
            "node.id": str(node["id"]),
            "controller.quorum.voters": ",".join(f"{c['id']}@127.0.0.1:{c['controller_port']}" for c in controllers),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            # The metadata log apart from the data, so DescribeLogDirs shows only topic partitions.
            "metadata.log.dir": str(Path(node["dir"]) / "metadata"),
            **props,
        }
        if "controller" in node["roles"]:
            props["listeners"] += f",CONTROLLER://127.0.0.1:{node['controller_port']}"
    else:
        props = {"broker.id": str(node["id"]), "zookeeper.connect": state["zk_connect"], **props}
    props.update(extra)
    return props


def _check_extra(extra: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for key, value in extra.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise InputError(f"broker property {str(key)[:60]!r} is not a Kafka property name")
        text = "true" if value is True else "false" if value is False else str(value)
        if "\n" in text:
            raise InputError(f"broker property {key}: the value holds a line break")
        out[key] = text
    return out


# -- ZooKeeper (3.9) ----------------------------------------------------------------------------------------------
class KafkaZooKeeper(ZooKeeperServer):
    """ZooKeeper's own server (``ZooKeeperServerMain``) from the jars Kafka 3.9 ships (ZooKeeper 3.8.4)."""

    def __init__(self, data_dir: Path, libs: Path, log4j: Path) -> None:
        super().__init__(data_dir, heap_mb=128)
        self.libs = libs
        self.log4j = log4j

    def command(self) -> list[str]:
        cfg = self.data_dir / "zoo.cfg"
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        cfg.write_text(_properties({
            "tickTime": self.tick_ms, "dataDir": self.data_dir / "data", "clientPort": self.port,
            "clientPortAddress": self.host, "maxClientCnxns": 0, "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr,mntr,stat,cons",
        }))
        return jvm(self.libs, "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg), heap_mib=self.heap_mb,
                   props={"log4j.configuration": f"file:{self.log4j}", "zookeeper.admin.enableServer": "false"})


# -- nodes --------------------------------------------------------------------------------------------------------
def node_command(state: Mapping[str, Any], node: Mapping[str, Any]) -> list[str]:
    d = Path(state["directory"])
    version = VERSIONS[state["version"]]
    props = {"kafka.logs.dir": node["dir"],
             version.log4j_option: (f"file:{d / version.log4j_file}" if not version.kraft else str(d / version.log4j_file))}
    return jvm(Path(state["libs"]), "kafka.Kafka", str(Path(node["dir"]) / "server.properties"),
               heap_mib=state["heap_mib"], props=props)


def start_node(state: dict[str, Any], node_id: int) -> subprocess.Popen[bytes]:
    """Start one node with its recorded configuration and data; records the new process in the state file."""
    node = next(n for n in state["nodes"] if n["id"] == node_id)
    if is_ours(node.get("process")):
        raise SimulationError(f"broker {node_id} is already running (pid {node['process']['pid']})")
    proc = _spawn(node_command(state, node), Path(node["dir"]), Path(node["dir"]) / "stdout.log")
    node["process"] = started_identity(proc.pid)
    write_state(state)
    return proc


def stop_node(state: dict[str, Any], node_id: int, *, kill: bool = False, wait: float = 30.0) -> bool:
    """SIGKILL (``kill``) or SIGTERM (controlled shutdown, SIGKILL after ``wait`` s) one node; False when it was not
    running (or its pid now belongs to another process, which is left alone)."""
    node = next(n for n in state["nodes"] if n["id"] == node_id)
    record = node.get("process")
    running = is_ours(record)
    if running:
        signal_all([record], signal.SIGKILL if kill else signal.SIGTERM, wait=wait)
    return running


def _format_storage(state: Mapping[str, Any], timeout: float) -> None:
    """KRaft: ``kafka-storage format`` every node's directories with one cluster id (static quorum: the voters are in
    server.properties, so no --standalone / --initial-controllers)."""
    procs = []
    for node in state["nodes"]:
        cmd = jvm(Path(state["libs"]), "kafka.tools.StorageTool", "format", "-t", state["cluster_id"],
                  "-c", str(Path(node["dir"]) / "server.properties"), heap_mib=128,
                  props={VERSIONS["4.x"].log4j_option: str(Path(state["directory"]) / VERSIONS["4.x"].log4j_file),
                         "kafka.logs.dir": node["dir"]})
        procs.append((node, _spawn(cmd, Path(node["dir"]), Path(node["dir"]) / "format.log")))
    deadline = time.monotonic() + timeout
    for node, proc in procs:
        try:
            code = proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for _, p in procs:
                p.kill()
            raise SimulationError(f"formatting the storage of node {node['id']} took more than {timeout:g} s") from None
        if code != 0:
            lines = (Path(node["dir"]) / "format.log").read_text(errors="replace").strip().splitlines() or ["(no output)"]
            raise SimulationError(f"formatting the storage of node {node['id']} failed: {lines[-1][:300]}")


def start_cluster(directory: str | os.PathLike[str], *, version: str, brokers: Mapping[int, str | None],
                  broker_config: Mapping[str, Any] | None = None, heap_mib: int = 256,
                  timeout: float = 180.0) -> dict[str, Any]:
    """Start ZooKeeper (3.9) or format KRaft storage (4.x), then every node at once; wait until all are ready.

    ``brokers`` maps node ids to racks. The state file is written as soon as a process runs, so that
    ``stop_cluster`` can always stop what was started, also when start-up fails (which it does here, before
    raising)."""
    key = normalize_version(version)
    extra = _check_extra(broker_config or {})
    if not brokers:
        raise InputError("a local Kafka cluster needs at least one broker")
    if not 64 <= heap_mib <= 16384:
        raise InputError(f"heap of {heap_mib} MiB: give 64 to 16384")
    libs = libs_dir(key)
    d = Path(directory).resolve()
    d.mkdir(parents=True, exist_ok=True)
    if (d / STATE_FILE).exists():
        try:
            old = read_state(d)
        except InputError:
            old = {"nodes": []}
        if any(is_ours(n.get("process")) for n in old["nodes"]) or is_ours(old.get("zookeeper") or {}):
            raise InputError(f"a local Kafka cluster is already running from {d} (stop it with 'kafka down --dir {d}')")
    # A new cluster starts empty: never on a previous run's data (its cluster id would not match).
    for stale in [*d.glob("node-*"), d / "zookeeper"]:
        shutil.rmtree(stale, ignore_errors=True)
    for name in (STATE_FILE, LOG_DIRS_FILE):
        (d / name).unlink(missing_ok=True)
    started = time.monotonic()
    ids = sorted(brokers)
    version_info = VERSIONS[key]
    state: dict[str, Any] = {
        "version": key, "kafka_version": kafka_release(libs), "kraft": version_info.kraft, "directory": str(d),
        "libs": str(libs), "heap_mib": heap_mib, "broker_config": extra, "zookeeper": None, "zk_url": None,
        "kafka_url": None, "sizes": None, "cluster_id": None,
        "nodes": [], "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    taken: set[int] = set()

    def port() -> int:
        while True:
            p = free_port()
            if p not in taken:
                taken.add(p)
                return p

    controllers = set(ids[:3]) if version_info.kraft else set()
    for i in ids:
        node_dir = d / f"node-{i}"
        (node_dir / "data").mkdir(parents=True)
        roles = (["broker", "controller"] if i in controllers else ["broker"]) if version_info.kraft else ["broker"]
        state["nodes"].append({"id": i, "rack": brokers[i], "roles": roles, "port": port(),
                               "controller_port": port() if i in controllers else None, "dir": str(node_dir),
                               "process": None})
    state["kafka_url"] = "kafka://" + ",".join(f"127.0.0.1:{n['port']}" for n in state["nodes"])
    (d / version_info.log4j_file).write_text(_LOG4J2 if version_info.kraft else _LOG4J)
    write_state(state)
    try:
        if version_info.kraft:
            state["cluster_id"] = _cluster_id()
        else:
            (d / "zookeeper").mkdir()
            (d / "zookeeper" / "log4j.properties").write_text(_ZK_LOG4J)
            zk = KafkaZooKeeper(d / "zookeeper", libs, d / "zookeeper" / "log4j.properties")
            zk.start(timeout=min(timeout, 60.0), detach=True)
            assert zk.process is not None
            state["zookeeper"] = {**started_identity(zk.process.pid), "port": zk.port, "log": str(zk.log_path)}
            state["zk_connect"] = f"127.0.0.1:{zk.port}{CHROOT}"
            state["zk_url"] = f"zk://127.0.0.1:{zk.port}{CHROOT}"
            write_state(state)
        for node in state["nodes"]:
            (Path(node["dir"]) / "server.properties").write_text(_properties(broker_properties(state, node, extra)))
        if version_info.kraft:
            _format_storage(state, timeout)
        procs = {node["id"]: start_node(state, node["id"]) for node in state["nodes"]}
        wait_brokers(state, ids, timeout=max(1.0, timeout - (time.monotonic() - started)), procs=procs)
    except BaseException:
        stop_cluster(d, wait=5.0)
        raise
    state["startup_seconds"] = round(time.monotonic() - started, 2)
    write_state(state)
    return state


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes in URL-safe base64 without padding (what ``kafka-storage random-uuid``
    prints). Like Kafka's ``Uuid.randomUuid()``, never one starting with '-' (the storage tool reads it as an option)."""
    import base64

    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def stop_cluster(directory: str | os.PathLike[str], *, wait: float = 5.0) -> dict[str, Any] | None:
    """Stop every recorded process still ours: brokers (broker-only nodes first), then controllers, then ZooKeeper.
    Keeps the directory (logs, data) and marks the state stopped. None when there is no state file."""
    try:
        state = read_state(directory)
    except InputError:
        return None
    nodes = state["nodes"]
    # KRaft: the broker-only nodes first, while the controller quorum can still fence them cleanly. A broker's
    # controlled shutdown cannot move the leadership of partitions whose other replicas are stopping too, and
    # retries (3 x 5 s in ZooKeeper mode): the cluster is going away, so after ``wait`` seconds SIGKILL ends it.
    first = [n.get("process") for n in nodes if "controller" not in n["roles"]]
    signal_all(first, wait=wait)
    signal_all([n.get("process") for n in nodes if "controller" in n["roles"]], wait=wait)
    signal_all([state.get("zookeeper")], wait=wait)
    left = [r["pid"] for r in [*(n.get("process") for n in nodes), state.get("zookeeper")] if r and is_ours(r)]
    if left:
        raise SimulationError(f"processes {left} of the local cluster in {directory} did not stop")
    state["stopped_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for n in nodes:
        n["process"] = None
    state["zookeeper"] = None
    write_state(state)
    return state


def status(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """Every recorded process: pid, whether it runs (as the one recorded) and its resident memory; plus the total."""
    state = read_state(directory)
    procs = []
    for node in state["nodes"]:
        rec = node.get("process") or {}
        alive = is_ours(rec)
        procs.append({"name": f"node-{node['id']}", "id": node["id"], "roles": node["roles"], "rack": node["rack"],
                      "port": node["port"], "pid": rec.get("pid"), "alive": alive,
                      "rss_kib": rss_kib(rec.get("pid")) if alive else 0})
    zk = state.get("zookeeper")
    if zk:
        alive = is_ours(zk)
        procs.append({"name": "zookeeper", "id": None, "roles": ["zookeeper"], "rack": None, "port": zk["port"],
                      "pid": zk.get("pid"), "alive": alive, "rss_kib": rss_kib(zk.get("pid")) if alive else 0})
    return {**{k: state.get(k) for k in ("version", "kafka_version", "zk_url", "kafka_url", "sizes", "directory")},
            "processes": procs, "rss_kib": sum(p["rss_kib"] for p in procs),
            "running": sum(1 for p in procs if p["alive"])}


# -- readiness ----------------------------------------------------------------------------------------------------
@contextmanager
def admin_client(bootstrap: str, *, timeout: float = 10.0) -> Iterator[Any]:
    """A kafka-python admin client on ``host:port[,host:port]``; kafka-python's errors are the caller's."""
    from kafka import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="localkafka",
                              request_timeout_ms=int(timeout * 1000), bootstrap_timeout_ms=int(timeout * 1000))
    try:
        yield client
    finally:
        client.close()


def _accepts(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _sees(port: int, expected: set[int]) -> set[int] | None:
    """The broker ids that the broker on ``port`` lists in its Metadata answer (None when it does not answer)."""
    import kafka.errors as ke

    try:
        with admin_client(f"127.0.0.1:{port}", timeout=3.0) as admin:
            brokers = admin.describe_cluster()["brokers"]
    except (ke.KafkaError, OSError, ValueError):
        return None
    return {b["broker_id"] for b in brokers if not b.get("is_fenced")}


def wait_brokers(state: Mapping[str, Any], ids: Iterable[int], *, timeout: float = 120.0,
                 procs: Mapping[int, subprocess.Popen[bytes]] | None = None) -> float:
    """Wait until each broker in ``ids`` runs, answers Metadata on its port, and lists every broker of ``ids``
    (registered and unfenced); returns the seconds waited. One-line ``SimulationError`` naming the broker and the
    last line of its log when one exits or the time runs out."""
    started = time.monotonic()
    want = set(ids)
    pending = sorted(want)
    nodes = {n["id"]: n for n in state["nodes"]}

    def waiting() -> list[int]:  # the brokers not ready yet (a broker that exited fails the wait at once)
        for i in list(pending):
            node = nodes[i]
            proc = (procs or {}).get(i)
            exited = proc.poll() if proc is not None else (None if is_ours(node.get("process")) else "gone")
            if exited is not None:
                how = f"exited with code {exited}" if proc is not None else "is not running"
                raise SimulationError(f"broker {i} {how}: {last_log_line(node['dir'])}")
            if not _accepts(node["port"]):
                continue
            seen = _sees(node["port"], want)
            if seen is not None and want <= seen:
                pending.remove(i)
        return pending

    left, _ = poll(waiting, lambda still: not still, timeout=timeout, interval=0.2)
    if left:
        raise SimulationError(f"broker {left[0]} not ready within {timeout:g} s: {last_log_line(nodes[left[0]]['dir'])}")
    return time.monotonic() - started

