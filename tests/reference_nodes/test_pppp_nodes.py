"""The PPPP reference publisher and subscriber, driven by hand: what each sends, delivers and
notes for each input, and what it keeps across a crash (docs/errata.md, PPPP section)."""

from __future__ import annotations

import json

import pytest

from harness.node import Connect, Deliver, Discard, Disconnect, DurableStore, Note, Send
from harness.protocols import codec
from reference_nodes.pppp.common import delivery_line
from reference_nodes.pppp.mutants import ResendsFirstPublisher
from reference_nodes.pppp.publisher import Publisher
from reference_nodes.pppp.subscriber import Subscriber
from tests.reference_nodes.node_helpers import ctx, notes, of, sends

C = codec("pppp")
MS = 1_000_000
TIMES = {"first_idle_ms": 50, "idle_ms": 200, "liveness": 3, "grace_ms": 2000}


def pub(store: DurableStore | None = None, cls: type = Publisher, **config) -> Publisher:
    return cls(ctx("pub", store, **{**TIMES, **config}))


def sub(store: DurableStore | None = None, **config) -> Subscriber:
    return Subscriber(ctx("sub", store, **{"channels": ["news"], **TIMES, **config}))


def msg(frames: list[bytes], to_subscriber: bool = True):
    return C.decode(frames, channel="to-subscriber" if to_subscriber else "to-publisher")


def from_sub(p: Publisher, ident: bytes, name: str, now: int, **fields) -> list:
    return p.receive("router", [ident, *C.encode(name, fields)], now)


def published(actions) -> list[tuple[bytes, bytes, int, list[bytes]]]:
    """(recipient, channel, number, payload) of every PUBLISH sent."""
    out = []
    for s in sends(actions, "PUBLISH"):
        m = msg(s.frames[1:])
        out.append((s.frames[0], m["channel"], m["sequence"], m["payload"]))
    return out


def publish(p: Publisher, channel: bytes, payload: bytes, now: int) -> list:
    return p.command({"op": "publish", "channel": channel, "payload": payload}, now)


# ---- publisher ---------------------------------------------------------------------------------


def test_numbers_start_at_1_per_channel_and_nothing_is_kept_without_subscribers() -> None:
    p = pub()
    out = publish(p, b"news", b"a", 0) + publish(p, b"news", b"b", 0) + publish(p, b"weather", b"c", 0)
    assert [(d.data["channel"], d.data["seq"]) for d in of(out, Deliver)] == [(b"news", 1), (b"news", 2),
                                                                              (b"weather", 1)]
    assert not sends(out) and not p.held.get(b"news")


def test_a_subscription_selects_channels_by_prefix_from_the_next_message_on() -> None:
    p = pub()
    publish(p, b"news", b"old", 0)
    from_sub(p, b"s1", "SUBSCRIBE", 0, channel=b"ne")
    from_sub(p, b"s2", "SUBSCRIBE", 0, channel=b"")
    out = publish(p, b"news", b"n", 1) + publish(p, b"weather", b"w", 1)
    assert published(out) == [(b"s1", b"news", 2, [b"n"]), (b"s2", b"news", 2, [b"n"]),
                              (b"s2", b"weather", 1, [b"w"])]


def test_a_batch_publishes_each_payload_in_order_as_its_own_message() -> None:
    p = pub()
    from_sub(p, b"s1", "SUBSCRIBE", 0, channel=b"news")
    out = p.command({"op": "publish", "channel": b"news", "batch": [b"a", [b"b1", b"b2"], b"c"]}, 1)
    assert published(out) == [(b"s1", b"news", 1, [b"a"]), (b"s1", b"news", 2, [b"b1", b"b2"]),
                              (b"s1", b"news", 3, [b"c"])]
    assert [d.data["seq"] for d in of(out, Deliver)] == [1, 2, 3]
    with pytest.raises(ValueError, match="list of payloads"):
        p.command({"op": "publish", "channel": b"news", "batch": b"abc"}, 2)


