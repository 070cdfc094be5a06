"""Build-time smoke check of the Airflow image (docker/Dockerfile): fail the build, not the first DAG run.

Checks what the compose stack relies on: one pyspark version (pyspark and pyspark-client ship the same package and
silently mix files otherwise), the editable install that makes rebalancer.analyze.JOB the mounted spark/ job, the
spark-submit the analysis stage calls, Java, the Postgres driver and the Airflow providers the DAGs use.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import shutil
import subprocess
import sys
from pathlib import Path

problems: list[str] = []

versions = {name: md.version(name) for name in ("pyspark", "pyspark-client")}
if len(set(versions.values())) != 1:
    problems.append(f"pyspark and pyspark-client differ: {versions}")
import pyspark  # noqa: E402

if pyspark.__version__ != versions["pyspark"]:
    problems.append(f"pyspark package is {pyspark.__version__}, distribution {versions['pyspark']} (mixed files)")

from rebalancer import analyze  # noqa: E402

if analyze.JOB != Path("/opt/airflow/spark/skew_analysis.py") or not analyze.JOB.is_file():
    problems.append(f"rebalancer.analyze.JOB is {analyze.JOB}, expected /opt/airflow/spark/skew_analysis.py")
if not (Path(sys.executable).parent / "spark-submit").is_file():
    problems.append(f"no spark-submit beside {sys.executable}")
if shutil.which("java") is None:
    problems.append("java is not on PATH")
else:
    out = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    if '"17.' not in out:
        problems.append(f"java is not 17: {out.splitlines()[:1]}")

for module in ("psycopg2", "kazoo", "kafka", "networkx", "pulp", "highspy", "great_expectations",
               "airflow.providers.apache.spark.hooks.spark_submit", "airflow.providers.standard.operators.hitl"):
    try:
        importlib.import_module(module)
    except Exception as exc:  # report every missing piece at once
        problems.append(f"import {module}: {type(exc).__name__}: {exc}")

if problems:
    print("image check failed:\n  " + "\n  ".join(problems), file=sys.stderr)
    sys.exit(1)
print(f"image check ok: pyspark {versions['pyspark']}, job {analyze.JOB}")
