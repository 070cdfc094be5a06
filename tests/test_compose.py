"""docker-compose.yaml, checked without Docker (the build machines have no Docker daemon).

The file is parsed with yaml.safe_load (anchors and ``<<`` merges resolved, as Compose does) and every reference in
it is checked against the repository: images and their pins (read from pyproject.toml / constraints.txt, never
repeated here), the Dockerfiles and what they COPY, bind-mount sources, scripts, Airflow config keys (against the
installed Airflow's own config.yml), the preset connections (parsed by Airflow and by the Spark provider's hook),
Kafka broker settings, ports and dependencies. Each check is a function returning a list of problems; the
``test_check_catches`` cases break a copy of the file and assert the check notices, so no check is a tautology.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
COMPOSE_FILE = REPO / "docker-compose.yaml"

AIRFLOW_SERVICES = ("airflow-init", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
AIRFLOW_DAEMONS = AIRFLOW_SERVICES[1:]
BROKERS = ("kafka1", "kafka2", "kafka3")
SPARK_SERVICES = ("spark-master", "spark-worker")
REQUIRED_SERVICES = ("postgres", "zookeeper", *AIRFLOW_SERVICES, *SPARK_SERVICES, *BROKERS)
MUST_HAVE_HEALTHCHECK = ("postgres", "zookeeper", *BROKERS, *AIRFLOW_DAEMONS, "spark-master")
# Confluent Platform release -> the Apache Kafka release it ships (docs.confluent.io "Supported versions");
# 7.9 is the last line with ZooKeeper mode.
CONFLUENT_TO_KAFKA = {"7.6": "3.6", "7.7": "3.7", "7.8": "3.8", "7.9": "3.9", "8.0": "4.0"}
KAFKA_VERSION = "3.9"
SIMPLE_AUTH_ROLES = {"viewer", "user", "op", "admin"}

Compose = dict[str, Any]
Problems = list[str]


# ----------------------------------------------------------------------------------------------------------------
# Reading the files

def load_compose() -> Compose:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict) and isinstance(data.get("services"), dict), "docker-compose.yaml has no services"
    return data


@pytest.fixture
def compose() -> Compose:
    return load_compose()


def pin(package: str) -> str:
    """The version of ``package`` pinned in constraints.txt, which must agree with pyproject.toml's pin."""
    found = re.findall(rf"^{re.escape(package)}==([^\s;#]+)", (REPO / "constraints.txt").read_text(), re.M | re.I)
    assert len(found) == 1, f"constraints.txt pins {package} {len(found)} times"
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    direct = [d.split("==", 1)[1].split(";")[0].strip() for d in deps if re.match(rf"{re.escape(package)}==", d, re.I)]
    assert direct in ([], [found[0]]), f"pyproject.toml pins {package} {direct}, constraints.txt {found[0]}"
    return found[0]


def python_minor() -> str:
    spec = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    m = re.fullmatch(r">=(3\.\d+),<3\.(\d+)", spec.replace(" ", ""))
    assert m and int(m.group(1).split(".")[1]) + 1 == int(m.group(2)), f"requires-python {spec!r} is not one minor"
    return m.group(1)


_VAR = re.compile(r"\$\$|\$\{(\w+)(?:(:?-)([^}]*))?\}|\$(\w+)")


def interpolate(value: Any) -> str:
    """Compose variable interpolation with an empty environment: ${X:-default} -> default, ${X} -> '', $$ -> $."""
    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return m.group(3) or ""
    return _VAR.sub(sub, str(value))


def env(service: dict[str, Any]) -> dict[str, str]:
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.split("=", 1) if "=" in item else (item, "") for item in raw)
    return {str(k): interpolate(v) for k, v in raw.items()}


def services(compose: Compose) -> dict[str, dict[str, Any]]:
    return compose["services"]


