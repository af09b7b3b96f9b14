"""Airflow DAG: lakelog maintenance on Spark, retention -> compact -> merge -> vacuum.

Copy this file into the Airflow ``dags/`` folder. Each task runs one job
through ``infra/spark-submit/submit.sh`` (so on whatever cluster
``SPARK_MASTER`` names), and fails when the job exits non-zero (any topic
failed), which Airflow retries once and reports. The order matters: expired
segments are removed before compaction and merging would rewrite them, and
vacuum deletes what the others removed once the grace period is over.

Airflow Variables (Admin -> Variables) configure it:

- ``lakelog_root``: the storage root, e.g. ``s3://bucket/lakelog`` (required)
- ``lakelog_submit``: path of ``submit.sh`` on the workers
  (default ``/opt/lakelog/infra/spark-submit/submit.sh``)
- ``lakelog_spark_master``: Spark master (default ``local[2]``)
- ``lakelog_vacuum_grace_ms``: vacuum grace period (default 7 days)

S3 credentials come from the worker's environment or role (see
``infra/spark-submit/README.md``); they are not stored in the DAG.

This file imports Airflow unconditionally, as a DAG file must: the test
(``tests/compaction/test_infra.py``) imports it when ``airflow`` is
installed and otherwise only byte-compiles it with ``py_compile``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow import DAG

try:  # Airflow 3: operators live in the standard provider
    from airflow.providers.standard.operators.bash import BashOperator
except ImportError:  # Airflow 2
    from airflow.operators.bash import BashOperator

SUBMIT = "{{ var.value.get('lakelog_submit', '/opt/lakelog/infra/spark-submit/submit.sh') }}"
ENV = {
    "LAKELOG_ROOT": "{{ var.value.lakelog_root }}",
    "SPARK_MASTER": "{{ var.value.get('lakelog_spark_master', 'local[2]') }}",
}
JOB_ARGS = {
    "retention": "",
    "compact": "",
    "merge": "",
    "vacuum": "--grace-ms {{ var.value.get('lakelog_vacuum_grace_ms', '604800000') }}",
}

with DAG(
    dag_id="lakelog_maintenance",
    description="lakelog retention, compaction, segment merging and vacuum",
    schedule=timedelta(minutes=30),
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,  # never two maintenance runs over one root at once
    default_args={"retries": 1, "retry_delay": timedelta(minutes=5)},
    tags=["lakelog", "spark"],
) as dag:
    previous = None
    for job, extra in JOB_ARGS.items():
        task = BashOperator(
            task_id=job,
            # A trailing space keeps Airflow from taking a command ending in ".sh" for a
            # template file name.
            bash_command=f"{SUBMIT} {job} --no-progress {extra} ".replace("  ", " "),
            env=ENV,
            append_env=True,  # keep PATH, JAVA_HOME and the worker's AWS settings
            execution_timeout=timedelta(hours=6),
        )
        if previous is not None:
            previous >> task
        previous = task
