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
import os
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from harness.trace import SCHEMA
from reports import run_scan
from reports.control import Control, ControlTables, read_control
from reports.messages import message_histogram, receiver_histogram
from reports.windows import NONE, Segment, segments as cut

ENGINES = ("auto", "arrow", "sql")
# tasks of the arrow engine per core: enough that the last one finishing alone costs little, few
# enough that each amortises its scheduling (a task is a contiguous share of the files)
TASKS_PER_CORE = 4


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
    receivers: pa.Table | None = None  # run_scan.RECEIVER_SCHEMA: end-to-end latency per receiver
    engine: str = "sql"
    files: int = 0
    rows: int | None = None  # trace rows read (the arrow engine counts them)
    files_by_sql: int = 0  # files the arrow engine left to the SQL engine
    unreadable: list[dict] = field(default_factory=list)  # {"file", "reason"}: skipped, the rest reported


def arrow_can_read(uri: str) -> bool:
    from pyarrow import fs as pafs

    if ":" not in uri.split("/", 1)[0]:
        return True
    try:
        pafs.FileSystem.from_uri(uri)
        return True
    except Exception:  # an unknown scheme (s3a, dbfs, ...) or a file system pyarrow was built without
        return False


def _hidden(name: str) -> bool:
    """Names Spark's file listing skips: hidden files and directories, _SUCCESS and the like."""
    return name.startswith((".", "_"))


def list_traces(path: str) -> list[str] | None:
    """The trace files under a local ``path`` (or file: URL) as Spark lists them for read_traces:
    recursively, *.parquet, hidden names skipped. Listed here because the JVM, which has not
    touched its file systems yet when the job starts, takes a second or two. None for other file
    systems (Spark lists them) and for a path that does not exist (Spark says so in its words)."""
    from urllib.parse import urlparse

    url = urlparse(path)
    if url.scheme not in ("", "file"):
        return None
    root = os.path.abspath(url.path if url.scheme else path)
    if os.path.isfile(root):
        return [root] if root.endswith(".parquet") else []
    if not os.path.isdir(root):
        return None
    found = []
    for here, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not _hidden(d))
        found += [os.path.join(here, n) for n in names if n.endswith(".parquet") and not _hidden(n)]
    return sorted(found)


def run_job(spark: Any, path: str, engine: str = "auto", unit_rows: int = run_scan.UNIT_ROWS,
            max_file_rows: int = run_scan.MAX_FILE_ROWS) -> JobResult:
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r} (one of {', '.join(ENGINES)})")
    df = None
    files = list_traces(path)
    if files is None:  # a file system pyarrow does not open, or the sql engine: Spark lists
        df = read_traces(spark, path)
        files = sorted(df.inputFiles())
    if engine == "auto":
        engine = "arrow" if files and arrow_can_read(files[0]) else "sql"
    tables = ControlTables()
    if engine == "sql":
        # A file that is not a trace (a torn one) would fail Spark's whole job: those pyarrow can
        # open are checked first, named and skipped, as the arrow engine does.
        good, unreadable = (files, []) if df is not None else check_footers(files)
        df = df if df is not None else (read_traces(spark, good) if good else None)
        histogram, receivers = _sql(spark, df, tables) if df is not None else (None, None)
        result = JobResult(Control(), engine="sql", files=len(files), histogram=histogram, receivers=receivers,
                           unreadable=unreadable)
    else:
        tasks, units, left = _arrow(spark, files, unit_rows, max_file_rows)
        for i, (_, u) in enumerate(units):
            if i not in left:
                for row in u.control:
                    tables.add(row)
        sql_files = sorted(files[f] for i in left for f in units[i][1].files)
        by_sql, rx_by_sql = _sql(spark, read_traces(spark, sql_files), tables) if sql_files else (None, None)
        histogram = run_scan.merge_histograms([t.histogram for t in tasks] + [by_sql])
        receivers = run_scan.merge_receivers([t.receivers for t in tasks] + [rx_by_sql])
        result = JobResult(Control(), engine="arrow", files=len(files), histogram=histogram, receivers=receivers,
                           rows=sum(u.rows for _, u in units), files_by_sql=len(sql_files),
                           unreadable=[{"file": files[u.files[0]], "reason": u.error} for _, u in units if u.error])
    tables.finish(result.control)
    result.segments = cut(result.control.events)
    return result


