#!/usr/bin/env python3
"""The embedded Airflow 3 of the runbook: SQLite + LocalExecutor in one AIRFLOW_HOME, run as separate processes
(api-server, scheduler, dag-processor, triggerer), and a small REST client for triggering and approving runs.

Used by ``scripts/demo.sh`` and by the Airflow tests (``tests/airflow_support.py``). Commands::

    airflow_local.py up       --home H --port P [--sim-dir D | --kafka-dir D] [--approver NAME] [--no-triggerer]
    airflow_local.py down     --home H
    airflow_local.py trigger  --home H DAG_ID [--conf JSON]           # prints the run id
    airflow_local.py approve  --home H DAG_ID RUN_ID --as NAME [--reject]
    airflow_local.py wait     --home H DAG_ID RUN_ID [--approve-as NAME] [--timeout S]

``up`` migrates the database, starts the processes detached (pids in H/processes.json, logs in H/logs/), waits
until the api-server answers, the scheduler and the dag-processor are healthy and the DAGs are parsed, then
creates the pool ``kafka_cluster`` (1 slot) and the connections through the REST API (``spark_default`` ->
local[*]; with ``--sim-dir``, ``zookeeper_default`` from the simulated cluster's sim.json, and ``kafka_default``
when it publishes a bootstrap address; with ``--kafka-dir``, ``kafka_default`` from the real local cluster's
localkafka.json (``rebalancer kafka up --dir D``), and ``zookeeper_default`` too for a 3.9 (ZooKeeper-mode) cluster).
Users come from the simple auth manager: ``admin`` (role admin) and ``--approver NAME`` (role user); their
generated passwords are in H/simple_auth_manager_passwords.json.generated.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC
from pathlib import Path
from typing import Any
from urllib.parse import quote

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
POOL = "kafka_cluster"
DAG_IDS = ("kafka_add_brokers", "kafka_rebalance_weekly", "kafka_leader_rebalance")
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
PASSWORDS_FILE = "simple_auth_manager_passwords.json.generated"
# Airflow 3.3: an approval answered before the scheduler has processed the exit of the worker that parked the task
# in awaiting_input can be failed by the scheduler (the answer re-queues the task, then the worker's "success" event
# arrives for a queued task: "finished with state success, but the task instance's state attribute is queued").
# Scripts that answer on their own wait for that event (``wait_parked``), however long a loaded machine takes.
PARKED_STATE = "awaiting_input"


class AirflowError(RuntimeError):
    pass


# -- configuration ----------------------------------------------------------------------------------------------
def airflow_env(home: Path, port: int, *, users: Sequence[tuple[str, str]] = (("admin", "admin"),),
                host: str = "127.0.0.1", public_host: str = "localhost", extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of every Airflow process (and of the CLI calls) for this AIRFLOW_HOME."""
    env = dict(os.environ)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        # SQLite takes one writer at a time: a writer waits up to 60 s for the lock (the default 5 s failed REST
        # calls and task-state updates on a loaded 2-core machine with several runs at once); WAL mode (init) lets
        # readers go on meanwhile.
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}?timeout=60",
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in users),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API__HOST": host,
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://{public_host}:{port}",
        "AIRFLOW__API__WORKERS": "1",
        # A task's worker gives the Execution API 5 s per request by default (5 tries, about 35 s in all). The api-server
        # answers its first task-instance request slowly: 23 and 36 s measured on a 2-core machine under load (every
        # later one under 1.5 s), and the 36 s one failed the KRaft Airflow test's first task in the flake hunt
        # (httpx.ReadTimeout; the task never started). Airflow's advice for a loaded machine: a longer timeout.
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "60",
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "REBALANCER_RUNS_DIR": str(home / "rebalancer-runs"),
        # spark-submit and the rebalancer CLI come with the virtualenv; Spark runs local without host lookups.
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    })
    env.update(extra or {})
    return env