def test_ack_releases_what_every_subscriber_acknowledged_and_nack_resends_it() -> None:
    p = pub()
    for s in (b"s1", b"s2"):
        from_sub(p, s, "SUBSCRIBE", 0, channel=b"news")
    for k in range(1, 5):
        publish(p, b"news", b"m%d" % k, k)
    assert not notes(from_sub(p, b"s1", "ACK", 10, channel=b"news", sequence=4), "released")
    out = from_sub(p, b"s2", "ACK", 11, channel=b"news", sequence=4, nacks=[(2, 3)])
    assert published(out) == [(b"s2", b"news", 2, [b"m2"]), (b"s2", b"news", 3, [b"m3"])]
    assert notes(out, "released")[0].data == {"channel": b"news", "seqs": [1, 4]}
    assert sorted(p.held[b"news"]) == [2, 3]  # kept until s2 acknowledges them


def test_resend_on_silence_sends_the_last_unacknowledged_message() -> None:
    p = pub()
    from_sub(p, b"s1", "SUBSCRIBE", 0, channel=b"news")
    for k in range(1, 4):
        publish(p, b"news", b"m%d" % k, 0)
    from_sub(p, b"s1", "HEARTBEAT", 100 * MS, )  # heartbeats are not an ACK/NACK (E-PPPP-15)
    assert p.get_timer() == 50 * MS  # first heartbeat, before the silence
    p.handle_timer(50 * MS)
    assert p.get_timer() == 150 * MS  # 3 x first idle after the last PUBLISH
    assert published(p.handle_timer(150 * MS)) == [(b"s1", b"news", 3, [b"m3"])]


def test_the_reply_to_a_resend_on_silence_implicitly_nacks_up_to_the_last_message() -> None:
    p = pub(cls=ResendsFirstPublisher)  # resends the first, so the implicit range matters
    from_sub(p, b"s1", "SUBSCRIBE", 0, channel=b"news")
    for k in range(1, 4):
        publish(p, b"news", b"m%d" % k, 0)
    assert [x[2] for x in published(p.handle_timer(150 * MS))] == [1]
    out = from_sub(p, b"s1", "ACK", 160 * MS, channel=b"news", sequence=1)
    assert [x[2] for x in published(out)] == [2, 3]  # (max(k, h), L] = (1, 3]


def test_heartbeats_first_after_the_first_idle_time_then_after_the_idle_time() -> None:
    p = pub()
    from_sub(p, b"s1", "SUBSCRIBE", 0, channel=b"news")
    assert p.get_timer() == 50 * MS
    assert [s.frames for s in sends(p.handle_timer(50 * MS), "HEARTBEAT")] == [[b"s1", b"\x03"]]
    from_sub(p, b"s1", "HEARTBEAT", 60 * MS)
    assert p.get_timer() == 250 * MS


def test_a_silent_subscriber_is_disconnected_then_dropped_after_the_grace_period() -> None:
    p = pub()
    from_sub(p, b"s1", "SUBSCRIBE", 0, channel=b"news")
    publish(p, b"news", b"a", 0)
    t = 0
    while not notes(out := p.handle_timer(t := p.get_timer()), "subscriber-lost"):
        pass
    assert t == 600 * MS  # liveness x idle after the SUBSCRIBE (E-PPPP-13)
    assert not sends(publish(p, b"news", b"b", t + 1))  # nothing more to it, but kept
    assert sorted(p.held[b"news"]) == [1, 2]
    out = p.handle_timer(p.get_timer())
    assert p.get_timer() is None and notes(out, "subscriber-dropped")
    assert notes(out, "released")[0].data["seqs"] == [1, 2] and not p.held[b"news"]


def test_a_subscribe_again_replays_the_backlog_with_its_numbers() -> None:
    p = pub()
    from_sub(p, b"s1", "SUBSCRIBE", 0, channel=b"news")
    for k in range(1, 4):
        publish(p, b"news", b"m%d" % k, 0)
    from_sub(p, b"s1", "ACK", 1, channel=b"news", sequence=1)
    out = from_sub(p, b"s1", "SUBSCRIBE", 2, channel=b"news")
    assert [(x[2], x[3]) for x in published(out)] == [(2, [b"m2"]), (3, [b"m3"])]