def check_footers(files: list[str]) -> tuple[list[str], list[dict]]:
    """(the files that are Parquet trace files, {"file", "reason"} of the others), by their
    footers and column names, as `run_scan.scan_files` judges them."""
    good, bad = [], []
    for f in files:
        try:
            names = set(pq.read_schema(f).names)
        except Exception as e:  # torn, empty, not Parquet at all
            bad.append({"file": f, "reason": f"not a readable Parquet file ({e})"})
            continue
        if "run" not in names or "kind" not in names:
            bad.append({"file": f, "reason": "not a trace file (no run/kind column)"})
        else:
            good.append(f)
    return good, bad


def _arrow(spark: Any, files: list[str], unit_rows: int, max_file_rows: int):
    """The arrow engine's Spark job: a few tasks per core, each over a contiguous share of the
    files. Returns the task results, every unit as (task, unit), and the indexes of the units the
    SQL engine must redo; tasks that summed such a unit's histogram are run again without it."""
    if not files:
        return [], [], set()
    ship_by_value()
    sc = spark.sparkContext
    n = max(1, min(len(files), sc.defaultParallelism * TASKS_PER_CORE))
    indexed = list(enumerate(files))
    shares = [(t, indexed[t * len(files) // n:(t + 1) * len(files) // n]) for t in range(n)]
    options = {"unit_rows": unit_rows, "max_file_rows": max_file_rows}
    tasks = sc.parallelize(shares, n).map(functools.partial(run_scan.scan_task, **options)).collect()
    units = [(t.task, u) for t in tasks for u in t.units]
    left = left_to_sql([u for _, u in units])
    # a split run: its units' rows are in their tasks' sums — sum those tasks again without them
    redo = {units[i][0] for i in left if not units[i][1].deferred}
    if redo:
        skip = frozenset(f for i in left for f in units[i][1].files)
        again = sc.parallelize([shares[t] for t in sorted(redo)], len(redo)).map(
            functools.partial(run_scan.scan_task, skip=skip, **options)).collect()
        by_task = {t.task: t for t in again}
        tasks = [by_task.get(t.task, t) for t in tasks]
    return tasks, units, left


def ship_by_value() -> None:
    """Pickle the arrow engine's code with its tasks: executors of a cluster need pyarrow, not an
    installed zmq-harness (tests/reports/test_run_scan.py runs a task where the project cannot be
    imported)."""
    from pyspark import cloudpickle

    from reports import windows

    for module in (run_scan, windows):
        cloudpickle.register_pickle_by_value(module)


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


def _sql(spark: Any, df, tables: ControlTables) -> tuple[pa.Table, pa.Table]:
    """The SQL engine over ``df``: control rows into ``tables``; histogram rows (named) and the
    end-to-end receipts per receiver returned."""
    control = read_control(df, tables)  # with the arrow engine's events so far: harmless, their runs differ
    segments = cut(control.events)
    labels = [NONE] + sorted({s.label for s in segments})
    rows = message_histogram(spark, df, segments, {lab: i for i, lab in enumerate(labels)})
    out = []
    for h in rows:
        protocol, scenario, clock = tables.groups.get(h["p"], (None, None, None))
        out.append({"protocol": protocol, "scenario": scenario, "clock": clock, "e": h["e"], "mt": tables.msg_types.get(h["mt"]),
                    "window": labels[h["wl"]], "fb": h["fb"], "status": h["status"], "b": h["b"], "n": h["n"],
                    "lo": h["lo"], "hi": h["hi"], "total": h["total"], "drops": h["drops"]})
    return (pa.Table.from_pylist(out, schema=run_scan.HISTOGRAM_SCHEMA),
            pa.Table.from_pylist(receiver_histogram(df), schema=run_scan.RECEIVER_SCHEMA))
