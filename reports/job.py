"""The Spark job: two scans of the trace set, small results back to the driver.

1. Control scan (reports.control): verdicts, fault-window events, discards, and the dictionary
   of names — a few rows per run.
2. Message scan (reports.messages): one shuffle pairs sends with receipts and commands with
   deliveries; Spark returns latency histograms, not latencies.

Only the columns each scan needs are read (never `frames`), and the files are read with the
trace schema (no inference), so any Spark master and any Spark-readable path work unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from harness.trace import SCHEMA
from reports.control import Control, read_control
from reports.messages import message_histogram
from reports.windows import NONE, Segment, segments as cut


def spark_schema():  # -> StructType
    from pyspark.sql import types as T

    kinds = {pa.string(): T.StringType(), pa.int64(): T.LongType(), pa.binary(): T.BinaryType()}
    return T.StructType([T.StructField(f.name, kinds[f.type], True) for f in SCHEMA])


def read_traces(spark: Any, path: str):  # -> DataFrame
    """Every *.parquet under ``path`` (a file or a directory, searched recursively)."""
    return (spark.read.schema(spark_schema())
            .option("recursiveFileLookup", "true")
            .option("pathGlobFilter", "*.parquet")
            .parquet(path))


@dataclass
class JobResult:
    control: Control
    segments: list[Segment] = field(default_factory=list)
    window_labels: list[str] = field(default_factory=list)  # index = window id in histogram rows
    histogram: list[dict] = field(default_factory=list)


def run_job(spark: Any, path: str) -> JobResult:
    df = read_traces(spark, path)
    control = read_control(df)
    segments = cut(control.events)
    labels = [NONE] + sorted({s.label for s in segments})
    histogram = message_histogram(spark, df, segments, {lab: i for i, lab in enumerate(labels)})
    return JobResult(control, segments, labels, histogram)
