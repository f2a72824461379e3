"""Dafka: what a node subscribes to and connects to, judged from what it does (the probe reports
every ``Subscribe``/``Unsubscribe``/``Connect``/``Disconnect`` of a node and the sockets each of
its lives declares), clause by clause of ZeroMQ Subscriptions and the Interconnection Model.

Only nodes the harness runs in-process (reference nodes and mutants) report these actions; an
implementation under test is judged by the conformance suites instead.
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import (
    COMMAND, SEND, START, SUBSCRIBE, UNSUBSCRIBE, Checker, Event, Verdict,
)
from harness.checkers.dafka_duties import DEFAULT_WITHIN_NS, Duties
from harness.checkers.lives import SocketLife, SocketLives
from harness.node import SocketSpec, SocketType
from harness.protocols.dafka import subscription

TOWER_BEACON = subscription("TOWER-BEACON")

# Per role: (command, addressed to the node itself?, clause). Unaddressed ones cover every topic
# (a store's "M"), addressed ones the node's own address (its partition, for a producer).
REQUIRED: dict[str, tuple[tuple[str, bool, str], ...]] = {
    "producer": (("ACK", True, "dafka.subscription.producer-ack"),
                 ("FETCH", True, "dafka.subscription.producer-fetch")),
    "consumer": (("DIRECT-RECORD", True, "dafka.subscription.consumer-direct-record"),
                 ("DIRECT-HEAD", True, "dafka.subscription.consumer-direct-head"),
                 ("STORE-HELLO", True, "dafka.subscription.consumer-store-hello")),
    "store": (("RECORD", False, "dafka.subscription.store-record"),
              ("HEAD", False, "dafka.subscription.store-head"),
              ("FETCH", False, "dafka.subscription.store-fetch"),
              ("GET-HEADS", False, "dafka.subscription.store-get-heads"),
              ("DIRECT-RECORD", True, "dafka.subscription.store-direct-record"),
              # "W" or "W" + its address: both receive every hello addressed to it (E-DAFKA-18)
              ("CONSUMER-HELLO", True, "dafka.subscription.store-consumer-hello")),
}
PER_TOPIC = (("RECORD", "dafka.subscription.consumer-record"), ("HEAD", "dafka.subscription.consumer-head"))


class _Life:
    """One incarnation of a node: its sockets, subscriptions and connections."""

    def __init__(self, sockets: list[SocketSpec]) -> None:
        self.types = {s.name: s.type for s in sockets}
        self.subs: dict[str, list[bytes]] = {s.name: list(s.subscribe) for s in sockets}
        self.connected: dict[str, set[str]] = {s.name: set(s.connect) for s in sockets}
        self.tower_sub = {s.name for s in sockets if s.type == SocketType.SUB and TOWER_BEACON in s.subscribe}
        self.address: str | None = None
        self.partitions: set[str] = set()
        self.topics: list[str] = []
        self.start: int | None = None

    def peer_subs(self) -> list[bytes]:
        """Subscriptions of the SUB sockets that listen to peers (not to the towers)."""
        return [p for name, subs in self.subs.items()
                if self.types.get(name) == SocketType.SUB and name not in self.tower_sub for p in subs]

    def covers(self, prefix: bytes) -> bool:
        return any(prefix.startswith(s) for s in self.peer_subs())


class Subscriptions(Checker):
    """Each producer, store and consumer subscribes to what ZeroMQ Subscriptions require of its
    role, on the SUB socket it connects to its peers: within ``within_ms`` (default 1000) of the
    moment it needs it (its start, its first beacon for what names its own address, its first
    RECORD for a producer's partition, a consumer's subscription to a topic), for as long as it
    lives. A node that restarts owes them again; a prefix that covers one (a store's ``W``
    covers ``W`` + its address, E-DAFKA-18) is enough."""

    name = "subscriptions"
    clause = "dafka.subscription.register"
    kinds = frozenset({SEND, SUBSCRIBE, UNSUBSCRIBE, COMMAND, *Duties.kinds})
    roles = frozenset({"producer", "store", "consumer"})

    def __init__(self, topics: dict[str, list[str]] | None = None, within_ms: int | None = None,
                 **params: Any) -> None:
        super().__init__(**params)
        self.config_topics = topics or {}
        self.duties = Duties(DEFAULT_WITHIN_NS if within_ms is None else int(within_ms) * 1_000_000)
        self.declared: dict[str, list[SocketSpec]] = {}
        self.lives: dict[str, _Life] = {}

    def on_sockets(self, node: str, sockets: list[SocketSpec]) -> None:
        self.declared[node] = list(sockets)

    def _need(self, life: _Life, ev: Event, prefix: bytes, clause: str, why: str) -> None:
        if life.covers(prefix):
            self.duties.met += 1
        else:
            self.duties.owe(ev.node, prefix, ev, f"did not subscribe to {prefix!r} ({why})", clause)

    def on_event(self, ev: Event) -> None:
        if ev.via:
            return  # an external node seen by the proxy: a partial view (harness.live_observe), not judged
        if ev.kind in Duties.kinds:
            self.duties.on_event(ev)
            if ev.kind == START:
                self._start(ev)
            return
        life = self.lives.get(ev.node)
        if life is None:
            return
        d = ev.data or {}
        if ev.kind in (SUBSCRIBE, UNSUBSCRIBE):
            subs = life.subs.setdefault(ev.socket, [])
            prefix = bytes(d.get("topic", b""))
            if ev.kind == UNSUBSCRIBE:
                if prefix in subs:
                    subs.remove(prefix)
                return
            subs.append(prefix)
            if life.types.get(ev.socket) == SocketType.SUB and ev.socket not in life.tower_sub:
                for key in [k for k in self.duties.owed.get(ev.node, {}) if bytes(k).startswith(prefix)]:
                    self.duties.discharge(ev.node, key, ev.time_ns)
        elif ev.kind == COMMAND and ev.role == "consumer" and d.get("op") == "subscribe":
            self._topic(life, ev, str(d.get("topic")))
        elif ev.kind == SEND and ev.msg_type in ("BEACON", "RECORD"):
            msg = ev.message()
            if msg is None:
                return
            if msg.name == "BEACON" and life.address is None:
                life.address = str(msg["sender"])
                for cmd, own, clause in REQUIRED.get(ev.role, ()):
                    if own and ev.role != "producer":
                        self._need(life, ev, subscription(cmd, life.address), clause, "its own address")
            elif msg.name == "RECORD" and ev.role == "producer" and msg["address"] not in life.partitions:
                life.partitions.add(msg["address"])
                for cmd, _, clause in REQUIRED["producer"]:
                    self._need(life, ev, subscription(cmd, msg["address"]), clause, "its partition")

    def _start(self, ev: Event) -> None:
        life = self.lives[ev.node] = _Life(self.declared.get(ev.node, []))
        life.start = ev.time_ns
        for cmd, own, clause in REQUIRED.get(ev.role, ()):
            if not own:
                self._need(life, ev, subscription(cmd), clause, "every one")
        if ev.role == "consumer":
            for t in self.config_topics.get(ev.node, []):
                self._topic(life, ev, t)

    def _topic(self, life: _Life, ev: Event, topic: str) -> None:
        if topic in life.topics:
            return
        life.topics.append(topic)
        for cmd, clause in PER_TOPIC:
            self._need(life, ev, subscription(cmd, topic), clause, f"topic {topic!r}")

    def finish(self, end_ns: int) -> list[Verdict]:
        bad = self.duties.finish(end_ns)
        if bad:
            return [self.first_problem(bad, "missing subscription(s)")]
        return [self.ok(f"{self.duties.met} required subscription(s) in place")]


class TowerLinks(Checker):
    """Each producer, store and consumer connects a PUB socket (its beacons) and a SUB socket
    subscribed to the towers' beacons (``B``) to at least one endpoint each (Interconnection
    Model), in every life that lasts ``within_ms`` (default 1000). The endpoints are not compared
    with the towers' own: on a live run a proxy may stand between a node and its towers."""

    name = "tower-links"
    clause = "dafka.interconnect.tower-sockets"
    kinds = SocketLives.kinds
    roles = frozenset({"producer", "store", "consumer"})

    def __init__(self, within_ms: int | None = None, **params: Any) -> None:
        super().__init__(**params)
        self.within = DEFAULT_WITHIN_NS if within_ms is None else int(within_ms) * 1_000_000
        self.lives = SocketLives(self.within)
        self.bad: list[tuple[Event, str, str]] = []
        self.judged = 0

    def on_sockets(self, node: str, sockets: list[SocketSpec]) -> None:
        self.lives.declare(node, sockets)

    def on_event(self, ev: Event) -> None:
        if ev.via:
            return  # an external node seen by the proxy: a partial view (harness.live_observe), not judged
        ended = self.lives.on_event(ev)
        if ended is not None:
            self._judge(ended)

    def _judge(self, life: SocketLife) -> None:
        self.judged += 1
        ev, node = life.start, life.start.node
        tower_sub = {n for n, t in life.types.items() if t == SocketType.SUB and TOWER_BEACON in life.subscribe[n]}
        pub = bool(life.linked_of_type(SocketType.PUB))
        sub = any(life.linked(n) for n in tower_sub)
        if not pub and not sub:
            self.bad.append((ev, f"{node} connected no socket to any tower", "dafka.interconnect.tower-sockets"))
        elif not pub:
            self.bad.append((ev, f"{node} connected no PUB socket to a tower", "dafka.interconnect.tower-pub-connect"))
        elif not sub:
            self.bad.append((ev, f"{node} connected no SUB socket for the towers' beacons to a tower",
                             "dafka.interconnect.tower-sub-connect"))

    def finish(self, end_ns: int) -> list[Verdict]:
        for life in self.lives.finish(end_ns):
            self._judge(life)
        if self.bad:
            return [self.first_problem(self.bad, "node life(s) without tower links")]
        return [self.ok(f"{self.judged} node life(s) linked to the towers both ways")]
