"""LiveRuntime: pausing an in-process node (what SIGSTOP does to a process) and connecting
from a node's own source address."""

from __future__ import annotations

import time
from typing import Any

import pytest

from harness.live.runtime import LiveRuntime
from harness.live.sockets import from_source
from harness.trace import RunInfo, TraceWriter, read_trace
from tests.fault_injection.zmtp_peers import RawServer
from tests.live.live_test_nodes import EchoClient, Ticker
from tests.live.test_runtime import echo_pair, kinds

pytestmark = [pytest.mark.live, pytest.mark.timeout(30)]


def test_a_paused_node_gets_nothing_until_resumed(tmp_path: Any, no_thread_leak: None) -> None:
    trace = TraceWriter(str(tmp_path / "t.parquet"), RunInfo("r", 1, "s", "test"))
    with LiveRuntime(trace) as rt:
        echo_pair(rt, n=1000)
        rt.add_node("tick", Ticker, role="ticker", config={"period_ms": 10, "ticks": 1000})
        rt.wait_for(lambda ds: len(kinds(ds, "reply")) >= 5 and len(kinds(ds, "tick")) >= 2, timeout=5)
        rt.pause("srv")
        rt.pause("tick")
        rt.command("tick", {"k": 1})
        rt.command("tick", {"k": 2})
        assert rt.is_paused("srv") and rt.is_paused("tick")
        time.sleep(0.1)  # whatever was already on its way lands
        replies, ticks = len(kinds(rt.deliveries, "reply")), len(kinds(rt.deliveries, "tick"))
        time.sleep(0.4)
        assert len(kinds(rt.deliveries, "reply")) == replies, "the server reads nothing while paused"
        assert len(kinds(rt.deliveries, "tick")) == ticks, "no timer fires while paused"
        assert kinds(rt.deliveries, "command") == [], "commands wait"
        rt.resume("tick")
        rt.resume("srv")
        rt.wait_for(lambda ds: len(kinds(ds, "reply")) > replies + 5, timeout=5)
        assert [d.data for d in rt.wait_for(lambda ds: len(kinds(ds, "command")) == 2, timeout=5)
                if d.kind == "command"] == [{"k": 1}, {"k": 2}], "in the order they came"
        rt.pause("srv")
        rt.crash("srv")  # a crash ends the pause
        rt.restart("srv")
        assert not rt.is_paused("srv")
    trace.close()
    rows = read_trace(str(tmp_path / "t.parquet")).to_pylist()
    assert [(r["node"], r["kind"]) for r in rows if r["kind"] in ("pause", "resume")] == [
        ("srv", "pause"), ("tick", "pause"), ("tick", "resume"), ("srv", "resume"), ("srv", "pause")]


def test_connections_come_from_the_node_source_address(no_thread_leak: None) -> None:
    assert from_source("tcp://127.0.0.1:5", "127.0.1.9") == "tcp://127.0.1.9:0;127.0.0.1:5"
    assert from_source("ipc:///x", "127.0.1.9") == "ipc:///x"
    assert from_source("tcp://127.0.0.1:5", None) == "tcp://127.0.0.1:5"
    with RawServer() as srv, LiveRuntime() as rt:
        rt.add_node("cli", EchoClient, role="client", config={"connect": [srv.endpoint], "n": 0},
                    source="127.0.1.9")
        rt.start()
        conn = srv.accept()
        assert conn.getpeername()[0] == "127.0.1.9"
        assert rt.connected("cli") == {"cli": [srv.endpoint]}, "the node's own name for the endpoint"
        rt.command("cli", {"connect": srv.endpoint.replace("127.0.0.1", "localhost")})
        assert srv.accept().getpeername()[0] == "127.0.1.9", "Connect actions too"
