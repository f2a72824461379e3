"""Dafka reference nodes end to end in the deterministic simulator (harness/sim/runtime.py):
a tower, producers, stores and consumers discover each other through the tower, and every
consumer delivers every record of every partition exactly once, in offset order, also when
RECORDs are lost, when the producer is gone and when a store restarts.
"""

from __future__ import annotations

from typing import Any

from fault_injection.rules import RuleSet
from harness.node import NS_PER_MS, Deliver, Discard, Note, Send
from harness.sim.runtime import Simulation
from reference_nodes.dafka import mutants as M
from reference_nodes.dafka.consumer import Consumer
from reference_nodes.dafka.producer import Producer
from reference_nodes.dafka.store import Store
from reference_nodes.dafka.tower import Tower

MS = NS_PER_MS
S = 1000 * MS
FAST = {"beacon_ms": 100, "head_ms": 100, "fetch_retry_ms": 200}
TOWER_A = ["tcp://127.0.0.1:5556", "tcp://127.0.0.1:5557"]
TOWER_B = ["tcp://127.0.0.1:5566", "tcp://127.0.0.1:5567"]


class Cluster:
    """A simulation plus what its nodes did, gathered with ``on_action``."""

    def __init__(self, seed: int, rules: RuleSet | None = None, towers=(TOWER_A,)) -> None:
        self.sim = Simulation(seed, rules=rules)
        self.towers = [list(t) for t in towers]
        self.port = 6000
        self.delivered: dict[str, list[tuple[str, str, int, bytes]]] = {}
        self.sent: dict[tuple[str, str], int] = {}
        self.notes: list[tuple[int, str, Note]] = []
        self.discards: list[tuple[str, Discard]] = []
        self.sim.on_action(self._hook)
        for i, (xsub, xpub) in enumerate(self.towers):
            self.sim.add_node(f"tower{i}", Tower, role="tower", config={"bind_sub": xsub, "bind_pub": xpub})

    def _hook(self, node: str, action: Any, t: int) -> None:
        if isinstance(action, Deliver) and action.kind == "record":
            d = action.data
            self.delivered.setdefault(node, []).append((d["topic"], d["partition"], d["offset"], d["content"]))
        elif isinstance(action, Send):
            key = (node, action.msg_type)
            self.sent[key] = self.sent.get(key, 0) + 1
        elif isinstance(action, Note):
            self.notes.append((t, node, action))
        elif isinstance(action, Discard):
            self.discards.append((node, action))

    def add(self, name: str, factory: Any, role: str, start_at: int = 0, **config: Any) -> None:
        self.port += 1
        cfg = {**FAST, "towers": self.towers, "bind": f"tcp://127.0.0.1:{self.port}", **config}
        self.sim.add_node(name, factory, role=role, config=cfg, start_at_ns=start_at)

    def produce(self, producer: str, n: int, start: int = 1 * S, every: int = 5 * MS, topic: str = "t") -> list[bytes]:
        contents = [f"{producer}-{i}".encode() for i in range(n)]
        for i, c in enumerate(contents):
            self.sim.command(start + i * every, producer, {"op": "produce", "topic": topic, "content": c})
        return contents

    def address(self, node: str) -> str:
        return self.sim.node(node).address  # type: ignore[union-attr]

    def partition(self, consumer: str, partition: str) -> list[tuple[int, bytes]]:
        return [(o, c) for _, p, o, c in self.delivered.get(consumer, []) if p == partition]

    def count(self, node: str, msg_type: str) -> int:
        return self.sent.get((node, msg_type), 0)

    def noted(self, node: str, kind: str) -> list[dict[str, Any]]:
        return [n.data for _, who, n in self.notes if who == node and n.kind == kind]


def expect_all(cl: Cluster, consumer: str, partition: str, contents: list[bytes]) -> None:
    assert cl.partition(consumer, partition) == list(enumerate(contents)), consumer


def test_one_producer_store_and_two_consumers() -> None:
    cl = Cluster(1)
    cl.add("p", Producer, "producer", topic="t")
    cl.add("s", Store, "store")
    cl.add("early", Consumer, "consumer", topics=["t"], offset_reset="earliest")
    cl.add("late", Consumer, "consumer", topics=["t"], offset_reset="latest")
    contents = cl.produce("p", 40)
    cl.sim.run(3 * S)
    p = cl.address("p")
    for c in ("early", "late"):
        expect_all(cl, c, p, contents)
        assert [d["offset"] for d in cl.noted(c, "partition-start")] == [0]
    assert cl.sim.node("s").status()["partitions"][f"t/{p}"]["prefix"] == 39  # type: ignore[union-attr]
    status = cl.sim.node("p").status()  # type: ignore[union-attr]
    assert status["acked"] == 39 and status["held"] == []  # ACKed, then released
    assert cl.count("s", "STORE-HELLO") == 2 and cl.count("early", "CONSUMER-HELLO") >= 1
    assert cl.count("p", "HEAD") > 0 and cl.count("early", "GET-HEADS") >= 1
    assert cl.discards == []


