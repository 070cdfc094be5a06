"""The analysis stage: run ``spark/skew_analysis.py`` on a run directory, via spark-submit or in-process.

Inputs are checked before Spark starts, so a missing or corrupt parquet, a bad history file or an unreachable
``spark://`` master is a one-line ``InputError``/``SourceError``, not a JVM stack trace. The job itself imports
nothing from this package, so it can be submitted to any master.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import InputError, SourceError
from .rundir import RunDir

__all__ = ["JOB", "check_inputs", "check_master", "run_analysis", "load_job"]

JOB = Path(__file__).resolve().parent.parent / "spark" / "skew_analysis.py"
REPLICA_COLUMNS = {"topic", "partition", "broker", "position", "is_leader", "in_isr", "size_bytes", "rack"}
BROKER_COLUMNS = {"broker", "rack", "alive"}
HISTORY_COLUMNS = {"topic", "partition", "bytes_in_per_s"}


def _parquet_columns(path: Path, what: str) -> set[str]:
    import pyarrow.parquet as pq

    if not path.exists():
        raise InputError(f"{path}: no {what} (run 'rebalancer snapshot' first)" if what != "history" else f"{path}: no such history file")
    try:
        return set(pq.read_schema(path).names) if path.is_file() else set(pq.ParquetDataset(path).schema.names)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise InputError(f"{path}: not a readable parquet file ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})") from None


def check_inputs(run_dir: str | Path, history: str | None = None) -> None:
    run = Path(run_dir)
    if not run.is_dir():
        raise InputError(f"{run}: no such run directory")
    for path, required in ((RunDir(run).replicas, REPLICA_COLUMNS), (RunDir(run).brokers, BROKER_COLUMNS)):
        cols = _parquet_columns(path, path.name)
        missing = required - cols
        if missing:
            raise InputError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    if history:
        missing = HISTORY_COLUMNS - _parquet_columns(Path(history), "history")
        if missing:
            raise InputError(f"{history}: history lacks column(s) {', '.join(sorted(missing))}")
    plan = RunDir(run).plan
    if plan.exists():
        try:
            json.loads(plan.read_text())
        except (OSError, ValueError) as exc:
            raise InputError(f"{plan}: malformed JSON ({exc})") from None


LOCAL_MASTER = re.compile(r"local(\[(\*|[1-9][0-9]{0,3})(,[0-9]{1,3})?\])?")  # local, local[N], local[*], local[N,F]


def check_master(master: str, timeout: float = 3.0) -> None:
    """A Spark master as Spark accepts it (``local``, ``local[N]`` with N > 0, ``local[*]``, ``local[N,F]``,
    ``spark://host:port[,host:port]``, ``yarn``, ``k8s://...``), else a one-line ``InputError`` before anything is
    submitted; a ``spark://`` master must accept a TCP connection."""
    if not master.startswith("spark://"):
        if LOCAL_MASTER.fullmatch(master) or master == "yarn" or (master.startswith("k8s://") and len(master) > 6):
            return
        raise InputError(f"unknown Spark master {master!r}: local, local[N] with N > 0, local[*], spark://HOST:PORT, "
                         "yarn or k8s://...")
    for hp in master[len("spark://"):].split(","):
        host, _, port = hp.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except (OSError, ValueError):
            continue
    raise SourceError(f"Spark master {master} is unreachable (no answer within {timeout:g} s)")


def spark_env(master: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no host-name lookups for a local run
    return env


def load_job() -> ModuleType:
    spec = importlib.util.spec_from_file_location("skew_analysis", JOB)
    if spec is None or spec.loader is None:
        raise InputError(f"{JOB}: the Spark job is missing")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_analysis(run_dir: str | Path, *, master: str = "local[*]", history: str | None = None,
                 in_process: bool = False, spark: Any = None) -> dict[str, Any]:
    """Analyse ``run_dir``; returns the content of ``analysis/summary.json``."""
    check_inputs(run_dir, history)
    check_master(master)
    run = Path(run_dir)
    if in_process or spark is not None:
        job = load_job()
        own = spark is None
        if own:
            os.environ.update({k: v for k, v in spark_env(master).items() if k.startswith(("SPARK_", "PYSPARK_"))})
            from pyspark.sql import SparkSession

            spark = (SparkSession.builder.master(master).appName("kafka-skew-analysis")
                     .config("spark.ui.enabled", "false").getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
        try:
            return dict(job.analyze(spark, str(run), history))
        finally:
            if own:
                spark.stop()
    submit = Path(sys.executable).parent / "spark-submit"
    cmd = [str(submit), "--master", master, "--conf", "spark.ui.enabled=false", str(JOB), "--run-dir", str(run)]
    if history:
        cmd += ["--history", str(history)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=spark_env(master))
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith((" ", "\t"))]
        errors = [ln for ln in lines if "Error" in ln or "Exception" in ln] or lines or ["(no output)"]
        raise SourceError(f"spark-submit failed (exit {proc.returncode}): {errors[-1][:300]}")
    try:
        return dict(json.loads(RunDir(run).analysis_summary.read_text()))
    except (OSError, ValueError) as exc:
        raise SourceError(f"the Spark job finished without a readable analysis/summary.json ({exc})") from None