def _airflow(env: Mapping[str, str], *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(VENV_BIN / "airflow"), *args], env=dict(env), capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise AirflowError(f"airflow {' '.join(args[:3])} failed ({proc.returncode}): {tail}")
    return proc


def sim_connections(sim_dir: Path) -> dict[str, dict[str, Any]]:
    """Connection fields for the simulated cluster described by ``sim_dir/sim.json``."""
    state = json.loads((sim_dir / "sim.json").read_text())
    rest = state["zk_url"][len("zk://"):]
    hosts, _, chroot = rest.partition("/")
    out = {"zookeeper_default": {"conn_type": "zookeeper", "host": hosts, "schema": chroot.strip("/"),
                                 "extra": {"sizes": state["sizes"]}}}
    bootstrap = state.get("kafka_bootstrap")
    if bootstrap:
        out["kafka_default"] = {"conn_type": "kafka", "host": str(bootstrap).removeprefix("kafka://"),
                                "extra": {"security_protocol": "PLAINTEXT"}}
    return out


def local_kafka_connections(kafka_dir: Path) -> dict[str, dict[str, Any]]:
    """Connection fields for the real local Kafka cluster described by ``kafka_dir/localkafka.json``
    (``rebalancer kafka up --dir``): ``kafka_default`` (its bootstrap servers, PLAINTEXT), and on 3.9 (ZooKeeper
    mode) ``zookeeper_default`` with the chroot and the ``log-dirs.json`` sizes as well."""
    path = kafka_dir / "localkafka.json"
    if not path.exists():
        raise AirflowError(f"no local Kafka cluster in {kafka_dir} (no localkafka.json; start one with "
                           f"'rebalancer kafka up --dir {kafka_dir}')")
    state = json.loads(path.read_text())
    bootstrap = state.get("kafka_url")
    if not bootstrap:
        raise AirflowError(f"{path} has no kafka_url: the cluster never finished starting")
    out: dict[str, dict[str, Any]] = {}
    if state.get("zk_url"):
        hosts, _, chroot = str(state["zk_url"])[len("zk://"):].partition("/")
        out["zookeeper_default"] = {"conn_type": "zookeeper", "host": hosts, "schema": chroot.strip("/"),
                                    "extra": {"sizes": state["sizes"]} if state.get("sizes") else {}}
    out["kafka_default"] = {"conn_type": "kafka", "host": str(bootstrap).removeprefix("kafka://"),
                            "extra": {"security_protocol": "PLAINTEXT"}}
    return out


def init(home: Path, env: Mapping[str, str]) -> None:
    """The metadata database (idempotent), in SQLite's write-ahead-log mode (it persists in the file)."""
    import sqlite3

    home.mkdir(parents=True, exist_ok=True)
    _airflow(env, "db", "migrate")
    with sqlite3.connect(home / "airflow.db", timeout=60) as db:
        mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if mode != "wal":
        raise AirflowError(f"SQLite refused write-ahead logging for {home / 'airflow.db'} (journal mode {mode})")


def configure(client: Client, *, sim_dir: Path | None = None, kafka_dir: Path | None = None) -> None:
    """Pool ``kafka_cluster`` (1 slot) and the connections, through the REST API (idempotent)."""
    client.upsert("/pools", "pool_name", POOL, {"name": POOL, "slots": 1, "include_deferred": False,
                                                "description": "one mutating Kafka runbook task at a time"})
    conns = {"spark_default": {"conn_type": "spark", "host": "local[*]"}}
    if sim_dir is not None:
        conns.update(sim_connections(sim_dir))
    if kafka_dir is not None:
        conns.update(local_kafka_connections(kafka_dir))
    for conn_id, fields in conns.items():
        body = {"connection_id": conn_id, **fields}
        if isinstance(body.get("extra"), dict):
            body["extra"] = json.dumps(body["extra"])
        client.upsert("/connections", "connection_id", conn_id, body)


