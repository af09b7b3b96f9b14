#!/usr/bin/env bash
# Submit a lakelog maintenance job to Spark with spark-submit.
#
#   infra/spark-submit/submit.sh maintain
#   infra/spark-submit/submit.sh compact --topic users --force
#   infra/spark-submit/submit.sh vacuum --grace-ms 86400000
#
# Arguments after the script name are those of `lakelog compact|retention|merge|
# vacuum|maintain|scheduler`. Settings come from the environment:
#
#   LAKELOG_ROOT        storage root, e.g. s3://bucket/lakelog            (required)
#   SPARK_MASTER        yarn, spark://host:7077, k8s://https://..., local[4] (default local[2])
#   DEPLOY_MODE         client (default) or cluster
#   LAKELOG_PYTHON_ENV  a packed virtualenv with lakelog installed (venv-pack / conda-pack
#                       .tar.gz), shipped to the executors with --archives; without it the
#                       executors must already have lakelog at $PYSPARK_PYTHON
#   PYSPARK_PYTHON      executor interpreter when no LAKELOG_PYTHON_ENV (default python3)
#   PYSPARK_DRIVER_PYTHON  driver interpreter (default: python3)
#   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL
#                       S3 access; forwarded to the executors (spark.executorEnv.*)
#   SPARK_SUBMIT        the spark-submit to run (default: spark-submit on PATH)
#   EXTRA_SPARK_ARGS    more spark-submit options, e.g. "--executor-memory 4g"
#   DRY_RUN=1           print the command instead of running it
#
# lakelog reads and writes S3 itself (pyarrow/s3fs inside the Python tasks), so no
# hadoop-aws jar and no spark.hadoop.fs.s3a.* settings are needed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
job="$(cd "$here/../.." && pwd)/compaction/job.py"

if [[ $# -eq 0 ]]; then
    echo "usage: $0 compact|retention|merge|vacuum|maintain|scheduler [options]" >&2
    exit 2
fi
if [[ -z "${LAKELOG_ROOT:-}" ]]; then
    echo "error: set LAKELOG_ROOT to the storage root (e.g. s3://bucket/lakelog)" >&2
    exit 2
fi

cmd=(
    "${SPARK_SUBMIT:-spark-submit}"
    --master "${SPARK_MASTER:-local[2]}"
    --deploy-mode "${DEPLOY_MODE:-client}"
    --name "lakelog-$1"
    --conf spark.ui.showConsoleProgress=false
    --conf spark.sql.session.timeZone=UTC
    --conf spark.python.unix.domain.socket.enabled=true
    --conf spark.pyspark.driver.python="${PYSPARK_DRIVER_PYTHON:-python3}"
)
if [[ -n "${LAKELOG_PYTHON_ENV:-}" ]]; then
    # Unpacked as ./lakelog_env in every executor's working directory.
    cmd+=(--archives "${LAKELOG_PYTHON_ENV}#lakelog_env"
          --conf spark.pyspark.python=./lakelog_env/bin/python)
else
    cmd+=(--conf spark.pyspark.python="${PYSPARK_PYTHON:-python3}")
fi
for var in AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_REGION AWS_ENDPOINT_URL; do
    if [[ -n "${!var:-}" ]]; then
        cmd+=(--conf "spark.executorEnv.${var}=${!var}")
        if [[ "${DEPLOY_MODE:-client}" == cluster ]]; then
            # In cluster mode the driver runs on the cluster too (YARN: in the AM).
            cmd+=(--conf "spark.yarn.appMasterEnv.${var}=${!var}"
                  --conf "spark.kubernetes.driverEnv.${var}=${!var}")
        fi
    fi
done
if [[ -n "${EXTRA_SPARK_ARGS:-}" ]]; then
    read -r -a extra <<<"${EXTRA_SPARK_ARGS}"
    cmd+=("${extra[@]}")
fi
cmd+=("$job" --root "$LAKELOG_ROOT" "$@")

if [[ "${DRY_RUN:-0}" == 1 ]]; then
    # Secrets are masked; everything else is printed as it would run.
    printf '%q ' "${cmd[@]}" | sed -E 's/(SECRET_ACCESS_KEY|SESSION_TOKEN)=[^ ]*/\1=***/g'
    echo
    exit 0
fi
exec "${cmd[@]}"
