"""PPPP checks with nodes that run as external processes (E-PPPP-20): no probe reports what an
external node delivers, sends or receives, so `exactly-once` judges an external subscriber on
what the publisher's probe shows and learns an external publisher's numbers from what the
in-process subscribers receive; every check names the external nodes it does not judge. The
events are fed as a live run produces them: the in-process nodes' probes only."""

from __future__ import annotations

from harness.checkers.base import CRASH, DELIVER, RECV, RESTART, SEND, Event, Verdict
from harness.checkers.pppp import ExactlyOnce, SubscriberHeartbeats
from harness.protocols import codec

C = codec("pppp", "strict")
MS = 1_000_000
TIMES = {"first_idle_ms": 50, "idle_ms": 200, "liveness": 3}


def subscribe(t: int, sub: bytes) -> Event:
    return Event(t, "publisher", "publisher", RECV, "router", [sub, *C.encode("SUBSCRIBE", {"channel": b"news"})],
                 "SUBSCRIBE", codec=C)


def publish_to(t: int, sub: bytes, seq: int) -> Event:
    frames = C.encode("PUBLISH", {"channel": b"news", "sequence": seq, "payload": [b"x"]})
    return Event(t, "publisher", "publisher", SEND, "router", [sub, *frames], "PUBLISH", codec=C)


def published(t: int, seq: int) -> Event:
    return Event(t, "publisher", "publisher", DELIVER, msg_type="published", data={"channel": b"news", "seq": seq})


def received(t: int, sub: str, seq: int) -> Event:
    frames = C.encode("PUBLISH", {"channel": b"news", "sequence": seq, "payload": [b"x"]})
    return Event(t, sub, "subscriber", RECV, "dealer", frames, "PUBLISH", codec=C)


def delivered(t: int, sub: str, seq: int) -> Event:
    return Event(t, sub, "subscriber", DELIVER, msg_type="message", data={"channel": b"news", "seq": seq})


def verdict(checker: ExactlyOnce | SubscriberHeartbeats, events: list[Event]) -> Verdict:
    for ev in events:
        checker.on_event(ev)
    [v] = checker.finish(10_000 * MS)
    return v


def test_an_external_subscriber_is_judged_by_what_the_publisher_sent_it() -> None:
    # 'ext' runs as a process: the publisher's probe sees its SUBSCRIBE and what it sends it
    events = [subscribe(1 * MS, b"ext"), published(10 * MS, 1), publish_to(10 * MS, b"ext", 1),
              published(20 * MS, 2), publish_to(20 * MS, b"ext", 2)]
    v = verdict(ExactlyOnce(**TIMES, external={"ext": "subscriber"}), events)
    # before: "ext subscribed b'news' but never received anything of b'news'"
    assert v.ok and "not judged: ext (external: what it delivers is not on the wire)" in v.detail, v.detail
    # a publisher that sends it nothing is caught, and named
    starved = [subscribe(1 * MS, b"ext"), published(10 * MS, 1), published(20 * MS, 2)]
    v = verdict(ExactlyOnce(**TIMES, external={"ext": "subscriber"}), starved)
    assert not v.ok and "the publisher sent ext nothing" in v.detail, v.detail
    assert v.clause == "pppp.publisher.preserve-until-acked"


def test_an_external_subscriber_killed_and_restarted_is_still_judged_as_external() -> None:
    # The live runtime reports the crash and the restart of an external process (role
    # subscriber); before, they made 'ext' look probed, and exactly-once failed the reference
    # publisher "ext subscribed b'news' but never received anything" (restart-live.yaml with its
    # subs external, bench/chaos_standins.py pp-restartlive-subs: the reference subscriber as the
    # process and the stand-in alike, seed 1)
    crash = [Event(15 * MS, "ext", "subscriber", CRASH), Event(16 * MS, "ext", "subscriber", RESTART)]
    events = [subscribe(1 * MS, b"ext"), published(10 * MS, 1), publish_to(10 * MS, b"ext", 1), *crash,
              subscribe(17 * MS, b"ext"), published(20 * MS, 2), publish_to(20 * MS, b"ext", 2)]
    v = verdict(ExactlyOnce(**TIMES, external={"ext": "subscriber"}), events)
    assert v.ok and "not judged: ext" in v.detail, v.detail
    # a publisher that sends the restarted one nothing is still caught
    starved = [subscribe(1 * MS, b"ext"), *crash, subscribe(17 * MS, b"ext"), published(20 * MS, 1)]
    v = verdict(ExactlyOnce(**TIMES, external={"ext": "subscriber"}), starved)
    assert not v.ok and "the publisher sent ext nothing" in v.detail, v.detail


