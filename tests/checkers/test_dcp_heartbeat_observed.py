"""``worker-interval`` of a DCP worker run as an external process, judged from its sends as the
chaos proxy read them (harness/checkers/dcp_heartbeat.py): the bound gets the external slack, a
gap is not judged across a change of connection or a broker's absence, and a file whose
partitions may cut the worker off judges none of its gaps. The live proof with the mutants as the
external process is in tests/live/test_dcp_external_worker.py."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CRASH, PAUSE, RESTART, RESUME, SEND, START, VIA_PROXY, Event, Verdict
from harness.checkers.dcp_heartbeat import WorkerInterval
from harness.composition import build_checkers
from harness.scenario import parse_scenario

MS = 1_000_000


def seen(t_ms: float, connection: int = 1, node: str = "outside") -> Event:
    """A send of the external worker ``node`` as the proxy read it."""
    return Event(int(t_ms * MS), node, "worker", SEND, socket="dealer:broker", frames=[b"", b"DGBX\x01", b"\x05"],
                 msg_type="PING", data={"peer": "broker", "connection": connection}, via=VIA_PROXY)


def life(t_ms: float, kind: str, node: str) -> Event:
    return Event(int(t_ms * MS), node, "broker" if node == "broker" else "worker", kind)


def judge(*events: Event, end_ms: int = 5000, **params: Any) -> Verdict:
    check = WorkerInterval(heartbeat_ms={"outside": 200}, external=frozenset({"outside"}),
                           brokers=frozenset({"broker"}), **params)
    for e in events:
        check.on_event(e)
    return check.finish(end_ms * MS)[0]


def test_an_external_worker_silent_past_its_bound_and_slack_fails() -> None:
    """Bound: 2.5 x 200 ms + 20 ms, and a quarter of an interval (50 ms) for the proxy's view:
    570 ms, which a worker that pings every third interval (600 ms) still breaks."""
    ok = judge(seen(0), seen(400), seen(970), end_ms=1200)
    assert ok.ok and "outside +50 ms" in ok.detail and "the longest 100% of its bound" in ok.detail, ok.detail
    v = judge(seen(0), seen(400), seen(1000), end_ms=1200)
    assert not v.ok and v.clause == "dcp.heartbeat.worker-interval", v.detail
    assert "outside sent the broker nothing for 600.0 ms before its next message" in v.detail
    assert "(bound 2.5 x 200 ms + 20 ms + 50 ms, seen by the proxy)" in v.detail
    assert v.evidence and v.evidence[0]["seen_by"] == "proxy"
    # a worker that never pings again is silent until the run ends
    assert "until its life ended" in judge(seen(0), end_ms=3000).detail
    # the slack is a setting: without it, the gap that passed above fails
    assert not judge(seen(0), seen(400), seen(970), end_ms=1200, external_slack_ms=0).ok


def test_a_gap_across_a_broker_s_absence_is_not_judged_one_across_the_worker_s_reconnect_is() -> None:
    """A message waits unread while a broker is down, paused or restarting: those gaps are not
    the worker's. One that reconnects because it heard nothing (it sent no PING to be answered)
    was silent all the same."""
    events = [seen(0), seen(200), life(300, PAUSE, "broker"), life(2000, RESUME, "broker"),
              seen(2100, connection=2), life(2200, CRASH, "broker"), life(4000, RESTART, "broker"),
              seen(4100, connection=3), seen(4300, connection=3)]
    v = judge(*events, end_ms=4500)
    assert v.ok, v.detail
    v = judge(seen(0), seen(1200, connection=2), end_ms=1300)
    assert not v.ok and "nothing for 1200.0 ms before its next message" in v.detail, v.detail
    # the worker's own pause is left out as it is for a worker the harness runs
    assert judge(seen(0), life(100, PAUSE, "outside"), life(3000, RESUME, "outside"), seen(3100), end_ms=3200).ok
    # a restart of the worker starts a new life: the gap from its start is not judged
    assert judge(seen(0), seen(200), life(300, CRASH, "outside"), life(3000, START, "outside"), seen(4000),
                 seen(4200), end_ms=4300).ok


def test_a_worker_the_harness_runs_is_judged_without_the_slack() -> None:
    check = WorkerInterval(heartbeat_ms={"w": 200}, external=frozenset({"outside"}), brokers=frozenset({"broker"}))
    for t in (0, 600):
        check.on_event(Event(t * MS, "w", "worker", SEND, socket="dealer", msg_type="PING"))
    v = check.finish(700 * MS)[0]
    assert not v.ok and "w sent the broker nothing for 600.0 ms" in v.detail and "seen by the proxy" not in v.detail


FILE = """protocol: dcp
name: t
duration: 2s
nodes:
  broker: {role: broker}
  outside: {role: worker, command: "worker {connect}", config: {heartbeat: 200ms}}
  clients: {role: client}
FAULTS
check: [worker-interval]
"""


def checker(faults: str = "") -> WorkerInterval:
    (c,) = [c for c in build_checkers(parse_scenario(FILE.replace("FAULTS", faults), "t.yaml"))
            if c.name == "worker-interval"]
    return c  # type: ignore[return-value]


def test_what_the_file_allows_decides_whether_external_workers_are_judged() -> None:
    assert checker().external == {"outside"}
    assert checker("faults:\n  - rule: {drop: 5%}").external == {"outside"}  # the proxy reads before a rule acts
    assert not checker("live: {observe: false}").external
    cut = checker("faults:\n  - {from: 1s, until: 2s, partition: [[outside], [broker]]}")
    assert not cut.external
    v = cut.finish(2000 * MS)[0]
    assert v.ok and "not judged: the gaps between their messages (a partition" in v.detail, v.detail
    assert "(external: outside)" in v.detail
