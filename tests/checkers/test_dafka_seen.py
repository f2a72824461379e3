"""Dafka ``subscriptions``, ``tower-links``, ``intervals``, ``answers``, ``producer-claims`` and ``offsets`` of
an external node, judged from what the chaos proxy saw of its sockets
(harness.checkers.dafka_seen): the subscriptions each of its connections carried (``subscribe``
events with the peer and the connection, as harness.live_observe presents them), its BEACONs,
its crashes and restarts, and what the tap heard on its XPUB. Events are fed as a live run
produces them."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CRASH, PAUSE, RECV, RESTART, RESUME, SEND, SUBSCRIBE, VIA_PROXY, Event, Verdict
from harness.checkers.dafka import FetchAscending, Offsets
from harness.checkers.dafka_answers import Answers, Intervals, ProducerClaims
from harness.checkers.dafka_links import Subscriptions, TowerLinks
from harness.checkers.dafka_seen import SeenNodes
from harness.protocols import codec
from harness.protocols.dafka import subscription

C = codec("dafka", "strict")
MS = 1_000_000
ADDR = "C0FFEE"
ROLES = {"tower": "tower", "producer": "producer", "store": "store", "ext": "consumer"}
TOPICS = {"ext": ["orders"]}
# what a correct consumer holds on its peer SUB (its own address, then its topic)
CONSUMER_SUBS = (subscription("DIRECT-RECORD", ADDR), subscription("DIRECT-HEAD", ADDR),
                 subscription("STORE-HELLO", ADDR), subscription("RECORD", "orders"), subscription("HEAD", "orders"))


def via(e: Event) -> Event:
    e.via = VIA_PROXY
    return e


def sub(t_ms: float, peer: str, connection: int, prefix: bytes, node: str = "ext", role: str = "consumer") -> Event:
    return via(Event(int(t_ms * MS), node, role, SUBSCRIBE, "sub",
                     data={"topic": prefix, "peer": peer, "connection": connection}))


def beacon(t_ms: float, node: str = "ext", role: str = "consumer", sender: str = ADDR) -> Event:
    frames = C.encode("BEACON", {"sender": sender, "host": "127.0.0.1", "port": 5000})
    return via(Event(int(t_ms * MS), node, role, SEND, "pub", frames, "BEACON", codec=C))


def life(start_ms: float = 100, subs: tuple[bytes, ...] = CONSUMER_SUBS, peers: tuple[str, ...] = ("producer", "store"),
         tower_sub: bool = True, beacons: bool = True) -> list[Event]:
    """An external consumer's life as the proxy sees it: the tower subscription, beacons every
    200 ms, then one connection per peer carrying ``subs``."""
    events = [sub(start_ms, "tower", 1, b"B")] if tower_sub else []
    if beacons:
        events += [beacon(start_ms + t) for t in range(0, 6000, 200)]
    for k, peer in enumerate(peers):
        events += [sub(start_ms + 150 + 10 * k, peer, 10 + k, p) for p in subs]
    return sorted(events, key=lambda e: e.time_ns)


def seen(starts: dict[str, int] | None = None) -> SeenNodes:
    return SeenNodes(ROLES, frozenset({"ext"}), starts or {})


def judge(checker: Any, events: list[Event], end_ms: float = 8000) -> Verdict:
    for e in events:
        checker.on_event(e)
    [v] = checker.finish(int(end_ms * MS))
    return v


def subscriptions(events: list[Event], end_ms: float = 8000) -> Verdict:
    return judge(Subscriptions(topics=TOPICS, seen=seen()), events, end_ms)


def tower_links(events: list[Event], end_ms: float = 8000, **kw: Any) -> Verdict:
    return judge(TowerLinks(seen=seen(), **kw), events, end_ms)


def test_a_correct_external_consumer_passes_both() -> None:
    v = subscriptions(life())
    assert v.ok and "5 more of the external nodes ext" in v.detail, v.detail
    v = tower_links(life())
    assert v.ok and "1 node life(s)" in v.detail, v.detail


def test_a_subscription_missing_on_a_connection_fails_with_its_clause() -> None:
    v = subscriptions(life(subs=CONSUMER_SUBS[:3]))  # no RECORD or HEAD of its topic
    assert not v.ok and v.clause == "dafka.subscription.consumer-record", v.detail
    assert "did not subscribe to b'Morders' (topic 'orders') on any of its connections to peers" in v.detail
    held_once = [e for e in life() if not (e.data and e.data.get("topic") == b"Horders" and e.data["peer"] == "store")]
    v = subscriptions(held_once)  # held on the producer's connection, then not on the store's
    assert not v.ok and v.clause == "dafka.subscription.consumer-head", v.detail
    assert "b'Horders' (topic 'orders') on its connection to store: not within 1000 ms" in v.detail
    v = subscriptions(life(subs=CONSUMER_SUBS[1:]))  # no DIRECT-RECORD on its address
    assert not v.ok and v.clause == "dafka.subscription.consumer-direct-record", v.detail


def test_a_shorter_prefix_covers_and_an_unsubscription_uncovers() -> None:
    assert subscriptions(life(subs=(b"D", b"E", b"L", b"M", b"H"))).ok
    events = life() + [via(Event(260 * MS, "ext", "consumer", "unsubscribe", "sub",
                                 data={"topic": b"Morders", "peer": "store", "connection": 11}))]
    v = subscriptions(sorted(events, key=lambda e: e.time_ns))
    assert not v.ok and "b'Morders' (topic 'orders') on its connection to store" in v.detail, v.detail
    late = [e for e in life() if not (e.data and e.data.get("topic") == b"Morders" and e.data["peer"] == "store")]
    late.append(sub(1400, "store", 11, b"Morders"))  # 1.15 s after the connection came up
    assert not subscriptions(late).ok


def test_a_need_that_comes_after_every_connection_is_judged_on_any_of_them() -> None:
    """Its address is learnt from its first BEACON; subscribing to it within a second of that on
    one connection is enough, as a later connection would carry it at once."""
    topic_only = (subscription("RECORD", "orders"), subscription("HEAD", "orders"))
    events = [e for e in life(subs=topic_only, beacons=False)] + [beacon(3000)]
    events += [sub(3500, "producer", 10, p) for p in CONSUMER_SUBS[:3]]
    assert subscriptions(sorted(events, key=lambda e: e.time_ns)).ok
    events = [e for e in life(subs=topic_only, beacons=False)] + [beacon(3000)]
    v = subscriptions(events)
    assert not v.ok and "within 1000 ms of needing it, on any of its 2 connection(s)" in v.detail, v.detail


def test_a_life_that_ends_before_the_bound_is_not_judged_and_a_restart_starts_a_new_one() -> None:
    events = life(subs=CONSUMER_SUBS[:3])
    crash_at = 760 * MS  # 500 ms after the second connection came up
    first = [e for e in events if e.time_ns < crash_at] + [Event(crash_at, "ext", "consumer", CRASH)]
    assert subscriptions(first).ok
    again = [Event(crash_at + 100 * MS, "ext", "consumer", RESTART)]
    again += [sub(crash_at / MS + 1000, "store", 30, p) for p in CONSUMER_SUBS[:3]]
    v = subscriptions(first + again)
    assert not v.ok and "b'Morders' (topic 'orders') on any of its connections" in v.detail, v.detail


def test_a_consumer_may_subscribe_to_its_topics_late() -> None:
    """zeromq/dafka's console consumer subscribes to its topics a second after it starts: the
    connections that came up before carry them from then on, and the later ones at once."""
    own = CONSUMER_SUBS[:3]
    events = life(subs=own) + [sub(2500, peer, 10 + k, p) for k, peer in enumerate(("producer", "store"))
                               for p in CONSUMER_SUBS[3:]]
    events += [sub(3000, "consumer2", 12, p) for p in CONSUMER_SUBS]
    assert subscriptions(sorted(events, key=lambda e: e.time_ns)).ok
    events += [sub(3100, "consumer3", 13, p) for p in own]  # one that came up after: without them
    v = subscriptions(sorted(events, key=lambda e: e.time_ns))
    assert not v.ok and "on its connection to consumer3" in v.detail, v.detail
    v = subscriptions(life(subs=own), end_ms=3000)
    assert v.ok, "a life too short to say it never subscribed"


def test_paused_time_does_not_count() -> None:
    events = [e for e in life() if not (e.data and e.data.get("topic") == b"Horders" and e.data["peer"] == "store")]
    events += [Event(270 * MS, "ext", "consumer", PAUSE), Event(2300 * MS, "ext", "consumer", RESUME),
               sub(2310, "store", 11, b"Horders")]
    assert subscriptions(sorted(events, key=lambda e: e.time_ns)).ok


def test_without_observation_nothing_of_an_external_node_is_judged() -> None:
    v = judge(Subscriptions(topics=TOPICS), life(subs=()))
    assert v.ok and "external" not in v.detail


def test_tower_links_of_an_external_node() -> None:
    v = tower_links(life(beacons=False))
    assert not v.ok and v.clause == "dafka.interconnect.tower-pub-connect", v.detail
    v = tower_links(life(tower_sub=False))
    assert not v.ok and v.clause == "dafka.interconnect.tower-sub-connect", v.detail
    v = tower_links([])
    assert not v.ok and v.clause == "dafka.interconnect.tower-sockets", v.detail
    assert "ext connected no socket to any tower" in v.detail
    v = tower_links(life(peers=()))
    assert not v.ok and v.clause == "dafka.interconnect.connect-on-discovery", v.detail


def test_tower_links_leave_alone_what_a_partition_or_a_short_life_explains() -> None:
    v = tower_links([], cut_from_towers=frozenset({"ext"}))
    assert v.ok and "not judged: ext (a partition may cut it off the towers)" in v.detail, v.detail
    assert tower_links(life(peers=()), cut_off=frozenset({"ext"})).ok
    v = tower_links([], end_ms=3000)
    assert v.ok and "a life too short to judge" in v.detail, v.detail
    late = judge(TowerLinks(seen=seen({"ext": 5000 * MS})), [], 8000)
    assert late.ok, "a late joiner's life starts with its group"


def test_a_store_that_is_two_nodes_passes_and_is_still_judged() -> None:
    """zeromq/dafka's store is a writer and a reader, each with its own address and SUB: each of
    its connections to a peer carries part of what a store subscribes to."""
    roles = {**ROLES, "ext": "store"}
    writer = (b"M", b"H", subscription("DIRECT-RECORD", "W1"))
    reader = (b"F", b"G", subscription("CONSUMER-HELLO", "R1"))

    def store(reader_subs: tuple[bytes, ...]) -> Verdict:
        events = [beacon(100, "ext", "store", "W1"), beacon(110, "ext", "store", "R1")]
        for k, peer in enumerate(("producer", "consumer")):
            events += [sub(200 + k, peer, 10 + k, p, "ext", "store") for p in writer]
            events += [sub(205 + k, peer, 20 + k, p, "ext", "store") for p in reader_subs]
        checker = Subscriptions(seen=SeenNodes({**roles, "consumer": "consumer"}, frozenset({"ext"}), {}))
        return judge(checker, sorted(events, key=lambda e: e.time_ns))

    v = store(reader)
    assert v.ok and "6 more of the external nodes ext" in v.detail, v.detail
    v = store(reader[1:])
    assert not v.ok and v.clause == "dafka.subscription.store-fetch", v.detail


def tapped(t_ms: float, name: str, node: str = "extp", sequence: int = 0) -> Event:
    """What the tap heard on an external producer's XPUB."""
    fields = {"topic": "orders", "version": 1, "address": "P1", "subject": "orders", "sequence": sequence}
    frames = C.encode(name, {**fields, "content": b"x"} if name == "RECORD" else fields)
    return Event(int(t_ms * MS), "tap", "tap", RECV, node, frames, "", codec=C)