def test_an_external_publishers_numbers_come_from_what_the_subscribers_received() -> None:
    # no publisher events at all: 'a' received #1..#3, 'b' (in-process) received #1 and #3 only
    events = [received(10 * MS, "a", 1), delivered(10 * MS, "a", 1), received(11 * MS, "a", 2),
              delivered(11 * MS, "a", 2), received(12 * MS, "a", 3), delivered(12 * MS, "a", 3),
              received(10 * MS, "b", 1), delivered(10 * MS, "b", 1), received(12 * MS, "b", 3),
              delivered(12 * MS, "b", 3)]
    v = verdict(ExactlyOnce(**TIMES, external={"pub": "publisher"}), events)
    # before: passed, judging duplicates only (the highest number came from the publisher's probe)
    assert not v.ok and "b never delivered b'news' #2" in v.detail, v.detail
    assert v.clause == "pppp.publisher.resend-nacked"  # the in-process subscriber NACKs what it lacks
    assert "not judged" not in v.detail  # it judges subscribers, and both are in-process


def test_a_check_of_a_role_that_is_external_says_what_it_did_not_judge() -> None:
    v = verdict(SubscriberHeartbeats(**TIMES, external={"ext.0": "subscriber", "pub": "publisher"}), [])
    assert v.ok and v.detail.endswith("; not judged: ext.0 (external: no probe reports what it does)"), v.detail


def test_a_malformed_message_from_an_external_subscriber_is_caught_where_the_publisher_dropped_it() -> None:
    from harness.checkers.base import DISCARD
    from harness.checkers.pppp_common import PpppExternalWire

    short = [b"\x02news", b"\x00\x01"]  # an ACK whose number is not 8 bytes
    got = Event(10, "publisher", "publisher", RECV, "router", [b"ext.0", *short], codec=C)
    dropped = Event(10, "publisher", "publisher", DISCARD, "router", short, codec=C,
                    data={"reason": "sequence is not 8 bytes", "clause": "pppp.wire.sequence-format"})
    v = verdict(PpppExternalWire(subscribers=["subs.0"]), [got, dropped])
    assert not v.ok and v.clause == "pppp.wire.sequence-format" and "ext.0" in v.detail, v
    assert verdict(PpppExternalWire(subscribers=["ext.0"]), [got, dropped]).ok  # in-process: wire-conformance's


def test_a_well_formed_message_the_publisher_dropped_for_another_reason_is_no_malformed_one() -> None:
    # a publisher that restarted forgets its subscribers: a correct subscriber's HEARTBEAT is
    # dropped as "from a peer that never subscribed", the routing id in front (as received)
    from harness.checkers.base import DISCARD
    from harness.checkers.pppp_common import PpppExternalWire

    frames = [b"ext.0", *C.encode("HEARTBEAT", {})]
    got = Event(10, "publisher", "publisher", RECV, "router", frames, codec=C)
    dropped = Event(10, "publisher", "publisher", DISCARD, "router", frames, codec=C,
                    data={"reason": "HEARTBEAT from a peer that never subscribed",
                          "clause": "pppp.conversation.subscribe-first"})
    v = verdict(PpppExternalWire(subscribers=["subs.0"]), [got, dropped])
    assert v.ok and "1 dropped message(s) of theirs decoded" in v.detail, v.detail