def test_two_producers_two_stores_interleaved() -> None:
    cl = Cluster(2)
    for name in ("p1", "p2"):
        cl.add(name, Producer, "producer")
    for name in ("s1", "s2"):
        cl.add(name, Store, "store")
    cl.add("c1", Consumer, "consumer", topics=["t"])
    cl.add("c2", Consumer, "consumer", topics=["t", "u"])
    a = cl.produce("p1", 25, every=7 * MS)
    b = cl.produce("p2", 25, start=1 * S + 3 * MS, every=6 * MS, topic="u")
    cl.sim.run(3 * S)
    p1, p2 = cl.address("p1"), cl.address("p2")
    expect_all(cl, "c1", p1, a)
    assert cl.partition("c1", p2) == []  # not subscribed to u
    expect_all(cl, "c2", p1, a)
    expect_all(cl, "c2", p2, b)
    topics = [t for t, *_ in cl.delivered["c2"]]
    assert topics.index("u") < len(topics) - topics[::-1].index("t") - 1  # the two streams interleave
    for s in ("s1", "s2"):
        parts = cl.sim.node(s).status()["partitions"]  # type: ignore[union-attr]
        assert parts[f"t/{p1}"]["prefix"] == 24 and parts[f"u/{p2}"]["prefix"] == 24
    assert cl.discards == []


def test_dropped_records_are_fetched() -> None:
    rules = RuleSet.from_dicts([{"message": "RECORD", "drop": "20%"}])
    cl = Cluster(3, rules=rules)
    cl.add("p", Producer, "producer", topic="t")
    cl.add("s", Store, "store")
    cl.add("c1", Consumer, "consumer", topics=["t"], offset_reset="earliest")
    cl.add("c2", Consumer, "consumer", topics=["t"], offset_reset="latest")
    contents = cl.produce("p", 50)
    cl.sim.run(4 * S)
    p = cl.address("p")
    assert cl.sim.stats.dropped.get("drop:rule-0", 0) >= 10
    expect_all(cl, "c1", p, contents)
    # latest starts where it first saw the partition and then misses nothing
    (start,) = [d["offset"] for d in cl.noted("c2", "partition-start")]
    assert cl.partition("c2", p) == list(enumerate(contents))[start:]
    assert cl.count("c1", "FETCH") > 0 and cl.count("s", "FETCH") > 0
    assert cl.count("p", "DIRECT-RECORD") > 0
    assert cl.sim.node("s").status()["partitions"][f"t/{p}"]["prefix"] == 49  # type: ignore[union-attr]


def test_dropped_records_two_earliest_consumers_seeds() -> None:
    rules = RuleSet.from_dicts([{"message": "RECORD", "drop": "20%"}])
    for seed in (11, 12, 13):
        cl = Cluster(seed, rules=rules)
        cl.add("p", Producer, "producer", topic="t")
        cl.add("s", Store, "store")
        cl.add("c1", Consumer, "consumer", topics=["t"])
        cl.add("c2", Consumer, "consumer", topics=["t"])
        contents = cl.produce("p", 30)
        cl.sim.run(3 * S)
        for c in ("c1", "c2"):
            expect_all(cl, c, cl.address("p"), contents)


def test_late_consumer_reads_from_the_store_after_the_producer_crashed() -> None:
    cl = Cluster(4)
    cl.add("p", Producer, "producer", topic="t")
    cl.add("s", Store, "store")
    cl.add("late", Consumer, "consumer", start_at=4 * S, topics=["t"])
    contents = cl.produce("p", 30)
    cl.sim.run(3 * S)
    p = cl.address("p")
    assert cl.sim.node("p").status()["held"] == []  # type: ignore[union-attr]
    cl.sim.crash("p")
    cl.sim.run(7 * S)
    expect_all(cl, "late", p, contents)
    assert cl.count("s", "DIRECT-RECORD") >= 30 and cl.count("s", "DIRECT-HEAD") >= 1


def test_store_restart_keeps_acked_records() -> None:
    cl = Cluster(5)
    cl.add("p", Producer, "producer", topic="t")
    cl.add("s", Store, "store")
    cl.add("late", Consumer, "consumer", start_at=5 * S, topics=["t"])
    contents = cl.produce("p", 30)
    cl.sim.run(3 * S)
    p = cl.address("p")
    assert cl.sim.node("p").status()["held"] == []  # type: ignore[union-attr]
    address = cl.address("s")
    cl.sim.crash("s")
    cl.sim.run(3500 * MS)
    cl.sim.restart("s")
    cl.sim.run(8 * S)
    assert cl.address("s") == address
    assert cl.noted("s", "store-loaded") == [{"partitions": 1, "records": 30}]
    expect_all(cl, "late", p, contents)


