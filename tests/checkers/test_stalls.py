"""A ``stall`` (live only: the runtime fired an in-process node's timer late, its loop busy with
other nodes) excuses the node for that long in the timing checks, as a short pause does — no
longer: a node late by more than the stall is still blamed."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import PAUSE, RECV, RESUME, SEND, STALL, Event, Pauses
from harness.checkers.dcp_heartbeat import WorkerInterval
from harness.checkers.pppp import AckTiming, SubscriberHeartbeats
from harness.protocols import codec

MS = 1_000_000
PPPP = codec("pppp", "strict")
DCP = codec("dcp", "strict")


def stall(t_ms: float, node: str, late_ms: float, role: str = "subscriber") -> Event:
    return Event(int(t_ms * MS), node, role, STALL, data={"late_ns": int(late_ms * MS)})


def heartbeat(t_ms: float, node: str = "subs.0") -> Event:
    return Event(int(t_ms * MS), node, "subscriber", SEND, "dealer", PPPP.encode("HEARTBEAT", {}), "HEARTBEAT",
                 codec=PPPP)


def subscriber_heartbeats(events: list[Event]) -> Any:
    check = SubscriberHeartbeats(first_idle_ms=50, idle_ms=200, tolerance_ms=25)
    for ev in events:
        check.on_event(ev)
    (v,) = check.finish(events[-1].time_ns)
    return v


def test_a_stall_excuses_a_late_subscriber_heartbeat_by_its_length_and_no_more() -> None:
    late = [heartbeat(0), heartbeat(250)]  # due within 200 + 25 ms
    assert not subscriber_heartbeats(late).ok
    assert subscriber_heartbeats([late[0], stall(250, "subs.0", 28), late[1]]).ok
    assert not subscriber_heartbeats([late[0], stall(250, "subs.0", 20), late[1]]).ok  # 5 ms beyond it
    assert not subscriber_heartbeats([late[0], stall(250, "subs.1", 28), late[1]]).ok  # another node's
    # a stall before the previous message is spent: it excuses nothing after it
    assert not subscriber_heartbeats([stall(0, "subs.0", 28), *late]).ok


def test_a_stall_reported_after_a_later_receipt_still_excuses_a_late_ack() -> None:
    """The loop reports a stall when it gets to the node: after the node received more, which
    is when ack-timing learns that an earlier PUBLISH went unacknowledged too long."""
    def publish(t_ms: float, seq: int) -> Event:
        frames = PPPP.encode("PUBLISH", {"channel": b"news", "sequence": seq, "payload": [b"x"]})
        return Event(int(t_ms * MS), "subs.0", "subscriber", RECV, "dealer", frames, "PUBLISH", codec=PPPP)

    def ack(t_ms: float, seq: int) -> Event:
        frames = PPPP.encode("ACK", {"channel": b"news", "sequence": seq, "nacks": []})
        return Event(int(t_ms * MS), "subs.0", "subscriber", SEND, "dealer", frames, "ACK", codec=PPPP)

    def ack_timing(events: list[Event]) -> bool:
        check = AckTiming(first_idle_ms=50, idle_ms=200, tolerance_ms=25)
        for ev in events:
            check.on_event(ev)
        return all(v.ok for v in check.finish(events[-1].time_ns))

    received = [publish(0, 1), publish(100, 2)]  # #1 is overdue (50 + 25 ms) when #2 comes
    assert not ack_timing([*received, ack(110, 2)])
    assert ack_timing([*received, stall(110, "subs.0", 40), ack(110, 2)])
    assert not ack_timing([*received, stall(110, "subs.0", 30), ack(110, 2)])  # 80 ms: 5 beyond


def test_pauses_count_a_stall_as_a_pause_that_just_ended() -> None:
    p = Pauses()
    for ev in (stall(100, "n", 30), Event(200 * MS, "n", "x", PAUSE), Event(260 * MS, "n", "x", RESUME),
               stall(262, "n", 10), stall(300, "n", 5)):
        p.on_event(ev)
    assert p.between("n", 0, 400 * MS) == (30 + 60 + 2 + 5) * MS  # (the second stall clipped to the resume)
    assert p.between("n", 0, 90 * MS) == 20 * MS and p.between("m", 0, 400 * MS) == 0
    q = Pauses()
    for ev in (Event(200 * MS, "n", "x", PAUSE), stall(250, "n", 10)):  # no timer runs while paused
        q.on_event(ev)
    assert q.between("n", 0, 250 * MS) == 50 * MS


def test_a_stall_excuses_a_late_dcp_worker_heartbeat_by_its_length_and_no_more() -> None:
    def worker_interval(events: list[Event]) -> bool:
        check = WorkerInterval(default_ms=100, factor=2.5, tolerance_ms=20)
        for ev in events:
            check.on_event(ev)
        return all(v.ok for v in check.finish(events[-1].time_ns))

    def ping(t_ms: float) -> Event:
        return Event(int(t_ms * MS), "w", "worker", SEND, "dealer", DCP.encode("PING", {}), "PING", codec=DCP)

    assert not worker_interval([ping(0), ping(300)])  # bound 250 + 20 ms
    assert worker_interval([ping(0), stall(300, "w", 35, "worker"), ping(300)])
    assert not worker_interval([ping(0), stall(300, "w", 20, "worker"), ping(300)])


def test_a_deadline_moves_by_the_pauses_that_fall_before_it_and_no_others() -> None:
    p = Pauses()
    for t, kind in ((100, PAUSE), (150, RESUME), (400, PAUSE), (500, RESUME), (900, PAUSE)):
        p.on_event(Event(t, "b", "broker", kind))
    assert p.deadline("b", 0, 300) == 350  # the 50 ms pause at 100 ms moves it; the one at 400 ms is later
    assert p.deadline("b", 0, 380) == 530  # that one too, once the first move pushes the deadline into it
    assert p.deadline("b", 120, 100) == 250  # from inside a pause: counting starts when it ends
    assert p.deadline("b", 600, 300) == 900  # reached just as the last pause begins
    assert p.deadline("b", 650, 300) is None  # the pause at 900 ms never ends: nothing is due
    assert p.deadline("c", 10, 5) == 15  # a node never paused


def test_a_clock_counts_its_jumps_only_from_when_they_happened() -> None:
    from harness.checkers.base import CLOCK, ClockSkews

    c = ClockSkews()
    ms = 1_000_000
    c.on_clock(Event(1000 * ms, "pub", "publisher", CLOCK, data={"offset_ns": 50 * ms, "drift": 0.0}))
    assert c.elapsed("pub", 600 * ms, 900 * ms) == 300 * ms  # before the jump: real time
    assert c.elapsed("pub", 900 * ms, 1100 * ms) == 250 * ms  # across it: 50 ms more
    assert c.elapsed("other", 900 * ms, 1100 * ms) == 200 * ms
    back = c.on_clock(Event(2000 * ms, "pub", "publisher", CLOCK, data={"offset_ns": -10 * ms, "drift": 0.0}))
    assert back == 60 * ms and c.elapsed("pub", 1100 * ms, 2100 * ms) == 940 * ms
