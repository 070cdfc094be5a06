"""Airflow glue for the Kafka rebalance runbook: connection hooks, the approval operator, the DAG wiring and
the report view. Imported by ``dags/`` and ``plugins/rebalancer_plugin.py`` (the plugins folder is on sys.path);
excluded from plugin scanning by ``plugins/.airflowignore``. The work itself is in ``rebalancer.runbook``."""
