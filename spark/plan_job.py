"""The plan stage as a Spark application (issue 26): what the DAGs submit through the Spark provider (the
``spark_default`` connection, like the analysis) when the load placement is split in groups of topics.

    spark-submit --master MASTER spark/plan_job.py RUN_DIR --mode MODE [the options of ``rebalancer plan``]

The driver is ``rebalancer plan`` itself: it reads ``RUN_DIR/snapshot.json``, solves the cluster step, hands each
group of topics to this application's executors as a task (``rebalancer.plan.spark_tasks``: a pure function of
plain data), merges and repairs, and writes plan.json, reassignment.json and rollback.json into the run directory.
Its exit status is the CLI's; a failure is also recorded in ``RUN_DIR/plan_error.json`` (``rebalancer.errors``'
record: the error's class, exit code and one line), where the DAG's task reads it. The executors need the ``rebalancer`` package (on a Spark cluster: installed on the workers,
or shipped with ``--py-files``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession

    # spark-submit has set the master and the configuration; the planner's session is this one.
    spark = SparkSession.builder.appName("kafka-rebalance-plan").getOrCreate()
    master = spark.sparkContext.master
    from rebalancer.cli import main as cli
    from rebalancer.errors import ERROR_RECORD_ENV
    from rebalancer.rundir import PLAN_ERROR_FILE

    if argv and Path(argv[0]).is_dir():
        os.environ[ERROR_RECORD_ENV] = str(Path(argv[0]) / PLAN_ERROR_FILE)  # the CLI records how it failed there
    return int(cli(["plan", *argv, "--master", master]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
