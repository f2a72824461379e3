"""The Spark job: small results back to the driver, whatever the size of the traces.

Two engines compute the same thing (tests hold them to the same report):

- **arrow** (the default where pyarrow can open the files: local paths, file://, hdfs://, s3://,
  gs://...): Spark hands each task a share of the trace files; the task reads whole runs with
  pyarrow and returns their control rows and latency histograms (reports.run_scan). No shuffle.
- **sql**: Spark SQL over any Spark-readable path (s3a://, dbfs:/, ...): a control scan
  (reports.control) and a message scan that pairs sends with receipts by one shuffle
  (reports.messages). The arrow engine also hands it what a task cannot do alone: runs split over
  files processed apart, and files bigger than run_scan.MAX_FILE_ROWS.

Either way only the columns needed are read (never `frames`), with the trace schema (no inference).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from harness.trace import SCHEMA
from reports import run_scan
from reports.run_scan import HISTOGRAM_SCHEMA  # noqa: F401  (the histogram's schema, for readers of JobResult)
from reports.control import Control, ControlTables, read_control
from reports.messages import message_histogram
from reports.windows import NONE, Segment, segments as cut

ENGINES = ("auto", "arrow", "sql")


def spark_schema():  # -> StructType
    from pyspark.sql import types as T

    kinds = {pa.string(): T.StringType(), pa.int64(): T.LongType(), pa.binary(): T.BinaryType()}
    return T.StructType([T.StructField(f.name, kinds[f.type], True) for f in SCHEMA])


def read_traces(spark: Any, path: str | list[str]):  # -> DataFrame
    """Every *.parquet under ``path`` (a file or a directory, searched recursively; or a list of files)."""
    paths = [path] if isinstance(path, str) else list(path)
    return (spark.read.schema(spark_schema())
            .option("recursiveFileLookup", "true")
            .option("pathGlobFilter", "*.parquet")
            .parquet(*paths))


@dataclass
class JobResult:
    control: Control
    segments: list[Segment] = field(default_factory=list)
    histogram: pa.Table | None = None  # run_scan.HISTOGRAM_SCHEMA
    engine: str = "sql"
    files: int = 0
    rows: int | None = None  # trace rows read (the arrow engine counts them)
    files_by_sql: int = 0  # files the arrow engine left to the SQL engine


def arrow_can_read(uri: str) -> bool:
    from pyarrow import fs as pafs

    if ":" not in uri.split("/", 1)[0]:
        return True
    try:
        pafs.FileSystem.from_uri(uri)
        return True
    except Exception:  # an unknown scheme (s3a, dbfs, ...) or a file system pyarrow was built without
        return False


def run_job(spark: Any, path: str, engine: str = "auto", unit_rows: int = run_scan.UNIT_ROWS,
            max_file_rows: int = run_scan.MAX_FILE_ROWS) -> JobResult:
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r} (one of {', '.join(ENGINES)})")
    df = read_traces(spark, path)
    files = sorted(df.inputFiles())
    if engine == "auto":
        engine = "arrow" if files and arrow_can_read(files[0]) else "sql"
    tables = ControlTables()
    if engine == "sql":
        result = JobResult(Control(), engine="sql", files=len(files), histogram=_sql(spark, df, tables))
    else:
        units = _arrow(spark, files, unit_rows, max_file_rows)
        left = left_to_sql(units)
        kept = [u for i, u in enumerate(units) if i not in left]
        for u in kept:
            for row in u.control:
                tables.add(row)
        sql_files = sorted(files[f] for i in left for f in units[i].files)
        by_sql = _sql(spark, read_traces(spark, sql_files), tables) if sql_files else None
        histogram = run_scan.merge_histograms([u.histogram for u in kept] + [by_sql])
        result = JobResult(Control(), engine="arrow", files=len(files), histogram=histogram,
                           rows=sum(u.rows for u in units), files_by_sql=len(sql_files))
    tables.finish(result.control)
    result.segments = cut(result.control.events)
    return result


def _arrow(spark: Any, files: list[str], unit_rows: int, max_file_rows: int) -> list[run_scan.UnitResult]:
    """One Spark task per share of the files; each returns one result per unit of files."""
    if not files:
        return []
    from pyspark import cloudpickle
    from reports import windows

    # shipped by value: executors of a cluster need pyarrow, not an installed zmq-harness
    for module in (run_scan, windows):
        cloudpickle.register_pickle_by_value(module)
    sc = spark.sparkContext
    slices = max(1, min(len(files), sc.defaultParallelism * 4))  # a few tasks per core: balance
    task = functools.partial(run_scan.scan_files, unit_rows=unit_rows, max_file_rows=max_file_rows)
    return sc.parallelize(list(enumerate(files)), slices).mapPartitions(task).collect()


def left_to_sql(units: list[run_scan.UnitResult]) -> set[int]:
    """Indexes of the units the SQL engine must redo: files too big for a unit, and every unit
    holding a file of a run that is split over several files (pairing needs all of a run's rows
    together; a unit assumes each of its runs is in one file)."""
    owners: dict[str, set[tuple[int, int]]] = {}  # run -> (unit, file)
    for i, u in enumerate(units):
        for f, runs in u.runs.items():
            for run in runs:
                owners.setdefault(run, set()).add((i, f))
    left = {i for i, u in enumerate(units) if u.deferred}
    for places in owners.values():
        if len(places) > 1:
            left.update(i for i, _ in places)
    return left


def _sql(spark: Any, df, tables: ControlTables) -> pa.Table:
    """The SQL engine over ``df``: control rows into ``tables``, histogram rows (named) returned."""
    control = read_control(df, tables)  # with the arrow engine's events so far: harmless, their runs differ
    segments = cut(control.events)
    labels = [NONE] + sorted({s.label for s in segments})
    rows = message_histogram(spark, df, segments, {lab: i for i, lab in enumerate(labels)})
    out = []
    for h in rows:
        protocol, scenario = tables.groups.get(h["p"], (None, None))
        out.append({"protocol": protocol, "scenario": scenario, "e": h["e"], "mt": tables.msg_types.get(h["mt"]),
                    "window": labels[h["wl"]], "fb": h["fb"], "status": h["status"], "b": h["b"], "n": h["n"],
                    "lo": h["lo"], "hi": h["hi"], "total": h["total"], "drops": h["drops"]})
    return pa.Table.from_pylist(out, schema=run_scan.HISTOGRAM_SCHEMA)