def test_a_restarted_publisher_numbers_on_and_replays_after_the_next_subscribe() -> None:
    store = DurableStore()
    p = pub(store)
    from_sub(p, b"s1", "SUBSCRIBE", 0, channel=b"news")
    publish(p, b"news", b"a", 0)
    publish(p, b"news", b"b", 0)
    from_sub(p, b"s1", "ACK", 1, channel=b"news", sequence=1)
    q = pub(store)  # the crash threw the object away; the store survived
    assert notes(q.start(5), "restored")
    assert q.get_timer() == 5 + 2000 * MS  # nothing to s1 before its SUBSCRIBE; grace runs from the restart
    assert [x[2] for x in published(publish(q, b"news", b"c", 10))] == []  # #3, kept, not sent yet
    out = from_sub(q, b"s1", "SUBSCRIBE", 20, channel=b"news")
    assert [x[2] for x in published(out)] == [2, 3]  # #1 was acknowledged by its only subscriber: let go


def test_custom_goes_to_the_application_and_may_be_published_back() -> None:
    p = pub(reply_channel="replies")
    from_sub(p, b"s1", "SUBSCRIBE", 0, channel=b"")
    out = from_sub(p, b"s1", "CUSTOM", 1, payload=[b"hi"])
    assert of(out, Deliver)[0].data == {"from": b"s1", "payload": [b"hi"]}
    assert published(out) == [(b"s1", b"replies", 1, [b"hi"])]


def test_malformed_input_and_messages_before_subscribe_are_dropped() -> None:
    p = pub()
    bad = p.receive("router", [b"s1", b"\x00news"], 0)  # an unsubscription is not PPPP (E-PPPP-07)
    assert of(bad, Discard)[0].clause == "pppp.wire.grammar"
    early = from_sub(p, b"s1", "HEARTBEAT", 0)
    assert of(early, Discard)[0].clause == "pppp.conversation.subscribe-first" and not sends(early)


def test_standalone_publishes_count_messages_per_channel_after_the_first_subscribe() -> None:
    p = pub(channels="news,weather", count=2, rate=10)
    assert p.get_timer() is None
    from_sub(p, b"s1", "SUBSCRIBE", 0, channel=b"")
    assert p.get_timer() == 50 * MS  # the first heartbeat; publishing begins 200 ms in
    out = []
    while (t := p.get_timer()) is not None and t <= 400 * MS:
        out += p.handle_timer(t)
    assert [(x[1], x[2], x[3]) for x in published(out)] == [
        (b"news", 1, [b"news:1"]), (b"weather", 1, [b"weather:1"]), (b"news", 2, [b"news:2"]),
        (b"weather", 2, [b"weather:2"])]


@pytest.mark.parametrize("config,words", [({"idle_ms": 50}, "must be larger"),
                                          ({"channels": ["\x02x"]}, "reserved"),
                                          ({"bind": []}, "endpoint")])
def test_bad_config_is_refused_with_a_clear_error(config, words) -> None:
    with pytest.raises(ValueError, match=words):
        pub(**config)


# ---- subscriber --------------------------------------------------------------------------------


def to_sub(s: Subscriber, now: int, seq: int, payload: bytes = b"x", channel: bytes = b"news") -> list:
    return s.receive("dealer", C.encode("PUBLISH", {"channel": channel, "sequence": seq, "payload": [payload]}), now)


def acks(actions) -> list[tuple[bytes, int, list]]:
    out = []
    for a in sends(actions, "ACK"):
        m = msg(a.frames, to_subscriber=False)
        out.append((m["channel"], m["sequence"], [tuple(r) for r in m["nacks"]]))
    return out


