"""Helpers of the Airflow tests: one real Airflow 3 (SQLite, LocalExecutor; api-server, scheduler and
dag-processor as subprocesses) per test module, and simulated clusters on the session's ZooKeeper, each reached
through its own Airflow connection (a run picks it with the ``zookeeper_conn_id`` param).

Nothing of Airflow is imported into the pytest process: the stack is driven through its REST API, like an
operator's scripts would, by ``scripts/airflow_local.py``.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import sys
import uuid
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import waiting
from conftest import FAST_SPARK_DEFAULTS, REPO

wait_for = partial(waiting.wait_for, poll=0.2)  # what these tests poll is slow to ask (a CLI, a cluster)

_spec = importlib.util.spec_from_file_location("airflow_local", REPO / "scripts" / "airflow_local.py")
assert _spec is not None and _spec.loader is not None
airflow_local = importlib.util.module_from_spec(_spec)
sys.modules["airflow_local"] = airflow_local
_spec.loader.exec_module(airflow_local)

ARTIFACTS = REPO / "tests" / "artifacts"
APPROVER, OTHER_USER = "alice", "bob"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Stack:
    home: Path
    port: int
    env: dict[str, str]
    admin: Any = None
    clients: dict[str, Any] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://localhost:{self.port}"

    def client(self, user: str) -> Any:
        if user not in self.clients:
            self.clients[user] = airflow_local.Client(f"http://127.0.0.1:{self.port}", user,
                                                      airflow_local.passwords(self.home)[user])
        return self.clients[user]

    def runs_root(self) -> Path:
        return Path(self.env["REBALANCER_RUNS_DIR"])

    def run_dir(self, dag_id: str, run_id: str) -> Path:
        from rebalancer.runbook import run_dir_for

        return run_dir_for(dag_id, run_id, self.runs_root())

    # Deadlines here stop a hung run; they do not measure speed (bench/ does). On this 2-core machine with a core
    # kept busy and real Kafka clusters on the other test worker, a run reached its approval after 11 minutes (the
    # Spark analysis alone took 4.5), so the approval may take up to 25.
    def wait_parked(self, dag_id: str, run_id: str, task_id: str = "approve", timeout: float = 1500) -> None:
        """Until the approval can be answered (``airflow_local.wait_parked``): every approval test waits here."""
        airflow_local.wait_parked(self.admin, self.home, dag_id, run_id, task_id=task_id, timeout=timeout)

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.home / "logs" / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no log)"


def start_stack(home: Path) -> Stack:
    """Migrate, configure and start Airflow in ``home``; returns when the DAGs are parsed."""
    port = free_port()
    spark_conf = home / "spark-conf"
    spark_conf.mkdir(parents=True, exist_ok=True)
    (spark_conf / "spark-defaults.conf").write_text(FAST_SPARK_DEFAULTS)
    users = [("admin", "admin"), (APPROVER, "user"), (OTHER_USER, "user")]
    env = airflow_local.airflow_env(home, port, users=users, extra={
        "SPARK_CONF_DIR": str(spark_conf), "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        # How often the scheduler resolves approvals whose response timeout passed (default 15 s).
        "AIRFLOW__SCHEDULER__TRIGGER_TIMEOUT_CHECK_INTERVAL": "3",
        # One Airflow for many (simulated) clusters: the tests' runs of a DAG proceed at once.
        "REBALANCER_MAX_ACTIVE_RUNS": "8"})
    airflow_local.init(home, env)
    # No triggerer: Airflow 3.3 parks human-in-the-loop tasks in awaiting_input without one.
    airflow_local.start(home, env, ("api-server", "scheduler", "dag-processor"))
    stack = Stack(home=home, port=port, env=env)
    try:
        airflow_local.wait_ready(f"http://127.0.0.1:{port}", home)
        admin = stack.client("admin")
        airflow_local.configure(admin)  # the pool and spark_default, as the demo does
        for dag_id in airflow_local.DAG_IDS:
            if dag_id != "kafka_rebalance_weekly":  # scheduled: stays paused, tests trigger it by hand
                admin.unpause(dag_id)
        stack.admin = admin
    except BaseException:
        airflow_local.stop(home)
        raise
    return stack


@dataclass
class Cluster:
    """A simulated cluster in its own chroot of the session's ZooKeeper, with its Airflow connection."""

    directory: Path
    zk_url: str
    sizes: str
    conn_id: str              # zookeeper connection
    kafka_conn_id: str | None  # kafka connection (Admin API of the simulated brokers), when the simulator has one

    def backend(self) -> Any:
        from rebalancer.execute import open_backend

        return open_backend(self.zk_url)

    def assignment(self) -> dict[tuple[str, int], tuple[int, ...]]:
        with self.backend() as b:
            return {p.tp: p.replicas for p in b.read_cluster().partitions}

    def throttles(self) -> dict[Any, Any]:
        with self.backend() as b:
            return dict(b.throttle_configs())

    def kill(self, broker: int) -> None:
        from rebalancer.sim.service import send_command

        send_command(self.zk_url, "kill-broker", broker)

    def restart(self, broker: int) -> None:
        from rebalancer.sim.service import send_command

        send_command(self.zk_url, "restart-broker", broker)

    def stop(self) -> None:
        from rebalancer.sim.service import down

        down(self.directory)


