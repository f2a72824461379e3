"""An Event BUS server run as an external process, observed by the chaos proxy (on by default):
its sockets are named by the ports they bind, so its two ROUTERs are told apart, and the server
checks that read the proxy's reports judge it (harness.checkers.eventbus, `ObservedHistory`).
Real processes (`zmq-harness node eventbus server`), real sockets, loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.composition import RunResult, run_live
from harness.scenario import parse_scenario
from harness.trace import read_trace

pytestmark = [pytest.mark.live, pytest.mark.timeout(120)]

BUS = """
protocol: eventbus
name: observed-bus
duration: 3s
LIVE
nodes:
  bus: {role: server, command: "{zmq_harness} node eventbus server --bind {endpoint} MUTANT"}
  early: {role: client, count: 2, config: {subtrees: [/w/], resync: 400ms}}
  late: {role: client, start: 1500ms, config: {subtrees: [/w/]}}
workload:
  - {nodes: early, op: publish, topics: [/w/a, /w/b], rate: 10/s, from: 300ms, until: 2s}
check: [convergence, syncend-sequence, server-sequence, snapshot-filter]
"""


def run(tmp_path: Path, mutant: str = "", live: str = "") -> RunResult:
    text = BUS.replace("MUTANT", f"--mutant {mutant}" if mutant else "").replace("LIVE", live)
    return run_live(parse_scenario(text, "observed-bus.yaml"), 1, str(tmp_path))


def detail(r: RunResult, check: str) -> str:
    return next(v.detail for v in r.verdicts if v.check == check)


def test_an_observed_external_server_is_judged_by_what_the_proxy_read(tmp_path: Path) -> None:
    r = run(tmp_path / "reference")
    assert r.ok, [v.to_dict() for v in r.failed]
    history = detail(r, "syncend-sequence")
    assert "bus (external): " in history and "snapshot(s) judged complete against the" in history, history
    assert "judged complete against the 0 BROADCAST(s)" not in history, history
    assert "bus (external) judged as the proxy read its" in detail(r, "server-sequence")
    # before: both ROUTERs were "router", and the snapshot and publisher reads went unjudged
    rows = read_trace(r.trace_path).select(["node", "kind", "socket", "detail"]).to_pylist()
    sockets = {row["socket"] for row in rows if row["node"] == "bus" and row["detail"] == "seen by the proxy"}
    assert sockets == {"snapshot", "publisher", "collector"}, sockets


def test_an_empty_snapshot_fails_against_the_broadcasts_the_proxy_read(tmp_path: Path) -> None:
    # a SYNCEND with the latest sequence and no SYNC: the late client lacks what came before it
    # only if no BROADCAST reaches it first, so convergence alone caught it now and then
    r = run(tmp_path / "mutant", "empty-snapshot")
    v = next(v for v in r.verdicts if v.check == "syncend-sequence")
    assert not v.ok and v.clause == "eventbus.server.syncend-sequence", v.to_dict()
    assert "(external, as the proxy read it)" in v.detail and "which are in the request but not among its 0 SYNC(s)" \
        in v.detail, v.detail
    off = run(tmp_path / "unobserved", "empty-snapshot", "live: {observe: false}")
    v = next(v for v in off.verdicts if v.check == "syncend-sequence")
    assert v.ok and "not judged: bus (external" in v.detail, v.to_dict()


STANDIN = ("{python} tests/standins/eventbus_server.py --host 127.0.0.1 --port {port} --dialect micro-toolkit "
           "--start-delay-ms 100 BREAK")


@pytest.mark.slow
@pytest.mark.parametrize("broken", [False, True], ids=["correct", "syncend-race"])
def test_the_deployed_buses_syncend_race_fails_in_its_own_dialect(broken: bool, tmp_path: Path) -> None:
    # micro-toolkit/event-bus-zeromq answers a SYNCSTART from a query of its store that completes
    # later, with its latest sequence in the SYNCEND: an event taken meanwhile is covered and in no
    # SYNC. Its dialect allows a SYNCEND above the highest SYNC, so only the history shows it.
    command = STANDIN.replace("BREAK", "--break syncend-race" if broken else "")
    text = BUS.replace("protocol: eventbus", "protocol: eventbus\ndialect: eventbus:micro-toolkit")
    text = text.replace('"{zmq_harness} node eventbus server --bind {endpoint} MUTANT"', f'"{command}"')
    r = run_live(parse_scenario(text.replace("LIVE", ""), "race.yaml"), 1, str(tmp_path))
    v = next(v for v in r.verdicts if v.check == "syncend-sequence")
    if not broken:
        assert r.ok, [v.to_dict() for v in r.failed]
        return
    assert not v.ok and "(external, as the proxy read it): SYNCEND" in v.detail, v.to_dict()
