"""The Spark report over traces the harness produced (simulated DCP runs, conformance runs) and a
hand-written trace: every latency table and delivery count of report.json agrees with an
independent pyarrow/Python computation (tests/reports/expected.py); the verdict tables say what
the runs decided."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reports import expected as ex

pytestmark = pytest.mark.timeout(600)
SUMMARY = ("count", "min", "max", "mean", "p50", "p90", "p99")


@pytest.fixture(scope="module")
def want(traces: Path) -> ex.Expected:
    return ex.compute(traces)


def _check_latency(rows: list[dict], want: dict[tuple, list[int]], keys: tuple[str, ...], rel: float) -> None:
    got = {tuple(r[k] for k in keys): r for r in rows}
    assert set(got) == set(want), (sorted(got), sorted(want))
    for key, values in want.items():
        values = sorted(values)
        row = got[key]
        assert (row["count"], row["min"], row["max"]) == (len(values), values[0], values[-1]), key
        assert abs(row["mean"] - sum(values) / len(values)) <= 0.5 + 1e-9, key
        for q in (50, 90, 99):
            exact = ex_quantile(values, q / 100)
            assert abs(row[f"p{q}"] - exact) <= rel * abs(exact) + 0.5, (key, q, row[f"p{q}"], exact)


def ex_quantile(sorted_values: list[int], q: float) -> int:
    import math

    return sorted_values[max(1, math.ceil(q * len(sorted_values))) - 1]


@pytest.mark.parametrize("table,keys", [
    ("by_msg_type", ("clock", "protocol", "msg_type")),
    ("by_fault_window", ("clock", "protocol", "scenario", "window")),
    ("by_message_fault", ("clock", "protocol", "msg_type", "fault")),
    ("end_to_end", ("clock", "protocol", "scenario", "command")),
    ("end_to_end_by_fault_window", ("clock", "protocol", "scenario", "window")),
    ("end_to_end_by_receiver", ("clock", "protocol", "scenario", "command", "node", "delivery", "topic")),
])
def test_latency_tables_agree_with_an_exact_computation(report: tuple[dict, Path], want: ex.Expected,
                                                        table: str, keys: tuple[str, ...]) -> None:
    data, _ = report
    _check_latency(data["latency"][table], getattr(want, table), keys, data["latency_method"]["relative_error"])


def test_the_traces_exercise_every_table(want: ex.Expected) -> None:
    windows = {k[3] for k in want.by_fault_window}
    assert {"none", "crash:workers.0", "partition", "pause:subs.1"} <= windows
    assert {"delay", "duplicate", "none"} <= {k[3] for k in want.by_message_fault}
    assert want.end_to_end and min(min(v) for v in want.by_msg_type.values()) < 0  # a negative latency
    assert {k[0] for k in want.end_to_end} == {"virtual", "wall"}  # simulated and live runs


def test_delivery_and_request_counts_agree(report: tuple[dict, Path], want: ex.Expected) -> None:
    data, _ = report
    fields = ("sent", "delivered", "receptions", "dropped", "lost", "drop_rows", "orphans", "unpaired")
    got = {(r["clock"], r["protocol"], r["msg_type"]): {f: r[f] for f in fields} for r in data["delivery"]}
    assert got == {k: {f: v.get(f, 0) for f in fields} for k, v in want.delivery.items()}
    fields = ("commands", "answered", "deliveries", "unanswered", "orphans", "unpaired")
    got = {(r["clock"], r["protocol"], r["scenario"], r["command"]): {f: r[f] for f in fields} for r in data["requests"]}
    paired = {k: v for k, v in want.requests.items() if v.get("commands") or v.get("deliveries") or v.get("orphans")}
    assert got == {k: {f: v.get(f, 0) for f in fields} for k, v in paired.items()}
    # operations none of whose rows carries a corr are listed apart, not as unanswered requests
    apart = {(r["clock"], r["protocol"], r["scenario"], r["command"]): r["rows"] for r in data["uncorrelated"]}
    assert apart == {k: v["unpaired"] for k, v in want.requests.items() if k not in paired}
    assert ("wall", "pppp", "hand", "case-result") in apart
    assert data["data_quality"]["uncorrelated_rows"] == sum(apart.values())
    hand = {r["msg_type"]: r for r in data["delivery"] if r["protocol"] == "pppp" and r["clock"] == "virtual"}
    assert (hand["HEARTBEAT"]["dropped"], hand["HEARTBEAT"]["lost"], hand["PUBLISH"]["orphans"]) == (1, 1, 1)


def test_runs_and_chaos_verdicts_per_scenario_and_seed(report: tuple[dict, Path]) -> None:
    data, _ = report
    runs = {(r["scenario"], r["clock"], r["runs"]) for r in data["runs"]}
    assert {("dcp-clean", "virtual", 2), ("dcp-lossy", "virtual", 1), ("hand", "virtual", 1), ("hand", "wall", 1)} <= runs
    summary = {(s["scenario"], s["check"]): s for s in data["chaos"]["summary"] if s["clock"] == "virtual"}
    assert summary[("dcp-clean", "exactly-once")]["total"] == 2 == summary[("dcp-clean", "exactly-once")]["pass"]
    assert summary[("dcp-lossy", "one-request-per-worker")]["status"] == "pass"
    failed = summary[("hand", "in-order")]
    assert (failed["fail"], failed["status"], failed["failing_seeds"]) == (1, "fail", [1])
    grid = {(r["scenario"], r["seed"]): r["checks"] for r in data["chaos"]["runs"] if r["clock"] == "virtual"}
    assert grid[("hand", 1)] == {"in-order": "fail", "no-node-errors": "pass"}
    assert set(grid[("dcp-clean", 2)].values()) == {"pass"}
    assert [f["detail"] for f in data["failures"] if f["scenario"] == "hand"] == ["subs.2 saw 8 before 7"]


def test_conformance_per_implementation_and_clause(report: tuple[dict, Path]) -> None:
    data, _ = report
    rows = {(r["implementation"], r["clause"]): r for r in data["conformance"]}
    assert rows[("reference", "dcp.heartbeat.pong")]["status"] == "pass"
    assert rows[("reference", "dcp.heartbeat.pong")]["role"] == "broker"
    broken = rows[("mutant:no-pong", "dcp.heartbeat.pong")]
    assert broken["fail"] >= 1 and broken["status"] == "fail" and "ping-pong" in broken["failing_cases"]
    assert not any(r["implementation"] == "" for r in data["conformance"])  # chaos verdicts stay out


def test_fault_windows_events_and_discards(report: tuple[dict, Path]) -> None:
    data, _ = report
    windows = {(w["scenario"], w["window"]): w for w in data["fault_windows"] if w["clock"] == "virtual"}
    assert windows[("dcp-worker-crash", "crash:workers.0")]["closed_total_ns"] == 2_000_000_000
    assert windows[("dcp-partition-heal", "partition")]["closed_total_ns"] == 2_000_000_000
    assert windows[("hand", "pause:subs.1")]["closed_total_ns"] == 2_000
    assert {(e["scenario"], e["fault"], e["count"]) for e in data["fault_events"]} == {
        ("hand", "incompatible-sockets", 1)}
    assert data["discards"] == [{"protocol": "pppp", "implementation": "mutant:slow", "role": "subscriber",
                                 "clause": "pppp.publish.malformed", "count": 1}]
    assert data["histograms"]["virtual/dcp/REQUEST"] and data["latency_method"]["relative_error"] == 0.01


# Slow, all three (the suite's time budget: about 15 s of Spark queries even on the tiny hand-made
# trace): by default the fan-out's exact path is proven by the report's latency tables agreeing
# with an exact computation over the same traces (the hand-made one has the fan-out).
@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["dcp-lossy", "dcp-worker-crash", "hand"])
def test_the_fast_pairing_agrees_with_the_exact_one(spark, traces: Path, scenario: str) -> None:
    """Hash-aggregate pairing (first and last receipt) equals the window pairing (every receipt)
    where no message has three receipts; with a fan-out it says so, and the exact path is used."""
    from reports.control import read_control
    from reports.job import read_traces
    from reports.messages import FANOUT, STATUS, STATUSES, fast_query, histogram_query
    from reports.windows import segments

    df = read_traces(spark, str(traces / scenario))
    segs = segments(read_control(df).events)
    labels = {lab: i for i, lab in enumerate(["none"] + sorted({s.label for s in segs}))}
    fast = sorted(tuple(r) for r in fast_query(spark, df, segs, labels).collect())
    fanout = [r for r in fast if r[5] == STATUS[FANOUT]]
    if scenario == "hand":
        assert fanout and sum(r[7] for r in fanout) == 1  # the third receipt of message 1
    else:  # the exact path only where it is compared (it takes seconds even on a tiny trace)
        exact = sorted(tuple(r) for r in histogram_query(spark, df, segs, labels).collect())
        assert not fanout and fast == exact, STATUSES


def test_an_empty_directory_gives_an_empty_report(spark, tmp_path: Path) -> None:
    from reports.cli import build_report

    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "notes.json").write_text("{}")  # not a trace: ignored
    data = build_report(str(tmp_path / "traces"), str(tmp_path / "out"), spark=spark)
    assert data["runs"] == [] and data["latency"]["by_msg_type"] == [] and data["chaos"]["summary"] == []
    assert (tmp_path / "out" / "report.html").read_text().startswith("<!DOCTYPE html>")


def test_the_report_command(traces: Path, spark, tmp_path: Path) -> None:
    """`zmq-harness report` in process (the session is shared), its errors as a subprocess."""
    from harness.cli import main

    assert main(["report", str(traces / "hand"), "--out", str(tmp_path / "r")]) == 0
    assert json.loads((tmp_path / "r" / "report.json").read_text())["runs"][0]["scenario"] == "hand"
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    mixed = tmp_path / "mixed"
    shutil.copytree(traces / "hand", mixed)
    (mixed / "torn.parquet").write_bytes(b"PAR1 cut short")  # one bad file: named, the rest reported
    assert main(["report", str(mixed), "--out", str(tmp_path / "m")]) == 1
    data = json.loads((tmp_path / "m" / "report.json").read_text())
    assert [u["file"] for u in data["unreadable_files"]] == [str(mixed / "torn.parquet")]
    assert data["data_quality"]["unreadable_files"] == 1 and data["runs"][0]["scenario"] == "hand"
    assert "torn.parquet" in (tmp_path / "m" / "report.html").read_text()
    r = subprocess.run([sys.executable, "-m", "reports", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "--master" in r.stdout


@pytest.mark.slow  # the suite's time budget (test_the_report_command reads a torn file by default)
def test_the_sql_engine_names_and_skips_a_torn_file(traces: Path, spark, tmp_path: Path) -> None:
    """As the arrow engine does (before, Spark failed the whole report on it)."""
    from harness.cli import main

    mixed = tmp_path / "mixed"
    shutil.copytree(traces / "hand", mixed)
    (mixed / "torn.parquet").write_bytes(b"PAR1 cut short")
    (mixed / "other.parquet").write_bytes((traces / "hand").joinpath(
        sorted(p.name for p in (traces / "hand").glob("*.parquet"))[0]).read_bytes()[:200])
    assert main(["report", str(mixed), "--engine", "sql", "--out", str(tmp_path / "m")]) == 1
    data = json.loads((tmp_path / "m" / "report.json").read_text())
    assert [u["file"] for u in data["unreadable_files"]] == [str(mixed / "other.parquet"), str(mixed / "torn.parquet")]
    assert data["spark"]["engine"] == "sql" and data["runs"][0]["scenario"] == "hand"


def _comparable(report: dict) -> dict:
    return {k: v for k, v in report.items() if k not in ("generated_at", "spark", "source")}


def test_the_sql_engine_gives_the_same_report(report: tuple[dict, Path], traces: Path, spark, tmp_path: Path) -> None:
    """Two independent engines — pyarrow tasks pairing whole runs, and Spark SQL with a shuffle —
    agree on every table of the report."""
    from reports.cli import build_report

    data, _ = report
    sql = build_report(str(traces), str(tmp_path), spark=spark, engine="sql")
    assert (data["spark"]["engine"], sql["spark"]["engine"]) == ("arrow", "sql")
    assert data["spark"]["files_by_sql"] == 0 and data["spark"]["rows"] > 10_000
    assert _comparable(sql) == _comparable(data)


def _report_of(spark, path: Path, **options) -> dict:
    from reports import model
    from reports.job import run_job

    job = run_job(spark, str(path), "arrow", **options)
    return {**model.build(job, str(path), "local", 0.0, "test"), "job": (job.files, job.files_by_sql)}


@pytest.mark.slow  # the suite's time budget (the SQL engine's report is compared by default)
def test_runs_split_over_files_and_big_files_go_to_the_sql_engine(spark, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    whole = tmp_path / "whole"
    whole.mkdir()
    write_hand_trace = __import__("tests.reports.conftest", fromlist=["write_hand_trace"]).write_hand_trace
    write_hand_trace(str(whole / "hand.parquet"))
    t = pq.read_table(whole / "hand.parquet")
    split = tmp_path / "split"
    split.mkdir()
    pq.write_table(t.slice(0, 12), split / "a.parquet")  # a run in two files: pairing needs both
    pq.write_table(t.slice(12), split / "b.parquet")
    want = _report_of(spark, whole)
    assert want["job"] == (1, 0)
    got = _report_of(spark, split)
    assert got["job"] == (2, 2)
    assert _comparable({**got, "job": None}) == _comparable({**want, "job": None})
    big = _report_of(spark, whole, max_file_rows=10)  # the file is "too big" for a unit
    assert big["job"] == (1, 1)
    assert _comparable({**big, "job": None}) == _comparable({**want, "job": None})


@pytest.mark.slow  # the suite's time budget (the SQL engine's report is compared by default)
def test_a_task_holding_a_split_run_is_summed_again_without_it(spark, tmp_path: Path) -> None:
    """More files than tasks: the tasks holding the halves of a split run also hold whole runs,
    whose histograms must survive when the split run goes to the SQL engine."""
    import pyarrow.parquet as pq

    from harness.trace import RunInfo, TraceWriter
    from tests.reports.conftest import write_hand_trace

    d = tmp_path / "mixed"
    d.mkdir()
    write_hand_trace(str(tmp_path / "hand.parquet"))
    t = pq.read_table(tmp_path / "hand.parquet")
    pq.write_table(t.slice(0, 12), d / "r05a.parquet")
    pq.write_table(t.slice(12), d / "r05b.parquet")
    for i in range(38):  # 40 files: more than the tasks of local[2] (reports.job.TASKS_PER_CORE)
        with TraceWriter(str(d / f"r{i:02d}.parquet"), RunInfo(f"x/{i}", i, "x", "dcp")) as w:
            w.register_node("a", "client")
            for m in range(1, 4):
                w.emit("a", "send", 100 * m, msg_type="REQUEST", msg_id=m)
                w.emit("a", "recv", 100 * m + 10 * i + 1, msg_type="REQUEST", msg_id=m)
    got = _report_of(spark, d, unit_rows=1)  # one unit per file: only the split run's two files are redone
    assert got["job"] == (40, 2)
    want = _report_of(spark, d, max_file_rows=0)  # every file by the SQL engine
    assert want["job"] == (40, 40)
    assert _comparable({**got, "job": None}) == _comparable({**want, "job": None})
    assert {r["msg_type"]: r["count"] for r in got["latency"]["by_msg_type"] if r["protocol"] == "dcp"} == {
        "REQUEST": 3 * 38}


def test_local_listing_matches_spark_s(spark, tmp_path: Path) -> None:
    """The arrow engine lists local trace directories itself; it finds what Spark finds."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from reports.job import list_traces, read_traces

    for rel in ("a.parquet", "d/b.parquet", "d/e/c.parquet", "_tmp/x.parquet", ".hidden/y.parquet", "d/.z.parquet",
                "d/_SUCCESS", "notes.json", "d/_w.parquet"):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"run": ["r"]}), p)
    listed = read_traces(spark, str(tmp_path)).inputFiles()
    spark_files = sorted("/" + f.removeprefix("file:").lstrip("/") for f in listed)
    assert list_traces(str(tmp_path)) == spark_files == [str(tmp_path / r) for r in
                                                         ("a.parquet", "d/b.parquet", "d/e/c.parquet")]
    assert list_traces("file://" + str(tmp_path / "a.parquet")) == [str(tmp_path / "a.parquet")]
    assert list_traces(str(tmp_path / "missing")) is None and list_traces("hdfs://nn/x") is None
