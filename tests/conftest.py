"""Shared fixtures: one real ZooKeeper server per test session, a fresh chroot per test (kazoo's harness style),
and simulated clusters running their controller in a thread of the test process."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.register_assert_rewrite("scheduling")  # a plugin (``pytest_plugins`` below) this module imports first
from scheduling import AIRFLOW_FILES, FAST_TIER, file_of
from waiting import wait_for  # noqa: F401 (the tests import it from here too)

from rebalancer.zkserver import ZooKeeperServer

REPO = Path(__file__).resolve().parent.parent
# How pytest-xdist hands the tests out (the order, and what stays on one worker): a plugin of its own.
pytest_plugins = ["scheduling"]
# Short Spark jobs on tiny inputs: a quick JIT, one GC thread and no whole-stage code generation halve the CPU time
# of each analysis. Every Spark the tests start reads them (``pytest_configure``: SPARK_CONF_DIR, unless set); the
# Airflow stack's tasks too (airflow_support).
FAST_SPARK_DEFAULTS = ("spark.driver.extraJavaOptions -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1\n"
                       "spark.sql.codegen.wholeStage false\n")


def pytest_configure(config: pytest.Config) -> None:
    if "SPARK_CONF_DIR" not in os.environ:
        import atexit
        import shutil
        import tempfile

        conf = Path(tempfile.mkdtemp(prefix="rebalancer-test-spark-conf-"))
        (conf / "spark-defaults.conf").write_text(FAST_SPARK_DEFAULTS)
        os.environ["SPARK_CONF_DIR"] = str(conf)
        atexit.register(shutil.rmtree, conf, ignore_errors=True)


def examples(n: int) -> int:
    """A property test's example count: ``n`` in the whole suite (what CI runs), a quarter of it (at least 20) in
    the fast tier, where the same properties are checked on fewer generated clusters."""
    return max(20, n // 4) if FAST_TIER else n


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    # A short tick allows session timeouts down to 1 s, so expiry can be provoked quickly.
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), tick_ms=500)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def zk_url(zk_server: ZooKeeperServer) -> str:
    """A zk:// URL with a chroot of its own (created), so tests never see each other's metadata."""
    from kazoo.client import KazooClient

    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    root = KazooClient(hosts=zk_server.hosts)
    root.start(timeout=10)
    root.ensure_path(chroot)
    root.stop()
    root.close()
    return f"zk://{zk_server.hosts}{chroot}"


def expire_session(client: Any, hosts: str) -> None:
    """Expire ``client``'s ZooKeeper session now, as a server does when it stops hearing from a client (kazoo's own
    test harness trick: a second client on the same session id and password, closed)."""
    from kazoo.client import KazooClient

    session_id, password = client.client_id
    twin = KazooClient(hosts=hosts)
    twin._session_id, twin._session_passwd = session_id, password  # noqa: SLF001
    twin.start(timeout=10)
    twin.stop()
    twin.close()


@pytest.fixture
def zk(zk_url: str) -> Iterator[object]:
    """A started kazoo client rooted at the test's chroot."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zk_url[len("zk://"):])
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def make_sim(zk: object, tmp_path: Path) -> Iterator[Callable[..., object]]:
    """Factory: load a cluster into the test's chroot and start the simulated controller in a thread."""
    from rebalancer.sim.controller import SimulatedCluster
    from rebalancer.sim.kafka_listener import serve

    sims: list[SimulatedCluster] = []

    def factory(cluster, *, acceleration: float = 1.0, tick: float = 0.01, **kw) -> SimulatedCluster:
        sim = SimulatedCluster(zk, acceleration=acceleration, tick=tick, state_dir=tmp_path / "sim",
                               listener_factory=serve, **kw)
        sim.load(cluster)
        sims.append(sim.start())
        return sim

    yield factory
    for sim in sims:
        sim.stop()
        assert sim.error is None, f"simulated controller crashed: {sim.error!r}"