# -- processes ----------------------------------------------------------------------------------------------------
def start(home: Path, env: Mapping[str, str], components: Sequence[str] = COMPONENTS) -> dict[str, int]:
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    pids: dict[str, int] = {}
    for name in components:
        with open(logs / f"{name}.log", "ab") as out:
            proc = subprocess.Popen([str(VENV_BIN / "airflow"), name], env=dict(env), stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        pids[name] = proc.pid
    (home / "processes.json").write_text(json.dumps(pids))
    return pids


def _alive(pid: int) -> bool:
    from rebalancer.procs import process_alive

    return process_alive(pid)


def stop(home: Path, timeout: float = 20.0) -> None:
    """Stop what ``start`` started: each process group (the scheduler's task workers included), by pid."""
    path = home / "processes.json"
    if not path.exists():
        return
    pids = json.loads(path.read_text())
    for pid in pids.values():
        try:
            os.killpg(pid, signal.SIGTERM)  # the group start() created for this process (start_new_session)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(p) for p in pids.values()):
        time.sleep(0.2)
    for pid in pids.values():
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    path.unlink(missing_ok=True)


def passwords(home: Path) -> dict[str, str]:
    path = home / PASSWORDS_FILE
    return json.loads(path.read_text()) if path.exists() else {}


# -- REST ---------------------------------------------------------------------------------------------------------
class Client:
    """A logged-in client of the api-server's public REST API (JWT from ``POST /auth/token``)."""

    def __init__(self, base_url: str, username: str, password: str) -> None:
        import httpx

        self.base_url = base_url.rstrip("/")
        self.username = username
        resp = httpx.post(f"{self.base_url}/auth/token", json={"username": username, "password": password}, timeout=30)
        if resp.status_code >= 300:
            raise AirflowError(f"login as {username} failed: {resp.status_code} {resp.text[:200]}")
        self.token = resp.json()["access_token"]
        self.http = httpx.Client(base_url=f"{self.base_url}/api/v2", timeout=60,
                                 headers={"Authorization": f"Bearer {self.token}"})

    def request(self, method: str, path: str, **kw: Any) -> Any:
        resp = self.http.request(method, path, **kw)
        if resp.status_code >= 300:
            raise AirflowError(f"{method} {path}: {resp.status_code} {resp.text[:300]}")
        return resp.json() if resp.content else None

    def upsert(self, collection: str, key: str, name: str, body: Mapping[str, Any]) -> None:
        """Create ``collection/name`` or replace its fields (pools, connections, variables)."""
        resp = self.http.post(collection, json=dict(body))
        if resp.status_code == 409:
            self.request("PATCH", f"{collection}/{quote(name, safe='')}", json=dict(body))
        elif resp.status_code >= 300:
            raise AirflowError(f"POST {collection}: {resp.status_code} {resp.text[:300]}")

    def unpause(self, dag_id: str) -> None:
        self.set_paused(dag_id, False)

    def set_paused(self, dag_id: str, paused: bool) -> None:
        self.request("PATCH", f"/dags/{dag_id}", json={"is_paused": paused})

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None, note: str | None = None) -> str:
        from datetime import datetime

        body: dict[str, Any] = {"logical_date": datetime.now(UTC).isoformat(), "conf": dict(conf or {})}
        if note:
            body["note"] = note
        return str(self.request("POST", f"/dags/{dag_id}/dagRuns", json=body)["dag_run_id"])

    def run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return dict(self.request("GET", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}"))

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        doc = self.request("GET", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances",
                           params={"limit": 100})
        return {ti["task_id"]: ti["state"] for ti in doc["task_instances"]}

    def hitl(self, dag_id: str, run_id: str, task_id: str = "approve") -> dict[str, Any]:
        return dict(self.request("GET", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/"
                                        f"{task_id}/-1/hitlDetails"))

    def answer(self, dag_id: str, run_id: str, option: str, task_id: str = "approve") -> dict[str, Any]:
        """Answer a human-in-the-loop task: ``Approve`` or ``Reject``, as this client's user."""
        return dict(self.request("PATCH", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/"
                                          f"{task_id}/-1/hitlDetails", json={"chosen_options": [option]}))

    def clear(self, dag_id: str, run_id: str, task_ids: Sequence[str], downstream: bool = True) -> list[str]:
        """Run tasks of a run again, as the UI's Clear does (with what follows them, by default); the run is running
        again once this returns. Returns the task ids cleared."""
        doc = self.request("POST", f"/dags/{dag_id}/clearTaskInstances",
                           json={"dry_run": False, "dag_run_id": run_id, "task_ids": list(task_ids),
                                 "include_downstream": downstream, "only_failed": False, "reset_dag_runs": True})
        return sorted({str(ti["task_id"]) for ti in doc.get("task_instances", [])})

    def log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """A task's log as text, one line per event."""
        doc = self.request("GET", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}/logs/"
                                  f"{try_number}", params={"full_content": True})
        lines = []
        for e in doc.get("content") or []:
            if not isinstance(e, dict):
                lines.append(str(e))
                continue
            lines.append(str(e.get("event", "")))
            lines += [f"{d.get('exc_type')}: {d.get('exc_value')}" for d in e.get("error_detail") or []]
        return "\n".join(lines)

    def wait_state(self, dag_id: str, run_id: str, *, task_id: str | None = None, states: Sequence[str],
                   timeout: float = 600, poll: float = 1.0, fail_states: Sequence[str] = ()) -> str:
        """Wait for the run (or one of its tasks) to reach one of ``states``; returns the state."""
        deadline = time.monotonic() + timeout
        state: str | None = None
        while time.monotonic() < deadline:
            state = (self.task_states(dag_id, run_id).get(task_id) if task_id else self.run(dag_id, run_id)["state"])
            if state in states:
                return state
            if state in fail_states:
                raise AirflowError(f"{dag_id} {run_id} {task_id or 'run'}: {state}")
            time.sleep(poll)
        raise AirflowError(f"{dag_id} {run_id} {task_id or 'run'} not in {list(states)} within {timeout:g} s "
                           f"(last: {state}); tasks: {self.task_states(dag_id, run_id)}")


