"""topic-frames judges what the tap (reference_nodes/dafka/tap.py) hears on an external node's
XPUB as that node's send. Before, an external producer that publishes without a topic frame
(mutant ``no-topic-frame``) and an external store that ACKs on the topic name (``ack-by-topic``)
passed every check: a PUB filters at the sender, so those messages reached no node the harness
runs (docs/real-implementations.md; the live proof is tests/live/test_external_roles.py)."""

from __future__ import annotations

from harness.checkers.base import RECV, SEND, Event
from harness.checkers.dafka_topics import TopicFrames
from harness.protocols import codec
from reference_nodes.dafka.tap import Tap, tap_of
from harness.node import DurableStore, NodeContext, SocketType

import random

DAFKA = codec("dafka")
MS = 1_000_000
ROLES = {"producer": "producer", "store": "store", "early": "consumer", "harness-tap": "tap"}


def heard(t: int, node: str, frames: list[bytes]) -> Event:
    """What the tap heard on ``node``'s XPUB."""
    return Event(t * MS, "harness-tap", "tap", RECV, node, frames, "", codec=DAFKA)


def sent(t: int, node: str, frames: list[bytes], name: str) -> Event:
    return Event(t * MS, node, ROLES[node], SEND, "xpub", frames, name, codec=DAFKA)


def record(seq: int, address: str = "P1") -> list[bytes]:
    return DAFKA.encode("RECORD", {"topic": "orders", "address": address, "subject": "orders", "sequence": seq,
                                   "content": b"x"})


def ack(topic: str) -> list[bytes]:
    return DAFKA.encode("ACK", {"topic": topic, "address": "S1", "subject": "orders", "sequence": 0})


def judge(events: list[Event], tapped: frozenset[str]) -> tuple[list[str], str]:
    check = TopicFrames(roles=ROLES, external_producers=frozenset({"producer"}) & tapped, tapped=tapped)
    for e in events:
        check.on_event(e)
    verdicts = check.finish(10**12)
    return [v.clause for v in verdicts if not v.ok], verdicts[0].detail


def test_an_external_producers_message_without_a_topic_frame_fails_as_the_tap_hears_it() -> None:
    headless = record(0)[1:]  # the body first, as no-topic-frame publishes it
    clauses, detail = judge([heard(1, "producer", headless)], frozenset({"producer"}))
    assert clauses == ["dafka.wire.topic-frame"]
    assert "producer published a message whose first frame" in detail
    clauses, _ = judge([heard(1, "producer", headless)], frozenset())  # untapped: not judged (as before)
    assert clauses == []


def test_an_external_stores_ack_on_the_topic_name_fails_as_the_tap_hears_it() -> None:
    events = [sent(1, "producer", record(0), "RECORD"), heard(2, "store", ack("orders"))]
    clauses, detail = judge(events, frozenset({"store"}))
    assert clauses == ["dafka.wire.topic-ack"]
    assert "store sent ACK with topic 'orders' is no partition of 'orders'" in detail
    clauses, detail = judge([sent(1, "producer", record(0), "RECORD"), heard(2, "store", ack("P1"))],
                            frozenset({"store"}))
    assert clauses == [] and "not judged" not in detail, detail


def test_a_tapped_node_never_heard_is_named_not_judged() -> None:
    _, detail = judge([heard(1, "store", ack("P1"))], frozenset({"store", "early"}))
    assert detail.endswith("not judged: the topics of what they send (nothing heard on their XPUB) "
                           "(external: early)"), detail


def test_the_tap_listens_to_every_external_node_straight_on_its_bind_subscribed_to_everything() -> None:
    configs = {"producer": ("producer", {"bind": "tcp://127.0.0.1:4001", "advertise": "tcp://127.0.0.1:5001"}),
               "store": ("store", {"bind": "tcp://127.0.0.1:4002"}), "tower": ("tower", {"bind_pub": "x"}),
               "early": ("consumer", {"bind": "tcp://127.0.0.1:4003"})}
    cfg = tap_of(configs, frozenset({"producer", "store", "tower"}))
    assert cfg == {"targets": {"producer": "tcp://127.0.0.1:4001", "store": "tcp://127.0.0.1:4002"}}
    assert tap_of(configs, frozenset({"tower"})) is None
    tap = Tap(NodeContext("harness-tap", random.Random(1), DurableStore(), cfg))
    assert [(s.name, s.type, s.connect, s.subscribe) for s in tap.sockets()] == [
        ("producer", SocketType.SUB, ("tcp://127.0.0.1:4001",), (b"",)),
        ("store", SocketType.SUB, ("tcp://127.0.0.1:4002",), (b"",))]
    assert tap.receive("store", ack("P1"), 1) == []


def direct_record(topic: str) -> list[bytes]:
    return DAFKA.encode("DIRECT-RECORD", {"topic": topic, "address": "P1", "subject": "orders", "sequence": 0,
                                          "content": b"x"})


def test_a_tapped_answer_to_a_request_the_harness_never_saw_is_not_blamed() -> None:
    # an external store answers a FETCH of a consumer the tap does not hear (it binds a port of
    # its own, or its FETCH went out while the tap was connecting): not the store's fault
    events = [sent(1, "producer", record(0), "RECORD"), heard(2, "store", direct_record("C-unseen"))]
    clauses, _ = judge(events, frozenset({"store"}))
    assert clauses == []
    # ... but an answer addressed to what the run showed is a partition is still wrong
    events = [sent(1, "producer", record(0), "RECORD"), heard(2, "store", direct_record("P1"))]
    clauses, detail = judge(events, frozenset({"store"}))
    assert clauses == ["dafka.wire.topic-direct-record"], detail


def get_heads(topic: str, address: str = "C1") -> list[bytes]:
    return DAFKA.encode("GET-HEADS", {"topic": topic, "address": address})


def consumer_hello(address: str = "C1") -> list[bytes]:
    return DAFKA.encode("CONSUMER-HELLO", {"topic": "S1", "address": address, "subjects": ["orders"]})


def test_a_tapped_consumers_get_heads_on_its_own_address_fails() -> None:
    # before: judged only when its topic named a topic or a store, so the mutant heads-by-address
    # run as an external consumer passed (eventbus/dafka mutant sweep, df-clean-late)
    events = [heard(1, "early", get_heads("C1")), heard(2, "early", consumer_hello())]
    clauses, detail = judge(events, frozenset({"early"}))
    assert clauses == ["dafka.wire.topic-get-heads"], detail
    assert "early sent GET-HEADS with topic 'C1' is no topic of the run" in detail
    # a topic the harness does not know (the consumer's own subscription) is no address: not blamed
    clauses, _ = judge([heard(1, "early", get_heads("invoices")), heard(2, "early", consumer_hello())],
                       frozenset({"early"}))
    assert clauses == []
    assert judge([heard(1, "early", get_heads("orders"))], frozenset({"early"}))[0] == []
