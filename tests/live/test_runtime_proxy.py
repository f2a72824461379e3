"""LiveRuntime with the chaos proxy attached: network faults go to the proxy, its fault rows
reach the trace, and nodes connect from their own source addresses."""

from __future__ import annotations

from typing import Any

import pytest

from fault_injection.proxy import ChaosProxy
from harness.live.runtime import LiveRuntime
from harness.live.sockets import from_source
from harness.runtime import UnsupportedFault
from harness.trace import RunInfo, TraceWriter, read_trace
from tests.fault_injection.zmtp_peers import RawServer
from tests.live.live_test_nodes import EchoClient

pytestmark = [pytest.mark.live, pytest.mark.timeout(30)]


def test_network_faults_need_a_proxy(no_thread_leak: None) -> None:
    with LiveRuntime() as rt:
        for fault in (lambda: rt.partition([["a"], ["b"]]), lambda: rt.heal(), lambda: rt.slow_link("a", "b", "1ms"),
                      lambda: rt.restore_link(1)):
            with pytest.raises(UnsupportedFault):
                fault()


def test_attached_proxy_carries_faults_and_its_rows_reach_the_trace(tmp_path: Any, no_thread_leak: None) -> None:
    trace = TraceWriter(str(tmp_path / "t.parquet"), RunInfo("r", 1, "s", "test"))
    proxy = ChaosProxy(clock=lambda: 0)
    with RawServer() as srv:
        rt = LiveRuntime(trace)
        rt.attach_proxy(proxy, {"cli": "127.0.1.9"})
        rt.add_node("cli", EchoClient, role="client", config={"connect": [srv.endpoint], "n": 0})
        proxy.start()
        rt.start()
        try:
            assert srv.accept().getpeername()[0] == "127.0.1.9", "from its own source address"
            assert rt.connected("cli") == {"cli": [srv.endpoint]}, "the node's own name for the endpoint"
            rt.command(0, "cli", {"connect": srv.endpoint.replace("127.0.0.1", "localhost")})
            assert srv.accept().getpeername()[0] == "127.0.1.9", "Connect actions too"
            pid = rt.partition([["cli"], ["srv"]])
            rt.heal(pid)
            rt.restore_link(rt.slow_link("cli", "srv", "5ms"))
            rt.call(lambda: None)  # the rows the proxy posted before it are written
        finally:
            proxy.stop()
            rt.stop()
    trace.close()
    rows = [(r["node"], r["fault"]) for r in read_trace(str(tmp_path / "t.parquet")).to_pylist() if r["kind"] == "fault"]
    assert rows == [("nemesis", "partition"), ("nemesis", "heal"), ("nemesis", "slow-link"),
                    ("nemesis", "restore-link")]
    assert from_source("ipc:///x", "127.0.1.9") == "ipc:///x"
    assert from_source("tcp://127.0.0.1:5", None) == "tcp://127.0.0.1:5"
