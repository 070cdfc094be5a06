"""Airflow plugin of the Kafka rebalance runbook: the report view (FastAPI app at ``/rebalancer``), a menu entry
listing every run, and a *Rebalance report* tab on each DAG run page (both rendered inside the Airflow UI).

The approval request's body links to ``/rebalancer/runs/<dag_id>/<run_id>/report.html`` and the run's Data Docs.
Connection hooks (``zookeeper_default``, ``kafka_default``) live in ``rebalancer_airflow.hooks``.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin


class KafkaRebalancerPlugin(AirflowPlugin):
    name = "kafka_rebalancer"

    @property
    def fastapi_apps(self) -> list[dict[str, Any]]:  # type: ignore[override]  # AirflowPlugin declares a list attribute
        # Imported when the api-server mounts the app, not when a worker or the scheduler loads plugins.
        from rebalancer_airflow.report_app import app

        return [{"app": app, "url_prefix": "/rebalancer", "name": "Kafka rebalance reports"}]

    external_views = [
        {
            "name": "Kafka rebalance reports",
            "href": "rebalancer/",
            "destination": "nav",
            "category": "browse",
            "url_route": "kafka-rebalance-reports",
        },
        {
            "name": "Rebalance report",
            "href": "rebalancer/runs/{DAG_ID}/{RUN_ID}/report.html",
            "destination": "dag_run",
            "url_route": "kafka-rebalance-report",
        },
    ]
