"""Skew analysis of a Kafka cluster snapshot, as a PySpark job.

    spark-submit [--master URL] spark/skew_analysis.py --run-dir RUN_DIR [--history PATH]

Self-contained (pyspark and the standard library only, DataFrame API, no Python UDFs), so ``spark-submit`` can
ship it to any master; the ``rebalancer analyze`` command and the Airflow Spark provider both submit this file.

Reads ``RUN_DIR/replicas.parquet`` (one row per replica), ``RUN_DIR/brokers.parquet`` (every broker, empty ones
too), optionally a load-history parquet (``topic, partition, bytes_in_per_s[, bytes_out_per_s][, timestamp]``,
one row per sample) and, when present, ``RUN_DIR/plan.json``. Writes ``RUN_DIR/analysis/`` as described in
``docs/analysis-schema.md``: per-broker, per-rack and topic x broker tables, topics ranked by skew,
under-replicated partitions, per-partition p95 load, and ``summary.json``; with a plan, the same tables after it.

The heavy work (aggregating millions of replica rows) runs in Spark; per-broker results are a few thousand rows at
most and are finished on the driver (exact medians, deviations, flags). Output is written to a temporary
directory and renamed into place, so a failed run leaves the previous analysis intact.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

TOP_TOPICS_HEATMAP = 20
TOP_TOPICS_JSON = 50
UNDER_REPLICATED_JSON = 200
WIX_UNBALANCED_RATIO = 0.5
ROWS_PER_SHUFFLE_PARTITION = 250_000


def size_shuffles(spark: Any, rows: int) -> int:
    """The job's shuffle partitions, unless the submitter set ``spark.sql.shuffle.partitions``: about
    ``ROWS_PER_SHUFFLE_PARTITION`` replica rows each, at least one per core. Spark's default of 200 (or a fixed 16)
    made a small cluster's analysis spend its CPU on empty tasks; its cached tables keep their partitions, which
    adaptive execution does not coalesce (1,440 replicas on local[2], cold: 75 CPU-s at 200, 28 at 16, 23 at 2)."""
    if spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        return int(spark.conf.get("spark.sql.shuffle.partitions"))
    n = max(int(spark.sparkContext.defaultParallelism), math.ceil(rows / ROWS_PER_SHUFFLE_PARTITION))
    spark.conf.set("spark.sql.shuffle.partitions", str(n))
    return n


def _dev(value: float, median: float) -> float:
    if median == 0:
        return 0.0 if value == 0 else math.inf
    return round((value - median) / median * 100.0, 3)


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float) and math.isinf(obj):
        return "inf"
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_json_safe(v) for v in obj]
    return obj


def load_history(spark: Any, path: str) -> Any:
    """Per partition p95 (and max) of bytes-in/out per second over the history samples."""
    from pyspark.sql import functions as F

    hist = spark.read.parquet(path)
    missing = {"topic", "partition", "bytes_in_per_s"} - set(hist.columns)
    if missing:
        raise ValueError(f"history {path} lacks column(s) {', '.join(sorted(missing))}")
    aggs = [F.percentile_approx("bytes_in_per_s", 0.95, 10000).alias("bytes_in_p95"),
            F.max("bytes_in_per_s").alias("bytes_in_max"), F.count(F.lit(1)).alias("samples")]
    if "bytes_out_per_s" in hist.columns:
        aggs.append(F.percentile_approx("bytes_out_per_s", 0.95, 10000).alias("bytes_out_p95"))
    return hist.groupBy("topic", "partition").agg(*aggs)


def replicas_after_plan(spark: Any, reps: Any, brokers: Any, plan: dict[str, Any]) -> Any:
    """The replica rows as the plan leaves them: changed partitions get their new replica lists."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    rows = [(c["topic"], int(c["partition"]), int(b), i)
            for c in plan.get("changes", []) for i, b in enumerate(c["replicas_after"])]
    if not rows:
        return reps
    schema = T.StructType([T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()),
                           T.StructField("broker", T.IntegerType()), T.StructField("position", T.IntegerType())])
    new = spark.createDataFrame(rows, schema)
    changed = new.select("topic", "partition").distinct()
    per_partition = reps.groupBy("topic", "partition").agg(
        F.first("size_bytes").alias("size_bytes"), F.first("bytes_in_per_s").alias("bytes_in_per_s"))
    racks = brokers.select(F.col("broker").cast("int").alias("broker"), "rack")
    new_rows = (new.join(per_partition, ["topic", "partition"], "left").join(racks, "broker", "left")
                .withColumn("position", F.col("position").cast("short"))
                .withColumn("is_leader", F.col("position") == 0)
                .withColumn("in_isr", F.lit(True)))
    kept = reps.join(changed, ["topic", "partition"], "left_anti")
    return kept.unionByName(new_rows.select(*reps.columns))