def parking_processed(home: Path, dag_id: str, run_id: str, task_id: str = "approve") -> bool:
    """Has the scheduler processed the exit of the worker that parked ``task_id`` in awaiting_input? It logs
    "TaskInstance Finished: dag_id=D, task_id=T, run_id=R, ... state=awaiting_input" when it has (the database shows
    nothing of it), and only then can an answer not be mistaken for a task changed behind its back."""
    log = home / "logs" / "scheduler.log"
    if not log.exists():
        return False
    data = log.read_bytes()
    marker = f"TaskInstance Finished: dag_id={dag_id}, task_id={task_id}, run_id={run_id}, ".encode()
    at = data.find(marker)
    while at >= 0:
        end = data.find(b"\n", at)
        if f"state={PARKED_STATE},".encode() in data[at:end if end >= 0 else len(data)]:
            return True
        at = data.find(marker, at + 1)
    return False


def wait_parked(client: Client, home: Path, dag_id: str, run_id: str, *, task_id: str = "approve",
                timeout: float = 600.0) -> None:
    """Wait until a human-in-the-loop task can be answered: in awaiting_input, and its parking processed by the
    scheduler (``parking_processed``). Every script and test that answers an approval waits here first."""
    started = time.monotonic()
    client.wait_state(dag_id, run_id, task_id=task_id, states=[PARKED_STATE], timeout=timeout,
                      fail_states=["failed", "upstream_failed", "skipped", "success"])
    deadline = started + timeout
    while not parking_processed(home, dag_id, run_id, task_id):
        if time.monotonic() > deadline:
            raise AirflowError(f"{dag_id} {run_id} {task_id}: the scheduler did not process the parking of the task "
                               f"within {timeout:g} s (logs in {home / 'logs'})")
        time.sleep(0.2)


