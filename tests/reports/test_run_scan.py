"""The per-run scan (reports.run_scan) without Spark: its vectorised pieces against their scalar
definitions, and one task over hand-made files (fan-out, fault bits, files it must leave to the SQL
engine, files it cannot read)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.trace import RunInfo, TraceWriter
from reports import run_scan
from reports.histogram import bucket_key
from tests.reports.conftest import write_hand_trace


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(-10**15, 10**15), st.sampled_from([0, 1, -1, 2, 10**18, -10**18])),
                min_size=1, max_size=50))
def test_bucket_codes_give_the_scalar_bucket_keys(values: list[int]) -> None:
    codes = run_scan._bucket_code(pa.array(values, pa.int64()))
    assert run_scan._bucket_key(codes).to_pylist() == [bucket_key(v) for v in values]


def test_no_latency_is_bucket_code_zero_and_no_key() -> None:
    codes = run_scan._bucket_code(pa.array([None, 5], pa.int64()))
    assert codes.to_pylist()[0] == 0 and run_scan._bucket_key(codes).to_pylist()[0] is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 1), st.integers(-3, 2**45), st.integers(-5, 5)),
                min_size=1, max_size=60))
def test_packed_group_by_equals_the_plain_one(rows: list[tuple[int, int, int, int]]) -> None:
    t = pa.table({"a": pa.array([r[0] for r in rows], pa.int32()), "b": pa.array([r[1] for r in rows], pa.int8()),
                  "c": pa.array([r[2] for r in rows], pa.int64()), "v": pa.array([r[3] for r in rows], pa.int64())})
    aggs = [("v", "sum"), ("v", "min")]
    got = run_scan._group(t, ["a", "b", "c"], aggs)
    want = t.group_by(["a", "b", "c"]).aggregate(aggs)
    key = ["a", "b", "c", "v_sum", "v_min"]
    assert sorted(got.select(key).to_pylist(), key=str) == sorted(want.select(key).to_pylist(), key=str)


# HISTOGRAM_KEYS: protocol 0, scenario 1, clock 2, e 3, mt 4, window 5, fb 6, status 7, b 8
def _hist(result: run_scan.UnitResult) -> dict[tuple, dict]:
    return {tuple(r[k] for k in run_scan.HISTOGRAM_KEYS): r for r in result.histogram.to_pylist()}


def test_one_task_over_the_hand_trace(tmp_path: Path) -> None:
    path = tmp_path / "hand.parquet"
    write_hand_trace(str(path))
    [unit] = list(run_scan.scan_files([(7, str(path))]))
    assert unit.files == [7] and unit.runs == {7: {"hand/1"}} and not unit.deferred
    assert unit.rows == pq.ParquetFile(path).metadata.num_rows
    assert {r["kind"] for r in unit.control} == {"pause", "resume", "fault", "verdict", "discard"}
    assert [r["detail"] for r in unit.control if r["kind"] == "verdict"] == ["subs.2 saw 8 before 7", None]
    h = _hist(unit)
    received = sorted(r["lo"] for k, r in h.items() if k[7] == "received" and not k[3] and k[4] == "PUBLISH")
    assert received == [-1000, 500, 500, 600, 1100, 1500, 9000, 40000]  # every receipt of the fan-out, the duplicate
    by_status = {}
    for k, r in h.items():
        by_status[(k[3], k[4], k[7])] = by_status.get((k[3], k[4], k[7]), 0) + r["n"]
    assert by_status[(False, "HEARTBEAT", "dropped")] == 1 and by_status[(False, "HEARTBEAT", "lost")] == 1
    assert by_status[(False, "PUBLISH", "orphan")] == 1 and by_status[(False, "PUBLISH", "no-id")] == 1
    assert by_status[(True, "request", "lost")] == 1 and by_status[(True, "reply", "orphan")] == 1
    paused = [k for k in h if k[5] == "pause:subs.1" and k[7] == "received"]
    assert len(paused) == 1 and h[paused[0]]["lo"] == 1100


def _faulty_run(path: str, faults: int) -> None:
    """Message 1 is delayed and duplicated (bits 1|2), message 2 reordered; ``faults`` extra fault
    rows on message 3 push the count past the packed fields when large."""
    with TraceWriter(path, RunInfo("f/1", 1, "f", "dcp")) as t:
        t.register_node("a", "client")
        for i in (1, 2, 3):
            t.emit("a", "send", 10 * i, msg_type="REQUEST", msg_id=i)
            t.emit("a", "recv", 10 * i + 5, msg_type="REQUEST", msg_id=i)
        t.emit("a", "fault", 10, msg_id=1, fault="delay:rule-1")
        t.emit("a", "fault", 10, msg_id=1, fault="duplicate:rule-2")
        t.emit("a", "fault", 20, msg_id=2, fault="reorder:rule-3")
        for _ in range(faults):
            t.emit("a", "fault", 30, msg_id=3, fault="weird")


@pytest.mark.parametrize("extra", [0, 1 << run_scan.FAULT_COUNT_BITS])
def test_fault_bits_are_the_or_of_a_message_s_faults(tmp_path: Path, extra: int) -> None:
    path = str(tmp_path / "f.parquet")
    _faulty_run(path, extra)
    [unit] = list(run_scan.scan_files([(0, path)]))
    bits = sorted(k[6] for k in _hist(unit) if k[7] == "received")
    assert bits == sorted([3, 4] + ([8] if extra else [0]))


def test_big_files_are_left_to_the_sql_engine_with_their_runs(tmp_path: Path) -> None:
    path = tmp_path / "hand.parquet"
    write_hand_trace(str(path))
    [unit] = list(run_scan.scan_files([(0, str(path))], max_file_rows=10))
    assert unit.deferred and unit.runs == {0: {"hand/1"}} and unit.histogram is None and not unit.control


def test_units_gather_whole_files(tmp_path: Path) -> None:
    paths = []
    for i in range(3):
        paths.append(str(tmp_path / f"{i}.parquet"))
        _faulty_run(paths[-1], 0)
    units = list(run_scan.scan_files(list(enumerate(paths)), unit_rows=15))
    assert [u.files for u in units] == [[0, 1], [2]]  # a unit closes once it holds unit_rows rows


def test_files_that_are_not_traces_are_named_and_skipped(tmp_path: Path) -> None:
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really")
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": [1]}), other)
    good = tmp_path / "hand.parquet"
    write_hand_trace(str(good))
    units = list(run_scan.scan_files([(0, str(bad)), (1, str(other)), (2, str(good))]))
    assert [(u.files, u.error is not None) for u in units] == [([0], True), ([1], True), ([2], False)]
    assert units[0].error.startswith("not a readable Parquet file")
    assert units[1].error == "not a trace file (no run/kind column)"
    assert units[2].runs == {2: {"hand/1"}} and units[2].histogram.num_rows


def test_a_trace_with_missing_columns_is_read_with_nulls(tmp_path: Path) -> None:
    path = tmp_path / "old.parquet"
    pq.write_table(pa.table({"run": ["r"] * 2, "kind": ["send", "recv"], "time_ns": [1, 4], "msg_id": [9, 9],
                             "msg_type": ["X", "X"]}), path)
    [unit] = list(run_scan.scan_files([(0, "file://" + str(path))]))
    [row] = [r for r in unit.histogram.to_pylist() if r["status"] == "received"]
    assert (row["protocol"], row["mt"], row["lo"], row["n"]) == (None, "X", 3, 1)
    assert pc.sum(unit.histogram["n"]).as_py() == 2  # the receipt and the delivered send


def test_a_task_runs_where_the_project_cannot_be_imported(tmp_path: Path) -> None:
    """What the arrow engine ships to an executor needs pyarrow (and pyspark's pickler), not
    zmq-harness: the task is unpickled and run in a process where importing harness, reports or
    tests fails."""
    import functools
    import subprocess
    import sys

    from pyspark import cloudpickle

    from reports.job import ship_by_value

    path = tmp_path / "hand.parquet"
    write_hand_trace(str(path))
    ship_by_value()
    blob = cloudpickle.dumps(functools.partial(run_scan.scan_task, unit_rows=10))
    (tmp_path / "task.pickle").write_bytes(blob)
    code = f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("harness", "reports", "tests"):
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
from pyspark import cloudpickle
task = cloudpickle.loads(open({str(tmp_path / "task.pickle")!r}, "rb").read())
result = task((0, [(0, {str(path)!r})]))
print(result.histogram.num_rows, len(result.units[0].control))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    [unit] = list(run_scan.scan_files([(0, str(path))]))
    assert r.stdout.split() == [str(unit.histogram.num_rows), str(len(unit.control))]
