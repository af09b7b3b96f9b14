"""The SparkSession the maintenance jobs run on.

Local mode by default (``local[2]``, or ``$LAKELOG_SPARK_MASTER``), any master
via ``--master``, or whatever spark-submit set up. Python workers must run the
interpreter lakelog is installed in, so ``PYSPARK_PYTHON`` defaults to this one
for a session started here (see ``spark_connector.worker_python``). Spark runs
on Java 17 or newer; a session this process would start without a ``java`` to
run is refused in one message (``require_java``) rather than PySpark's traceback.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

from lakelog.errors import MissingDependencyError
from spark_connector.worker_python import use_driver_python_for_workers

#: Python workers over a Unix socket instead of loopback TCP, where Nagle's algorithm
#: and Linux's 40 ms delayed ACK stall each task's first input batch (a caught-up
#: stream: e2e p50 190 ms over TCP, 145 ms over a Unix socket). Executors and their
#: Python workers share a host, so a cluster can always use it.
UNIX_SOCKETS_TO_PYTHON_WORKERS = "spark.python.unix.domain.socket.enabled"


def require_java() -> None:
    """Raise ``MissingDependencyError`` unless a ``java`` is where Spark's launcher looks.

    PySpark starts its JVM with ``$JAVA_HOME/bin/java`` when ``JAVA_HOME`` is set,
    else with ``java`` from ``PATH``; without one it fails with
    ``JAVA_GATEWAY_EXITED`` and a traceback that never names Java. Checked
    before a session is created here, so the missing runtime is one message.
    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        java = Path(java_home, "bin", "java")
        if java.is_file() and os.access(java, os.X_OK):
            return
        raise MissingDependencyError(
            f"Spark needs Java 17 (or newer), and JAVA_HOME={java_home} holds no bin/java; "
            "set JAVA_HOME to a Java 17 installation, or unset it to use the java on PATH",
            missing=["java"],
        )
    if shutil.which("java") is None:
        raise MissingDependencyError(
            "Spark needs Java 17 (or newer): there is no java on PATH and JAVA_HOME is not set; "
            "install a Java 17 runtime (e.g. apt-get install openjdk-17-jre-headless) and put "
            "its java on PATH or set JAVA_HOME to its directory",
            missing=["java"],
        )


def spark_session(master: str | None = None, app_name: str = "lakelog") -> SparkSession:
    """Get or create the session; an existing one (spark-submit, notebooks) is reused as is."""
    active = SparkSession.getActiveSession()
    if active is None and SparkContext._active_spark_context is not None:
        # A session exists but is not active in this thread: join it as it is, since
        # builder options would silently change the configuration of a shared session.
        active = SparkSession.builder.getOrCreate()
    if active is not None:
        use_driver_python_for_workers(active)
        return active
    if "PYSPARK_GATEWAY_PORT" in os.environ and not master:  # under spark-submit
        return SparkSession.builder.getOrCreate()  # keeps even spark-submit's --name
    require_java()  # this process starts the JVM
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder
    # e.g. "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC": starts and warms up in a
    # third of the time, for short local runs (cron, tests); costs peak speed.
    java_options = os.environ.get("LAKELOG_SPARK_DRIVER_JAVA_OPTIONS")
    if java_options:
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
    return (
        builder.appName(app_name)
        .master(master or os.environ.get("LAKELOG_SPARK_MASTER", "local[2]"))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", os.environ.get("LAKELOG_SHUFFLE_PARTITIONS", "8"))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config(UNIX_SOCKETS_TO_PYTHON_WORKERS, "true")
        .config("spark.driver.memory", os.environ.get("LAKELOG_SPARK_DRIVER_MEMORY", "2g"))
        .getOrCreate()
    )


def stop_spark(session: SparkSession, timeout_s: float = 120.0) -> None:
    """Stop the session and end the JVM this process started for it, waiting for it to exit.

    ``session.stop()`` leaves the JVM running until Python exits; a notebook
    kernel killed with its process group then races the JVM's shutdown hooks
    (``IOException: Failed to delete``). Closing its stdin lets it exit cleanly.
    Under spark-submit the JVM started this process and is left alone.
    """
    session.stop()
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if gateway is None or process is None:
        return
    gateway.shutdown()
    if process.stdin is not None:
        process.stdin.close()  # the JVM exits at EOF on its stdin (PythonGatewayServer)
    process.wait(timeout=timeout_s)
    SparkContext._gateway = None
    SparkContext._jvm = None
