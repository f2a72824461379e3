"""`zmq-harness report DIR` and `python -m reports DIR`: run the Spark job, write report.json and
report.html."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from typing import Any, Sequence
from urllib.parse import urlparse

from reports.session import DEFAULT_MASTER


def default_out(source: str) -> str:
    """DIR/report for a local DIR (or file:// URL); ./report for a remote URL (hdfs://, s3a://)."""
    url = urlparse(source)
    if url.scheme in ("", "file"):
        return os.path.join(url.path if url.scheme else source, "report")
    return "report"


def build_report(source: str, out: str | None = None, master: str = DEFAULT_MASTER, spark: Any = None,
                 extra: dict[str, Any] | None = None, engine: str = "auto") -> dict[str, Any]:
    """Run the job over ``source`` and write ``out``/report.json and report.html; returns the report."""
    from reports import html, model
    from reports.job import run_job
    from reports.session import get_session

    spark = spark or get_session(master)
    t0 = time.perf_counter()
    job = run_job(spark, source, engine)
    seconds = time.perf_counter() - t0
    report = model.build(job, source, spark.sparkContext.master, seconds, spark.version, extra)
    out = out or default_out(source)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=1, default=str)
        f.write("\n")
    with open(os.path.join(out, "report.html"), "w") as f:
        f.write(html.render(report))
    return report


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("dir", metavar="DIR", help="trace Parquet files: a directory (searched recursively), a file, "
                    "or any Spark-readable URL (file://, hdfs://, s3a://...)")
    ap.add_argument("--out", help="directory for report.json and report.html (default: DIR/report)")
    ap.add_argument("--master", default=DEFAULT_MASTER, help=f"Spark master URL (default: {DEFAULT_MASTER})")
    ap.add_argument("--engine", choices=("auto", "arrow", "sql"), default="auto",
                    help="arrow: tasks read whole runs with pyarrow (fast, no shuffle; needs a file system "
                    "pyarrow opens); sql: Spark SQL over any Spark-readable path; auto (default): arrow "
                    "where it can read the files")


def run(args: argparse.Namespace) -> int:
    local = urlparse(args.dir).scheme in ("", "file")
    path = urlparse(args.dir).path if args.dir.startswith("file:") else args.dir
    if local and not os.path.exists(path):
        print(f"zmq-harness report: {args.dir}: no such file or directory", file=sys.stderr)
        return 2
    try:
        report = build_report(args.dir, args.out, args.master, engine=args.engine)
    except Exception as e:  # Spark errors arrive as Py4J/Analysis/Python-worker exceptions
        from pyspark.errors import PySparkException

        if isinstance(e, PySparkException):
            print(f"zmq-harness report: {spark_error(str(e))}", file=sys.stderr)
            return 2
        raise
    out = args.out or default_out(args.dir)
    runs = sum(r["runs"] for r in report["runs"])
    failing = sum(1 for s in report["chaos"]["summary"] if s["status"] != "pass")
    failing += sum(1 for c in report["conformance"] if c["status"] in ("fail", "error"))
    timed = sum(r["count"] for r in report["latency"]["by_msg_type"])
    print(f"report: {os.path.join(out, 'report.html')} and report.json — {runs} run(s), {timed} message receipt(s) "
          f"timed, {failing} failing check(s)/clause(s); Spark {report['spark']['seconds']:.1f} s")
    if not runs and not timed:
        print(f"zmq-harness report: no trace rows found under {args.dir}", file=sys.stderr)
    for u in report["unreadable_files"]:
        print(f"zmq-harness report: skipped {u['file']}: {u['reason']}", file=sys.stderr)
    return 1 if report["unreadable_files"] else 0


def spark_error(text: str) -> str:
    """The line of a Spark error that says what went wrong: the Python exception a task raised
    (its last 'SomethingError: ...' line), else the first line."""
    found = re.findall(r"^\s*(\w+(?:Error|Exception): .*)$", text, re.M)
    return found[-1] if found else text.splitlines()[0]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reports", description=__doc__)
    add_arguments(ap)
    return run(ap.parse_args(argv))
