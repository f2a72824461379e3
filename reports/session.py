"""One SparkSession for the report job (and for every test that runs it).

Settings chosen for a small local machine but valid on any master: many small shuffle partitions
that adaptive execution coalesces, no UI, quiet logs, and a 4 GB driver heap (with 2 GB the
pairing aggregation spends its time in the garbage collector and spilling; measured in
bench/bench_report.py). A session that already exists (a test fixture, a notebook) is reused.
"""

from __future__ import annotations

import os
import sys

DEFAULT_MASTER = "local[*]"


def get_session(master: str = DEFAULT_MASTER, driver_memory: str | None = None):  # -> SparkSession
    # Loopback unless told otherwise: a laptop on a flaky network must not stall the driver.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python tasks (the arrow engine) run with this interpreter, which has pyarrow, unless the
    # environment names another (as a cluster's would).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    cores = os.cpu_count() or 2
    builder = (
        SparkSession.builder.master(master)
        .appName("zmq-harness report")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "ERROR")
        # Shuffle partitions: start from many small ones and let adaptive execution coalesce them
        # to ~32 MB each. A fixed 2 x cores would make every reduce task's sort grow with the
        # input (and spill); this keeps a task's memory flat from 1M to 50M rows and beyond.
        .config("spark.sql.shuffle.partitions", str(max(32 * cores, 64)))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.adaptive.coalescePartitions.enabled", "true")
        .config("spark.sql.adaptive.advisoryPartitionSizeInBytes", "32m")
        .config("spark.driver.memory", driver_memory or os.environ.get("ZMQ_HARNESS_DRIVER_MEMORY", "4g"))
    )
    if os.environ.get("ZMQ_HARNESS_JAVA_OPTS"):  # e.g. -XX:StartFlightRecording=... to profile
        builder = builder.config("spark.driver.extraJavaOptions", os.environ["ZMQ_HARNESS_JAVA_OPTS"])
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
