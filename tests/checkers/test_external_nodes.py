"""DCP and Dafka checks with external nodes (``command:`` groups), fed the events such a run
produces: an external node makes no COMMAND, DELIVER or NOTE events and no sends of its own;
only the probed (reference) nodes at the other end of the wire report its messages. A check must
not fail a correct external node for lack of observation, must judge what the wire shows, and
must say what it did not judge (harness/checkers/external.py)."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import COMMAND, CRASH, DELIVER, NOTE, RECV, SEND, Checker, Event, Verdict
from harness.checkers.external import external_nodes
from harness.protocols import codec
from harness.registry import package
from harness.scenario import parse_scenario

DAFKA = codec("dafka", "strict")
PART = "P1"  # the external producer's partition (its address)


def feed(checker: Checker, events: list[Event], end_ns: int = 10**10) -> Verdict:
    for ev in events:
        checker.on_event(ev)
    [verdict] = checker.finish(end_ns)
    return verdict


def dafka_msg(t_ms: int, node: str, role: str, kind: str, name: str, **fields: Any) -> Event:
    return Event(t_ms * 1_000_000, node, role, kind, frames=DAFKA.encode(name, fields),
                 msg_type=name if kind == SEND else "", codec=DAFKA)


def dafka_check(text: str, name: str) -> Checker:
    scenario = parse_scenario(text, "ext.yaml")
    return package("dafka").checks[name].factory(scenario)


DAFKA_EXTERNAL = """protocol: dafka
name: ext
duration: 3s
nodes:
  tower: {role: tower}
  producer: {role: producer, command: "prod --towers {towers}"}
  store: {role: store, command: "store --towers {towers}"}
  early: {role: consumer, config: {topics: orders}}
  outside: {role: consumer, command: "cons --towers {towers}"}
"""


def test_keep_until_ack_counts_the_acks_a_producer_received_from_an_external_store() -> None:
    """The external store's ACK is seen only as the producer's receipt: a release after it is
    lawful (the old checker counted store sends only and failed the reference producer)."""
    check = package("dafka").checks["keep-until-ack"].factory(parse_scenario(
        DAFKA_EXTERNAL.replace('command: "prod --towers {towers}"', "config: {topic: orders}"), "ext.yaml"))
    events = [dafka_msg(10, "producer", "producer", SEND, "RECORD", topic="orders", address=PART,
                        subject="orders", sequence=0, content=b"x"),
              dafka_msg(20, "producer", "producer", RECV, "ACK", topic=PART, sequence=0),
              Event(20_000_000, "producer", "producer", NOTE, msg_type="records-released",
                    data={"topic": "orders", "partition": PART, "upto": 0})]
    assert feed(check, events).ok
    early = [events[0], events[2]]  # released with no ACK seen anywhere: still caught
    v = feed(package("dafka").checks["keep-until-ack"].factory(parse_scenario(DAFKA_EXTERNAL, "ext.yaml")), early)
    assert not v.ok and "ACKs only up to -1" in v.detail


def test_complete_delivery_owes_what_an_external_producer_published() -> None:
    """RECORDs and HEADs the reference nodes received tell what an external producer published:
    a consumer that lacks some of it fails (the old checker learnt only from producer sends, and
    judged nothing of an external producer); the external consumer is named as not judged."""
    check = dafka_check(DAFKA_EXTERNAL, "complete-delivery")
    records = [dafka_msg(100 + k, "early", "consumer", RECV, "RECORD", topic="orders", address=PART,
                         subject="orders", sequence=k, content=b"x") for k in range(3)]
    head = dafka_msg(200, "early", "consumer", RECV, "HEAD", topic="orders", address=PART, subject="orders",
                     sequence=4)
    got = [Event(300 + k, "early", "consumer", DELIVER, msg_type="record",
                 data={"topic": "orders", "partition": PART, "offset": k}) for k in range(3)]
    v = feed(check, [*records, head, *got])
    assert not v.ok and "early lacks 2 of orders/P1.." in v.detail, v.detail
    assert "not judged: what their applications get (external: outside)" in v.detail
    rest = [Event(400 + k, "early", "consumer", DELIVER, msg_type="record",
                  data={"topic": "orders", "partition": PART, "offset": k}) for k in (3, 4)]
    assert feed(dafka_check(DAFKA_EXTERNAL, "complete-delivery"), [*records, head, *got, *rest]).ok


def test_complete_delivery_orphans_an_external_producers_partition_when_it_crashes() -> None:
    """Seen only through receipts, the partition is owed only as far as a store got it once an
    external producer crashed (what died with it is lost, as the document allows)."""
    check = dafka_check(DAFKA_EXTERNAL, "complete-delivery")
    head = dafka_msg(200, "early", "consumer", RECV, "HEAD", topic="orders", address=PART, subject="orders",
                     sequence=4)
    crash = Event(300_000_000, "producer", "producer", CRASH)
    assert feed(check, [head, crash]).ok


def test_dafka_checks_name_the_external_nodes_they_do_not_judge() -> None:
    scenario = parse_scenario(DAFKA_EXTERNAL, "ext.yaml")
    assert external_nodes(scenario) == {"producer", "store", "outside"}
    notes = {name: package("dafka").checks[name].factory(scenario).finish(0)[0].detail
             for name in package("dafka").default_checks}
    # (an external producer's offsets: as the tap hears them, from the first it heard)
    assert "RECORD(s) of external producers as the tap heard them" in notes["offsets"]
    assert "(external: outside)" in notes["consumer-order"]
    assert "not judged: what they hold of what they ACKed (external: store)" in notes["acked-retrievable"]
    assert "(external: outside, producer, store)" in notes["subscriptions"]
    assert "(external: store)" in notes["store-input"]


DCP_EXTERNAL = """protocol: dcp
name: ext
duration: 3s
nodes:
  broker: {role: broker, command: "broker --bind {endpoint}"}
  workers: {role: worker, count: 2, config: {service: echo, behaviour: upper}}
  outside: {role: worker, command: "worker --connect {connect}"}
  clients: {role: client, count: 1}
  app: {role: client, command: "client --connect {connect}"}