def intervals(events: list[Event], end_ms: float = 8000) -> Verdict:
    checker = Intervals(beacon_ms={"ext": 200, "extp": 200}, head_ms={"extp": 200},
                        external=frozenset({"ext", "extp"}))
    return judge(checker, sorted(events, key=lambda e: e.time_ns), end_ms)


def test_intervals_of_external_nodes_from_the_proxy_and_the_tap() -> None:
    beacons = [beacon(t) for t in range(100, 8000, 200)] + [beacon(t, "extp", "producer", "P1")
                                                             for t in range(100, 8000, 200)]
    heads = [tapped(1000, "RECORD")] + [tapped(t, "HEAD") for t in range(1200, 8000, 1000)]
    v = intervals(beacons + heads)
    assert v.ok and "held to at least 1000 ms" in v.detail, v.detail  # a 1 s HEAD interval: the floor
    v = intervals([b for b in beacons if not 2000 <= b.time_ns / MS < 6500 or b.node != "ext"] + heads)
    assert not v.ok and v.clause == "dafka.interconnect.address-beacon", v.detail
    assert "ext sent no BEACON for 4600 ms (bound 4000 ms) (seen by the chaos proxy and the tap)" in v.detail
    v = intervals(beacons + [tapped(1000, "RECORD")])  # never a HEAD after its first record
    assert not v.ok and v.clause == "dafka.producer.head-interval", v.detail
    assert intervals(beacons).ok, "no HEAD is due before its first RECORD"