def test_memory_store_loses_them() -> None:
    cl = Cluster(5)
    cl.add("p", Producer, "producer", topic="t")
    cl.add("s", M.MemoryStore, "store")
    cl.add("late", Consumer, "consumer", start_at=5 * S, topics=["t"])
    cl.produce("p", 30)
    cl.sim.run(3 * S)
    assert cl.sim.node("p").status()["held"] == []  # type: ignore[union-attr]
    cl.sim.crash("s")
    cl.sim.run(3500 * MS)
    cl.sim.restart("s")
    cl.sim.run(8 * S)
    assert cl.delivered.get("late", []) == []  # ACKed, released by the producer, and lost


def test_two_towers_one_lost() -> None:
    cl = Cluster(6, towers=(TOWER_A, TOWER_B))
    cl.add("p", Producer, "producer", topic="t")
    cl.add("s", Store, "store")
    cl.add("c1", Consumer, "consumer", topics=["t"])
    cl.add("late", Consumer, "consumer", start_at=2 * S, topics=["t"])
    cl.sim.schedule(500 * MS, lambda: cl.sim.crash("tower0"))
    contents = cl.produce("p", 20)
    cl.sim.run(5 * S)
    p = cl.address("p")
    expect_all(cl, "c1", p, contents)
    expect_all(cl, "late", p, contents)
    assert cl.noted("late", "peer-discovered")  # through the second tower


def test_no_hello_without_topics_and_subscribe_later() -> None:
    cl = Cluster(7)
    cl.add("p", Producer, "producer", topic="t")
    cl.add("s", Store, "store")
    cl.add("c", Consumer, "consumer")
    contents = cl.produce("p", 10)
    cl.sim.command(2 * S, "c", {"op": "subscribe", "topic": "t"})
    cl.sim.run(4 * S)
    assert cl.count("s", "STORE-HELLO") >= 1
    assert [t for t, node, n in cl.notes if node == "c" and n.kind == "partition-start"][0] >= 2 * S
    expect_all(cl, "c", cl.address("p"), contents)


def _one_consumer_run(consumer: Any, rules: list[dict[str, Any]], stores: int = 1) -> list[int]:
    cl = Cluster(3, rules=RuleSet.from_dicts(rules))
    cl.add("p", Producer, "producer", topic="t")
    for i in range(stores):
        cl.add(f"s{i}", Store, "store")
    cl.add("c", consumer, "consumer", topics=["t"])
    cl.produce("p", 30)
    cl.sim.run(3 * S)
    return [o for o, _ in cl.partition("c", cl.address("p"))]


def test_duplicates_reach_the_application_once() -> None:
    rules = [{"message": "RECORD", "duplicate": 1, "probability": 0.3}, {"message": "DIRECT-RECORD", "duplicate": 1}]
    assert _one_consumer_run(Consumer, rules, stores=2) == list(range(30))
    got = _one_consumer_run(M.DuplicateDeliveryConsumer, rules, stores=2)
    assert sorted(set(got)) == list(range(30)) and len(got) > 30


def test_consumer_mutants_end_to_end() -> None:
    drops = [{"message": "RECORD", "drop": "20%"}]
    assert _one_consumer_run(Consumer, drops) == list(range(30))
    got = _one_consumer_run(M.OutOfOrderConsumer, drops)
    assert sorted(got) == list(range(30)) and got != list(range(30))
    got = _one_consumer_run(M.SkipGapConsumer, drops)
    assert got == sorted(got) and len(got) < 30


def test_zproto_dialect_cluster() -> None:
    cl = Cluster(9, rules=RuleSet.from_dicts([{"message": "RECORD", "drop": "20%"}]))
    z = {"dialect": "dafka:zproto"}
    cl.add("p", Producer, "producer", topic="t", **z)
    cl.add("s", Store, "store", **z)
    cl.add("c", Consumer, "consumer", topics=["t"], **z)
    cl.add("late", Consumer, "consumer", start_at=3 * S, topics=["t"], **z)
    contents = cl.produce("p", 20)
    cl.sim.run(5 * S)
    for c in ("c", "late"):
        expect_all(cl, c, cl.address("p"), contents)
    assert cl.sim.node("p").status()["held"] == [] and cl.discards == []  # type: ignore[union-attr]


def test_same_seed_same_run() -> None:
    def run() -> tuple:
        rules = RuleSet.from_dicts([{"message": "RECORD", "drop": "20%"}])
        cl = Cluster(8, rules=rules)
        cl.add("p", Producer, "producer", topic="t")
        cl.add("s", Store, "store")
        cl.add("c", Consumer, "consumer", topics=["t"])
        cl.produce("p", 20)
        cl.sim.run(3 * S)
        return cl.delivered, cl.sent, [(t, n, a.kind) for t, n, a in cl.notes], cl.sim.stats

    assert run() == run()