def wait_ready(base_url: str, home: Path, *, dag_ids: Sequence[str] = DAG_IDS, timeout: float = 240) -> None:
    """The api-server answers, the scheduler and dag-processor are healthy, and every DAG is parsed."""
    import httpx

    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        _check_processes(home)
        try:
            health = httpx.get(f"{base_url}/api/v2/monitor/health", timeout=5).json()
            ok = all((health.get(k) or {}).get("status") == "healthy" for k in ("metadatabase", "scheduler", "dag_processor"))
            if ok:
                break
            last = json.dumps(health)[:300]
        except (httpx.HTTPError, ValueError) as exc:
            last = str(exc)
        time.sleep(1)
    else:
        raise AirflowError(f"Airflow not healthy within {timeout:g} s: {last} (logs in {home / 'logs'})")
    admin = Client(base_url, "admin", passwords(home)["admin"])
    while time.monotonic() < deadline:
        _check_processes(home)
        missing = [d for d in dag_ids if admin.http.get(f"/dags/{d}").status_code != 200]
        if not missing:
            errors = admin.request("GET", "/importErrors")
            if errors.get("total_entries"):
                raise AirflowError(f"DAG import errors: {json.dumps(errors['import_errors'])[:1000]}")
            return
        time.sleep(1)
    raise AirflowError(f"DAGs not parsed within {timeout:g} s: {missing} (logs in {home / 'logs'})")


def _check_processes(home: Path) -> None:
    path = home / "processes.json"
    if not path.exists():
        return
    for name, pid in json.loads(path.read_text()).items():
        if not _alive(pid):
            log = home / "logs" / f"{name}.log"
            tail = log.read_text(errors="replace").strip().splitlines()[-5:] if log.exists() else []
            raise AirflowError(f"airflow {name} exited: " + " | ".join(tail))


# -- the CLI --------------------------------------------------------------------------------------------------------
def _home_env(args: argparse.Namespace) -> tuple[Path, dict[str, str], str]:
    home = Path(args.home).resolve()
    settings = home / "local.json"
    if settings.exists():
        saved = json.loads(settings.read_text())
    else:
        saved = {"port": args.port or 8080, "users": [["admin", "admin"]], "public_host": "localhost"}
    if getattr(args, "port", None):
        saved["port"] = args.port
    env = airflow_env(home, int(saved["port"]), users=[tuple(u) for u in saved["users"]],
                      public_host=saved.get("public_host", "localhost"), host=saved.get("host", "127.0.0.1"))
    return home, env, f"http://127.0.0.1:{saved['port']}"


