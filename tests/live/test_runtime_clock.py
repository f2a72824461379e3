"""Clock skew over real sockets: the live runtime moves the clock of a node it runs in this
process (offset and drift, as the simulator does: node time = t + offset + drift * t), converts
the node's timers back, and refuses a process's clock, which is the host's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.composition import run_live, unsupported
from harness.live.runtime import LIVE_FAULTS, LiveRuntime
from harness.runtime import skewed_time
from harness.scenario import parse_scenario
from harness.trace import read_trace, unpack_data
from tests.live.live_test_nodes import Ticker

pytestmark = [pytest.mark.live, pytest.mark.timeout(60)]
MS = 1_000_000


def ticks(runtime: LiveRuntime, n: int) -> list[Any]:
    return [d for d in runtime.wait_for(lambda ds: sum(d.kind == "tick" for d in ds) >= n, timeout=10)
            if d.kind == "tick"]


def test_an_offset_moves_the_nodes_clock_and_its_pending_timer(runtime: LiveRuntime) -> None:
    runtime.add_node("t", Ticker, role="ticker", config={"period_ms": 300, "ticks": 3})
    runtime.start()
    runtime.set_clock("t", 10_000 * MS)  # its first tick, due at 300 ms of its clock, is now overdue
    got = ticks(runtime, 3)
    assert got[0].time_ns < 300 * MS, "the pending timer fired at once"
    for d in got:
        assert d.data["now"] == skewed_time(d.time_ns, 10_000 * MS, 0.0), d
    assert [b.data["now"] - a.data["now"] >= 300 * MS for a, b in zip(got, got[1:])] == [True, True]
    assert runtime.node_time("t") >= 10_000 * MS + got[-1].time_ns


def test_a_drift_makes_the_node_read_a_faster_clock(runtime: LiveRuntime) -> None:
    runtime.add_node("t", Ticker, role="ticker", config={"period_ms": 200, "ticks": 3})
    runtime.set_clock("t", 0, drift=1.0)  # before the start: the node never reads the host's time
    runtime.start()
    got = ticks(runtime, 3)
    for d in got:
        assert d.data["now"] == skewed_time(d.time_ns, 0, 1.0), d
    # 200 ms apart on its clock, which runs twice as fast: about 100 ms apart on the runtime's
    assert [b.data["now"] - a.data["now"] >= 200 * MS for a, b in zip(got, got[1:])] == [True, True]
    assert all(b.time_ns - a.time_ns >= 100 * MS for a, b in zip(got, got[1:]))


EXPIRY = """
protocol: raft
name: raft-live-expiry
duration: 2500ms
nodes:
  peers: PEERS
  clients: {role: client, count: 2, config: {op_timeout: 1s}}
workload:
  - {nodes: clients, op: put, rate: 10/s, from: 500ms, until: 1800ms}
faults:
  - {at: 300ms, clock_skew: TARGET, offset: -60s}
check: [update-expiry, update-once, election-safety]
"""
IN_PROCESS = "{role: peer, count: 3, config: {update_ttl: 20s}}"
EXTERNAL = ('{role: peer, count: 3, command: "{zmq_harness} node raft peer --set id={id} --set endpoint={endpoint} '
            '--set peers={peers} --set election_min={election_min_ms}ms --set election_max={election_max_ms}ms '
            '--set broadcast=false --set update_ttl=20s --data-dir {data_dir}", ready: {line: READY}}')


def test_live_clock_skew_is_refused_only_for_what_may_be_an_external_process() -> None:
    def why(peers: str, target: str) -> list[str]:
        scenario = parse_scenario(EXPIRY.replace("PEERS", peers).replace("TARGET", target), "x.yaml")
        return unsupported(scenario, LIVE_FAULTS, "live")

    assert why(IN_PROCESS, "clients.0") == [] and why(EXTERNAL, "clients.0") == []
    assert "peers.1 run(s) an external command" in why(EXTERNAL, "peers.1")[0]
    assert "may name an external process when it fires" in why(EXTERNAL, "leader")[0]
    assert why(IN_PROCESS, "leader") == []


@pytest.mark.slow
def test_external_peers_refuse_updates_of_a_client_whose_clock_is_a_minute_behind(tmp_path: Path) -> None:
    """The use of it: the harness's client stamps reqids a minute in the past, beyond the peers'
    20 s REQUEST_UPDATE_TTL, so external peers must refuse them as expired (E-RAFT-15/16). (Reqids
    carry whole seconds, and a live run's clients start their clocks when the processes are up,
    a few seconds after the epoch the run gives them: a TTL of a second or two is too fine.)"""
    scenario = parse_scenario(EXPIRY.replace("PEERS", EXTERNAL).replace("TARGET", "clients.0"), "expiry.yaml")
    result = run_live(scenario, 1, str(tmp_path))
    assert result.ok, [v.to_dict() for v in result.failed]
    ops: dict[str, list[str]] = {}
    for row in read_trace(result.trace_path).to_pylist():
        if row["kind"] == "deliver" and row["msg_type"] == "op":
            op = unpack_data(row["data"])
            ops.setdefault(row["node"], []).append(op["reason"] if op["status"] == "info" else op["status"])
    assert ops["clients.0"] and set(ops["clients.0"]) == {"the reqid expired"}, ops
    assert "ok" in ops["clients.1"], ops  # the same peers take the updates of a client on time