def test_an_external_process_that_is_two_nodes_beacons_for_each_and_a_crash_ends_the_gaps() -> None:
    two = [beacon(t, sender="W1") for t in range(100, 8000, 200)]
    two += [beacon(t, sender="R1") for t in range(150, 3000, 200)]
    v = intervals(two)
    assert not v.ok and "ext sent no BEACON for" in v.detail, "the reader's beacons stopped"
    crashed = [b for b in two if b.time_ns < 2900 * MS] + [Event(3000 * MS, "ext", "consumer", CRASH),
                                                            Event(3500 * MS, "ext", "consumer", RESTART)]
    crashed += [beacon(t, sender=s) for t in range(5000, 8000, 200) for s in ("W1", "R1")]
    assert intervals(crashed).ok, "a crash closes the gaps; the process's slow restart is no gap"
    v = intervals(two[:1], end_ms=8000)
    assert not v.ok, "one beacon, then nothing"


def answers_of(events: list[Event], external: dict[str, str], end_ms: float = 8000) -> Verdict:
    return judge(Answers(external=external), sorted(events, key=lambda e: e.time_ns), end_ms)


def xpub_subscription(t_ms: float, prefix: bytes, node: str = "exts") -> Event:
    """A subscription that reached an external store's XPUB (harness.live_observe)."""
    return via(Event(int(t_ms * MS), node, "store", RECV, "xpub", [b"\x01" + prefix]))


