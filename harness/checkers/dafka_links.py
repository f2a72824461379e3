"""Dafka: what a node subscribes to and connects to, judged from what it does (the probe reports
every ``Subscribe``/``Unsubscribe``/``Connect``/``Disconnect`` of a node and the sockets each of
its lives declares), clause by clause of ZeroMQ Subscriptions and the Interconnection Model.

Nodes the harness runs in-process (reference nodes and mutants) report these actions. An
external node's are judged from what the chaos proxy saw of its sockets when the run observes it
(`harness.checkers.dafka_seen`): the subscriptions each of its connections carried, and whether
its beacons and a subscription to the towers' beacons reached a tower.
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import (
    COMMAND, RESTART, SEND, START, SUBSCRIBE, UNSUBSCRIBE, Checker, Event, Verdict,
)
from harness.checkers.dafka_duties import DEFAULT_WITHIN_NS, Duties, Problem
from harness.checkers.dafka_seen import SeenConnection, SeenLife, SeenNodes
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
MS = 1_000_000
# An external process's start or restart, before its tower links are due: it is not seen to
# start, and a slow one (a shell first, an interpreter) takes seconds.
TOWER_GRACE_NS = 4000 * MS


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
                 seen: SeenNodes | None = None, **params: Any) -> None:
        super().__init__(**params)
        self.config_topics = topics or {}
        self.duties = Duties(DEFAULT_WITHIN_NS if within_ms is None else int(within_ms) * 1_000_000)
        self.declared: dict[str, list[SocketSpec]] = {}
        self.lives: dict[str, _Life] = {}
        self.seen = seen  # the external nodes, as the proxy saw them (None: not observed)
        if seen is not None:
            self.kinds = self.kinds | SeenNodes.kinds

    def on_sockets(self, node: str, sockets: list[SocketSpec]) -> None:
        self.declared[node] = list(sockets)

    def _need(self, life: _Life, ev: Event, prefix: bytes, clause: str, why: str) -> None:
        if life.covers(prefix):
            self.duties.met += 1
        else:
            self.duties.owe(ev.node, prefix, ev, f"did not subscribe to {prefix!r} ({why})", clause)

    def on_event(self, ev: Event) -> None:
        if self.seen is not None:
            self.seen.on_event(ev)
        if ev.via:
            return  # an external node: judged from `seen` at the end
        if ev.kind in Duties.kinds:  # (every node's, external ones' too: their pauses count)
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
        seen = ""
        if self.seen is not None:
            judged = _SeenSubscriptions(self, end_ns)
            bad = bad + judged.bad
            seen = judged.summary()
        if bad:
            return [self.first_problem(bad, "missing subscription(s)")]
        return [self.ok(f"{self.duties.met} required subscription(s) in place{seen}")]


class _SeenSubscriptions:
    """The subscriptions of the external nodes, judged from their connections (``seen``), peer by
    peer: a connection to a peer that came up once the node needed a subscription carries it
    within ``within`` of coming up, or another of the node's connections to that peer does (a
    SUB socket sends what it holds on each new connection; a process that is two Dafka nodes has
    two SUBs). One needed later (its own address, from its first BEACON; a producer's partition,
    from its first RECORD) that no connection came up after is held on some connection within
    ``within`` of the need. A need for its own address is met by any of its addresses (a process
    that is two nodes splits them). A consumer's topics (the file's, and any it subscribed to
    RECORDs or HEADs of) are needed from when it first held them on any connection (its
    application subscribes when it will), and held at some point in a life of `TOWER_GRACE_NS`
    or more. Paused time does not count; a connection is judged only if the
    node's life lasted until the bound."""

    def __init__(self, check: Subscriptions, end_ns: int) -> None:
        assert check.seen is not None
        self.check = check
        self.within = check.duties.within
        self.bad: list[Problem] = []
        self.met = 0
        self.nodes: set[str] = set()
        self.unseen: set[str] = set()  # external nodes with no peer connection seen
        for life in check.seen.all_lives(end_ns):
            self._judge(life, check.seen.roles)

    def _needs(self, life: SeenLife) -> list[tuple[tuple[bytes, ...], str, str, Event | None]]:
        """(prefixes, any of which will do; clause; why; the event that made it needed, or None:
        from the start)."""
        needs: list[tuple[tuple[bytes, ...], str, str, Event | None]] = []
        for cmd, own, clause in REQUIRED.get(life.role, ()):
            if not own:
                needs.append(((subscription(cmd),), clause, "every one", None))
            elif life.role != "producer" and life.addresses:
                needs.append((tuple(subscription(cmd, a) for a in life.addresses), clause, "its own address",
                              life.beacon))
            elif life.role == "producer":
                needs.extend(((subscription(cmd, part),), clause, "its partition", ev)
                             for part, ev in life.partitions.items())
        return needs

    def _topic_needs(self, life: SeenLife, roles: dict[str, str]) -> list[tuple[bytes, str, str, Event | None]]:
        """A consumer's topics: its application subscribes when it will (zeromq/dafka's console
        consumer a second after it starts), which the harness does not see. (prefix, clause, why,
        the first subscription that held it, or None: never.)"""
        if life.role != "consumer":
            return []
        # its topics: the file's, and any it showed it wants (a RECORD or HEAD subscription on a topic)
        topics = dict.fromkeys(self.check.config_topics.get(life.node, []))
        topics.update(dict.fromkeys(life.topics(roles, tuple(subscription(cmd) for cmd, _ in PER_TOPIC))))
        prefixes = [(subscription(cmd, topic), clause, f"topic {topic!r}") for topic in topics
                    for cmd, clause in PER_TOPIC]
        return [(prefix, clause, why, life.first_holding(prefix, roles)) for prefix, clause, why in prefixes]

    def _due(self, node: str, since: int) -> int | None:
        """When the node has run ``within`` unpaused since ``since`` (None: a pause held it to the end)."""
        return self.check.duties.pauses.deadline(node, since, self.within)

    @staticmethod
    def _held(conns: list[SeenConnection], prefixes: tuple[bytes, ...], by_ns: int) -> bool:
        return any(c.covers(p, by_ns) for c in conns for p in prefixes)

    def _judge(self, life: SeenLife, roles: dict[str, str]) -> None:
        by_peer = life.by_peer(roles)
        if not by_peer:
            self.unseen.add(life.node)
            return
        self.nodes.add(life.node)
        end = life.end
        assert end is not None
        everything = life.peer_conns(roles)  # oldest first
        for prefixes, clause, why, since in self._needs(life):
            need = since.time_ns if since is not None else None
            what = f"{life.node} did not subscribe to {' or '.join(map(repr, prefixes))} ({why})"
            problem = self._on_connect(life, by_peer, prefixes, need, end, what, clause)
            if problem is None and since is not None and not any(c.first >= since.time_ns for c in everything):
                due = self._due(life.node, since.time_ns)
                if due is not None and due <= end and not self._held(everything, prefixes, due):
                    problem = (since, f"{what} within {self.within // MS} ms of needing it, on any of its "
                                      f"{len(everything)} connection(s) to peers (seen by the proxy)", clause)
            self._count(problem)
        for prefix, clause, why, first in self._topic_needs(life, roles):
            what = f"{life.node} did not subscribe to {prefix!r} ({why})"
            if first is None:  # never: a failure once its life was long enough to have done it
                long_enough = end - life.start >= TOWER_GRACE_NS
                self._count((everything[0].event, f"{what} on any of its connections to peers (seen by the proxy)",
                             clause) if long_enough else None)
            else:  # once it holds it, each connection that comes up carries it
                self._count(self._on_connect(life, by_peer, (prefix,), first.time_ns, end, what, clause))

    def _count(self, problem: Problem | None) -> None:
        if problem is not None:
            self.bad.append(problem)
        else:
            self.met += 1

    def _on_connect(self, life: SeenLife, by_peer: dict[str, list[SeenConnection]], prefixes: tuple[bytes, ...],
                    need: int | None, end: int, what: str, clause: str) -> Problem | None:
        for peer, conns in by_peer.items():
            for c in conns:
                if need is not None and c.first < need:
                    continue
                due = self._due(life.node, c.first)
                if due is not None and due <= end and not self._held(conns, prefixes, due):
                    return (c.event, f"{what} on its connection to {peer}: not within {self.within // MS} ms of it "
                                     "coming up (seen by the proxy)", clause)
        return None

    def summary(self) -> str:
        out = ""
        if self.nodes:
            out += (f"; {self.met} more of the external nodes {', '.join(sorted(self.nodes))}, judged from their "
                    "connections as the proxy saw them")
        if self.unseen - self.nodes:
            out += ("; not judged: no connection to a peer seen (external: "
                    f"{', '.join(sorted(self.unseen - self.nodes))})")
        return out