def tables(spark: Any, reps: Any, brokers: Any, load: Any | None) -> dict[str, Any]:
    """Spark DataFrames for one state of the cluster (before or after)."""
    from pyspark.sql import functions as F

    pref = (F.col("position") == 0).cast("int")
    if load is not None:
        reps = reps.join(load.select("topic", "partition", "bytes_in_p95"), ["topic", "partition"], "left")
    else:
        reps = reps.withColumn("bytes_in_p95", F.lit(0.0))
    per_broker = reps.groupBy("broker").agg(
        F.count(F.lit(1)).alias("replicas"), F.sum(pref).alias("leaders"), F.sum("size_bytes").alias("bytes"),
        F.sum(F.coalesce("bytes_in_p95", F.lit(0.0))).alias("bytes_in_p95"))
    per_broker = (brokers.select(F.col("broker").cast("int").alias("broker"), "rack", "alive")
                  .join(per_broker, "broker", "left").fillna(0, ["replicas", "leaders", "bytes"])
                  .fillna(0.0, ["bytes_in_p95"]))
    topic_broker = reps.groupBy("topic", "broker").agg(F.count(F.lit(1)).alias("replicas"),
                                                       F.sum(pref).alias("leaders"))
    n_brokers = brokers.count()
    topic_stats = topic_broker.groupBy("topic").agg(
        F.sum("replicas").alias("replicas"), F.count(F.lit(1)).alias("brokers_hosting"),
        F.max("replicas").alias("max_replicas"), F.min("replicas").alias("min_hosting"),
        F.sum(F.col("replicas") * F.col("replicas")).alias("sum_sq"),
        F.max("leaders").alias("max_leaders"), F.min("leaders").alias("min_leaders_hosting"))
    partitions = reps.groupBy("topic").agg(F.countDistinct("partition").alias("partitions"))
    b = F.lit(n_brokers)
    mean = F.col("replicas") / b
    topics_skew = (topic_stats.join(partitions, "topic")
                   .withColumn("min_replicas", F.when(F.col("brokers_hosting") < b, F.lit(0)).otherwise(F.col("min_hosting")))
                   .withColumn("spread", F.col("max_replicas") - F.col("min_replicas"))
                   .withColumn("cv", F.when(mean > 0, F.sqrt(F.greatest(F.col("sum_sq") / b - mean * mean, F.lit(0.0))) / mean)
                               .otherwise(F.lit(0.0)))
                   .withColumn("leader_spread", F.col("max_leaders") - F.when(F.col("brokers_hosting") < b, F.lit(0))
                               .otherwise(F.col("min_leaders_hosting")))
                   .select("topic", "partitions", "replicas", "brokers_hosting", "min_replicas", "max_replicas",
                           "spread", "cv", "leader_spread")
                   .orderBy(F.desc("spread"), F.desc("cv"), "topic"))
    return {"brokers": per_broker, "topic_broker": topic_broker, "topics_skew": topics_skew}