def test_the_first_messages_are_one_subscribe_per_channel() -> None:
    s = sub(channels="news,weather")
    assert [msg(a.frames, False)["channel"] for a in sends(s.start(0))] == [b"news", b"weather"]
    assert [a.msg_type for a in sends(sub(channels=None).start(0))] == ["SUBSCRIBE"]  # every channel: ""


def test_each_message_is_delivered_once_and_every_one_acked_with_its_gaps() -> None:
    s = sub()
    s.start(0)
    out = to_sub(s, 1, 1) + to_sub(s, 2, 2) + to_sub(s, 3, 5) + to_sub(s, 4, 2)  # #2 twice, 3-4 missing
    assert [d.data["seq"] for d in of(out, Deliver)] == [1, 2, 5]
    assert s.get_timer() == 1 + 10 * MS  # first_idle / 5 after the first PUBLISH
    assert acks(s.handle_timer(s.get_timer())) == [(b"news", 5, [(3, 4)])]
    to_sub(s, 20 * MS, 3)
    assert acks(s.handle_timer(s.get_timer())) == [(b"news", 5, [(4, 4)])]


def test_heartbeats_and_the_publisher_lost() -> None:
    s = sub()
    s.start(0)
    assert s.get_timer() == 50 * MS
    assert sends(s.handle_timer(50 * MS), "HEARTBEAT")
    assert s.get_timer() == 250 * MS
    t = 0
    while not notes(out := s.handle_timer(t := s.get_timer()), "publisher-lost"):
        pass
    assert t == 600 * MS and [a.msg_type for a in sends(out)] == ["SUBSCRIBE"]
    # on a new connection: a publisher's ROUTER without handover may ignore the old one for good
    endpoint = s.sockets()[0].connect[0]
    assert [a for a in out if isinstance(a, (Disconnect, Connect))] == [Disconnect("dealer", endpoint),
                                                                         Connect("dealer", endpoint)]
    assert [type(a).__name__ for a in out] == ["Note", "Disconnect", "Connect", "Send"]


def test_after_a_crash_nothing_is_delivered_twice_and_the_gap_from_the_floor_is_nacked() -> None:
    store = DurableStore()
    s = sub(store)
    s.start(0)
    for k in (1, 2, 3):
        to_sub(s, k, k)
    t = sub(store)  # same store, memory gone
    t.start(10)
    out = to_sub(t, 11, 3) + to_sub(t, 12, 6)  # a replay of 3 (delivered), then 6: 4 and 5 missing
    assert [d.data["seq"] for d in of(out, Deliver)] == [6]
    assert acks(t.handle_timer(t.get_timer())) == [(b"news", 6, [(4, 5)])]


def test_a_floor_older_than_the_grace_period_is_not_used_for_gaps() -> None:
    store = DurableStore()
    s = sub(store)
    s.start(0)
    to_sub(s, 1, 1)
    t = sub(store)
    t.start(5000 * MS)
    to_sub(t, 5000 * MS, 9)  # the publisher forgot this subscriber long ago: 2-8 are gone
    assert acks(t.handle_timer(t.get_timer())) == [(b"news", 9, [])]


def test_malformed_input_is_dropped() -> None:
    s = sub()
    s.start(0)
    out = s.receive("dealer", [b"\x01news", b"\x00" * 8], 1)
    assert of(out, Discard)[0].clause == "pppp.wire.channel-name"


def test_delivery_line_is_the_documented_json() -> None:
    line = delivery_line("message", {"channel": b"news", "seq": 7, "payload": [b"he", b"llo"]})
    assert json.loads(line) == {"channel": "news", "sequence": 7, "payload": "68656c6c6f"}
    assert delivery_line("subscriber-status", {}) is None


def test_notes_name_the_subscriber() -> None:
    p = pub()
    out = from_sub(p, b"s1", "SUBSCRIBE", 0, channel=b"news")
    assert notes(out, "subscriber-new")[0].data["subscriber"] == b"s1"
    assert all(isinstance(a, (Note, Send)) for a in out)
