"""topic-frames judges the RECORDs and HEADs an external producer sends, as the harness's nodes
receive them: the reference store subscribes to every RECORD and HEAD, so one published on the
wrong topic still arrives, and its topic frame must be the subject it names
(``dafka.wire.topic-record``, ``dafka.wire.topic-head``). Before, an external producer's topics
were not judged at all: the mutants record-by-address and head-by-partition passed every check
as external processes (docs/real-implementations.md; the live proof is in
tests/live/test_external_roles.py)."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import RECV, SEND, Event
from harness.checkers.dafka_topics import TopicFrames
from harness.protocols import codec
from harness.registry import package
from harness.scenario import parse_scenario

DAFKA = codec("dafka")
MS = 1_000_000


def message(name: str, topic: str, **fields: Any) -> list[bytes]:
    base = {"address": "p-uuid", "subject": "orders", "sequence": 1}
    if name == "RECORD":
        base["content"] = b"x"
    return DAFKA.encode(name, {**base, "topic": topic, **fields})


def event(t: int, node: str, role: str, kind: str, frames: list[bytes], name: str) -> Event:
    return Event(t * MS, node, role, kind, "peer_sub" if kind == RECV else "xpub", frames, name, codec=DAFKA)


def judge(events: list[Event], external: frozenset[str] = frozenset({"producer"})) -> tuple[list[str], str]:
    check = TopicFrames(roles={"producer": "producer", "store": "store", "mine": "producer"},
                        external_producers=external)
    for e in events:
        check.on_event(e)
    verdicts = check.finish(10**12)
    return [v.clause for v in verdicts if not v.ok], verdicts[0].detail


def test_a_record_of_an_external_producer_on_its_address_fails_as_received() -> None:
    bad = message("RECORD", "p-uuid")
    clauses, detail = judge([event(1, "store", "store", RECV, bad, "RECORD")])
    assert clauses == ["dafka.wire.topic-record"]
    assert "store received RECORD from 'p-uuid', an external producer, with topic 'p-uuid', not its subject" in detail


def test_a_head_of_an_external_producer_on_its_partition_fails_as_received() -> None:
    clauses, _ = judge([event(1, "store", "store", RECV, message("HEAD", "p-uuid"), "HEAD")])
    assert clauses == ["dafka.wire.topic-head"]


def test_well_formed_receipts_pass_and_a_probed_send_is_not_judged_again_as_received() -> None:
    good = message("RECORD", "orders")
    mine = message("RECORD", "orders", address="mine-uuid")
    events = [event(1, "store", "store", RECV, good, "RECORD"), event(2, "late", "consumer", RECV, good, "RECORD"),
              event(3, "mine", "producer", SEND, mine, "RECORD"), event(4, "store", "store", RECV, mine, "RECORD")]
    clauses, detail = judge(events)
    assert clauses == []
    assert detail.startswith("2 command(s)"), detail  # the external RECORD once, the probed one at its send


def test_without_external_producers_receipts_are_not_judged() -> None:
    clauses, _ = judge([event(1, "store", "store", RECV, message("RECORD", "p-uuid"), "RECORD")], frozenset())
    assert clauses == []


SCENARIO = """
protocol: dafka
name: external-producer
duration: 1s
nodes:
  tower: {role: tower}
  producer: {role: producer, command: "my-producer {towers}"}
  store: {role: store}
RULES
check: [topic-frames]
"""


def test_the_package_judges_receipts_unless_a_rule_corrupts_messages() -> None:
    make = package("dafka").checks["topic-frames"].factory
    plain = make(parse_scenario(SCENARIO.replace("RULES", ""), "x.yaml"))
    assert plain.external_producers == frozenset({"producer"})
    assert plain.tapped == frozenset({"producer"})
    # (nothing heard by the tap here: what it sends is judged only as received)
    assert ("not judged: the topics of what they send (nothing heard on their XPUB) but the RECORDs and HEADs of "
            "producers, as received (external: producer)") in plain.finish(10**12)[0].detail
    corrupting = make(parse_scenario(SCENARIO.replace("RULES", "faults:\n  - rule: {corrupt: 5%}"), "x.yaml"))
    assert corrupting.external_producers == frozenset()
    assert ("not judged: the topics of what they send (nothing heard on their XPUB) (external: producer)"
            in corrupting.finish(10**12)[0].detail)
