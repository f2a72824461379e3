"""The lives of a node as its probe reports them: the sockets each life declares, the endpoints
each socket connects to (declared, or by a later ``Connect`` action), and how long the life ran,
paused time left out. Checks of the connections a role must make (Dafka's ``tower-links``, the
Event BUS's ``client-connections``) judge each life once it ends.

Only nodes the harness runs in-process report their sockets; events of external nodes seen by
the chaos proxy (``ev.via``) are not fed here.
"""

from __future__ import annotations

from harness.checkers.base import CONNECT, CRASH, PAUSE, RESTART, RESUME, STALL, START, Event, Pauses
from harness.node import SocketSpec, SocketType


class SocketLife:
    """One life of a node: its sockets' types, declared subscriptions and connected endpoints."""

    __slots__ = ("start", "types", "subscribe", "connected")

    def __init__(self, start: Event, sockets: list[SocketSpec]) -> None:
        self.start = start
        self.types = {s.name: s.type for s in sockets}
        self.subscribe = {s.name: list(s.subscribe) for s in sockets}
        self.connected: dict[str, set[str]] = {s.name: set(s.connect) for s in sockets}

    def linked(self, socket: str) -> bool:
        """The socket connected to at least one endpoint."""
        return bool(self.connected.get(socket))

    def linked_of_type(self, kind: SocketType) -> list[str]:
        return [n for n, t in self.types.items() if t == kind and self.connected.get(n)]


class SocketLives:
    """Per node, its current life; ``on_event`` hands back a life that ended after lasting at
    least ``within_ns`` of running time (shorter ones owe nothing). Feed it every event of
    ``kinds`` of the nodes judged, and ``declare`` from the checker's ``on_sockets``."""

    kinds = frozenset({START, CRASH, RESTART, PAUSE, RESUME, STALL, CONNECT})

    def __init__(self, within_ns: int) -> None:
        self.within = within_ns
        self.pauses = Pauses()
        self.declared: dict[str, list[SocketSpec]] = {}
        self.lives: dict[str, SocketLife] = {}

    def declare(self, node: str, sockets: list[SocketSpec]) -> None:
        self.declared[node] = list(sockets)

    def life(self, node: str) -> SocketLife | None:
        return self.lives.get(node)

    def on_event(self, ev: Event) -> SocketLife | None:
        if ev.kind == CONNECT:
            life = self.lives.get(ev.node)
            if life is not None:
                life.connected.setdefault(ev.socket, set()).add(str((ev.data or {}).get("endpoint", "")))
            return None
        ended = self.end(ev.node, ev.time_ns) if ev.kind in (START, CRASH) else None
        self.pauses.on_event(ev)
        if ev.kind == START:
            self.lives[ev.node] = SocketLife(ev, self.declared.get(ev.node, []))
        return ended

    def end(self, node: str, end: int) -> SocketLife | None:
        """Close the node's life at ``end``: the life, when it lasted long enough to be judged."""
        life = self.lives.pop(node, None)
        if life is None:
            return None
        start = life.start.time_ns
        if end - start - self.pauses.between(node, start, end) < self.within:
            return None
        return life

    def finish(self, end: int) -> list[SocketLife]:
        return [life for node in list(self.lives) if (life := self.end(node, end)) is not None]
