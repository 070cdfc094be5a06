"""The Spark skew analysis against an independent pandas computation, and its one-line failures."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli

from rebalancer.analyze import load_job, run_analysis
from rebalancer.errors import InputError, SourceError
from rebalancer.formats import write_cluster_json
from rebalancer.model import Broker, Cluster, Partition
from rebalancer.plan import plan_run_dir
from rebalancer.sim.scenarios import ScenarioParams, build_scenario
from rebalancer.snapshot import take_snapshot
from rebalancer.zkserver import free_port


@pytest.fixture(scope="module")
def spark():
    import os

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("tests").config("spark.ui.enabled", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def make_run(tmp: Path, cluster: Cluster) -> Path:
    src = tmp / "cluster.json"
    write_cluster_json(cluster, src)
    take_snapshot(f"file://{src}", tmp / "run")
    return tmp / "run"


def degraded_cluster() -> Cluster:
    """Under-replicated partitions, a dead broker holding replicas, an empty broker, no racks on some."""
    brokers = [Broker(0, "a"), Broker(1, "b"), Broker(2, "a"), Broker(3, "b", alive=False), Broker(4, None)]
    parts = [
        Partition("orders", 0, (0, 1, 3), 0, (0, 1), 500),
        Partition("orders", 1, (1, 3, 0), 1, (1, 0), 700),
        Partition("orders", 2, (3, 0, 1), 0, (0, 1), 0),
        Partition("clicks", 0, (2, 1), 2, (2, 1), 10**9),
        Partition("clicks", 1, (2, 0), 2, (2,), 5),
    ]
    return Cluster.build(brokers, parts)


def expected(cluster: Cluster, assignment: dict | None = None, p95: dict | None = None) -> dict:
    """The analysis computed directly with pandas from the model (independent of the Spark code)."""
    rows = []
    for p in cluster.partitions:
        reps = (assignment or {}).get(p.tp, p.replicas)
        for pos, b in enumerate(reps):
            rows.append({"topic": p.topic, "partition": p.partition, "broker": b, "pos": pos, "size": p.size_bytes,
                         "in_isr": b in p.isr or (assignment is not None and p.tp in assignment),
                         "load": (p95 or {}).get(p.tp, 0.0)})
    df = pd.DataFrame(rows)
    ids = pd.DataFrame({"broker": [b.id for b in cluster.brokers], "rack": [b.rack for b in cluster.brokers]})
    g = df.groupby("broker").agg(replicas=("topic", "size"), leaders=("pos", lambda s: int((s == 0).sum())),
                                 bytes=("size", "sum"), bytes_in_p95=("load", "sum")).reset_index()
    per = ids.merge(g, on="broker", how="left").fillna({"replicas": 0, "leaders": 0, "bytes": 0, "bytes_in_p95": 0.0})
    per = per.astype({"replicas": int, "leaders": int, "bytes": int}).sort_values("broker")
    med = {k: statistics.median(per[k]) for k in ("replicas", "leaders", "bytes")}
    avg_leaders = per["leaders"].mean()
    tb = df.groupby(["topic", "broker"]).size().unstack(fill_value=0).reindex(columns=list(ids.broker), fill_value=0)
    skew = pd.DataFrame({"spread": tb.max(axis=1) - tb.min(axis=1),
                         "cv": tb.std(axis=1, ddof=0) / tb.mean(axis=1)})
    under = sorted({(p.topic, p.partition) for p in cluster.partitions if len(p.isr) < len(p.replicas)})
    return {"brokers": per, "median": med, "avg_leaders": avg_leaders, "skew": skew, "under": under}


def check(analysis_dir: Path, exp: dict, suffix: str = "") -> None:
    got = pd.DataFrame(json.loads((analysis_dir / f"brokers{suffix}.json").read_text()))
    e = exp["brokers"].reset_index(drop=True)
    assert list(got.broker) == list(e.broker)
    for col in ("replicas", "leaders", "bytes"):
        assert list(got[col]) == list(e[col]), col
        med = exp["median"][col]
        dev = [(v - med) / med * 100 if med else 0.0 for v in e[col]]
        assert np.allclose(got[f"dev_{col}_pct"].astype(float), dev, atol=1e-3), col
    assert np.allclose(got.bytes_in_p95, e.bytes_in_p95, rtol=1e-9)
    assert list(got.wix_underloaded) == [v < 0.5 * exp["median"]["replicas"] for v in e.replicas]
    assert list(got.pinterest_over) == [v > exp["avg_leaders"] for v in e.leaders]
    assert list(got.pinterest_under) == [v < exp["avg_leaders"] for v in e.leaders]
    skew = pd.DataFrame(json.loads((analysis_dir / f"topics_skew{suffix}.json").read_text())).set_index("topic")
    for topic, row in exp["skew"].iterrows():
        assert skew.loc[topic, "spread"] == row.spread
        assert skew.loc[topic, "cv"] == pytest.approx(row.cv, abs=1e-9)
    spreads = list(skew.spread)
    assert spreads == sorted(spreads, reverse=True)
    racks = json.loads((analysis_dir / f"racks{suffix}.json").read_text())
    assert sum(r["replicas"] for r in racks) == int(e.replicas.sum())


@pytest.mark.parametrize("case", ["new-brokers+plan", "pinterest", "degraded", "wix+plan"])
def test_spark_equals_pandas(spark, tmp_path: Path, case: str):
    cluster = {"new-brokers+plan": lambda: build_scenario("new-brokers"),
               "pinterest": lambda: build_scenario("pinterest"),
               "degraded": degraded_cluster,
               "wix+plan": lambda: build_scenario("wix", ScenarioParams(partitions=900))}[case]()
    run = make_run(tmp_path, cluster)
    plan = None
    if case == "new-brokers+plan":
        plan = plan_run_dir(run, "add-brokers", brokers=[12, 13, 14, 15])
    if case == "wix+plan":
        plan = plan_run_dir(run, "rebalance", strategy="greedy")
    summary = load_job().analyze(spark, str(run))
    exp = expected(cluster)
    check(run / "analysis", exp)
    before = summary["before"]
    assert before["replicas"] == cluster.replica_count and before["partitions"] == len(cluster.partitions)
    assert before["under_replicated_partitions"] == len(exp["under"])
    under = json.loads((run / "analysis" / "under_replicated.json").read_text())
    assert [(u["topic"], u["partition"]) for u in under] == exp["under"]
    if plan is None:
        assert summary["after"] is None and not (run / "analysis" / "brokers_after.json").exists()
    else:
        after = {c.tp if hasattr(c, "tp") else (c.topic, c.partition): c.replicas_after for c in plan.changes}
        check(run / "analysis", expected(cluster, after), "_after")
        # The plan's own prediction and Spark's after-table agree broker by broker.
        predicted = {b["broker"]: (b["replicas_after"], b["leaders_after"]) for b in plan.summary["brokers"]}
        got = {r["broker"]: (r["replicas"], r["leaders"]) for r in json.loads((run / "analysis" / "brokers_after.json").read_text())}
        assert got == predicted
        heat = json.loads((run / "analysis" / "topic_broker_top_after.json").read_text())
        assert heat["topics"] == json.loads((run / "analysis" / "topic_broker_top.json").read_text())["topics"]


def test_shuffles_are_sized_to_the_replica_rows_and_at_least_one_per_core(spark):
    job = load_job()
    try:
        assert job.size_shuffles(spark, 3_000_000) == 12 == int(spark.conf.get("spark.sql.shuffle.partitions"))
        assert job.size_shuffles(spark, 250_001) == 2
        assert job.size_shuffles(spark, 10) == 2 == int(spark.conf.get("spark.sql.shuffle.partitions"))
    finally:
        spark.conf.unset("spark.sql.shuffle.partitions")


def test_the_plan_analysis_keeps_the_before_tables_of_the_same_snapshot(spark, tmp_path: Path):
    """The runbook's analyze_plan follows analyze on the same snapshot: it computes the tables after the plan and
    keeps those before it; a snapshot whose bytes changed is analysed anew."""
    from dataclasses import replace

    cluster = build_scenario("new-brokers")
    run = make_run(tmp_path, cluster)
    job = load_job()
    first = job.analyze(spark, str(run))
    assert first["input"]["before_reused"] is False
    kept = {f.name: f.read_bytes() for f in (run / "analysis").glob("*.json") if f.name != "summary.json"}
    plan = plan_run_dir(run, "add-brokers", brokers=[12, 13, 14, 15])
    second = job.analyze(spark, str(run))
    assert second["input"]["before_reused"] is True and second["before"] == first["before"]
    assert {f.name: f.read_bytes() for f in (run / "analysis").glob("*.json") if f.name in kept} == kept
    assert (run / "analysis" / "brokers.parquet").is_dir() and (run / "analysis" / "under_replicated.parquet").is_dir()
    after = {c.tp if hasattr(c, "tp") else (c.topic, c.partition): c.replicas_after for c in plan.changes}
    check(run / "analysis", expected(cluster, after), "_after")
    check(run / "analysis", expected(cluster))
    # The same directory, another snapshot (one partition grew): nothing of the old analysis is kept.
    grown = Cluster.build(cluster.brokers, [replace(p, size_bytes=p.size_bytes * 10) if i == 0 else p
                                            for i, p in enumerate(cluster.partitions)])
    other = make_run(tmp_path / "grown", grown)
    for name in ("replicas.parquet", "brokers.parquet"):
        (run / name).write_bytes((other / name).read_bytes())
    third = job.analyze(spark, str(run))
    assert third["input"]["before_reused"] is False and third["before"]["bytes"] > first["before"]["bytes"]
    check(run / "analysis", expected(grown))
    check(run / "analysis", expected(grown, after), "_after")


def test_history_p95_per_partition(spark, tmp_path: Path):
    cluster = build_scenario("sqooba")
    run = make_run(tmp_path, cluster)
    rng = np.random.default_rng(7)
    rows = []
    for p in cluster.partitions:
        for t in range(40):
            rows.append({"topic": p.topic, "partition": p.partition, "timestamp": t,
                         "bytes_in_per_s": float(rng.integers(0, 10**6)), "bytes_out_per_s": float(rng.integers(0, 10**6))})
    hist = pd.DataFrame(rows)
    hist_path = tmp_path / "history.parquet"
    hist.to_parquet(hist_path)
    load_job().analyze(spark, str(run), str(hist_path))
    # Spark's percentile_approx is the smallest sample with at least 95% of samples at or below it.
    p95 = {k: float(np.percentile(g.bytes_in_per_s, 95, method="inverted_cdf"))
           for k, g in hist.groupby(["topic", "partition"])}
    check(run / "analysis", expected(cluster, p95=p95))
    load = pd.read_parquet(run / "analysis" / "partition_load.parquet")
    assert len(load) == len(cluster.partitions) and set(load.columns) >= {"bytes_in_p95", "bytes_out_p95", "samples"}


def test_missing_corrupt_and_unreachable_are_one_line_errors(tmp_path: Path):
    run = make_run(tmp_path, build_scenario("sqooba"))
    with pytest.raises(SourceError, match=r"Spark master spark://127.0.0.1:\d+ is unreachable"):
        run_analysis(run, master=f"spark://127.0.0.1:{free_port()}")
    with pytest.raises(InputError, match="no such history file"):
        run_analysis(run, history=str(tmp_path / "nope.parquet"))
    (run / "replicas.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(InputError, match="replicas.parquet: not a readable parquet file"):
        run_analysis(run)
    (run / "replicas.parquet").unlink()
    with pytest.raises(InputError, match="replicas.parquet: no replicas.parquet"):
        run_analysis(run)
    assert not (run / "analysis").exists()


def test_cli_analyze_through_spark_submit(tmp_path: Path):
    run = make_run(tmp_path, build_scenario("new-brokers"))
    bad = run_cli("analyze", str(run), "--master", f"spark://127.0.0.1:{free_port()}")
    assert bad.returncode == 4 and len(bad.stderr.strip().splitlines()) == 1 and "unreachable" in bad.stderr
    result = run_cli("analyze", str(run), "--master", "local[2]", timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((run / "analysis" / "summary.json").read_text())
    assert summary["spark"]["master"] == "local[2]" and summary["before"]["replicas"] == 1440
    assert summary["spark"]["shuffle_partitions"] == 2  # one per core: 1,440 rows are far below 250,000 a partition
    assert summary["before"]["wix_underloaded"] == [12, 13, 14, 15]
    assert "1440 replicas on 16 brokers" in result.stdout