def store_hello(t_ms: float, consumer: str, node: str = "exts") -> Event:
    frames = C.encode("STORE-HELLO", {"topic": consumer, "version": 1, "address": "S1"})
    return via(Event(int(t_ms * MS), node, "store", SEND, "xpub", frames, "STORE-HELLO", codec=C))


def test_an_external_store_owes_a_store_hello_for_each_subscription_its_xpub_gets() -> None:
    asked = [xpub_subscription(500, subscription("STORE-HELLO", "CONS1"))]
    v = answers_of(asked + [store_hello(1900, "CONS1")], {"exts": "store"})
    assert v.ok and "1 judged as the proxy and the tap saw them, within 2000 ms" in v.detail, v.detail
    v = answers_of(asked, {"exts": "store"})
    assert not v.ok and v.clause == "dafka.store.hello-on-subscription", v.detail
    v = answers_of(asked + [store_hello(2600, "CONS1")], {"exts": "store"})
    assert not v.ok and "only 2100 ms later (bound 2000 ms)" in v.detail, v.detail
    tap_heard = Event(1500 * MS, "tap", "tap", RECV, "exts", store_hello(0, "CONS1").frames, "", codec=C)
    assert answers_of(asked + [tap_heard], {"exts": "store"}).ok, "what the tap heard it publish counts"


