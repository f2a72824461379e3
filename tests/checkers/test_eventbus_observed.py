"""Event BUS checks of a server run as an external process, judged from what the chaos proxy read
(``via="proxy"``, harness.live_observe): `server-sequence` per connection and across the
server's lives, `syncend-sequence` against the BROADCASTs of the same life; the other server
checks leave such events out (the in-process clients' views already show them). The events are
fed as a live run produces them: a send the proxy read on one connection, numbered in its data."""

from __future__ import annotations

from harness.checkers.base import NOTE, RECV, RESTART, SEND, VIA_PROXY, Checker, Event, Verdict
from harness.checkers.eventbus import CompleteDelivery, ServerSequence, SyncEndSequence
from harness.checkers.eventbus_server import SnapshotFilter
from harness.protocols import codec

C = codec("eventbus", "strict")
UUIDS = ["0c2f7b4e-8d1a-4f6e-9b3a-5d6c7e8f9a" + f"{i:02d}" for i in range(60)]


def seen(ev: Event, connection: int) -> Event:
    ev.via = VIA_PROXY
    ev.data = {"peer": "app", "connection": connection}
    return ev


def broadcast(t: int, seq: int, connection: int, topic: str = "/w/x") -> Event:
    frames = C.encode("BROADCAST", {"topic": topic, "sequence": seq, "producer": "app", "uuid": UUIDS[seq],
                                    "timestamp": "2026-01-01T00:00:00.000Z", "data": b"\x80"})
    return seen(Event(t, "bus", "server", SEND, "publisher", frames, "BROADCAST", codec=C), connection)


def syncstart(t: int, since: int, connection: int, subtrees: list[str] | None = None, who: bytes = b"app") -> Event:
    frames = C.encode("SYNCSTART", {"subtrees": subtrees or [], "sequence": since})
    return seen(Event(t, "bus", "server", RECV, "snapshot", [who, *frames], "SYNCSTART", codec=C), connection)


def sync(t: int, seq: int, connection: int, topic: str = "/w/x", who: bytes = b"app") -> Event:
    frames = C.encode("SYNC", {"topic": topic, "sequence": seq, "producer": "app", "uuid": UUIDS[seq],
                               "timestamp": "2026-01-01T00:00:00.000Z", "data": b"\x80"})
    return seen(Event(t, "bus", "server", SEND, "snapshot", [who, *frames], "SYNC", codec=C), connection)


def syncend(t: int, seq: int, connection: int, subtrees: list[str] | None = None, who: bytes = b"app") -> Event:
    frames = C.encode("SYNCEND", {"subtrees": subtrees or [], "sequence": seq})
    return seen(Event(t, "bus", "server", SEND, "snapshot", [who, *frames], "SYNCEND", codec=C), connection)


def restart(t: int) -> Event:
    return Event(t, "bus", "server", RESTART)


def verdict(checker: Checker, events: list[Event]) -> Verdict:
    for ev in events:
        checker.on_event(ev)
    [v] = checker.finish(100_000)
    return v


def server_sequence(events: list[Event]) -> Verdict:
    return verdict(ServerSequence(external=["bus"]), events)


# ---- server-sequence ------------------------------------------------------------------------------
def test_copies_on_each_subscribers_connection_are_one_increasing_stream_each() -> None:
    # the PUB sends every BROADCAST to each subscriber: the proxy reads it once per connection, and
    # across connections in any order (before: "bus sent 1 after 1" on every second copy)
    events = [broadcast(10, 1, 7), broadcast(11, 2, 7), broadcast(12, 1, 8), broadcast(13, 3, 7), broadcast(14, 2, 8)]
    v = server_sequence(events)
    assert v.ok, v.detail
    assert "bus (external) judged as the proxy read its 5 BROADCAST(s) on 2 connection(s)" in v.detail
    assert "not judged" not in v.detail


def test_a_sequence_that_goes_back_on_one_connection_fails() -> None:
    v = server_sequence([broadcast(10, 1, 7), broadcast(11, 3, 7), broadcast(12, 2, 7)])
    assert not v.ok and "bus (as the proxy read it) sent 2 after 3" in v.detail, v.detail
    assert v.clause == "eventbus.server.sequence-increasing"


def test_a_counter_that_starts_again_after_a_restart_fails_on_the_new_connections() -> None:
    before = [broadcast(10, 1, 7), broadcast(11, 2, 7), broadcast(12, 3, 7)]
    again = [restart(50), broadcast(60, 1, 9), broadcast(61, 2, 9)]  # volatile-sequence: from 1 again
    v = server_sequence(before + again)
    assert not v.ok and "sent 1 after 3" in v.detail, v.detail
    kept = [restart(50), broadcast(60, 4, 9), broadcast(61, 5, 9)]  # a counter kept across the restart
    assert server_sequence(before + kept).ok