def finish_brokers(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Exact medians, deviations and the Wix/Pinterest flags on the (small) per-broker table."""
    rows = sorted(rows, key=lambda r: r["broker"])
    med = {k: statistics.median([r[k] for r in rows]) if rows else 0 for k in ("replicas", "leaders", "bytes")}
    avg_leaders = sum(r["leaders"] for r in rows) / len(rows) if rows else 0.0
    out = []
    for r in rows:
        out.append({
            "broker": int(r["broker"]), "rack": r["rack"], "replicas": int(r["replicas"]), "leaders": int(r["leaders"]),
            "bytes": int(r["bytes"]), "bytes_in_p95": float(r["bytes_in_p95"]),
            "dev_replicas_pct": _dev(r["replicas"], med["replicas"]), "dev_leaders_pct": _dev(r["leaders"], med["leaders"]),
            "dev_bytes_pct": _dev(r["bytes"], med["bytes"]),
            "wix_underloaded": r["replicas"] < WIX_UNBALANCED_RATIO * med["replicas"],
            "pinterest_over": r["leaders"] > avg_leaders, "pinterest_under": r["leaders"] < avg_leaders,
        })
    return out, med


def racks_of(brokers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    agg: dict[Any, dict[str, Any]] = {}
    for r in brokers:
        a = agg.setdefault(r["rack"], {"rack": r["rack"], "brokers": 0, "replicas": 0, "leaders": 0, "bytes": 0})
        a["brokers"] += 1
        a["replicas"] += r["replicas"]
        a["leaders"] += r["leaders"]
        a["bytes"] += r["bytes"]
    return sorted(agg.values(), key=lambda a: (a["rack"] is None, a["rack"] or ""))


def heatmap(topic_broker_rows: list[Any], topics: list[str], broker_ids: list[int]) -> dict[str, Any]:
    index = {t: i for i, t in enumerate(topics)}
    col = {b: j for j, b in enumerate(broker_ids)}
    reps = [[0] * len(broker_ids) for _ in topics]
    leads = [[0] * len(broker_ids) for _ in topics]
    for r in topic_broker_rows:
        i, j = index.get(r["topic"]), col.get(r["broker"])
        if i is not None and j is not None:
            reps[i][j] = int(r["replicas"])
            leads[i][j] = int(r["leaders"])
    return {"topics": topics, "brokers": broker_ids, "replicas": reps, "leaders": leads}


def headline(brokers: list[dict[str, Any]], med: dict[str, Any], n: dict[str, int], under_replicated: int,
             skew_top: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        **n,
        "brokers": len(brokers),
        "racks": len({r["rack"] for r in brokers if r["rack"] is not None}),
        "median": med,
        "max_abs_deviation_pct": {k: max((abs(r[f"dev_{k}_pct"]) for r in brokers), default=0.0)
                                  for k in ("replicas", "leaders", "bytes")},
        "wix_underloaded": [r["broker"] for r in brokers if r["wix_underloaded"]],
        "pinterest_over": [r["broker"] for r in brokers if r["pinterest_over"]],
        "pinterest_under": [r["broker"] for r in brokers if r["pinterest_under"]],
        "under_replicated_partitions": under_replicated,
        "worst_topics": [{"topic": t["topic"], "spread": t["spread"], "cv": round(t["cv"], 4)} for t in skew_top[:10]],
    }


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(_json_safe(obj), indent=1) + "\n")


def _files(path: Path) -> list[Path]:
    """A parquet input's files: the file itself, or every file of its directory in name order."""
    return [f for f in (sorted(path.rglob("*")) if path.is_dir() else [path]) if f.is_file()]


def input_key(run: Path, history: str | None) -> str:
    """What the "before" tables are a function of: the snapshot's replica and broker files (their bytes) and the
    load history (its files' names, sizes and modification times: it may be large)."""
    h = hashlib.sha256()
    for name in ("replicas.parquet", "brokers.parquet"):
        for f in _files(run / name):
            h.update(f.name.encode() + b"\0")
            with f.open("rb") as fh:
                while chunk := fh.read(1 << 20):
                    h.update(chunk)
    if history:
        h.update(str(Path(history).resolve()).encode() + b"\0")
        for f in _files(Path(history)):
            st = f.stat()
            h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}\0".encode())
    return h.hexdigest()


def reusable_before(out: Path, key: str) -> dict[str, Any] | None:
    """The "before" headline of the analysis already in ``out`` when it was made from the same inputs (the runbook's
    analyze_plan follows analyze on the same snapshot), else None."""
    try:
        previous = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(previous, dict) or previous.get("input", {}).get("key") != key:
        return None
    before = previous.get("before")
    return before if isinstance(before, dict) else None


def _state_tables(spark: Any, tmp: Path, state: str, frame: Any, brokers: Any, load: Any | None,
                  n: dict[str, int], under_count: int, heat_topics: list[str],
                  broker_ids: list[int]) -> tuple[dict[str, Any], list[str]]:
    """Write one state's tables (before, or after with the ``_after`` suffix); its headline and the heat map's
    topics (chosen before the plan, kept after it)."""
    from pyspark.sql import functions as F

    suffix = "" if state == "before" else "_after"
    t = {name: df.cache() for name, df in tables(spark, frame, brokers, load).items()}
    try:
        for name in ("brokers", "topic_broker", "topics_skew"):
            t[name].write.mode("overwrite").parquet(str(tmp / f"{name}{suffix}.parquet"))
        broker_rows, med = finish_brokers([r.asDict() for r in t["brokers"].collect()])
        skew_top = [r.asDict() for r in t["topics_skew"].limit(TOP_TOPICS_JSON).collect()]
        if state == "before":
            heat_topics = [r["topic"] for r in skew_top[:TOP_TOPICS_HEATMAP]]
        tb_rows = t["topic_broker"].where(F.col("topic").isin(heat_topics)).collect() if heat_topics else []
    finally:
        for df in t.values():
            df.unpersist()
    _write_json(tmp / f"brokers{suffix}.json", broker_rows)
    _write_json(tmp / f"racks{suffix}.json", racks_of(broker_rows))
    _write_json(tmp / f"topics_skew{suffix}.json", skew_top)
    _write_json(tmp / f"topic_broker_top{suffix}.json", heatmap(tb_rows, heat_topics, broker_ids))
    return headline(broker_rows, med, n, under_count, skew_top), heat_topics


