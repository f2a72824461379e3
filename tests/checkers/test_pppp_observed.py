"""PPPP checks of an external node whose traffic the chaos proxy reports (``via="proxy"``
events, harness.live_observe): a send's time is when the proxy read it, a receipt's when it
handed the message on. Deadlines of such a node get ``external_slack_ms`` more; a rule that a
receipt handed on but not yet read could break is not applied; the verdicts say what was judged
this way. Events are fed as a live run produces them (docs/pppp.md, "External publishers and
subscribers")."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CRASH, RECV, SEND, VIA_PROXY, Event, Verdict
from harness.checkers.pppp import AckHighest, AckTiming, ExactlyOnce, Resubscribe, SubscriberHeartbeats
from harness.checkers.pppp_common import PpppCheck
from harness.checkers.pppp_publisher import PublisherHeartbeats, ResendNacked, SequenceNumbers
from harness.protocols import codec

C = codec("pppp", "strict")
MS = 1_000_000
TIMES = {"first_idle_ms": 50, "idle_ms": 200, "liveness": 3}
PUB = {"pub": "publisher"}
SUB = {"ext": "subscriber"}


def ev(t_ms: float, node: str, role: str, kind: str, name: str, fields: dict[str, Any], ident: bytes | None = None,
       via: str = VIA_PROXY) -> Event:
    frames = C.encode(name, fields)
    e = Event(int(t_ms * MS), node, role, kind, "router" if ident is not None else "dealer",
              ([ident] if ident is not None else []) + frames, name, codec=C)
    e.via = via
    return e


def pub(t_ms: float, kind: str, name: str, ident: bytes = b"s", **fields: Any) -> Event:
    return ev(t_ms, "pub", "publisher", kind, name, fields, ident)


def sub(t_ms: float, kind: str, name: str, **fields: Any) -> Event:
    return ev(t_ms, "ext", "subscriber", kind, name, fields)


def publish(seq: int, channel: bytes = b"news") -> dict[str, Any]:
    return {"channel": channel, "sequence": seq, "payload": [b"x"]}


def verdict(checker: PpppCheck, events: list[Event], end_ms: float = 10_000) -> Verdict:
    for e in events:
        checker.on_event(e)
    [v] = checker.finish(int(end_ms * MS))
    return v


def heartbeats(gap_ms: float, via: str = VIA_PROXY) -> list[Event]:
    """The publisher hears a SUBSCRIBE, sends PUBLISH #1, then a HEARTBEAT ``gap_ms`` later; the
    subscriber heartbeats every 150 ms meanwhile (it is live: nothing is excused)."""
    events = [pub(0, RECV, "SUBSCRIBE", channel=b"news"), pub(10, SEND, "PUBLISH", **publish(1))]
    events += [pub(t, RECV, "HEARTBEAT") for t in range(150, int(gap_ms), 150)]
    events.append(pub(10 + gap_ms, SEND, "HEARTBEAT"))
    for e in events:
        e.via = via
    return events


def test_an_external_publishers_deadlines_get_the_slack_and_its_verdict_says_so() -> None:
    # first_idle 50 ms + tolerance 25 ms: 160 ms is a failure for a probed publisher...
    assert not verdict(PublisherHeartbeats(**TIMES), heartbeats(160, via=""), 171).ok
    # ... and within the slack (half an idle interval, 100 ms) for an observed external one
    v = verdict(PublisherHeartbeats(**TIMES, external=PUB, observed=True), heartbeats(160), 171)
    assert v.ok and "judged from what the chaos proxy saw: pub (external; its deadlines 100 ms later)" in v.detail
    # beyond it, it fails: a first heartbeat after the whole idle time (the mutant
    # publisher-slow-first-heartbeat), which a slack of one interval let pass
    v = verdict(PublisherHeartbeats(**TIMES, external=PUB, observed=True), heartbeats(200), 211)
    assert not v.ok and v.clause == "pppp.heartbeat.first-idle", v.detail
    # the slack is half an interval, at most 1000 ms, or what the check is given
    assert PublisherHeartbeats(idle_ms=5000, external=PUB, observed=True).slack_for("pub") == 1000 * MS
    assert PublisherHeartbeats(**TIMES, external=PUB, observed=True, external_slack_ms=50).slack_for("pub") == 50 * MS
    assert PublisherHeartbeats(**TIMES, external=PUB, observed=True).slack_for("subs.0") == 0  # in-process
    # without observation it judges nothing of it and says so
    v = verdict(PublisherHeartbeats(**TIMES, external=PUB), [], 1200)
    assert v.detail.endswith("not judged: pub (external: no probe reports what it does)")


def test_an_external_publisher_numbering_from_zero_is_caught_from_its_sends() -> None:
    v = verdict(SequenceNumbers(**TIMES, external=PUB, observed=True),
                [pub(0, RECV, "SUBSCRIBE", channel=b"news"), pub(5, SEND, "PUBLISH", **publish(0))])
    assert not v.ok and "#0 (numbers start at 1)" in v.detail
    assert "the numbering its application is told is not on the wire" in v.detail


def test_an_external_publishers_implicit_nacks_reach_only_the_numbers_it_sent_that_subscriber() -> None:
    # #3 is resent to s on silence; the proxy read #4 (to another subscriber, t) before that
    # resend, though the publisher may have published it after: s's next ACK does not owe #4
    # to s by implicit NACK (it is owed as a new message, which the publisher sent s at 12 ms)
    events = [pub(0, RECV, "SUBSCRIBE", b"s", channel=b"news"), pub(0, RECV, "SUBSCRIBE", b"t", channel=b"news"),
              pub(10, SEND, "PUBLISH", b"s", **publish(3)), pub(11, SEND, "PUBLISH", b"t", **publish(4)),
              pub(11.5, SEND, "PUBLISH", b"s", **publish(3)), pub(12, SEND, "PUBLISH", b"s", **publish(4)),
              pub(13, RECV, "ACK", b"s", channel=b"news", sequence=3, nacks=[])]
    v = verdict(ResendNacked(**TIMES, external=PUB, observed=True), events, 3000)
    assert v.ok, v.detail
    # the same events from a probed publisher: #4 was published before the resend, implicitly NACKed
    for e in events:
        e.via = ""
    v = verdict(ResendNacked(**TIMES), events, 3000)
    assert not v.ok and v.clause == "pppp.publisher.implicit-nack", v.detail


def test_an_external_subscriber_acking_below_what_was_handed_to_it_is_not_judged_but_a_made_up_number_is() -> None:
    handed = [sub(0, SEND, "SUBSCRIBE", channel=b"news"), sub(10, RECV, "PUBLISH", **publish(1)),
              sub(11, RECV, "PUBLISH", **publish(2))]
    ack1 = sub(12, SEND, "ACK", channel=b"news", sequence=1, nacks=[])  # #2 handed on, maybe not read yet
    v = verdict(AckHighest(**TIMES, external=SUB, observed=True), [*handed, ack1])
    assert v.ok and "an ACK below a number handed on to it is not judged" in v.detail, v.detail
    made_up = sub(12, SEND, "ACK", channel=b"news", sequence=5, nacks=[])
    v = verdict(AckHighest(**TIMES, external=SUB, observed=True), [*handed, made_up])
    assert not v.ok and "which it never received" in v.detail, v.detail
    # a probed subscriber's receipt is its reading: the low ACK fails
    for e in [*handed, ack1]:
        e.via = ""
    assert not verdict(AckHighest(**TIMES), [*handed, ack1]).ok


def test_an_external_subscribers_heartbeats_and_deliveries() -> None:
    silent = [sub(0, SEND, "SUBSCRIBE", channel=b"news"), sub(1500, SEND, "HEARTBEAT")]
    v = verdict(SubscriberHeartbeats(**TIMES, external=SUB, observed=True), silent, 1500)
    assert not v.ok and "ext sent nothing for 1500.0 ms" in v.detail, v.detail
    # exactly-once: its receipts are no deliveries; it is judged on what the publisher sent it
    got = [sub(0, SEND, "SUBSCRIBE", channel=b"news"), sub(10, RECV, "PUBLISH", **publish(1))]
    v = verdict(ExactlyOnce(**TIMES, external=SUB, observed=True), got)
    assert v.ok and "not judged: ext (external: what it delivers is not on the wire)" in v.detail, v.detail


def test_what_an_external_publisher_owes_a_crashed_subscriber_is_not_judged() -> None:
    # A subscriber crashes 20 ms after its PUBLISH: what the publisher then sends it (heartbeats,
    # resends) vanishes in its ROUTER, and the proxy reads none of it; a probed publisher's sends
    # are reported all the same. Found by pppp/chaos/fifty-subscribers.yaml with the publisher
    # external: "sent nothing to b'subs.7' for 446.2 ms after its PUBLISH" (both the stand-in and
    # the reference publisher as processes).
    crash = Event(30 * MS, "s", "subscriber", CRASH)
    events = [pub(0, RECV, "SUBSCRIBE", channel=b"news"), pub(10, SEND, "PUBLISH", **publish(1)), crash,
              pub(500, RECV, "SUBSCRIBE", channel=b"news"), pub(501, SEND, "PUBLISH", **publish(2))]
    checker = PublisherHeartbeats(**TIMES, external=PUB, observed=True)
    assert checker.roles == {"publisher", "subscriber"}  # it hears subscriber crashes
    v = verdict(checker, events, 502)
    assert v.ok, v.detail
    for e in events:
        e.via = ""
    probed = PublisherHeartbeats(**TIMES)
    assert probed.roles == {"publisher"}
    v = verdict(probed, [e for e in events if e.role == "publisher"], 502)
    assert not v.ok and "sent nothing to b's'" in v.detail, v.detail


def test_an_external_subscriber_is_not_timed_across_a_publisher_crash() -> None:
    # its DEALER holds what it sends while the publisher is down: the proxy reads it late
    crash = Event(100 * MS, "pub", "publisher", CRASH)
    events = [sub(0, SEND, "SUBSCRIBE", channel=b"news"), sub(90, SEND, "HEARTBEAT"), crash,
              sub(900, SEND, "HEARTBEAT")]
    v = verdict(SubscriberHeartbeats(**TIMES, external=SUB, observed=True), events, 901)
    assert v.ok, v.detail
    v = verdict(SubscriberHeartbeats(**TIMES, external=SUB, observed=True), [e for e in events if e is not crash], 901)
    assert not v.ok, v.detail


# pppp/chaos/partition-heal.yaml with the reference subscriber as the external process (found by
# bench.chaos_standins, 2026-11-30): cut off from 1.5 s to 3 s, it takes the publisher for lost
# and opens a new connection, whose handshake the proxy holds until the heal; its SUBSCRIBE and
# HEARTBEATs sent meanwhile were read at 3001.6 ms. Both checks blamed it: "sent nothing for
# 1058.6 ms after a HEARTBEAT at 1943.0 ms", "had not SUBSCRIBEd b'news' again by 2605.6 ms".
CUT = ((1500 * MS, 3000 * MS),)


def cut_off(end_ms: float = 3001.6) -> list[Event]:
    events = [sub(0, SEND, "SUBSCRIBE", channel=b"news"), sub(1, RECV, "PUBLISH", **publish(1))]
    events += [sub(t, SEND, "HEARTBEAT") for t in range(150, 1950, 150)]
    events += [sub(t, RECV, "HEARTBEAT") for t in range(200, 1500, 200)] + [sub(1480, RECV, "HEARTBEAT")]
    events.sort(key=lambda e: e.time_ns)  # (1480 ms: the last it heard from the publisher)
    if end_ms > 3000:
        events += [sub(end_ms, SEND, "SUBSCRIBE", channel=b"news"), sub(end_ms, SEND, "HEARTBEAT")]
    return events


def test_an_external_subscriber_is_not_timed_across_the_heal_of_a_partition() -> None:
    for check in (SubscriberHeartbeats, Resubscribe):
        v = verdict(check(**TIMES, external=SUB, observed=True, cuts=CUT), cut_off(), 3100)
        assert v.ok, (check.name, v.detail)
        # without the partition in the file the same reads are a failure: the check still judges
        v = verdict(check(**TIMES, external=SUB, observed=True), cut_off(), 3100)
        assert not v.ok, (check.name, v.detail)
        # a partition still holding at the end leaves the silence unjudged too
        v = verdict(check(**TIMES, external=SUB, observed=True, cuts=((1500 * MS, 4000 * MS),)), cut_off(0), 3100)
        assert v.ok, (check.name, v.detail)
    # a probed subscriber's sends are reported when made: a partition excuses nothing of it
    events = cut_off()
    for e in events:
        e.via = ""
    assert not verdict(SubscriberHeartbeats(**TIMES, cuts=CUT), events, 3100).ok
    # and an observed subscriber's silence outside the partition is still judged
    late = [sub(0, SEND, "SUBSCRIBE", channel=b"news"), sub(400, SEND, "HEARTBEAT"), sub(3500, SEND, "HEARTBEAT"),
            sub(4500, SEND, "HEARTBEAT")]
    v = verdict(SubscriberHeartbeats(**TIMES, external=SUB, observed=True, cuts=CUT), late, 4600)
    assert not v.ok and "sent nothing for 1000.0 ms after a HEARTBEAT at 3500.0 ms" in v.detail, v.detail


def test_an_ack_an_external_subscriber_sends_while_cut_off_is_not_timed_across_the_heal() -> None:
    got = [sub(0, SEND, "SUBSCRIBE", channel=b"news"), sub(1490, RECV, "PUBLISH", **publish(7)),
           sub(3001, SEND, "ACK", channel=b"news", sequence=7, nacks=[])]
    assert verdict(AckTiming(**TIMES, external=SUB, observed=True, cuts=CUT), got, 3100).ok
    assert not verdict(AckTiming(**TIMES, external=SUB, observed=True), got, 3100).ok


def lifecycle(t_ms: float, kind: str, node: str = "pub") -> Event:
    return Event(int(t_ms * MS), node, "publisher", kind, None, None, None)


def test_a_nack_handed_to_a_stopped_external_publisher_is_due_once_it_runs_again() -> None:
    # The live hunt's false alarm (a pause of the stand-in publisher on fifty-subscribers): the
    # proxy handed on an ACK NACKing #5 at 1261 ms to a publisher stopped from 1208 to 2001 ms,
    # and "not resent within 325 ms" failed it. Its deadline moves by the time it was stopped.
    nack = [pub(0, RECV, "SUBSCRIBE", channel=b"news"), pub(10, SEND, "PUBLISH", **publish(5)),
            pub(11, SEND, "PUBLISH", **publish(6)), pub(61, RECV, "ACK", channel=b"news", sequence=6, nacks=[[5, 5]])]
    resent = pub(850, SEND, "PUBLISH", **publish(5))
    heard = [pub(t, RECV, "HEARTBEAT") for t in range(100, 1500, 150)]  # the subscriber is live throughout

    def run(events: list[Event]) -> Verdict:
        events = sorted(events, key=lambda e: e.time_ns)
        return verdict(ResendNacked(**TIMES, external=PUB, observed=True), events, 1500)

    stopped = [lifecycle(40, "pause"), lifecycle(800, "resume")]
    assert run(nack + heard + stopped + [resent]).ok
    # not stopped: 789 ms later is late (idle 200 + tolerance 25 + the slack 100)
    v = run(nack + heard + [resent])
    assert not v.ok and "NACKed b'news' #5 at 61.0 ms; not resent within 325 ms" in v.detail, v.detail
    # stopped, and still nothing 325 ms after it ran again (1125 ms): late, and the detail says so
    v = run(nack + heard + stopped)
    assert not v.ok and "(and 739 ms it was paused)" in v.detail, v.detail
