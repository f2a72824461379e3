"""Dafka: what the chaos proxy saw of an external node's sockets (``via`` events), for the checks
of subscriptions and tower links (`harness.checkers.dafka_links`).

An external node runs no probe, so its ``Subscribe`` actions and socket declarations are not
reported. On a live run that observes it, the proxy stands between it and every node it talks
to and reports each subscription its SUB sockets send, on each connection, as a ``subscribe``
event with the peer and the connection (`harness.live_observe`), and each message it sends. A
SUB socket sends every subscription it holds on each connection as soon as the connection is up,
and a new one on every connection it has: what one connection carries shows what the socket held.

A life of an external node starts at its group's start or at its restart and ends at its crash
or the end of the run (a process's own start is not seen: it may start slowly). Its addresses are
the senders of its BEACONs: a process may be more than one Dafka node (zeromq/dafka's store is a
writer and a reader, each with its own address, XPUB and SUB), so one process may have several
connections to a peer, each carrying part of what it subscribes to. A producer's partition is
the address of its first RECORD.
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CRASH, RESTART, SEND, SUBSCRIBE, UNSUBSCRIBE, Event

TOWER = "tower"


class SeenConnection:
    """One connection of an external node's SUB socket to a peer's XPUB, as the proxy saw it."""

    __slots__ = ("peer", "first", "event", "subs")

    def __init__(self, peer: str, event: Event) -> None:
        self.peer = peer
        self.first = event.time_ns  # its first subscription: when the connection was up
        self.event = event
        self.subs: list[tuple[int, bool, bytes, Event]] = []  # (time, subscribed?, prefix, event), in order

    def covers(self, prefix: bytes, by_ns: int) -> bool:
        """Whether, at ``by_ns``, the connection held a subscription that is a prefix of ``prefix``."""
        active: list[bytes] = []
        for t, on, p, _ in self.subs:
            if t > by_ns:
                break
            if on:
                active.append(p)
            elif p in active:
                active.remove(p)
        return any(prefix.startswith(q) for q in active)


class SeenLife:
    """One life of an external node: its connections, its address, its partitions."""

    __slots__ = ("node", "role", "start", "end", "conns", "addresses", "partitions")

    def __init__(self, node: str, role: str, start: int) -> None:
        self.node, self.role = node, role
        self.start = start
        self.end: int | None = None  # its crash (None: it lived to the end of the run)
        self.conns: dict[int, SeenConnection] = {}  # proxy connection number -> connection
        self.addresses: dict[str, Event] = {}  # address -> its first BEACON, in the order seen
        self.partitions: dict[str, Event] = {}  # partition -> its first RECORD

    @property
    def beacon(self) -> Event | None:
        """Its first BEACON."""
        return next(iter(self.addresses.values()), None)

    def peer_conns(self, roles: dict[str, str]) -> list[SeenConnection]:
        """The connections of the SUB that listens to peers (not to the towers), oldest first."""
        return sorted((c for c in self.conns.values() if roles.get(c.peer) != TOWER), key=lambda c: c.first)

    def by_peer(self, roles: dict[str, str]) -> dict[str, list[SeenConnection]]:
        """The peer connections, by peer (several when the process is several nodes, or the peer
        came back), oldest first."""
        out: dict[str, list[SeenConnection]] = {}
        for c in self.peer_conns(roles):
            out.setdefault(c.peer, []).append(c)
        return out

    def first_holding(self, prefix: bytes, roles: dict[str, str]) -> Event | None:
        """The first subscription of a peer connection that covers ``prefix`` (None: none did)."""
        found = [ev for c in self.peer_conns(roles) for _, on, p, ev in c.subs if on and prefix.startswith(p)]
        return min(found, key=lambda ev: ev.time_ns, default=None)

    def topics(self, roles: dict[str, str], kinds: tuple[bytes, ...]) -> list[str]:
        """The topics its peer subscriptions name after one of the command ids ``kinds`` (a
        consumer's ``M`` + topic, ``H`` + topic), in the order first seen."""
        found: dict[str, None] = {}
        for c in self.peer_conns(roles):
            for _, on, p, _ in c.subs:
                if on and len(p) > 1 and p[:1] in kinds:
                    found.setdefault(p[1:].decode("utf-8", "surrogateescape"), None)
        return list(found)

    def tower_conns(self, roles: dict[str, str]) -> list[SeenConnection]:
        return [c for c in self.conns.values() if roles.get(c.peer) == TOWER]


class SeenNodes:
    """The lives of the external nodes, from the events the proxy reported of them. ``roles``:
    every node's role; ``external``: the external nodes; ``starts``: when each one's group starts."""

    kinds = frozenset({SEND, SUBSCRIBE, UNSUBSCRIBE, CRASH, RESTART})

    def __init__(self, roles: dict[str, str], external: frozenset[str], starts: dict[str, int]) -> None:
        self.roles = roles
        self.external = external
        self.lives: dict[str, list[SeenLife]] = {n: [SeenLife(n, roles.get(n, ""), starts.get(n, 0))]
                                                 for n in sorted(external)}

    def on_event(self, ev: Event) -> None:
        if ev.node not in self.external:
            return
        lives = self.lives[ev.node]
        life = lives[-1]
        if ev.kind == CRASH:
            if life.end is None:
                life.end = ev.time_ns
            return
        if ev.kind == RESTART:
            if life.end is None:
                life.end = ev.time_ns
            lives.append(SeenLife(ev.node, life.role, ev.time_ns))
            return
        if not ev.via or life.end is not None:
            return  # (what a killed process's connections still carried belongs to no life)
        if ev.kind in (SUBSCRIBE, UNSUBSCRIBE):
            d = ev.data or {}
            number = int(d.get("connection", -1))
            conn = life.conns.get(number)
            if conn is None:
                conn = life.conns[number] = SeenConnection(str(d.get("peer", "")), ev)
            conn.subs.append((ev.time_ns, ev.kind == SUBSCRIBE, bytes(d.get("topic", b"")), ev))
        elif ev.kind == SEND and ev.msg_type in ("BEACON", "RECORD"):
            msg = ev.message()
            if msg is None:
                return
            if msg.name == "BEACON":
                life.addresses.setdefault(str(msg["sender"]), ev)
            elif msg.name == "RECORD" and life.role == "producer":
                life.partitions.setdefault(str(msg["address"]), ev)

    def all_lives(self, end_ns: int) -> list[SeenLife]:
        """Every life, each ended (at ``end_ns`` for those that lived to the end)."""
        out = []
        for lives in self.lives.values():
            for life in lives:
                if life.end is None:
                    life.end = end_ns
                out.append(life)
        return out


def starts_of(scenario: Any, external: frozenset[str]) -> dict[str, int]:
    """When each external node's group starts (a late joiner's process starts then)."""
    return {n: g.start_ns for g in scenario.groups.values() for n in g.nodes if n in external}


__all__ = ["SeenConnection", "SeenLife", "SeenNodes", "starts_of"]
