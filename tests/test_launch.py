"""Endpoints of a run: live, a node's first endpoints are consecutive ports (an Event BUS
server's P, P+1, P+2), the same (node, purpose) always gets the same endpoint."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from harness.launch import PORTS_PER_NODE, EndpointAllocator


def port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def test_live_endpoints_of_a_node_are_consecutive() -> None:
    alloc = EndpointAllocator("live")
    ports = [port(alloc("bus", p)) for p in ("snapshot", "publisher", "collector")]
    assert ports == [ports[0], ports[0] + 1, ports[0] + 2] and PORTS_PER_NODE == 3
    assert alloc("bus", "publisher") == f"tcp://127.0.0.1:{ports[1]}"
    assert port(alloc("bus", "extra")) not in ports  # beyond the block: a port of its own
    assert port(alloc("other", "x")) not in ports
    assert alloc.of("bus")[:3] == [f"tcp://127.0.0.1:{p}" for p in ports]


def test_sim_endpoints_are_virtual() -> None:
    alloc = EndpointAllocator("sim")
    assert alloc("bus", "snapshot") == "tcp://bus:5000" and alloc("bus", "publisher") == "tcp://bus:5001"


# ---- process-alive: a process that ended by itself, not one the scenario's faults killed ----

_WORKERS = """protocol: dcp
name: external-worker-{name}
duration: 3s
nodes:
  broker: {{role: broker, config: {{heartbeat: 200ms, liveness: 3}}}}
  workers: {{role: worker, count: 2, config: {{service: echo, heartbeat: 200ms, liveness: 3}}}}
  outside: {{role: worker, command: "{command}", ready: {{line: READY}}}}
  clients: {{role: client, count: 2, config: {{timeout: 400ms, max_attempts: 25}}}}
workload:
  - {{nodes: clients, op: request, service: echo, rate: 5/s, from: 300ms, until: 2s}}
faults: [{faults}]
check: [exactly-once]
"""
_WORKER = ("{{zmq_harness}} node dcp worker --connect {{connect}} --set service=echo --set heartbeat=200ms "
           "--set liveness=3")


def _alive_verdicts(tmp_path: Any, name: str, command: str, faults: str) -> list[Any]:
    from harness.composition import run_live
    from harness.scenario import parse_scenario

    text = _WORKERS.format(name=name, command=command, faults=faults)
    r = run_live(parse_scenario(text, f"{name}.yaml"), 1, str(tmp_path))
    return [v for v in r.verdicts if v.check == "process-alive"]


@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_process_the_scenario_kills_for_good_is_not_a_process_that_died(tmp_path: Any) -> None:
    # before: process-alive failed by the harness's own SIGKILL ("exited with status -9")
    assert _alive_verdicts(tmp_path, "killed", _WORKER.format(), "{at: 1s, crash: outside}") == []


def _exits_with(status: int) -> str:
    """READY (once the worker is up, however long that takes), then its end half a second later."""
    return ("sh -c '" + _WORKER.format() + " > {datadir}/out & W=$!; until grep -q READY {datadir}/out; do sleep 0.1; "
            f"done; echo READY; sleep 0.5; kill $W; wait $W; exit {status}'")


@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_process_that_exits_by_itself_fails_process_alive_unless_with_status_0(tmp_path: Any) -> None:
    # Status 0 is a program's normal end (the habit of command-line clients once their work is
    # out); process-alive failed it ("outside exited with status 0") though nothing went wrong.
    from harness.composition import run_live
    from harness.scenario import parse_scenario

    text = _WORKERS.format(name="exits", command=_exits_with(3), faults="")
    text = text.replace("  clients:", f'  done: {{role: worker, command: "{_exits_with(0)}", ready: {{line: READY}}}}\n'
                                      "  clients:")
    r = run_live(parse_scenario(text, "exits.yaml"), 1, str(tmp_path))
    by_node = {v.detail.split()[0]: v for v in r.verdicts if v.check == "process-alive"}
    assert set(by_node) == {"outside", "done"}, by_node
    assert not by_node["outside"].ok and "outside exited with status 3" in by_node["outside"].detail
    assert by_node["done"].ok and "done ended by itself with status 0" in by_node["done"].detail


# ---- {data_dir}: kept across a node's restarts, never across runs -----------------------------

_KEEPER = """protocol: raft
name: raft-data-dirs
duration: 1s
nodes:
  peers: {role: peer, count: 1, command: "{python} -c pass --data-dir {data_dir}"}