def test_an_old_connection_read_after_the_restart_stays_in_its_life() -> None:
    # the proxy may read what the killed process left on an old connection after the restart
    events = [broadcast(10, 1, 7), restart(50), broadcast(60, 4, 9), broadcast(61, 2, 7), broadcast(62, 5, 9)]
    assert server_sequence(events).ok


def test_an_unobserved_external_server_is_still_named_as_not_judged() -> None:
    v = server_sequence([])
    assert v.ok and "not judged: bus (external" in v.detail


# ---- syncend-sequence -----------------------------------------------------------------------------
def history(observed: bool = True) -> SyncEndSequence:
    return SyncEndSequence(dialect="strict", external_servers={0: "bus"}, observed_history=observed)


def test_a_snapshot_that_leaves_out_a_broadcast_event_it_covers_fails() -> None:
    # empty-snapshot: no SYNC, and a SYNCEND with the latest sequence (E-EVENTBUS-08 allows that
    # only when there is nothing to send); the BROADCASTs went to another subscriber
    events = [broadcast(10, 1, 3), broadcast(11, 2, 3), syncstart(20, 0, 5), syncend(21, 2, 5)]
    v = verdict(history(), events)
    assert not v.ok and "covers event(s) [1, 2] it broadcast in that life" in v.detail, v.detail
    assert v.clause == "eventbus.server.syncend-sequence"
    v = verdict(history(observed=False), events)  # two servers: the history is not judged
    assert v.ok and "not judged: bus (external" in v.detail


def test_a_broadcast_read_after_the_syncend_still_counts() -> None:
    # sent before the SYNCEND, read later on another connection: its sequence shows it was held
    events = [syncstart(20, 0, 5), sync(21, 1, 5), syncend(22, 1, 5), broadcast(30, 1, 3), broadcast(31, 2, 3)]
    v = verdict(history(), events)
    assert v.ok and "1 snapshot(s) judged complete against the 2 BROADCAST(s)" in v.detail, v.detail
    racy = [syncstart(20, 0, 5), sync(21, 1, 5), syncend(22, 2, 5), broadcast(30, 1, 3), broadcast(31, 2, 3)]
    assert not verdict(SyncEndSequence(dialect="eventbus:micro-toolkit", external_servers={0: "bus"},
                                       observed_history=True), racy).ok


def test_the_filter_and_the_subtrees_of_the_request_bound_what_is_owed() -> None:
    events = [broadcast(10, 1, 3, "/w/x"), broadcast(11, 2, 3, "/n/y"), broadcast(12, 3, 3, "/w/x"),
              syncstart(20, 1, 5, ["/w/"]), sync(21, 3, 5), syncend(22, 3, 5, ["/w/"])]
    assert verdict(history(), events).ok


def test_a_request_asked_again_before_its_answer_is_not_judged() -> None:
    events = [broadcast(10, 1, 3), broadcast(11, 2, 3), syncstart(20, 0, 5), syncstart(21, 0, 5),
              sync(22, 1, 5), syncend(23, 2, 5), sync(24, 2, 5), syncend(25, 2, 5)]
    v = verdict(history(), events)
    assert v.ok and "0 snapshot(s) judged" in v.detail and "2 answer(s)" in v.detail, v.detail
    # once both are answered, the next request is judged again
    v = verdict(history(), [*events, syncstart(30, 0, 5), sync(31, 1, 5), syncend(32, 2, 5)])
    assert not v.ok and "covers event(s) [2]" in v.detail, v.detail


def test_a_new_life_owes_nothing_of_the_old_lifes_broadcasts() -> None:
    events = [broadcast(10, 1, 3), broadcast(11, 2, 3), restart(50), syncstart(60, 0, 8), syncend(61, 2, 8)]
    assert verdict(history(), events).ok


# ---- the checks that leave observed events out -------------------------------------------------
def test_other_server_checks_do_not_read_the_proxys_events_again() -> None:
    # the client's own view shows this request; read twice, it would stay open and mismatch the next
    sf = SnapshotFilter(external_servers={0: "bus"})
    events = [syncstart(20, 5, 5), sync(21, 1, 5), syncend(22, 1, 5)]
    v = verdict(sf, events)
    assert v.ok and "0 snapshot(s)" in v.detail, v.detail
    cd = CompleteDelivery({"app": ["/w/"]}, servers=["bus"], external_servers=True)
    v = verdict(cd, [Event(5, "app", "client", NOTE, msg_type="synced", data={"sequence": 0}), broadcast(10, 1, 3)])
    assert v.ok and "0 event(s) accepted" in v.detail, v.detail
