"""Event BUS client duties the document words as SHOULD (``harness/protocols/eventbus_clauses.py``):
the sockets a client connects and the producer id it stamps on its events.

Both are opt-in (``level = "SHOULD"``, not among the package's default checks): a scenario or an
exploration file that names them in ``check:`` says its clients claim them. A client that leaves
them out still converges (its periodic resynchronisation brings every event by snapshot, and no
peer reads a producer id), so only these checks see it.

The connections are read from what the probe reports (the sockets each life declares, and its
``Connect`` actions): only nodes the harness runs in-process are judged; an implementation under
test is judged by the conformance suites instead.
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CRASH, RECV, SEND, START, Checker, Event, Verdict
from harness.checkers.eventbus import CLIENT, SERVER, decoded, snapshot_message
from harness.checkers.lives import SocketLife, SocketLives
from harness.node import SocketSpec, SocketType

DEFAULT_WITHIN_NS = 1_000_000_000


class ProducerId(Checker):
    """Every PUB a client sends in one life carries the same producer id
    (``eventbus.client.producer-id``: "The producer unique id, SHOULD identify the event
    producer"). A restarted client may take another one (a process that draws its id at start
    still identifies itself); a PUB sent again byte for byte is the same event."""

    name = "producer-id"
    clause = "eventbus.client.producer-id"
    level = "SHOULD"
    kinds = frozenset({SEND, CRASH, START})  # a life ends at CRASH (an external client's too), starts at START
    roles = CLIENT

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.first: dict[str, tuple[str, Event]] = {}  # node -> (producer id of this life, its first PUB)
        self.bad: list[tuple[Event, str, str]] = []
        self.pubs = 0

    def on_event(self, ev: Event) -> None:
        if ev.kind in (CRASH, START):
            self.first.pop(ev.node, None)
            return
        if ev.msg_type != "PUB":
            return
        msg = decoded(ev)
        if msg is None or msg.name != "PUB":
            return  # what does not decode is wire-conformance's
        self.pubs += 1
        producer = str(msg["producer"])
        seen = self.first.setdefault(ev.node, (producer, ev))
        if seen[0] != producer:
            self.bad.append((ev, f"{ev.node} published as producer {producer!r} after {seen[0]!r} in the same life",
                             self.clause))
            self.first[ev.node] = (producer, ev)  # one failure per change

    def finish(self, end_ns: int) -> list[Verdict]:
        if self.bad:
            return [self.first_problem(self.bad, "change(s) of producer id")]
        return [self.ok(f"{self.pubs} PUB(s), one producer id per client life")]


class ClientConnections(Checker):
    """In every life of a client that lasts ``within_ms`` (default 1000, paused time left out),
    the client has a SUBSCRIBER connection (a SUB socket connected to a server: the publisher
    port, P + 1) and a SNAPSHOT connection (a DEALER connected to a server, which carries its
    SYNCSTARTs: port P) (``eventbus.client.connections``, a SHOULD). The endpoints are not
    compared with the servers' own: on a live run a proxy may stand between."""

    name = "client-connections"
    clause = "eventbus.client.connections"
    level = "SHOULD"
    kinds = frozenset({*SocketLives.kinds, SEND})
    roles = CLIENT

    def __init__(self, within_ms: int | None = None, **params: Any) -> None:
        super().__init__(**params)
        self.lives = SocketLives(DEFAULT_WITHIN_NS if within_ms is None else int(within_ms) * 1_000_000)
        self.syncstart_on: dict[str, set[str]] = {}  # node -> sockets its SYNCSTARTs left by in this life
        self.bad: list[tuple[Event, str, str]] = []
        self.judged = 0

    def on_sockets(self, node: str, sockets: list[SocketSpec]) -> None:
        self.lives.declare(node, sockets)

    def on_event(self, ev: Event) -> None:
        if ev.via:
            return  # an external node seen by the proxy: its sockets are not reported
        if ev.kind == SEND:
            if ev.msg_type == "SYNCSTART":
                self.syncstart_on.setdefault(ev.node, set()).add(ev.socket)
            return
        ended = self.lives.on_event(ev)
        if ended is not None:
            self._judge(ended)
        if ev.kind == START:
            self.syncstart_on.pop(ev.node, None)

    def _judge(self, life: SocketLife) -> None:
        self.judged += 1
        node, start = life.start.node, life.start.time_ns
        snapshot = [n for n in self.syncstart_on.get(node, ()) if life.types.get(n) == SocketType.DEALER
                    and life.linked(n)]
        if not life.linked_of_type(SocketType.SUB):
            self.bad.append((life.start, f"{node} connected no SUB socket (its SUBSCRIBER connection, port P + 1) "
                                         f"in its life from {start / 1e6:.0f} ms", self.clause))
        if not snapshot:
            self.bad.append((life.start, f"{node} sent no SYNCSTART on a connected DEALER (its SNAPSHOT "
                                         f"connection, port P) in its life from {start / 1e6:.0f} ms", self.clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        for life in self.lives.finish(end_ns):
            self._judge(life)
        if self.bad:
            return [self.first_problem(self.bad, "missing client connection(s)")]
        return [self.ok(f"{self.judged} client life(s), each with its SNAPSHOT and SUBSCRIBER connections")]


class SyncStartFirst(Checker):
    """On every socket a client sends a SYNCSTART by (its SNAPSHOT connection), the first message
    it sends in that life is a SYNCSTART (``eventbus.client.syncstart-first``, "The client MUST
    start by sending a SYNCSTART command to its snapshot connection"; E-EVENTBUS-15: judged on
    snapshot connections only, so a client that only publishes passes, and its PUBs are not
    ordered against its SYNCSTART).

    Judged from the client's own sends, so no fault of the network can make a correct client
    fail it. A client that runs as an external process reports no sends: it is judged where a
    reference server received what it sent on its snapshot port, per connection (the routing id
    the server's ROUTER gave it) and per life of the server. A client sends nothing but SYNCSTARTs
    there, so whatever a lost, duplicated or late message changes, the first message the server
    took from a correct client is a SYNCSTART; one that does not decode is `external-wire`'s.
    What an external server's replica connection sends is no client's: with an external server in
    the run, what the servers received is not judged."""

    name = "syncstart-first"
    clause = "eventbus.client.syncstart-first"
    # a life starts at START, the probe's, before the node's first sends; servers: their receipts
    kinds = frozenset({SEND, RECV, START, CRASH})
    roles = CLIENT | SERVER

    def __init__(self, in_process: frozenset[str] = frozenset(), external_clients: frozenset[str] = frozenset(),
                 external_servers: bool = False, **params: Any) -> None:
        super().__init__(**params)
        # node -> socket -> its first send in this life; None once the socket's SYNCSTART was judged
        self.first: dict[str, dict[str, tuple[str, Event] | None]] = {}
        self.bad: list[tuple[Event, str, str]] = []
        self.judged = 0
        # receipts: the identities of in-process nodes (clients and servers, whose sends are
        # judged as sent), the external clients (judged as received), and whether that is sound
        self.in_process = frozenset(n.encode() for n in in_process)
        self.external_clients = external_clients
        self.by_receipt = bool(external_clients) and not external_servers
        self.received: set[tuple[str, bytes]] = set()  # (server, routing id) whose first message was judged
        self.judged_received = 0

    def on_event(self, ev: Event) -> None:
        if ev.via:
            return  # the proxy names an external client's two DEALERs to one server alike
        if ev.role == "server":
            self._on_server(ev)
            return
        if ev.kind == RECV:
            return
        if ev.kind != SEND:
            self.first.pop(ev.node, None)  # a new life starts its connections afresh
            if ev.node in self.external_clients:  # its connections too (a correct client's receipts
                self.received.clear()              # are SYNCSTARTs whatever is forgotten)
            return
        sockets = self.first.setdefault(ev.node, {})
        seen = sockets.get(ev.socket, ())
        if seen is None:
            return  # judged in this life
        msg = decoded(ev)
        name = msg.name if msg is not None else "a message that does not decode"
        first_name, first = seen or sockets.setdefault(ev.socket, (name, ev))
        if name != "SYNCSTART":
            return
        sockets[ev.socket] = None
        if first_name == "SYNCSTART":
            self.judged += 1
            return
        self.bad.append((first, f"{ev.node} sent {first_name} on {ev.socket} at {first.time_ns / 1e6:.1f} ms, "
                                f"before its first SYNCSTART there ({ev.time_ns / 1e6:.1f} ms)", self.clause))

    def _on_server(self, ev: Event) -> None:
        """A reference server's receipt on its snapshot port from a connection no in-process node
        made: an external client's (`by_receipt`)."""
        if not self.by_receipt:
            return
        if ev.kind in (START, CRASH):
            self.received = {k for k in self.received if k[0] != ev.node}  # a new ROUTER, new connections
            return
        if ev.kind != RECV or ev.socket != "snapshot" or not ev.frames or ev.frames[0] in self.in_process:
            return
        key = (ev.node, ev.frames[0])
        if key in self.received:
            return
        got = snapshot_message(ev)
        if got is None:
            return  # it does not decode: external-wire's
        self.received.add(key)
        msg = got[1]
        if msg.name == "SYNCSTART":
            self.judged_received += 1
            return
        self.bad.append((ev, f"{ev.node} received {msg.name} on its snapshot port from the client with identity "
                             f"{ev.frames[0]!r} (external) at {ev.time_ns / 1e6:.1f} ms, the first message of "
                             "that connection: a client sends nothing but SYNCSTARTs there", self.clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        if self.bad:
            return [self.first_problem(self.bad, "snapshot connection(s) not started by a SYNCSTART")]
        detail = (f"{self.judged} snapshot connection(s) (client sockets that carried a SYNCSTART), "
                  f"each started by one")
        if self.by_receipt:
            detail += (f"; of external clients, {self.judged_received} connection(s) as the servers received them, "
                       "each started by one")
        elif self.external_clients:
            detail += ("; not judged: the external clients (an external server's replica connection would be "
                       "taken for one of theirs)")
        return [self.ok(detail)]