def test_an_external_producer_answers_get_heads_once_it_published() -> None:
    record = via(Event(1000 * MS, "extp", "producer", SEND, "xpub", tapped(0, "RECORD").frames, "RECORD", codec=C))
    ask = C.encode("GET-HEADS", {"topic": "orders", "version": 1, "address": "CONS1"})
    get_heads = via(Event(1500 * MS, "extp", "producer", RECV, "sub", ask, "", codec=C))
    head = C.encode("DIRECT-HEAD", {"topic": "CONS1", "version": 1, "address": "P1", "subject": "orders",
                                    "sequence": 0})
    answered = via(Event(1600 * MS, "extp", "producer", SEND, "xpub", head, "DIRECT-HEAD", codec=C))
    assert answers_of([record, get_heads, answered], {"extp": "producer"}).ok
    v = answers_of([record, get_heads], {"extp": "producer"})
    assert not v.ok and v.clause == "dafka.producer.direct-head-reply", v.detail
    assert answers_of([get_heads], {"extp": "producer"}).ok, "nothing owed before it published"
    assert answers_of([record, get_heads], {}).ok, "not observed: not judged"


def test_an_external_producers_claims_as_the_tap_heard_them() -> None:
    announce = beacon(100, "extp", "producer", "P1")

    def claims(*events: Event) -> Verdict:
        return judge(ProducerClaims(external=frozenset({"extp"})), [announce, *events])

    assert claims(tapped(1000, "RECORD", sequence=0), tapped(1100, "HEAD", sequence=0)).ok
    v = claims(tapped(1000, "RECORD", sequence=0), tapped(1100, "HEAD", sequence=1))
    assert not v.ok and v.clause == "dafka.producer.head-sequence", v.detail
    assert "extp sent HEAD 1 with its last record at 0" in v.detail
    assert claims(tapped(1100, "HEAD", sequence=7)).ok, "no RECORD heard yet: the tap may have come late"
    v = judge(ProducerClaims(external=frozenset({"extp"})), [beacon(100, "extp", "producer", "OTHER"),
                                                             tapped(1000, "RECORD", sequence=0)])
    assert not v.ok and v.clause == "dafka.partition.name-is-producer-uuid", v.detail
    assert judge(ProducerClaims(), [beacon(100, "extp", "producer", "OTHER"), tapped(1000, "RECORD")]).ok


def test_a_consumers_topics_are_also_those_it_showed_it_wants() -> None:
    """Without the file's topics (its command line has them), a HEAD subscription on a topic says
    it wants that topic: its RECORDs are owed too."""
    without_records = tuple(p for p in CONSUMER_SUBS if p != b"Morders")
    v = judge(Subscriptions(seen=seen()), life(subs=without_records))
    assert not v.ok and v.clause == "dafka.subscription.consumer-record", v.detail
    assert judge(Subscriptions(seen=seen()), life()).ok


def test_an_external_producers_offsets_as_the_tap_heard_them() -> None:
    def offsets(*events: Event) -> Verdict:
        return judge(Offsets(external=frozenset({"extp"}), tapped=True), list(events))

    v = offsets(*(tapped(1000 + 50 * k, "RECORD", sequence=k) for k in range(5, 9)))
    assert v.ok and "4 RECORD(s) of external producers as the tap heard them" in v.detail, v.detail
    v = offsets(tapped(1000, "RECORD", sequence=0), tapped(1050, "RECORD", sequence=1),
                tapped(1100, "RECORD", sequence=3))
    assert not v.ok and v.clause == "dafka.record.offset-increments", v.detail
    assert "extp published offset 3 of partition P1 where 2 was due (heard by the tap)" in v.detail
    v = offsets(tapped(1000, "RECORD", sequence=4), Event(1500 * MS, "extp", "producer", CRASH),
                tapped(2500, "RECORD", sequence=0))
    assert v.ok, "a crash starts a new life: it may start its partition again"
    assert judge(Offsets(external=frozenset({"extp"})), [tapped(1000, "RECORD", sequence=3),
                                                         tapped(1100, "RECORD", sequence=9)]).ok


# ---- fetch-ascending of an external store: FETCHes as the proxy handed them on, answers per connection


def fetch(t_ms: float, sequence: int, count: int = 3, node: str = "ext", requestor: str = ADDR) -> Event:
    frames = C.encode("FETCH", {"topic": "P1", "address": requestor, "subject": "orders", "sequence": sequence,
                                "count": count})
    return via(Event(int(t_ms * MS), node, "store", RECV, "sub", frames, "FETCH", codec=C,
                     data={"peer": "consumer", "connection": 20}))


