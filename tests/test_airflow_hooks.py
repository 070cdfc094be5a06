"""The connection hooks (plugins/rebalancer_airflow/hooks.py): Airflow connections -> the library's source
arguments. Run in a fresh interpreter with connections from AIRFLOW_CONN_* variables (no database needed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO

PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from rebalancer_airflow.hooks import ZooKeeperHook, KafkaClusterHook, cluster_source
from rebalancer.zkclient import parse_zk_url
out = {}
zk = ZooKeeperHook("zk_auth")
source, sizes = zk.get_source()
t = parse_zk_url(source)
out["zk"] = {"sizes": sizes, "hosts": t.hosts, "chroot": t.chroot, "auth": list(t.auth), "describe": zk.describe()}
out["zk_plain"] = cluster_source({"backend": "zookeeper", "zookeeper_conn_id": "zk_plain"})
out["kafka"] = cluster_source({"backend": "kafka", "kafka_conn_id": "kafka_sasl"})
from rebalancer.errors import InputError
try:
    KafkaClusterHook("kafka_bad").get_source()
except InputError as exc:
    out["bad"] = str(exc)
print(json.dumps(out))
"""


def test_hooks_build_sources_without_leaking_secrets(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin", "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_ZK_AUTH": json.dumps({"conn_type": "zookeeper", "host": "zk1:2181,zk2:2181", "schema": "kafka",
                                            "login": "ops", "password": "s3cr@t/pw",
                                            "extra": {"sizes": "file:///data/log-dirs.json"}}),
        "AIRFLOW_CONN_ZK_PLAIN": json.dumps({"conn_type": "zookeeper", "host": "zk1", "port": 2181,
                                             "extra": {"capacity": "/etc/kafka/capacity.json"}}),
        "AIRFLOW_CONN_KAFKA_SASL": json.dumps({"conn_type": "kafka", "host": "b1:9093,b2:9093", "login": "svc",
                                               "password": "kafka-pw", "extra": {"security_protocol": "SASL_SSL",
                                                                                 "sasl_mechanism": "PLAIN",
                                                                                 "ssl_cafile": "/etc/ca.pem"}}),
        "AIRFLOW_CONN_KAFKA_BAD": json.dumps({"conn_type": "kafka", "host": "b1:9092", "extra": {"sasl_passwd": "x"}}),
    }
    proc = subprocess.run([sys.executable, "-c", PROBE, str(REPO / "plugins")], capture_output=True, text=True,
                          env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # ZooKeeper: hosts, chroot from the schema, digest credentials that survive URL quoting, sizes from the extra.
    assert out["zk"] == {"sizes": "file:///data/log-dirs.json", "hosts": "zk1:2181,zk2:2181", "chroot": "/kafka",
                         "auth": ["ops", "s3cr@t/pw"], "describe": "zk://zk1:2181,zk2:2181/kafka"}
    # The broker capacity file for plans on load (issue 13) comes from the connection's extra too.
    assert out["zk_plain"] == {"source": "zk://zk1:2181", "sizes": None, "kafka_config": None,
                               "display": "zk://zk1:2181", "capacity": "/etc/kafka/capacity.json"}
    # Kafka: bootstrap servers, kafka-python security settings, login/password as the SASL credentials.
    assert out["kafka"] == {"source": "kafka://b1:9093,b2:9093", "sizes": None, "display": "kafka://b1:9093,b2:9093",
                            "capacity": None,
                            "kafka_config": {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
                                             "ssl_cafile": "/etc/ca.pem", "sasl_plain_username": "svc",
                                             "sasl_plain_password": "kafka-pw"}}
    assert "unknown extra key(s) sasl_passwd" in out["bad"]
    # Nothing printed the secrets.
    for secret in ("s3cr@t/pw", "s3cr%40t%2Fpw", "kafka-pw"):
        assert secret not in proc.stderr


BAD_PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from rebalancer_airflow.hooks import cluster_source
from rebalancer_airflow.runbook_dag import one_line_errors
from rebalancer.errors import InputError
out = {}
for name, params in json.loads(sys.argv[2]).items():
    try:
        cluster_source(params)
        out[name] = "accepted"
    except InputError as exc:
        out[name] = str(exc)
    except Exception as exc:
        out[name] = f"RAW {type(exc).__name__}: {exc}"
try:
    one_line_errors(lambda: cluster_source({"backend": "kafka", "kafka_conn_id": "nowhere"}))()
except Exception as exc:
    out["task"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def test_bad_connections_are_one_line_input_errors(tmp_path: Path) -> None:
    """A missing or unusable connection is a named one-line error (InputError, a failed task), never a ValueError
    or an Airflow traceback from the hook."""
    env = {
        "PATH": "/usr/bin:/bin", "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_ZK_NOHOST": json.dumps({"conn_type": "zookeeper", "schema": "kafka"}),
        "AIRFLOW_CONN_ZK_EXTRA": json.dumps({"conn_type": "zookeeper", "host": "zk1:2181", "extra": {"size": "x"}}),
        "AIRFLOW_CONN_KAFKA_LIST": json.dumps({"conn_type": "kafka", "host": "b1:9092", "extra": "[1, 2]"}),
        "AIRFLOW_CONN_KAFKA_BROKEN": json.dumps({"conn_type": "kafka", "host": "b1:9092", "extra": "{not json"}),
        "AIRFLOW_CONN_KAFKA_BAD": json.dumps({"conn_type": "kafka", "host": "b1:9092", "extra": {"sasl_passwd": "x"}}),
    }
    cases = {
        "missing": {"backend": "zookeeper", "zookeeper_conn_id": "no_such_conn"},
        "no_host": {"backend": "zookeeper", "zookeeper_conn_id": "zk_nohost"},
        "zk_extra": {"backend": "zookeeper", "zookeeper_conn_id": "zk_extra"},
        "extra_list": {"backend": "kafka", "kafka_conn_id": "kafka_list"},
        "extra_broken": {"backend": "kafka", "kafka_conn_id": "kafka_broken"},
        "unknown_key": {"backend": "kafka", "kafka_conn_id": "kafka_bad"},
        "backend": {"backend": "pulsar"},
    }
    proc = subprocess.run([sys.executable, "-c", BAD_PROBE, str(REPO / "plugins"), json.dumps(cases)],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "Airflow connection 'no_such_conn' is not defined" in out["missing"]
    assert "'zk_nohost' names no ZooKeeper host" in out["no_host"]
    assert "'zk_extra': unknown extra key(s) size" in out["zk_extra"]
    assert "'kafka_list': extra must be a JSON object" in out["extra_list"]
    assert "'kafka_broken': extra is not valid JSON" in out["extra_broken"]
    assert "unknown extra key(s) sasl_passwd" in out["unknown_key"]
    assert "backend must be zookeeper or kafka, got 'pulsar'" in out["backend"]
    for name, message in out.items():
        assert not message.startswith("RAW") and "\n" not in message, (name, message)
    assert out["task"].startswith("AirflowFailException: InputError: Airflow connection 'nowhere' is not defined")


OPTIONS_PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from rebalancer_airflow.runbook_dag import _estimated_schedule, _exec_options, common_params
from rebalancer import runbook
params = {k: p.value for k, p in common_params("rebalance").items()}
out = {"defaults": _exec_options(params)}
out["rolling"] = _exec_options({**params, "execution_schedule": "rolling"})
opts = runbook._options(out["rolling"])
out["opts"] = {"schedule": opts.schedule, "per_broker": opts.per_broker, "throttle": opts.throttle}
out["estimated"] = [_estimated_schedule({**params, "execution_schedule": s, "backend": b})
                    for s, b in (("batches", "kafka"), ("rolling", "zookeeper"), ("auto", "kafka"), ("auto", "zookeeper"))]
from rebalancer_airflow.runbook_dag import plan_options
for mode, extra in (("leaders", {}), ("rebalance", {"capacity_file": "/tmp/cap.json", "disk_band_pct": 7})):
    params = {**{k: p.value for k, p in common_params(mode).items()}, **extra}
    opts = plan_options(mode, {"params": params})
    out["plan_" + mode] = {**opts, "argv": runbook.plan_args("RUN", mode, **opts)}
print(json.dumps(out))
"""


def test_the_execution_params_reach_the_runbook_with_the_schedules_defaults(tmp_path: Path) -> None:
    """The DAG's execution params become the runbook's options: auto by default (as the executor resolves it);
    ``execution_schedule`` rolling passes through; the per-broker cap left empty keeps the schedule's own default (5 in batches, 2 rolling)
    instead of the DAG restating one; the plan's estimate assumes the schedule the execution will run."""
    env = {"PATH": "/usr/bin:/bin", "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    proc = subprocess.run([sys.executable, "-c", OPTIONS_PROBE, str(REPO / "plugins")],
                          capture_output=True, text=True, env=env, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["defaults"]["schedule"] == "auto" and out["defaults"]["per_broker"] is None
    assert out["defaults"]["throttle"] == "50MB/s" and out["defaults"]["total"] == 50
    assert out["rolling"]["schedule"] == "rolling"
    assert out["opts"] == {"schedule": "rolling", "per_broker": None, "throttle": 50_000_000}
    # the plan's time estimate assumes the same schedule, auto as the cluster access resolves it
    assert out["estimated"] == ["batches", "rolling", "rolling", "batches"]
    # the plan's options: every PlanOptions field the form can set (None where this DAG's form has none), and the
    # argv of the plan in its own process says only what was given
    leaders = out["plan_leaders"]
    assert leaders["groups"] is None and leaders["master"] is None and leaders["capacity"] is None
    assert leaders["argv"] == ["RUN", "--mode", "leaders", "--strategy", "auto", "--objective", "replicas",
                               "--throttle", "50MB/s", "--schedule", "batches", "--max-moves", "50"]
    assert out["plan_rebalance"]["argv"] == [
        "RUN", "--mode", "rebalance", "--strategy", "auto", "--balance", "auto", "--capacity", "/tmp/cap.json",
        "--band", "disk=7.0", "--objective", "replicas", "--failover-when-balanced", "--throttle", "50MB/s",
        "--schedule", "batches", "--max-moves", "50"]  # the weekly form orders a balanced cluster's followers