def analyze(spark: Any, run_dir: str, history: str | None = None) -> dict[str, Any]:
    """Run the whole analysis on ``run_dir`` with an existing SparkSession; returns summary.json's content.

    With a plan, the "before" tables of an analysis already in ``RUN_DIR/analysis`` are kept when that analysis was
    made from the same snapshot and history (``input.key``): only the "after" tables are computed."""
    from pyspark.sql import functions as F

    started = time.monotonic()
    run = Path(run_dir)
    out = run / "analysis"
    tmp = run / ".analysis.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        plan_path = run / "plan.json"
        plan = json.loads(plan_path.read_text()) if plan_path.exists() else None
        key = input_key(run, history)
        before = reusable_before(out, key) if plan is not None else None
        reused = before is not None
        reps = spark.read.parquet(str(run / "replicas.parquet")).cache()
        brokers = spark.read.parquet(str(run / "brokers.parquet")).cache()
        shuffles = size_shuffles(spark, reps.count())
        if before is not None:
            for f in out.iterdir():
                if "_after" not in f.name and f.name != "summary.json":
                    (shutil.copytree if f.is_dir() else shutil.copy2)(f, tmp / f.name)
            load = spark.read.parquet(str(tmp / "partition_load.parquet")) if history else None
            n = {k: int(before[k]) for k in ("topics", "partitions", "replicas", "bytes")}
            under_count = int(before["under_replicated_partitions"])
            top = json.loads((tmp / "topic_broker_top.json").read_text())
            heat_topics, broker_ids = list(top["topics"]), [int(b) for b in top["brokers"]]
        else:
            load = None
            if history:
                load = load_history(spark, history).cache()
                load.write.mode("overwrite").parquet(str(tmp / "partition_load.parquet"))
            counts = reps.agg(F.count(F.lit(1)).alias("replicas"), F.countDistinct("topic").alias("topics"),
                              F.countDistinct("topic", "partition").alias("partitions"),
                              F.sum("size_bytes").alias("bytes")).first()  # stored bytes, all replicas
            n = {"topics": int(counts["topics"]), "partitions": int(counts["partitions"]),
                 "replicas": int(counts["replicas"]), "bytes": int(counts["bytes"] or 0)}
            under = (reps.groupBy("topic", "partition")
                     .agg(F.count(F.lit(1)).alias("replicas"), F.sum(F.col("in_isr").cast("int")).alias("isr"))
                     .where(F.col("isr") < F.col("replicas")).orderBy("topic", "partition")).cache()
            under.write.mode("overwrite").parquet(str(tmp / "under_replicated.parquet"))
            under_rows = [r.asDict() for r in under.limit(UNDER_REPLICATED_JSON).collect()]
            under_count = under.count()
            under.unpersist()
            _write_json(tmp / "under_replicated.json", under_rows)
            broker_ids = sorted(int(r["broker"]) for r in brokers.select("broker").collect())
            before, heat_topics = _state_tables(spark, tmp, "before", reps, brokers, load, n, under_count, [],
                                                broker_ids)
        after = None
        if plan is not None:
            after, _ = _state_tables(spark, tmp, "after", replicas_after_plan(spark, reps, brokers, plan), brokers,
                                     load, n, under_count, heat_topics, broker_ids)
        result = {
            "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "spark": {"master": spark.sparkContext.master, "version": spark.version,
                      "seconds": round(time.monotonic() - started, 3), "shuffle_partitions": shuffles},
            "input": {"replica_rows": n["replicas"], "history": history, "plan": plan is not None, "key": key,
                      "before_reused": reused},
            "before": before,
            "after": after,
        }
        _write_json(tmp / "summary.json", result)
        reps.unpersist()
        brokers.unpersist()
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # a failed analysis leaves nothing behind, not half a directory
        raise
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="skew_analysis.py", description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--history", help="load-history parquet (topic, partition, bytes_in_per_s[, bytes_out_per_s])")
    ap.add_argument("--master", help="only when run with plain python (spark-submit passes its own --master)")
    args = ap.parse_args(argv)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("kafka-skew-analysis")
    if args.master:
        builder = builder.master(args.master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        result = analyze(spark, args.run_dir, args.history)
    finally:
        spark.stop()
    before = result["before"]
    print(f"analysed {before['replicas']} replicas on {before['brokers']} brokers in {result['spark']['seconds']:.1f} s: "
          f"max deviation from median {before['max_abs_deviation_pct']['replicas']:.1f}% (replicas)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
