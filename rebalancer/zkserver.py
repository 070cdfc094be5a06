"""A real ZooKeeper server process for the simulated cluster, the demo and the tests.

The server comes from the ZooKeeper jars shipped inside the pyspark wheel (``pyspark/jars/zookeeper-*.jar``), or
from Debian's ``zookeeper`` package when installed. It runs ``ZooKeeperServerMain`` with a generated ``zoo.cfg``
(admin HTTP server off, four-letter words ``ruok``/``srvr``/``mntr`` on) and is ready when it answers ``imok``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

from .errors import SimulationError
from .retry import poll

__all__ = ["find_classpath", "free_port", "four_letter", "ZooKeeperServer"]


def find_classpath() -> str:
    """Java classpath holding ZooKeeper's server; pyspark's jars first, then Debian's package."""
    try:
        import pyspark

        jars = Path(pyspark.__file__).parent / "jars"
        if any(jars.glob("zookeeper-*.jar")):
            return f"{jars}/*"
    except ImportError:
        pass
    debian = Path("/usr/share/java/zookeeper.jar")
    if debian.exists():
        return ":".join(str(p) for p in [debian, *Path("/usr/share/java").glob("*.jar")])
    raise SimulationError("no ZooKeeper jars found: install pyspark (it ships them) or Debian's 'zookeeper' package")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def four_letter(host: str, port: int, word: str = "ruok", timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter word; returns the answer, '' when nothing answers."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while True:
                data = s.recv(4096)
                if not data:
                    break
                chunks.append(data)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


PORT_ATTEMPTS = 3


class _PortTaken(Exception):
    """ZooKeeper exited because its port was bound by another process."""


class ZooKeeperServer:
    """One standalone ZooKeeper server on 127.0.0.1 with its data in ``data_dir``.

    ``tick_ms`` sets the session-timeout range (2 to 20 ticks); tests use a short tick so that session expiry
    can be provoked quickly.
    """

    def __init__(self, data_dir: str | os.PathLike[str], *, port: int | None = None, tick_ms: int = 2000,
                 host: str = "127.0.0.1", heap_mb: int = 256) -> None:
        self.data_dir = Path(data_dir)
        self._chosen_port = port is None  # picked here: another process may bind it first, then pick again
        self.port = port or free_port(host)
        self.host = host
        self.tick_ms = tick_ms
        self.heap_mb = heap_mb
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    def command(self) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise SimulationError("java not found on PATH: ZooKeeper needs Java 17 (apt-get install openjdk-17-jre-headless)")
        cfg = self.data_dir / "zoo.cfg"
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        cfg.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_ms}",
                    f"dataDir={self.data_dir / 'data'}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    "maxClientCnxns=0",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,mntr,stat,cons",
                    "autopurge.purgeInterval=1",
                    "",
                ]
            )
        )
        return [
            java,
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseSerialGC",
            "-Dzookeeper.admin.enableServer=false",
            "-Dlog4j2.level=WARN",
            "-cp",
            find_classpath(),
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(cfg),
        ]

    def start(self, timeout: float = 60.0, *, detach: bool = False) -> ZooKeeperServer:
        """Start the server and wait until it answers ``imok``; on failure the log's tail is in the error. A port
        picked here is only free when picked: if another process binds it first, start again on a new one."""
        for attempt in range(PORT_ATTEMPTS):
            try:
                return self._start_once(timeout, detach=detach)
            except _PortTaken:
                if not self._chosen_port or attempt == PORT_ATTEMPTS - 1:
                    raise SimulationError(f"ZooKeeper could not bind port {self.port}: address already in use") from None
                self.port = free_port(self.host)
        raise AssertionError("unreachable")

    def _start_once(self, timeout: float, *, detach: bool) -> ZooKeeperServer:
        if four_letter(self.host, self.port) == "imok":
            raise SimulationError(f"port {self.port} already has a ZooKeeper server")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = self.command()
        log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as logf:
            self.process = subprocess.Popen(
                cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=detach
            )
        process = self.process

        def answers() -> bool:
            if process.poll() is not None:  # exited: no use waiting (raised through the poll)
                tail = self._log_tail(log_start)
                if "BindException" in tail:
                    raise _PortTaken
                raise SimulationError(f"ZooKeeper exited with code {process.returncode}: {tail}")
            return four_letter(self.host, self.port, timeout=0.5) == "imok"

        if poll(answers, bool, timeout=timeout, interval=0.1)[1]:
            return self
        self.stop()
        raise SimulationError(f"ZooKeeper did not answer on {self.hosts} within {timeout:g} s: {self._log_tail(log_start)}")

    def _log_tail(self, start: int = 0) -> str:
        """The line that says why this start failed: the last exception (log4j's closing "Exiting JVM" line says
        nothing), else the last error, else the last line, from byte ``start`` of the log on."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(start)
                lines = [ln for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return "(no log)"
        exceptions = [ln for ln in lines if "Exception" in ln and not ln.lstrip().startswith("at ")]
        errors = [ln for ln in lines if "ERROR" in ln]
        return (exceptions or errors or lines or ["(empty log)"])[-1].strip()[:300]

    def stop(self, timeout: float = 10.0) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
