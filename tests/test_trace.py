"""The trace writer: one schema, cheap rows, and nothing lost when a run is aborted."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.composition import run_sim
from harness.node import BaseNode
from harness.scenario import parse_scenario
from harness.trace import SCHEMA, RunInfo, TraceWriter, pack_frames, read_trace, unpack_frames


def test_rows_round_trip_with_run_and_node_columns(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    with TraceWriter(str(path), RunInfo("r/1", 1, "s", "dcp"), row_group_rows=3) as w:
        w.register_node("a", "broker", "reference")
        for i in range(7):
            w.emit("a", "send", i, socket="router", msg_type="PING", msg_id=i, frames=pack_frames([b"", bytes([i])]))
        w.emit("ghost", "note", 9)  # an unregistered node still gets a row
    t = read_trace(str(path))
    assert t.schema == SCHEMA and t.num_rows == 8
    rows = t.to_pylist()
    assert rows[0]["run"] == "r/1" and rows[0]["role"] == "broker" and rows[0]["implementation"] == "reference"
    assert unpack_frames(rows[6]["frames"]) == [b"", b"\x06"] and rows[7]["role"] == ""
    assert pq.ParquetFile(str(path)).metadata.num_row_groups >= 3


def test_an_exception_inside_the_writer_context_still_leaves_a_readable_file(tmp_path: Path) -> None:
    path = tmp_path / "abort.parquet"
    with pytest.raises(RuntimeError):
        with TraceWriter(str(path), RunInfo("r", 1, "s", "dcp")) as w:
            w.emit("a", "send", 1)
            raise RuntimeError("aborted")
    assert read_trace(str(path)).num_rows == 1


class Exploding(BaseNode):
    protocol, role = "dcp", "client"

    wake: int | None = None

    def start(self, now: int) -> list:
        self.wake = now + 1_500_000_000
        return []

    def get_timer(self) -> int | None:
        return self.wake

    def handle_timer(self, now: int) -> list:
        raise KeyboardInterrupt("boom")  # what Ctrl-C does in the middle of a run


def test_a_run_aborted_by_an_exception_flushes_its_trace(tmp_path: Path) -> None:
    text = Path("scenarios/dcp/clean.yaml").read_text().replace("duration: 6s", "duration: 3s").replace(
        "until: 5s", "until: 2s")
    scenario = parse_scenario(text, "clean.yaml")
    with pytest.raises(KeyboardInterrupt, match="boom"):
        run_sim(scenario, 1, str(tmp_path), factories={"clients.0": Exploding}, checks=False)
    files = list(tmp_path.rglob("*.parquet"))
    assert len(files) == 1
    t = read_trace(str(files[0]))
    assert t.num_rows > 100  # everything up to the abort at 1.5 s is there
    assert max(t.column("time_ns").to_pylist()) >= 1_000_000_000


def test_statistics_are_written_for_the_columns_readers_filter_on_only(tmp_path: Path) -> None:
    path = str(tmp_path / "stats.parquet")
    with TraceWriter(path, RunInfo("r/1", 1, "s", "dcp")) as w:
        w.register_node("a", "client")
        for i in range(3):
            w.emit("a", "send", 10 + i, "s", "REQUEST", "b", msg_id=i, corr=f"c{i}", size=5,
                   frames=pack_frames([b"x" * i]))
    group = pq.ParquetFile(path).metadata.row_group(0)
    stats = {group.column(i).path_in_schema: group.column(i).statistics for i in range(group.num_columns)}
    assert (stats["time_ns"].min, stats["time_ns"].max) == (10, 12)
    assert (stats["msg_id"].min, stats["msg_id"].max) == (0, 2) and stats["kind"].min == "send"
    assert stats["frames"] is None and stats["corr"] is None and stats["data"] is None


def test_readers_get_the_schema_and_per_node_columns_stay_dictionary_encoded(tmp_path: Path) -> None:
    # The writer is handed node, role, implementation and the run columns as dictionary arrays;
    # no reader may see those types, and repeated roles must not push the writer to plain pages.
    path = str(tmp_path / "dict.parquet")
    with TraceWriter(path, RunInfo("r/1", 1, "s", "dcp"), row_group_rows=4) as w:
        for i in range(3):
            w.register_node(f"c{i}", "client", "mutant:x" if i == 2 else "reference")
        for i in range(10):
            w.emit(f"c{i % 3}" if i != 7 else "ghost", "send", i)
    assert pq.read_table(path).schema == SCHEMA  # without the schema argument too
    rows = read_trace(path).to_pylist()
    assert [(r["node"], r["role"], r["implementation"]) for r in rows[:3]] == [
        ("c0", "client", "reference"), ("c1", "client", "reference"), ("c2", "client", "mutant:x")]
    assert (rows[7]["role"], rows[7]["implementation"], rows[9]["run"], rows[9]["seed"]) == ("", "", "r/1", 1)
    meta = pq.ParquetFile(path).metadata
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    for g in range(meta.num_row_groups):
        for col in ("run", "node", "role", "implementation"):
            assert "RLE_DICTIONARY" in meta.row_group(g).column(names.index(col)).encodings


class Raising(Exploding):
    def handle_timer(self, now: int) -> list:
        raise RuntimeError("boom")


def test_a_node_that_raises_is_crashed_the_run_goes_on_and_the_verdict_shows_it(tmp_path: Path) -> None:
    """One policy, the same in simulation and live (harness.runtime): an error row, a crash row,
    the other nodes keep running, and no-node-errors fails naming the node."""
    text = Path("scenarios/dcp/clean.yaml").read_text().replace("duration: 6s", "duration: 3s").replace(
        "until: 5s", "until: 2s")
    scenario = parse_scenario(text, "clean.yaml")
    result = run_sim(scenario, 1, str(tmp_path), factories={"clients.0": Raising})
    (failed,) = [v for v in result.verdicts if v.check == "no-node-errors"]
    assert not failed.ok and "clients.0" in failed.detail and "RuntimeError: boom" in failed.detail
    rows = read_trace(result.trace_path).to_pylist()  # type: ignore[arg-type]
    (error,) = [r for r in rows if r["kind"] == "error"]
    assert error["node"] == "clients.0" and error["msg_type"] == "handle_timer" and "boom" in error["detail"]
    crash = next(r for r in rows if r["kind"] == "crash")
    assert crash["node"] == "clients.0" and crash["time_ns"] == error["time_ns"]
    assert max(r["time_ns"] for r in rows if r["kind"] == "recv") > 2_000_000_000  # the others went on
