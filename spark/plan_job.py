"""The plan stage as a Spark application (issue 26): what the DAGs submit through the Spark provider (the
``spark_default`` connection, like the analysis) when the load placement is split in groups of topics.

    spark-submit --master MASTER spark/plan_job.py RUN_DIR --mode MODE [the options of ``rebalancer plan``]

The driver is ``rebalancer plan`` itself: it reads ``RUN_DIR/snapshot.json``, solves the cluster step, hands each
group of topics to this application's executors as a task (``rebalancer.plan.spark_tasks``: a pure function of
plain data), merges and repairs, and writes plan.json, reassignment.json and rollback.json into the run directory.
Its exit status is the CLI's; a failure's one-line error is also written to ``RUN_DIR/plan_error.txt``, where the
DAG's task reads it. The executors need the ``rebalancer`` package (on a Spark cluster: installed on the workers,
or shipped with ``--py-files``).
"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any


class _Tee(io.TextIOBase):
    """stderr as it was, and a copy of what went through it."""

    def __init__(self, out: Any) -> None:
        self.out, self.seen = out, io.StringIO()

    def write(self, text: str) -> int:
        self.seen.write(text)
        return int(self.out.write(text))

    def flush(self) -> None:
        self.out.flush()


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession

    # spark-submit has set the master and the configuration; the planner's session is this one.
    spark = SparkSession.builder.appName("kafka-rebalance-plan").getOrCreate()
    master = spark.sparkContext.master
    from rebalancer.cli import main as cli
    from rebalancer.rundir import PLAN_ERROR_FILE

    tee = _Tee(sys.stderr)
    sys.stderr = tee
    try:
        status = int(cli(["plan", *argv, "--master", master]))
    finally:
        sys.stderr = tee.out
    if status != 0 and argv and Path(argv[0]).is_dir():
        lines = [ln for ln in tee.seen.getvalue().splitlines() if ln.startswith("rebalancer: ")]
        (Path(argv[0]) / PLAN_ERROR_FILE).write_text((lines[-1] if lines else f"exit status {status}")
                                                     .removeprefix("rebalancer: error: ") + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