"""


def test_a_data_dir_starts_empty_in_each_run_of_an_out_dir(tmp_path: Any) -> None:
    """A second run in the same out dir (`zmq-harness run --live` twice into runs/) used to hand
    each external node the directory of the run before: Raft stand-in peers came back with that
    run's log, and log-matching and linearizable failed them (and reference peers alike)."""
    from harness.launch import external_node
    from harness.scenario import parse_scenario

    scenario = parse_scenario(_KEEPER)
    group = scenario.groups["peers"]
    alloc = EndpointAllocator("live")
    alloc("peers.0", "router")
    first = external_node(scenario, group, "peers.0", "peer", 1, alloc, str(tmp_path), config={})
    data_dir = first.process.args[-1]
    assert data_dir.startswith(str(tmp_path))
    with open(f"{data_dir}/state.json", "w") as f:
        f.write("the log of the run before")
    again = external_node(scenario, group, "peers.0", "peer", 2, alloc, str(tmp_path), config={})
    assert again.process.args[-1] == data_dir
    assert os.listdir(data_dir) == [], "a new run's node starts without the last run's durable state"


# ---- restarts of external nodes: what the scenario did to them is not their failure -----------


def _external(script: str, name: str) -> Any:
    """An external node running ``sh -c script``, ready when it prints READY."""
    from harness.live.external import ExternalNode
    from harness.live.supervisor import ManagedProcess, ReadyLine

    return ExternalNode(ManagedProcess(["sh", "-c", script], ready=ReadyLine("READY", timeout=10), name=name), "peer")


SLOW_START = "sleep 0.5; echo READY; exec sleep 30"  # as the reference peer on a loaded machine, only faster


@pytest.mark.live
@pytest.mark.timeout(60)
def test_a_restart_a_crash_fault_cuts_short_is_not_a_restart_that_failed() -> None:
    """The reference peer as an external command takes a second or more to print READY on a
    loaded machine; rolling-restarts crashes a peer 1 s after its restart began, and
    five-peers-everything the leader it restarted 0.5 s before: the crash killed a process still
    starting, and process-alive said it "did not come back after a restart" ("exited with code
    -9 before printing a line matching 'READY'"), though the scenario had killed it."""
    slow = _external(SLOW_START, "slow")
    slow.process.start()
    try:
        slow.restart_in_background()
        time.sleep(0.25)  # starting again, not ready yet: a crash fault strikes
        slow.kill()
        slow.wait_restarted(10)
        assert slow.restart_errors == []
    finally:
        slow.process.kill()
    broken = _external("exit 3", "broken")
    broken.restart_in_background()
    broken.wait_restarted(10)
    assert len(broken.restart_errors) == 1 and "before printing" in broken.restart_errors[0], broken.restart_errors


@pytest.mark.live
@pytest.mark.timeout(60)
def test_two_restarts_close_together_run_one_after_the_other() -> None:
    """five-peers-everything crashes the leader at 1.5 s (back after 1 s) and peers.1 at 2 s
    (back after 0.4 s): when the leader was peers.1 the second restart began while the first was
    starting it, stopped that process (SIGTERM), and process-alive said peers.1 "exited with code
    -15 before printing a line matching 'READY'"."""
    node = _external(SLOW_START, "twice")
    node.process.start()
    try:
        node.restart_in_background()
        time.sleep(0.2)
        node.restart_in_background()
        node.wait_restarted(10)
        assert node.restart_errors == [] and node.running and not node.down_on_purpose
    finally:
        node.process.kill()