def start_cluster(stack: Stack, zk_hosts: str, directory: Path, *, scenario: str = "new-brokers",
                  partitions: int = 48, new_brokers: int | None = None, acceleration: float = 200.0) -> Cluster:
    from rebalancer.sim.scenarios import ScenarioParams
    from rebalancer.sim.service import up

    chroot = f"/airflow-{uuid.uuid4().hex[:10]}"
    state = up(directory, scenario=scenario, params=ScenarioParams(partitions=partitions, new_brokers=new_brokers),
               acceleration=acceleration, zk_hosts=zk_hosts, chroot=chroot)
    name = chroot.strip("/").replace("-", "_")
    conn_id, kafka_conn_id = f"zk_{name}", None
    stack.admin.request("POST", "/connections", json={
        "connection_id": conn_id, "conn_type": "zookeeper", "host": zk_hosts, "schema": chroot.strip("/"),
        "extra": json.dumps({"sizes": state["sizes"]})})
    if state.get("kafka_bootstrap"):
        kafka_conn_id = f"kafka_{name}"
        stack.admin.request("POST", "/connections", json={
            "connection_id": kafka_conn_id, "conn_type": "kafka",
            "host": state["kafka_bootstrap"].removeprefix("kafka://"),
            "extra": json.dumps({"security_protocol": "PLAINTEXT"})})
    return Cluster(directory=Path(directory), zk_url=state["zk_url"], sizes=state["sizes"], conn_id=conn_id,
                   kafka_conn_id=kafka_conn_id)


def leader_skewed_description(path: Path) -> str:
    """A balanced cluster whose preferred leaders all sit on the lowest broker id of each replica set (leader skew
    without replica skew): a ``file:`` scenario for the simulator."""
    from dataclasses import replace

    from rebalancer.formats import write_cluster_json
    from rebalancer.model import Cluster as Model
    from rebalancer.sim.scenarios import ScenarioParams, build_scenario

    base = build_scenario("new-brokers", ScenarioParams(partitions=24, new_brokers=0))
    parts = []
    for p in base.partitions:
        replicas = tuple(sorted(p.replicas))
        parts.append(replace(p, replicas=replicas, leader=replicas[0]))
    write_cluster_json(Model.build(base.brokers, parts, dict(base.meta)), path)
    return f"file:{path}"


def planned_assignment(run_dir: Path) -> dict[tuple[str, int], tuple[int, ...]]:
    doc = json.loads((run_dir / "reassignment.json").read_text())
    return {(p["topic"], p["partition"]): tuple(p["replicas"]) for p in doc["partitions"]}


CHROMEDRIVER = "/usr/bin/chromedriver"


def signed_in_browser(stack: Stack, tmp: Path, user: str = APPROVER) -> tuple[Any, Any]:
    """Headless Debian Chromium, signed in to the stack's Airflow UI as ``user``: (driver, a 60 s WebDriverWait)."""
    import pytest
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    if not Path(CHROMEDRIVER).exists():
        pytest.fail(f"{CHROMEDRIVER} is missing: install Debian's chromium-driver (with chromium)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1300", f"--user-data-dir={tmp / 'chromium-profile'}"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    wait = WebDriverWait(driver, 60)
    try:
        driver.get(f"{stack.base_url}/")
        wait.until(ec.presence_of_element_located((By.NAME, "username"))).send_keys(user)
        driver.find_element(By.NAME, "password").send_keys(airflow_local.passwords(stack.home)[user])
        driver.find_element(By.XPATH, "//button[normalize-space()='Sign in']").click()
        wait.until(lambda d: "/auth/login" not in d.current_url)
    except BaseException:
        driver.quit()
        raise
    return driver, wait