workload:
  - {nodes: clients, op: request, rate: 5/s}
"""


def dcp_check(text: str, name: str) -> Checker:
    return package("dcp").checks[name].factory(parse_scenario(text, "ext.yaml"))


def test_exactly_once_one_request_per_worker_and_worker_expiry_are_should_checks_out_of_the_defaults() -> None:
    """They judge SHOULDs (E-DCP-06, dcp.client.retry, E-DCP-09): a broker that lawfully gives a
    busy worker a second request, keeps no queue or never expires a worker fails only a file that
    names them."""
    pkg = package("dcp")
    for name in ("exactly-once", "one-request-per-worker", "worker-expiry"):
        assert pkg.checks[name].checker.level == "SHOULD" and name not in pkg.default_checks


def request(t: int, rid: str, data: list[bytes]) -> Event:
    return Event(t, "clients.0", "client", COMMAND, data={"op": "request", "id": rid, "service": "echo", "data": data})


def reply(t: int, rid: str, data: list[bytes]) -> Event:
    return Event(t, "clients.0", "client", DELIVER, msg_type="reply", data={"id": rid, "data": data})


def test_exactly_once_names_the_clause_each_failure_proves() -> None:
    text = DCP_EXTERNAL.replace('  outside: {role: worker, command: "worker --connect {connect}"}\n', "")
    twice = feed(dcp_check(text, "exactly-once"), [request(1, "a", [b"x"]), reply(2, "a", [b"X"]), reply(3, "a", [b"X"])])
    assert not twice.ok and twice.clause == "dcp.client.track-by-metadata" and "answered 2 times" in twice.detail
    lost = feed(dcp_check(text, "exactly-once"), [request(1, "a", [b"x"])])
    assert not lost.ok and lost.clause == "dcp.client.retry" and "never answered" in lost.detail
    altered = feed(dcp_check(text, "exactly-once"), [request(1, "a", [b"x"]), reply(2, "a", [b"x"])])
    assert not altered.ok and altered.clause == "dcp.broker.data-unmodified", altered.detail
    assert "not judged: the requests and replies of their applications (external: app)" in altered.detail


def test_exactly_once_does_not_predict_what_an_external_worker_computes() -> None:
    """The external worker may serve echo its own way: the reply data is not judged (the old
    checker predicted the in-process workers' 'upper' and failed a correct worker's reply)."""
    v = feed(dcp_check(DCP_EXTERNAL, "exactly-once"), [request(1, "a", [b"x"]), reply(2, "a", [b"x"])])
    assert v.ok and "not judged: the reply data of the services they may serve (external: outside)" in v.detail


def test_worker_expiry_says_an_external_brokers_expiry_is_not_judged() -> None:
    crash = Event(1_000_000_000, "workers.0", "worker", CRASH)
    v = feed(dcp_check(DCP_EXTERNAL, "worker-expiry"), [crash])
    assert v.ok and "not judged: the expiry of crashed workers" in v.detail and "(external: broker)" in v.detail


def test_hello_subjects_judges_an_external_consumers_hello_as_a_store_receives_it() -> None:
    """A CONSUMER-HELLO without topics breaks one clause or the other whatever its sender
    subscribed to: judged on receipt when no probed consumer sent it (the old checker judged
    consumers' sends only, and nothing of an external consumer)."""
    def hello(node: str, role: str, kind: str, subjects: list[str]) -> Event:
        return dafka_msg(50, node, role, kind, "CONSUMER-HELLO", topic="S1", address="C9", subjects=subjects)

    mine = [hello("early", "consumer", SEND, ["orders"]), hello("store", "store", RECV, ["orders"])]
    assert feed(dafka_check(DAFKA_EXTERNAL, "hello-subjects"), mine).ok
    v = feed(dafka_check(DAFKA_EXTERNAL, "hello-subjects"), [hello("store", "store", RECV, [])])
    assert not v.ok and v.clause == "dafka.consumer.hello-subjects" and "external consumer" in v.detail


def dcp_frames(identity: bytes, name: str, **fields: Any) -> list[bytes]:
    return [identity, *codec("dcp", "strict").encode(name, fields)]


def test_heartbeat_answers_catches_an_external_client_that_pings() -> None:
    """Seen as the reference broker receives it, under the client's node name; a peer that
    REGISTERed is a worker, whose PINGs are due."""
    dcp = codec("dcp", "strict")
    text = DCP_EXTERNAL.replace('  broker: {role: broker, command: "broker --bind {endpoint}"}',
                                "  broker: {role: broker}")

    def at_broker(t: int, identity: bytes, name: str, **fields: Any) -> Event:
        return Event(t, "broker", "broker", RECV, frames=dcp_frames(identity, name, **fields), codec=dcp)

    v = feed(dcp_check(text, "heartbeat-answers"), [at_broker(1, b"app", "PING")])
    assert not v.ok and v.clause == "dcp.heartbeat.client-no-heartbeat" and "client app (external)" in v.detail
    registered = [at_broker(1, b"app", "REGISTER", service="echo"), at_broker(2, b"app", "PING")]
    assert feed(dcp_check(text, "heartbeat-answers"), registered).ok


def test_receipts_prove_nothing_of_an_external_node_when_a_rule_corrupts_messages() -> None:
    """A damaged copy could claim offsets, partitions or an empty subject list that nobody sent:
    complete-delivery and hello-subjects then say what they do not judge instead."""
    corrupting = DAFKA_EXTERNAL + "faults:\n  - rule: {message: HEAD, corrupt: true}\n"
    head = dafka_msg(200, "early", "consumer", RECV, "HEAD", topic="orders", address=PART, subject="orders",
                     sequence=4)
    v = feed(dafka_check(corrupting, "complete-delivery"), [head])
    assert v.ok and "not judged: what they published (a corrupt rule may forge what is received) (external: producer)" \
        in v.detail
    empty = dafka_msg(50, "store", "store", RECV, "CONSUMER-HELLO", topic="S1", address="C9", subjects=[])
    v = feed(dafka_check(corrupting, "hello-subjects"), [empty])
    assert v.ok and "not judged: their CONSUMER-HELLOs" in v.detail


def test_metadata_unchanged_judges_an_external_client_at_the_broker() -> None:
    """Its REQUESTs and REPLYs as the reference broker receives and sends them under the client's
    node name (the old checker judged clients' own events only: nothing of an external one)."""
    dcp = codec("dcp", "strict")
    text = DCP_EXTERNAL.replace('  broker: {role: broker, command: "broker --bind {endpoint}"}',
                                "  broker: {role: broker}")

    def at_broker(t: int, kind: str, name: str, metadata: list[bytes]) -> Event:
        fields: dict[str, Any] = {"client_address": b"app", "metadata": metadata, "data": [b"x"]}
        if name == "REQUEST":
            fields["service"] = "echo"
        return Event(t, "broker", "broker", kind, frames=dcp_frames(b"app", name, **fields), codec=dcp)

    ok = feed(dcp_check(text, "metadata-unchanged"), [at_broker(1, RECV, "REQUEST", [b"m1"]),
                                                      at_broker(2, SEND, "REPLY", [b"m1"])])
    assert ok.ok and ok.detail.startswith("1 repl(ies)") and "not judged" not in ok.detail, ok.detail
    bad = feed(dcp_check(text, "metadata-unchanged"), [at_broker(1, RECV, "REQUEST", [b"m1"]),
                                                       at_broker(2, SEND, "REPLY", [b"m2"])])
    assert not bad.ok and bad.clause == "dcp.worker.metadata-copied"
    unseen = feed(dcp_check(text, "metadata-unchanged"), [])
    assert "not judged: the replies they received" in unseen.detail and "(external: app)" in unseen.detail
