"""A live run writes its trace's row groups between two turns of the loop, never inside a
node's handler. Written in a handler, a full group (16,384 rows, about 100 ms) was taken for
the node's own time: the stall model credits a node only for waits of the loop, and in a live
run of fifty PPPP subscribers the one whose receive filled the group ACKed 119 ms after a
PUBLISH (first idle time 50 ms) and failed `ack-timing` and `subscriber-heartbeats`."""

from __future__ import annotations

from typing import Any

from harness.live.runtime import LiveRuntime
from harness.trace import RunInfo, TraceWriter, read_trace
from tests.live.live_test_nodes import EchoClient, EchoServer


def test_row_groups_are_written_between_turns(tmp_path: Any, no_thread_leak: None) -> None:
    path = str(tmp_path / "trace.parquet")
    in_handler: list[bool] = []
    with TraceWriter(path, RunInfo("flush", 1, "echo", "test"), row_group_rows=64) as trace:
        flush = trace.flush
        with LiveRuntime(trace, seed=1) as rt:
            def watched() -> None:
                in_handler.append(rt._handling is not None)  # a handler of a node is running
                flush()
            trace.flush = watched  # type: ignore[method-assign]
            rt.add_node("srv", EchoServer, role="server")
            rt.start()
            endpoint = rt.endpoints("srv")["srv"][0]
            rt.add_node("cli", EchoClient, role="client", config={"connect": [endpoint], "n": 300, "window": 8})
            rt.wait_for(lambda ds: sum(1 for d in ds if d.kind == "reply") >= 300, timeout=10)
    assert len(in_handler) >= 10, "row groups of 64 rows were written as the run went"
    assert not any(in_handler), f"{sum(in_handler)} of {len(in_handler)} row groups written inside a handler"
    rows = read_trace(path).to_pylist()
    assert sum(1 for r in rows if r["kind"] == "send") == 600  # nothing lost by writing later
