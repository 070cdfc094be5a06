"""The split placement's groups as Spark tasks (issue 26): ``spark_map(master)`` gives a ``map`` for
``split.split_greedy`` that plans each ``GroupTask`` in a Spark task (one partition per group) and collects the
results in the driver. Each task is ``split.plan_group``, a pure function of its pickled plain data, so what runs on
an executor is exactly what runs in process.

The session is the same kind ``rebalancer analyze --in-process`` starts (``analyze._env``: the driver's Python for
the workers, the UI off); ``master`` is checked (reachable) before it starts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from .split import GroupTask

__all__ = ["spark_map"]


@contextmanager
def spark_map(master: str) -> Iterator[Callable[[Callable[[GroupTask], Any], Iterable[GroupTask]], list[Any]]]:
    from ..analyze import check_master, spark_env

    check_master(master)
    os.environ.update({k: v for k, v in spark_env(master).items() if k.startswith(("SPARK_", "PYSPARK_"))})
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(master).appName("kafka-rebalance-plan")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    def run(fn: Callable[[GroupTask], Any], tasks: Iterable[GroupTask]) -> list[Any]:
        items = list(tasks)
        if not items:
            return []
        return list(spark.sparkContext.parallelize(items, len(items)).map(fn).collect())

    try:
        yield run
    finally:
        spark.stop()
