# Spark standalone master/worker of docker-compose.yaml.
#
# Spark comes from the pyspark wheel pinned in constraints.txt (4.2.0), so the cluster runs exactly the Spark
# version of the driver (pyspark in the Airflow image) - no dependence on when an apache/spark image of that
# version is published. Python is 3.11 like the driver's: executors start Python workers (spark/skew_analysis.py
# builds a DataFrame from the plan with createDataFrame), and PySpark refuses a worker of another minor version.
FROM python:3.11.13-slim-bookworm

RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/*

COPY constraints.txt /tmp/constraints.txt
# spark-class/spark-submit from the wheel; SPARK_HOME is the installed pyspark package (jars/, bin/, python/lib/).
ENV SPARK_HOME=/usr/local/lib/python3.11/site-packages/pyspark
RUN pip install --no-cache-dir -c /tmp/constraints.txt pyspark \
    && rm /tmp/constraints.txt \
    && spark-class org.apache.spark.deploy.master.Master --help 2>&1 | grep -q -- "--webui-port"

# Same uid/gid as the Airflow image's "airflow" user: executors write into the run directory the Airflow driver
# created, and the driver renames what they wrote.
RUN useradd --uid 50000 --gid 0 --create-home --home-dir /home/spark spark \
    && mkdir -p /opt/airflow/rebalancer-runs /tmp/spark-work \
    && chown 50000:0 /opt/airflow/rebalancer-runs /tmp/spark-work

# Executors start Python workers with the driver's PYSPARK_PYTHON. The compose file sets the bare name python3.11,
# but a driver that passes its own sys.executable (the Airflow image's /home/airflow/.local/bin/python) must find
# an interpreter at that path here too.
RUN mkdir -p /home/airflow/.local/bin \
    && for name in python python3 python3.11; do ln -s /usr/local/bin/python3.11 "/home/airflow/.local/bin/$name"; done

USER 50000
WORKDIR /home/spark
ENV PYSPARK_PYTHON=python3.11