class TowerLinks(Checker):
    """Each producer, store and consumer connects a PUB socket (its beacons) and a SUB socket
    subscribed to the towers' beacons (``B``) to at least one endpoint each (Interconnection
    Model), in every life that lasts ``within_ms`` (default 1000). The endpoints are not compared
    with the towers' own: on a live run a proxy may stand between a node and its towers."""

    name = "tower-links"
    clause = "dafka.interconnect.tower-sockets"
    kinds = SocketLives.kinds
    roles = frozenset({"producer", "store", "consumer"})

    def __init__(self, within_ms: int | None = None, seen: SeenNodes | None = None,
                 cut_from_towers: frozenset[str] = frozenset(), cut_off: frozenset[str] = frozenset(),
                 **params: Any) -> None:
        super().__init__(**params)
        self.within = DEFAULT_WITHIN_NS if within_ms is None else int(within_ms) * 1_000_000
        self.lives = SocketLives(self.within)
        self.bad: list[tuple[Event, str, str]] = []
        self.judged = 0
        self.seen = seen  # the external nodes, as the proxy saw them (None: not observed)
        self.cut_from_towers = cut_from_towers  # external nodes a partition may cut off the towers
        self.cut_off = cut_off  # ... or off any other node
        if seen is not None:
            self.kinds = self.kinds | SeenNodes.kinds

    def on_sockets(self, node: str, sockets: list[SocketSpec]) -> None:
        self.lives.declare(node, sockets)

    def on_event(self, ev: Event) -> None:
        if self.seen is not None:
            self.seen.on_event(ev)
        if ev.via:
            return  # an external node: judged from `seen` at the end
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

    def _judge_seen(self, life: SeenLife, roles: dict[str, str]) -> str | None:
        """An external node's life: within `TOWER_GRACE_NS` of its start (or restart), a BEACON
        of it and a subscription to the towers' beacons on a connection to a tower reached the
        proxy, and (unless a partition may cut it off) its SUB connected to a peer it heard of.
        Returns why it was not judged, if it was not."""
        end = life.end
        assert end is not None
        if end - life.start < TOWER_GRACE_NS:
            return "a life too short to judge"
        if life.node in self.cut_from_towers:
            return "a partition may cut it off the towers"
        due = life.start + TOWER_GRACE_NS
        self.judged += 1
        sub = any(c.covers(TOWER_BEACON, due) for c in life.tower_conns(roles))
        pub = life.beacon is not None and life.beacon.time_ns <= due
        first_conn = min(life.conns.values(), key=lambda c: c.first, default=None)
        ev = life.beacon or (first_conn.event if first_conn is not None else None)
        where = f" (seen by the proxy, within {TOWER_GRACE_NS // MS} ms of its {'re' if life.start else ''}start)"
        if not pub and not sub:
            self._seen_problem(ev, life, f"{life.node} connected no socket to any tower: no BEACON and no "
                                         f"subscription to {TOWER_BEACON!r} reached one{where}",
                               "dafka.interconnect.tower-sockets")
        elif not pub:
            self._seen_problem(ev, life, f"{life.node} sent no BEACON to a tower{where}",
                               "dafka.interconnect.tower-pub-connect")
        elif not sub:
            self._seen_problem(ev, life, f"{life.node} subscribed to no tower's beacons ({TOWER_BEACON!r}){where}",
                               "dafka.interconnect.tower-sub-connect")
        elif life.node not in self.cut_off and not life.peer_conns(roles):
            # it heard the towers' beacons, so of the other nodes, and connected to none of them
            self._seen_problem(ev, life, f"{life.node} connected its SUB to no peer it heard of from the towers"
                                         f"{where}", "dafka.interconnect.connect-on-discovery")
        return None

    def _seen_problem(self, ev: Event | None, life: SeenLife, detail: str, clause: str) -> None:
        if ev is None:  # nothing of this life was seen: the evidence is the detail alone
            ev = Event(life.start, life.node, life.role, RESTART if life.start else START)
        self.bad.append((ev, detail, clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        for life in self.lives.finish(end_ns):
            self._judge(life)
        unjudged: dict[str, str] = {}
        if self.seen is not None:
            for seen_life in self.seen.all_lives(end_ns):
                why = self._judge_seen(seen_life, self.seen.roles)
                if why is not None:
                    unjudged.setdefault(seen_life.node, why)
        note = "".join(f"; not judged: {node} ({why})" for node, why in sorted(unjudged.items()))
        if self.bad:
            v = self.first_problem(self.bad, "node life(s) with links missing")
            v.detail += note
            return [v]
        return [self.ok(f"{self.judged} node life(s) linked to the towers both ways{note}")]