def _client(home: Path, base: str, user: str) -> Client:
    pw = passwords(home)
    if user not in pw:
        raise AirflowError(f"no user {user!r} in {home / PASSWORDS_FILE} (users: {', '.join(pw)})")
    return Client(base, user, pw[user])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="airflow_local.py", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("up")
    p.add_argument("--home", required=True)
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--host", default="127.0.0.1", help="address the api-server listens on")
    p.add_argument("--public-host", default="localhost", help="host name in the links Airflow prints")
    p.add_argument("--sim-dir", help="create zookeeper_default (and kafka_default) for this simulated cluster")
    p.add_argument("--kafka-dir", help="create kafka_default (and zookeeper_default on 3.9) for the real local Kafka "
                                       "cluster of this directory (DIR/localkafka.json, 'rebalancer kafka up --dir')")
    p.add_argument("--approver", action="append", default=[], help="an extra user with role 'user'")
    p.add_argument("--no-triggerer", action="store_true")
    p = sub.add_parser("down")
    p.add_argument("--home", required=True)
    p = sub.add_parser("trigger")
    p.add_argument("--home", required=True)
    p.add_argument("dag_id")
    p.add_argument("--conf", default="{}")
    p = sub.add_parser("approve")
    p.add_argument("--home", required=True)
    p.add_argument("dag_id")
    p.add_argument("run_id")
    p.add_argument("--as", dest="user", required=True)
    p.add_argument("--reject", action="store_true")
    p = sub.add_parser("wait")
    p.add_argument("--home", required=True)
    p.add_argument("dag_id")
    p.add_argument("run_id")
    p.add_argument("--approve-as", help="answer the approval through the REST API as this user")
    p.add_argument("--timeout", type=float, default=3600)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "up":
            if args.sim_dir and args.kafka_dir:
                raise AirflowError("--sim-dir and --kafka-dir both define the default connections: give one")
            kafka_dir = Path(args.kafka_dir).resolve() if args.kafka_dir else None
            if kafka_dir is not None:
                local_kafka_connections(kafka_dir)  # refuse a directory without a cluster before starting anything
            home = Path(args.home).resolve()
            home.mkdir(parents=True, exist_ok=True)
            users = [["admin", "admin"]] + [[u, "user"] for u in args.approver if u != "admin"]
            (home / "local.json").write_text(json.dumps({"port": args.port, "users": users, "host": args.host,
                                                          "public_host": args.public_host}))
            home, env, base = _home_env(args)
            stop(home)
            init(home, env)
            comps = [c for c in COMPONENTS if not (args.no_triggerer and c == "triggerer")]
            start(home, env, comps)
            try:
                wait_ready(base, home)
                configure(_client(home, base, "admin"), sim_dir=Path(args.sim_dir).resolve() if args.sim_dir else None,
                          kafka_dir=kafka_dir)
            except BaseException:
                stop(home)
                raise
            print(json.dumps({"url": env["AIRFLOW__API__BASE_URL"], "passwords": passwords(home)}))
        elif args.cmd == "down":
            stop(Path(args.home).resolve())
        elif args.cmd == "trigger":
            home, _env, base = _home_env(args)
            client = _client(home, base, "admin")
            client.unpause(args.dag_id)
            print(client.trigger(args.dag_id, json.loads(args.conf)))
        elif args.cmd == "approve":
            home, _env, base = _home_env(args)
            client = _client(home, base, args.user)
            rec = client.answer(args.dag_id, args.run_id, "Reject" if args.reject else "Approve")
            print(f"{rec['chosen_options'][0]} by {rec['responded_by']['name']} at {rec['responded_at']}")
        elif args.cmd == "wait":
            home, _env, base = _home_env(args)
            return _wait(home, base, args)
    except AirflowError as exc:
        print(f"airflow_local: {exc}", file=sys.stderr)
        return 1
    return 0


def _wait(home: Path, base: str, args: argparse.Namespace) -> int:
    """Follow a run, printing each task's state change; optionally approve it; exit 0 when it succeeded."""
    client = _client(home, base, "admin")
    approver = _client(home, base, args.approve_as) if args.approve_as else None
    seen: dict[str, str | None] = {}
    deadline = time.monotonic() + args.timeout
    answered = False
    while time.monotonic() < deadline:
        states = client.task_states(args.dag_id, args.run_id)
        for task_id, state in states.items():
            if seen.get(task_id) != state and state is not None:
                print(f"  {time.strftime('%H:%M:%S')}  {task_id:<18} {state}", flush=True)
        seen = dict(states)
        if (approver is not None and not answered and states.get("approve") == PARKED_STATE
                and parking_processed(home, args.dag_id, args.run_id)):
            rec = approver.answer(args.dag_id, args.run_id, "Approve")
            print(f"  approved through the REST API by {rec['responded_by']['name']}", flush=True)
            answered = True
        run_state = client.run(args.dag_id, args.run_id)["state"]
        if run_state in ("success", "failed"):
            print(f"run {args.run_id}: {run_state}")
            return 0 if run_state == "success" else 1
        time.sleep(2)
    print(f"run {args.run_id}: still running after {args.timeout:g} s", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