class AirflowStack:
    """The worker's one real Airflow stack (``airflow_support.Stack``), shared by its Airflow test files: started in a
    thread on first use, so that a file can start its Kafka cluster meanwhile (``start``, then ``result`` when it is
    needed), and stopped once the worker's Airflow files are done (``pytest_runtest_teardown``): an idle stack's
    scheduler and DAG processor would take CPU from the rest of the worker's tests. Asked again after that (a run that
    orders its files otherwise), it starts a new one."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._homes = tmp_path_factory
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="airflow-start")
        self._future: Any = None
        self._home: Path | None = None

    def start(self) -> AirflowStack:
        if self._future is None:
            from airflow_support import start_stack

            self._home = self._homes.mktemp("airflow")
            self._future = self._pool.submit(start_stack, self._home)
        return self

    def result(self, timeout: float | None = None) -> Any:
        """The started stack (``airflow_support.Stack``), waiting up to ``timeout`` seconds for it."""
        return self.start()._future.result(timeout=timeout)

    def stop(self) -> None:
        if self._future is None or self._home is None:
            return
        from airflow_support import airflow_local

        try:
            self._future.result(timeout=600)  # a stack still starting is stopped once its processes exist
        except BaseException:
            pass
        airflow_local.stop(self._home)
        self._future = self._home = None


_AIRFLOW_STACKS: list[AirflowStack] = []


@pytest.fixture(scope="session")
def airflow_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    """The worker's Airflow stack (``AirflowStack``), starting."""
    stack = AirflowStack(tmp_path_factory).start()
    _AIRFLOW_STACKS.append(stack)
    try:
        yield stack
    finally:
        stack.stop()
        _AIRFLOW_STACKS.remove(stack)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Once a worker moves from its Airflow files to another file (their tests are handed out together,
    ``AIRFLOW_FILES``), its Airflow stack stops: idle, the scheduler and the DAG processor would keep taking CPU from
    the worker's remaining tests until the session ends. (After the test's own teardown: the module's clusters and
    connections go first.)"""
    yield
    if nextitem is not None and file_of(item) in AIRFLOW_FILES and file_of(nextitem) not in AIRFLOW_FILES:
        for stack in _AIRFLOW_STACKS:
            stack.stop()


def run_cli(*args: str, timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real console entry point in a subprocess, as an operator would."""
    return subprocess.run(
        [sys.executable, "-m", "rebalancer", *args],
        capture_output=True, text=True, timeout=timeout, cwd=REPO, env={**os.environ, **(env or {})},
    )


# Fixtures that start real components: a test using one gets the component's marker (``scripts/test.sh --fast``
# deselects kafka, airflow and browser). Tests that start them otherwise carry the marker themselves.
COMPONENT_FIXTURES = {"kafka": "kafka", "real_kafka": "kafka", "stack": "airflow", "airflow_stack": "airflow"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Markers for the real components a test needs (the order and the workers' scopes: ``scheduling``)."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for fixture, marker in COMPONENT_FIXTURES.items():
            if fixture in names:
                item.add_marker(marker)
        callspec = getattr(item, "callspec", None)
        engine = callspec.params.get("engine") if callspec is not None else None
        if isinstance(engine, str) and engine.startswith("kafka-"):  # tests/engines.py: the real-Kafka engines
            item.add_marker("kafka")


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """On a failure in a test that used ZooKeeper, append the server log's tail to the report."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)  # fixtures read it to keep logs of a failed test
    if report.failed and os.environ.get("REBALANCER_TEST_FAILURES"):
        # Written as it happens (a long run cut short still tells what failed, and why).
        with open(os.environ["REBALANCER_TEST_FAILURES"], "a") as out:
            out.write(f"== {item.nodeid} ({report.when})\n{report.longreprtext[-4000:]}\n")
    if report.failed and "zk_server" in getattr(item, "fixturenames", ()):
        server = item.funcargs.get("zk_server") if hasattr(item, "funcargs") else None
        if server is not None and server.log_path.exists():
            tail = server.log_path.read_text(errors="replace").splitlines()[-30:]
            report.sections.append(("zookeeper log (tail)", "\n".join(tail)))