def mounts(service: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(source, target, is_bind) for each volume entry, short or long syntax."""
    out = []
    for v in service.get("volumes") or []:
        if isinstance(v, dict):
            src, dst, kind = str(v.get("source", "")), str(v["target"]), v.get("type", "volume")
            out.append((src, dst, kind == "bind"))
            continue
        parts = interpolate(v).split(":")
        src, dst = (parts[0], parts[1]) if len(parts) > 1 else ("", parts[0])
        out.append((src, dst, src.startswith((".", "/", "~"))))
    return out


def host_ports(service: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(host ip, host port, container port) for each published port."""
    out = []
    for p in service.get("ports") or []:
        if isinstance(p, dict):
            if p.get("published"):
                out.append((str(p.get("host_ip", "0.0.0.0")), int(p["published"]), int(p["target"])))
            continue
        parts = interpolate(p).split("/")[0].split(":")
        if len(parts) == 3:
            out.append((parts[0], int(parts[1]), int(parts[2])))
        elif len(parts) == 2:
            out.append(("0.0.0.0", int(parts[0]), int(parts[1])))
    return out


def dockerfile(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    lines, buf = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        lines.append(buf + line)
        buf = ""
    out = []
    for line in lines:
        instr, _, args = line.partition(" ")
        out.append((instr.upper(), " ".join(args.split())))
    return out


def dockerignore_keeps(patterns: list[str], path: str) -> bool:
    """Docker's rule: the last pattern matching the path (or one of its parent directories) decides."""
    keep = True
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pat in patterns:
        negate = pat.startswith("!")
        p = pat[1:] if negate else pat
        p = p.strip().strip("/")
        if p.startswith("**/"):
            hit = any(fnmatchcase(part, p[3:]) for part in parts)
        else:
            hit = any(fnmatchcase(prefix, p) for prefix in prefixes)
        if hit:
            keep = negate
    return keep


def ignore_patterns(dockerfile_path: Path) -> list[str]:
    own = dockerfile_path.with_name(dockerfile_path.name + ".dockerignore")
    path = own if own.exists() else REPO / ".dockerignore"
    if not path.exists():
        return []
    return [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def airflow_config_options() -> dict[str, set[str]]:
    """Sections and options of the installed Airflow's config.yml, without importing Airflow."""
    spec = importlib.util.find_spec("airflow")
    assert spec and spec.submodule_search_locations, "Airflow is not installed in this environment"
    for location in spec.submodule_search_locations:
        path = Path(location) / "config_templates" / "config.yml"
        if path.exists():
            data = yaml.safe_load(path.read_text())
            return {section: set(body.get("options") or {}) for section, body in data.items()}
    raise AssertionError("config_templates/config.yml not found in the installed Airflow")


def image_tag(image: str) -> tuple[str, str]:
    name, sep, tag = image.rpartition(":")
    if not sep or "/" in tag:
        return image, ""
    return name, tag


def build_dockerfile(service: dict[str, Any]) -> Path | None:
    build = service.get("build")
    if build is None:
        return None
    if isinstance(build, str):
        return REPO / build / "Dockerfile"
    return REPO / build.get("context", ".") / build.get("dockerfile", "Dockerfile")


def spark_master_url(conn: dict[str, Any]) -> str:
    """How providers-apache-spark's SparkSubmitHook builds --master from a "spark" connection (host + ':' + port)."""
    host, port = conn.get("host") or "", conn.get("port")
    master = host if conn.get("conn_type") == "spark" and host and ("://" in host or not port) else f"{conn.get('conn_type')}://{host}"
    return f"{master}:{port}" if port else master


def connection(compose: Compose, conn_id: str) -> dict[str, Any]:
    return json.loads(env(compose["x-airflow-common"])[f"AIRFLOW_CONN_{conn_id.upper()}"])


# ----------------------------------------------------------------------------------------------------------------
# The checks

def check_services(compose: Compose) -> Problems:
    return [f"service {name} is missing" for name in REQUIRED_SERVICES if name not in services(compose)]


def check_images(compose: Compose) -> Problems:
    problems = []
    for name, svc in services(compose).items():
        image = svc.get("image")
        if not image:
            problems.append(f"{name}: no image (built images get a pinned local tag too)")
            continue
        if "@sha256:" in image:
            continue
        _, tag = image_tag(image)
        if not tag:
            problems.append(f"{name}: image {image} has no tag")
        elif tag == "latest" or "latest" in tag.split("-"):
            problems.append(f"{name}: image {image} is not pinned")
    return problems


def kafka_version_of(image: str) -> str | None:
    name, tag = image_tag(image)
    if name.endswith("cp-kafka") or name.endswith("cp-server"):
        return CONFLUENT_TO_KAFKA.get(".".join(tag.split(".")[:2]))
    if name.endswith("/kafka"):  # apache/kafka, bitnami/kafka: the tag is the Kafka version
        return ".".join(tag.split("-")[0].split(".")[:2])
    return None


def check_kafka_images(compose: Compose) -> Problems:
    problems = []
    images = {services(compose)[b]["image"] for b in BROKERS if b in services(compose)}
    if len(images) != 1:
        problems.append(f"brokers run different images: {sorted(images)}")
    for image in images:
        if kafka_version_of(image) != KAFKA_VERSION:
            problems.append(f"{image} is Kafka {kafka_version_of(image)}, not {KAFKA_VERSION}")
    return problems


def check_airflow_common(compose: Compose) -> Problems:
    problems = []
    common = compose.get("x-airflow-common") or {}
    common_env = env(common)
    if common_env.get("AIRFLOW__CORE__EXECUTOR") != "LocalExecutor":
        problems.append(f"x-airflow-common executor is {common_env.get('AIRFLOW__CORE__EXECUTOR')}")
    for name in AIRFLOW_SERVICES:
        svc = services(compose).get(name, {})
        for key in ("image", "build"):
            if svc.get(key) != common.get(key):
                problems.append(f"{name}: {key} {svc.get(key)!r} differs from x-airflow-common")
        svc_env = env(svc)
        for key, value in common_env.items():
            if svc_env.get(key) != value:
                problems.append(f"{name}: {key}={svc_env.get(key)!r}, x-airflow-common has {value!r}")
    if common_env.get("AIRFLOW__CORE__LOAD_EXAMPLES", "").lower() != "false":
        problems.append("AIRFLOW__CORE__LOAD_EXAMPLES is not false")
    for name in AIRFLOW_DAEMONS:
        if str(services(compose).get(name, {}).get("user")) != str(common.get("user")):
            problems.append(f"{name}: runs as {services(compose).get(name, {}).get('user')}, not {common.get('user')}")
    return problems


def check_metadata_db(compose: Compose) -> Problems:
    url = urlsplit(env(compose["x-airflow-common"]).get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", ""))
    problems = []
    if url.scheme != "postgresql+psycopg2":
        problems.append(f"metadata DB scheme is {url.scheme!r}")
    pg = services(compose).get(url.hostname or "", {})
    if "postgres" not in str(pg.get("image", "")):
        return problems + [f"metadata DB host {url.hostname!r} is not a postgres service"]
    if not str(pg["image"]).split(":")[1].startswith("16"):
        problems.append(f"Postgres image {pg['image']} is not 16")
    pg_env = env(pg)
    if (url.port or 5432) != 5432:
        problems.append(f"metadata DB port {url.port} (postgres listens on 5432)")
    expected = (pg_env.get("POSTGRES_USER"), pg_env.get("POSTGRES_PASSWORD"), pg_env.get("POSTGRES_DB"))
    if (url.username, url.password, url.path.lstrip("/")) != expected:
        problems.append(f"metadata DB user/password/db {url.username, url.password, url.path} != postgres {expected}")
    return problems


def check_airflow_config_keys(compose: Compose) -> Problems:
    options = airflow_config_options()
    problems = []
    for name in ("x-airflow-common", *AIRFLOW_SERVICES):
        source = compose.get(name) if name.startswith("x-") else services(compose).get(name, {})
        for key in env(source or {}):
            m = re.fullmatch(r"AIRFLOW__([A-Z0-9_]+?)__([A-Z0-9_]+)", key)
            if not m:
                continue
            section, option = m.group(1).lower(), m.group(2).lower()
            if option not in options.get(section, set()):
                problems.append(f"{name}: {key} is not an option of the installed Airflow ([{section}] {option})")
    common_env = env(compose["x-airflow-common"])
    if not re.fullmatch(r"http://[\w-]+:\d+/execution/", common_env.get("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", "")):
        problems.append("AIRFLOW__CORE__EXECUTION_API_SERVER_URL does not point at the api-server's /execution/")
    else:
        host = urlsplit(common_env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
        api = services(compose).get(host.hostname or "", {})
        if "api-server" not in api.get("command", []) or all(p[2] != host.port for p in host_ports(api)):
            problems.append(f"execution API URL host {host.netloc} is not the api-server service")
    if len(common_env.get("AIRFLOW__API_AUTH__JWT_SECRET", "")) < 32:
        problems.append("AIRFLOW__API_AUTH__JWT_SECRET is unset or short (it must be shared by every component)")
    return problems


def check_simple_auth(compose: Compose) -> Problems:
    common_env = env(compose["x-airflow-common"])
    problems = []
    if not common_env.get("AIRFLOW__CORE__AUTH_MANAGER", "").endswith("simple_auth_manager.SimpleAuthManager"):
        problems.append("auth manager is not the simple auth manager")
    users = [u.split(":") for u in common_env.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "").split(",") if u]
    if not any(len(u) == 2 and u[1] == "admin" for u in users):
        problems.append(f"no admin user in SIMPLE_AUTH_MANAGER_USERS {users}")
    problems += [f"user {u} has an unknown role" for u in users if len(u) != 2 or u[1] not in SIMPLE_AUTH_ROLES]
    passwords = common_env.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", "")
    for name in ("airflow-init", "airflow-apiserver"):
        targets = [dst for src, dst, bind in mounts(services(compose).get(name, {})) if not bind]
        if not any(passwords.startswith(dst.rstrip("/") + "/") for dst in targets):
            problems.append(f"{name}: passwords file {passwords!r} is not on a named volume")
    return problems


def check_connections(compose: Compose) -> Problems:
    problems = []
    try:
        zk, kafka, spark = (connection(compose, c) for c in ("zookeeper_default", "kafka_default", "spark_default"))
    except (KeyError, ValueError) as exc:
        return [f"preset connections: {type(exc).__name__}: {exc}"]
    svcs = services(compose)
    if (zk.get("conn_type"), zk.get("host")) != ("zookeeper", "zookeeper:2181") or not zk.get("schema"):
        problems.append(f"zookeeper_default is {zk}")
    if zk.get("host", ":").split(":")[0] not in svcs:
        problems.append(f"zookeeper_default host {zk.get('host')} is not a service")
    chroot = "/" + str(zk.get("schema", "")).strip("/")
    for b in BROKERS:
        connect = env(svcs.get(b, {})).get("KAFKA_ZOOKEEPER_CONNECT", "")
        if connect != f"{zk.get('host')}{chroot}":
            problems.append(f"{b}: zookeeper.connect {connect!r} != zookeeper_default {zk.get('host')}{chroot}")
    if kafka.get("conn_type") != "kafka" or (kafka.get("extra") or {}).get("security_protocol") != "PLAINTEXT":
        problems.append(f"kafka_default is {kafka}")
    advertised = set()
    for b in BROKERS:
        for listener in env(svcs.get(b, {})).get("KAFKA_ADVERTISED_LISTENERS", "").split(","):
            if listener.startswith("PLAINTEXT://"):
                advertised.add(listener[len("PLAINTEXT://"):])
    if set(str(kafka.get("host", "")).split(",")) != advertised:
        problems.append(f"kafka_default hosts {kafka.get('host')} != brokers' PLAINTEXT listeners {sorted(advertised)}")
    master = spark_master_url(spark)
    m = re.fullmatch(r"spark://([\w-]+):(\d+)", master)
    if not m:
        return problems + [f"spark_default gives master {master!r}"]
    svc = svcs.get(m.group(1), {})
    command = [str(c) for c in svc.get("command", [])]
    if "org.apache.spark.deploy.master.Master" not in command or command[command.index("--port") + 1] != m.group(2):
        problems.append(f"spark_default master {master} is not the spark-master service's --port")
    worker = [str(c) for c in svcs.get("spark-worker", {}).get("command", [])]
    if master not in worker:
        problems.append(f"spark-worker does not register with {master}")
    if (spark.get("extra") or {}).get("deploy-mode", "client") != "client":
        problems.append("spark_default deploy-mode must be client (Python apps cannot run in standalone cluster mode)")
    common_env = env(compose["x-airflow-common"])
    if common_env.get("REBALANCER_BACKEND") != "kafka":
        problems.append(f"REBALANCER_BACKEND is {common_env.get('REBALANCER_BACKEND')!r}")
    return problems


def check_brokers(compose: Compose) -> Problems:
    problems = []
    svcs = services(compose)
    ids, racks = [], []
    published = {b: host_ports(svcs.get(b, {})) for b in BROKERS}
    for b in BROKERS:
        e = env(svcs.get(b, {}))
        ids.append(e.get("KAFKA_BROKER_ID"))
        racks.append(e.get("KAFKA_BROKER_RACK"))
        if not e.get("KAFKA_BROKER_RACK"):
            problems.append(f"{b}: no broker.rack")
        if e.get("KAFKA_AUTO_LEADER_REBALANCE_ENABLE", "").lower() != "false":
            problems.append(f"{b}: auto.leader.rebalance.enable is not false")
        if e.get("KAFKA_DEFAULT_REPLICATION_FACTOR") != "3" or e.get("KAFKA_MIN_INSYNC_REPLICAS") != "2":
            problems.append(f"{b}: default RF / min.insync are {e.get('KAFKA_DEFAULT_REPLICATION_FACTOR')}/{e.get('KAFKA_MIN_INSYNC_REPLICAS')}")
        if int(e.get("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "3")) > len(BROKERS):
            problems.append(f"{b}: offsets topic RF exceeds the broker count")
        listeners = dict(x.split("://", 1) for x in e.get("KAFKA_LISTENERS", "").split(",") if "://" in x)
        adv = dict(x.split("://", 1) for x in e.get("KAFKA_ADVERTISED_LISTENERS", "").split(",") if "://" in x)
        protocols = dict(x.split(":", 1) for x in e.get("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "").split(",") if ":" in x)
        if set(listeners) != set(adv) or not set(listeners) <= set(protocols):
            problems.append(f"{b}: listeners {sorted(listeners)}, advertised {sorted(adv)}, protocol map {sorted(protocols)}")
        if adv.get("PLAINTEXT", "").split(":")[0] not in (b, svcs.get(b, {}).get("hostname")):
            problems.append(f"{b}: PLAINTEXT advertised as {adv.get('PLAINTEXT')}, not the service name")
        for name, hostport in adv.items():
            if name == "PLAINTEXT":
                continue
            port = int(hostport.rsplit(":", 1)[1])
            if (port, port) not in {(h, c) for _, h, c in published[b]} or not listeners.get(name, "").endswith(f":{port}"):
                problems.append(f"{b}: {name} advertised on {hostport} but listens/publishes {listeners.get(name)} {published[b]}")
        if e.get("KAFKA_INTER_BROKER_LISTENER_NAME") not in listeners:
            problems.append(f"{b}: inter-broker listener {e.get('KAFKA_INTER_BROKER_LISTENER_NAME')} is not a listener")
    if len(set(ids)) != len(BROKERS) or None in ids:
        problems.append(f"broker ids are not unique: {ids}")
    if len({r for r in racks if r}) < 2:
        problems.append(f"racks {racks}: fewer than two, so rack-aware placement has nothing to keep")
    return problems


def check_ports(compose: Compose) -> Problems:
    seen: dict[int, str] = {}
    problems = []
    for name, svc in services(compose).items():
        for _, host, _ in host_ports(svc):
            if host in seen:
                problems.append(f"host port {host} published by {seen[host]} and {name}")
            seen[host] = name
    return problems


def check_depends_on(compose: Compose) -> Problems:
    problems = []
    svcs = services(compose)
    for name, svc in svcs.items():
        deps = svc.get("depends_on") or {}
        deps = {d: {"condition": "service_started"} for d in deps} if isinstance(deps, list) else deps
        for dep, spec in deps.items():
            condition = (spec or {}).get("condition", "service_started")
            if dep not in svcs:
                problems.append(f"{name} depends on undefined service {dep}")
            elif dep == name:
                problems.append(f"{name} depends on itself")
            elif condition == "service_healthy" and not (svcs[dep].get("healthcheck") or {}).get("test"):
                problems.append(f"{name} waits for {dep} to be healthy, but {dep} has no healthcheck")
            elif condition == "service_completed_successfully" and str(svcs[dep].get("restart", "no")) != "no":
                problems.append(f"{name} waits for {dep} to complete, but {dep} restarts")
            elif condition not in ("service_started", "service_healthy", "service_completed_successfully"):
                problems.append(f"{name}: unknown depends_on condition {condition}")
    graph = {name: set(svc.get("depends_on") or ()) for name, svc in svcs.items()}
    state: dict[str, int] = {}  # 1 = on the DFS path, 2 = done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                problems.append(f"depends_on cycle: {' -> '.join([*path, node, dep])}")
            elif dep in graph and dep not in state:
                visit(dep, [*path, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return problems


def check_healthchecks(compose: Compose) -> Problems:
    problems = []
    for name in MUST_HAVE_HEALTHCHECK:
        hc = services(compose).get(name, {}).get("healthcheck") or {}
        if not hc.get("test") or hc.get("disable"):
            problems.append(f"{name} has no healthcheck")
    return problems


def check_mounts(compose: Compose, root: Path = REPO) -> Problems:
    problems = []
    declared = set((compose.get("volumes") or {}).keys())
    common_env = env(compose["x-airflow-common"])
    runs = common_env.get("REBALANCER_RUNS_DIR", "")
    for name, svc in services(compose).items():
        for src, _dst, bind in mounts(svc):
            if bind and not (root / src).exists():
                problems.append(f"{name}: bind source {src} does not exist in the repository")
            if not bind and src and src not in declared:
                problems.append(f"{name}: named volume {src} is not declared")
    for name in AIRFLOW_DAEMONS:
        targets = {dst: src for src, dst, _ in mounts(services(compose).get(name, {}))}
        for d in ("dags", "plugins", "spark"):
            if targets.get(f"/opt/airflow/{d}") != f"./{d}":
                problems.append(f"{name}: ./{d} is not mounted on /opt/airflow/{d}")
    runs_volumes = {}
    for name in (*AIRFLOW_DAEMONS, "spark-worker"):
        targets = {dst: src for src, dst, bind in mounts(services(compose).get(name, {}))}
        runs_volumes[name] = targets.get(runs)
    if not runs or None in runs_volumes.values() or len(set(runs_volumes.values())) != 1:
        problems.append(f"REBALANCER_RUNS_DIR {runs!r} is not one shared volume: {runs_volumes}")
    for name in SPARK_SERVICES:
        if "./spark" not in [src for src, _, _ in mounts(services(compose).get(name, {}))]:
            problems.append(f"{name}: ./spark is not mounted")
    return problems


def check_scripts(compose: Compose, root: Path = REPO) -> Problems:
    """Scripts of docker/ that the compose file mounts exist and are executable; entrypoints are such scripts."""
    problems = []
    for name, svc in services(compose).items():
        mounted = {dst: src for src, dst, bind in mounts(svc) if bind}
        for src in mounted.values():
            path = root / src
            if not src.lstrip("./").startswith("docker/") or not path.is_file():
                continue
            if path.read_bytes()[:2] == b"#!" or path.suffix == ".sh":
                if not os.access(path, os.X_OK):
                    problems.append(f"{name}: {src} is a script but not executable")
        entry = svc.get("entrypoint")
        first = (entry[0] if isinstance(entry, list) else str(entry).split()[0]) if entry else None
        if first and first.startswith("/opt/kafka-rebalancer-docker/"):
            if first not in mounted:
                problems.append(f"{name}: entrypoint {first} is not a mounted script")
            elif not os.access(root / mounted[first], os.X_OK):
                problems.append(f"{name}: entrypoint {first} ({mounted[first]}) is not executable")
    return problems


def check_builds(compose: Compose, root: Path = REPO) -> Problems:
    problems = []
    for name, svc in services(compose).items():
        path = build_dockerfile(svc)
        if path is None:
            continue
        if not path.is_file():
            problems.append(f"{name}: Dockerfile {path.relative_to(root)} does not exist")
            continue
        context = root / (svc["build"].get("context", ".") if isinstance(svc["build"], dict) else svc["build"])
        patterns = ignore_patterns(path)
        for instr, args in dockerfile(path):
            if instr not in ("COPY", "ADD") or "--from=" in args:
                continue
            sources = [a for a in args.split() if not a.startswith("--")][:-1]
            for src in sources:
                if not (context / src).exists():
                    problems.append(f"{path.name}: COPY source {src} does not exist")
                elif not dockerignore_keeps(patterns, src):
                    problems.append(f"{path.name}: COPY source {src} is excluded by the .dockerignore")
    return problems


def check_airflow_image(compose: Compose, dockerfile_path: Path | None = None) -> Problems:
    problems = []
    common = compose["x-airflow-common"]
    path = dockerfile_path or build_dockerfile(common)
    if path is None or not path.is_file():
        return [f"x-airflow-common builds no Dockerfile ({path})"]
    froms = [args for instr, args in dockerfile(path) if instr == "FROM"]
    airflow = pin("apache-airflow")
    m = re.fullmatch(r"apache/airflow:(?:slim-)?(\d+\.\d+\.\d+)-python(3\.\d+)(?: AS \w+)?", froms[0] if froms else "", re.I)
    if not m:
        return [f"{path.name}: FROM {froms[:1]} is not an apache/airflow:<version>-python<x.y> image"]
    if m.group(1) != airflow:
        problems.append(f"{path.name}: FROM apache/airflow {m.group(1)}, apache-airflow is pinned to {airflow}")
    if m.group(2) != python_minor():
        problems.append(f"{path.name}: Python {m.group(2)}, the project requires {python_minor()}")
    if image_tag(common.get("image", ""))[1] != airflow:
        problems.append(f"x-airflow-common image {common.get('image')} is not tagged {airflow}")
    runs = " ".join(args for instr, args in dockerfile(path) if instr == "RUN")
    if "openjdk-17-jre-headless" not in runs:
        problems.append(f"{path.name}: no Java 17 for spark-submit")
    install = re.search(r"pip install [^&;]*", runs)
    if not install or "-c /opt/airflow/constraints.txt" not in install.group(0) or "psycopg2-binary==" not in install.group(0):
        problems.append(f"{path.name}: the project is not installed with constraints.txt and a pinned psycopg2-binary")
    # rebalancer.analyze.JOB is <project>/spark/skew_analysis.py: with the editable install from /opt/airflow it is
    # the file compose mounts ./spark on.
    if not install or not re.search(r"-e /opt/airflow(\s|$)", install.group(0)):
        problems.append(f"{path.name}: the project is not installed editable from /opt/airflow")
    return problems


def check_spark(compose: Compose, dockerfile_path: Path | None = None) -> Problems:
    problems = []
    pyspark = pin("pyspark")
    svcs = services(compose)
    images = {svcs.get(s, {}).get("image") for s in SPARK_SERVICES}
    if len(images) != 1 or image_tag(next(iter(images)) or "")[1] != pyspark:
        problems.append(f"Spark images {sorted(map(str, images))} are not one image tagged with pyspark {pyspark}")
    path = dockerfile_path or build_dockerfile(svcs.get("spark-master", {}))
    if path is None or not path.is_file():
        return problems + [f"spark-master builds no Dockerfile ({path})"]
    steps = dockerfile(path)
    froms = [args for instr, args in steps if instr == "FROM"]
    m = re.fullmatch(r"python:(3\.\d+)\.\d+-slim-\w+", froms[-1] if froms else "")
    if not m or m.group(1) != python_minor():
        problems.append(f"{path.name}: FROM {froms[-1:]} is not Python {python_minor()} (the driver's)")
    runs = " ".join(args for instr, args in steps if instr == "RUN")
    if not re.search(r"pip install [^&;]*-c /tmp/constraints.txt pyspark(\s|$)", runs):
        problems.append(f"{path.name}: pyspark is not installed from constraints.txt (its version would float)")
    if "openjdk-17-jre-headless" not in runs:
        problems.append(f"{path.name}: no Java 17")
    uid = str(compose["x-airflow-common"].get("user", "")).split(":")[0]
    if f"--uid {uid}" not in runs:
        problems.append(f"{path.name}: creates no user with the Airflow uid {uid}")
    for s in SPARK_SERVICES:
        if str(svcs.get(s, {}).get("user", "")).split(":")[0] != uid:
            problems.append(f"{s}: does not run as the Airflow uid {uid} (shared run directory)")
    driver = env(compose["x-airflow-common"]).get("PYSPARK_PYTHON", "")
    worker = env(svcs.get("spark-worker", {})).get("PYSPARK_PYTHON", "")
    if driver != f"python{python_minor()}" or worker != driver:
        problems.append(f"PYSPARK_PYTHON driver {driver!r} / worker {worker!r}: must be the bare name python{python_minor()}")
    return problems


ALL_CHECKS: dict[str, Callable[[Compose], Problems]] = {
    f.__name__: f for f in (check_services, check_images, check_kafka_images, check_airflow_common,
                            check_metadata_db, check_airflow_config_keys, check_simple_auth, check_connections,
                            check_brokers, check_ports, check_depends_on, check_healthchecks, check_mounts,
                            check_scripts, check_builds, check_airflow_image, check_spark)
}


# ----------------------------------------------------------------------------------------------------------------
# The tests

@pytest.mark.parametrize("check", list(ALL_CHECKS))
def test_compose_file(compose: Compose, check: str):
    assert ALL_CHECKS[check](compose) == []


def _set_env(service: str, key: str, value: Any) -> Callable[[Compose], None]:
    def mutate(c: Compose) -> None:
        target = c if service.startswith("x-") else c["services"]
        target[service]["environment"] = {**target[service]["environment"], key: value}
    return mutate


def _set(service: str, key: str, value: Any) -> Callable[[Compose], None]:
    def mutate(c: Compose) -> None:
        c["services"][service][key] = value
    return mutate


def _set_conn(conn_id: str, **fields: Any) -> Callable[[Compose], None]:
    def mutate(c: Compose) -> None:
        conn = connection(c, conn_id)
        conn.update(fields)
        key = f"AIRFLOW_CONN_{conn_id.upper()}"
        for svc in [c["x-airflow-common"], *(c["services"][s] for s in AIRFLOW_SERVICES)]:
            svc["environment"] = {**svc["environment"], key: json.dumps(conn)}
    return mutate


def _drop_mount(service: str, target: str) -> Callable[[Compose], None]:
    def mutate(c: Compose) -> None:
        svc = c["services"][service]
        svc["volumes"] = [v for v in svc["volumes"] if not str(v).split(":")[1:2] == [target]]
    return mutate


MUTATIONS: list[tuple[str, str, Callable[[Compose], None]]] = [
    ("zookeeper-latest", "check_images", _set("zookeeper", "image", "zookeeper:latest")),
    ("postgres-untagged", "check_images", _set("postgres", "image", "postgres")),
    ("kafka-3.8", "check_kafka_images", _set("kafka2", "image", "confluentinc/cp-kafka:7.8.0")),
    ("kafka-apache-4.0", "check_kafka_images", lambda c: [c["services"][b].update(image="apache/kafka:4.0.0") for b in BROKERS]),
    ("celery-executor", "check_airflow_common", _set_env("airflow-scheduler", "AIRFLOW__CORE__EXECUTOR", "CeleryExecutor")),
    ("other-image", "check_airflow_common", _set("airflow-triggerer", "image", "apache/airflow:3.3.2")),
    ("db-password", "check_metadata_db", _set_env("postgres", "POSTGRES_PASSWORD", "secret")),
    ("config-typo", "check_airflow_config_keys", _set_env("x-airflow-common", "AIRFLOW__CORE__EXECUTORS", "x")),
    ("config-section", "check_airflow_config_keys", _set_env("airflow-apiserver", "AIRFLOW__WEBSERVER__NO_SUCH", "x")),
    ("no-jwt", "check_airflow_config_keys", _set_env("x-airflow-common", "AIRFLOW__API_AUTH__JWT_SECRET", "")),
    ("no-admin", "check_simple_auth", _set_env("x-airflow-common", "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "bob:viewer")),
    ("zk-chroot", "check_connections", _set_env("kafka2", "KAFKA_ZOOKEEPER_CONNECT", "zookeeper:2181/other")),
    ("zk-schema", "check_connections", _set_conn("zookeeper_default", schema="kafka-prod")),
    ("kafka-host", "check_connections", _set_conn("kafka_default", host="kafka1:9092,kafka2:9092")),
    ("spark-port", "check_connections", _set_conn("spark_default", port=7078)),
    ("spark-host", "check_connections", _set_conn("spark_default", host="spark://spark")),
    ("bad-json", "check_connections", lambda c: c["x-airflow-common"]["environment"].update(AIRFLOW_CONN_SPARK_DEFAULT="{")),
    ("duplicate-id", "check_brokers", _set_env("kafka3", "KAFKA_BROKER_ID", 1)),
    ("one-rack", "check_brokers", lambda c: [_set_env(b, "KAFKA_BROKER_RACK", "az-a")(c) for b in BROKERS]),
    ("auto-leader", "check_brokers", _set_env("kafka1", "KAFKA_AUTO_LEADER_REBALANCE_ENABLE", "true")),
    ("external-port", "check_brokers", _set("kafka2", "ports", ["127.0.0.1:29093:19093"])),
    ("port-collision", "check_ports", _set("kafka2", "ports", ["127.0.0.1:19092:19093"])),
    ("undefined-dep", "check_depends_on", _set("airflow-scheduler", "depends_on", {"kafka4": {"condition": "service_started"}})),
    ("dependency-cycle", "check_depends_on", lambda c: c["services"]["postgres"].update(
        depends_on={"airflow-scheduler": {"condition": "service_started"}})),
    ("unhealthy-dep", "check_depends_on", lambda c: c["services"]["kafka3"].pop("healthcheck")),
    ("no-healthcheck", "check_healthchecks", lambda c: c["services"]["zookeeper"].pop("healthcheck")),
    ("missing-bind", "check_mounts", _set("spark-master", "volumes", ["./no-such-dir:/opt/airflow/spark:ro"])),
    ("undeclared-volume", "check_mounts", lambda c: c["volumes"].pop("kafka1-data")),
    ("runs-not-shared", "check_mounts", _drop_mount("spark-worker", "/opt/airflow/rebalancer-runs")),
    ("dags-not-mounted", "check_mounts", _drop_mount("airflow-dag-processor", "/opt/airflow/dags")),
    ("entrypoint-not-mounted", "check_scripts", _set("kafka-demo-topics", "volumes", [])),
    ("missing-dockerfile", "check_builds", lambda c: c["services"]["spark-worker"]["build"].update(dockerfile="docker/nope")),
    ("spark-version", "check_spark", lambda c: [c["services"][s].update(image="kafka-rebalancer/spark:4.1.0") for s in SPARK_SERVICES]),
    ("spark-root", "check_spark", _set("spark-worker", "user", "185:185")),
    ("pyspark-python", "check_spark", _set_env("spark-worker", "PYSPARK_PYTHON", "/usr/bin/python3")),
    ("airflow-tag", "check_airflow_image", lambda c: c["x-airflow-common"].update(image="kafka-rebalancer/airflow:3.2.0")),
]


@pytest.mark.parametrize(("name", "check", "mutate"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_check_catches(compose: Compose, name: str, check: str, mutate: Callable[[Compose], None]):
    assert ALL_CHECKS[check](compose) == [], "the unbroken file must pass first"
    broken = copy.deepcopy(compose)
    mutate(broken)
    assert ALL_CHECKS[check](broken), f"{check} did not notice the {name} breakage"


@pytest.mark.parametrize(("from_line", "fragment"), [
    ("FROM apache/airflow:slim-3.2.1-python3.11", "pinned to"),
    ("FROM apache/airflow:3.3.2-python3.12", "Python 3.12"),
    ("FROM apache/airflow:latest", "is not an apache/airflow"),
])
def test_airflow_image_check_reads_the_pin(compose: Compose, tmp_path: Path, from_line: str, fragment: str):
    original = (REPO / "docker" / "Dockerfile").read_text()
    broken = tmp_path / "Dockerfile"
    broken.write_text(re.sub(r"^FROM .*$", from_line, original, count=1, flags=re.M))
    problems = check_airflow_image(compose, broken)
    assert any(fragment in p for p in problems), problems


def test_spark_image_check_reads_the_dockerfile(compose: Compose, tmp_path: Path):
    original = (REPO / "docker" / "spark.Dockerfile").read_text()
    broken = tmp_path / "spark.Dockerfile"
    broken.write_text(original.replace("-c /tmp/constraints.txt pyspark", "pyspark").replace("python:3.11.", "python:3.12."))
    problems = check_spark(compose, broken)
    assert any("constraints.txt" in p for p in problems) and any("not Python 3.11" in p for p in problems), problems


def test_dockerignore_rules():
    patterns = ["*", "!rebalancer/", "!pyproject.toml", "**/__pycache__"]
    assert dockerignore_keeps(patterns, "rebalancer/")
    assert dockerignore_keeps(patterns, "rebalancer/analyze.py")
    assert dockerignore_keeps(patterns, "pyproject.toml")
    assert not dockerignore_keeps(patterns, "rebalancer/__pycache__/x.pyc")
    assert not dockerignore_keeps(patterns, ".venv/bin/python")
    assert not dockerignore_keeps(patterns, "spark/skew_analysis.py")
    assert dockerignore_keeps([], "anything")


def test_non_executable_script_is_caught(compose: Compose, tmp_path: Path):
    (tmp_path / "docker" / "kafka").mkdir(parents=True)
    for src in ("docker/airflow-init.sh", "docker/kafka/create-demo-topics.sh"):
        shutil.copy(REPO / src, tmp_path / src)
    os.chmod(tmp_path / "docker/kafka/create-demo-topics.sh", 0o644)
    problems = check_scripts(compose, tmp_path)
    assert any("create-demo-topics.sh" in p for p in problems), problems
    assert not any("airflow-init.sh" in p for p in problems), problems


def test_airflow_init_creates_the_runbook_pools():
    """Tasks in a pool that does not exist are never scheduled: airflow-init creates every pool the plugins use."""
    pools = set()
    for path in (REPO / "plugins").rglob("*.py"):
        pools.update(re.findall(r'^POOL\s*=\s*"([^"]+)"', path.read_text(), re.M))
    if not pools:
        pytest.skip("the plugins define no POOL")
    script = (REPO / "docker" / "airflow-init.sh").read_text()
    for pool in pools:
        assert re.search(rf"airflow pools set {re.escape(pool)} \d+ ", script), f"airflow-init.sh does not create pool {pool}"


def test_analysis_job_path_matches_the_image_layout():
    """The image relies on JOB = <project root>/spark/skew_analysis.py (editable install from /opt/airflow)."""
    from rebalancer import analyze

    assert analyze.JOB == REPO / "spark" / "skew_analysis.py"


def test_interpolation():
    assert interpolate("${A:-x}/${B}/$${HOSTNAME}/${C-y}") == "x//${HOSTNAME}/y"


def test_spark_master_url_matches_the_provider():
    """Our copy of the provider's rule agrees with the provider's code on the cases that matter."""
    assert spark_master_url({"conn_type": "spark", "host": "spark://spark-master", "port": 7077}) == "spark://spark-master:7077"
    assert spark_master_url({"conn_type": "spark", "host": "local[*]"}) == "local[*]"
    assert spark_master_url({"conn_type": "spark", "host": "spark-master", "port": 7077}) == "spark://spark-master:7077"


RESOLVE_CONNECTIONS = """
import json
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import BaseHook
out = {"spark_master": SparkSubmitHook(conn_id="spark_default")._connection["master"]}
for conn_id in ("kafka_default", "zookeeper_default"):
    c = BaseHook.get_connection(conn_id)
    out[conn_id] = {"conn_type": c.conn_type, "host": c.host, "schema": c.schema, "port": c.port, "extra": c.extra_dejson}
print(json.dumps(out))
"""


def test_airflow_parses_the_preset_connections(compose: Compose, tmp_path: Path):
    """The real Airflow and Spark provider read the compose env: the master URL and connection fields come out right."""
    conns = {k: v for k, v in env(compose["x-airflow-common"]).items() if k.startswith("AIRFLOW_CONN_")}
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    run_env.update(conns, AIRFLOW_HOME=str(tmp_path), AIRFLOW__CORE__LOAD_EXAMPLES="false")
    proc = subprocess.run([sys.executable, "-c", RESOLVE_CONNECTIONS], env=run_env, capture_output=True, text=True,
                          timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["spark_master"] == spark_master_url(connection(compose, "spark_default")) == "spark://spark-master:7077"
    assert got["kafka_default"]["host"] == "kafka1:9092,kafka2:9092,kafka3:9092"
    assert got["kafka_default"]["extra"] == {"security_protocol": "PLAINTEXT"}
    assert (got["zookeeper_default"]["host"], got["zookeeper_default"]["schema"]) == ("zookeeper:2181", "kafka")


def _compose_cli() -> list[str] | None:
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_docker_compose_config_validates():
    """Compose's own schema validation (no daemon needed), where a Compose CLI is installed."""
    cli = _compose_cli()
    if cli is None:
        pytest.skip("no docker compose / docker-compose CLI on this machine")
    proc = subprocess.run([*cli, "-f", str(COMPOSE_FILE), "config", "-q"], capture_output=True, text=True,
                          cwd=REPO, timeout=120, env={**os.environ, "COMPOSE_PROJECT_NAME": "kafka-rebalancer-test"})
    assert proc.returncode == 0, proc.stderr