def answer(t_ms: float, sequence: int, connection: int = 21, node: str = "ext", requestor: str = ADDR) -> Event:
    frames = C.encode("DIRECT-RECORD", {"topic": requestor, "address": "P1", "subject": "orders",
                                        "sequence": sequence, "content": b"x"})
    return via(Event(int(t_ms * MS), node, "store", SEND, "pub", frames, "DIRECT-RECORD", codec=C,
                     data={"peer": "consumer", "connection": connection}))


def ascending(*events: Event, observed: bool = True) -> Verdict:
    check = FetchAscending(external=frozenset({"ext"}), observed=observed)
    for e in events:
        check.on_event(e)
    return check.finish(10_000 * MS)[0]


def test_an_external_store_answering_a_fetch_in_descending_order_fails() -> None:
    v = ascending(fetch(10, 0), answer(11, 2), answer(11.1, 1), answer(11.2, 0))
    assert not v.ok and v.clause == "dafka.fetch.ascending-order"
    assert "ext sent offset 1 after 2" in v.detail
    assert "1 step(s) down there, and only 1 FETCH(es) of that partition handed on to it" in v.detail
    assert v.evidence[0]["seen_by"] == "proxy" and v.evidence[0]["data"]["connection"] == 21
    # two FETCHes handed on, but only one of them asks for offsets 1 and 2: both answers are its
    v = ascending(fetch(10, 0), fetch(10.5, 10, count=2), answer(11, 2), answer(11.1, 1))
    assert not v.ok and "both answers to the one FETCH of offsets 0-2 handed on to it (at 10.0 ms)" in v.detail


def test_a_step_down_is_the_next_fetchs_answers_when_another_fetch_may_be_its_request() -> None:
    """The proxy may read the answers to the next FETCH right after the last ones to this, on the
    same connection: a step down is judged only when one FETCH alone can be the request of both."""
    assert ascending(fetch(10, 0), fetch(10.5, 0), answer(11, 0), answer(11.1, 1), answer(11.2, 2),
                     answer(11.3, 0), answer(11.4, 1), answer(11.5, 2)).ok, "two FETCHes, two runs"
    assert ascending(fetch(10, 10, count=2), answer(11, 10), answer(11.1, 11), fetch(11.5, 0, count=1),
                     answer(12, 0)).ok, "another FETCH's range"
    # a FETCH the proxy handed on only after it read the answer cannot be that answer's request
    v = ascending(fetch(10, 0), answer(11, 2), answer(11.1, 1), fetch(12, 0))
    assert not v.ok and "only 1 FETCH(es) of that partition handed on to it" in v.detail
    # two FETCHes of the same offsets: a step down may be the second one's answers (not judged)
    assert ascending(fetch(10, 0), fetch(10.5, 0), answer(11, 2), answer(11.1, 1)).ok


def test_answers_are_ordered_per_connection_and_per_requestor() -> None:
    """Two connections carry the same answers in their own time; another requestor's answers are
    another run."""
    assert ascending(fetch(10, 0), answer(11, 0, connection=21), answer(11.1, 1, connection=21),
                     answer(11.2, 0, connection=22), answer(11.3, 2, connection=21), answer(11.4, 1, connection=22)).ok
    assert ascending(fetch(10, 0), fetch(10, 0, requestor="BEEF01"), answer(11, 1), answer(11.1, 0, requestor="BEEF01"),
                     answer(11.2, 2)).ok


def test_an_unobserved_external_store_is_named_not_judged() -> None:
    v = ascending(fetch(10, 0), answer(11, 2), answer(11.1, 1), observed=False)
    assert v.ok and v.detail == ("0 DIRECT-RECORD(s), ascending within each FETCH; not judged: the order of their "
                                 "answers to FETCH (external: ext)")
    seen_ok = ascending(fetch(10, 0), answer(11, 0), answer(11.1, 1))
    assert seen_ok.detail == ("2 DIRECT-RECORD(s), ascending within each FETCH (2 of them by external nodes, as the "
                              "chaos proxy saw them)")
