"""Event BUS server properties that pair what a server sends with what it was asked or given:
its snapshots against the SYNCSTART they answer, and the events it broadcasts and syncs against
the PUBs they came from (docs/errata.md E-EVENTBUS-05, -06, -09, -12).

Both hold for every correct server in every run, whatever the faults: a snapshot is sent in
answer to one request and must match it, and an event is forwarded, never rewritten. Neither
needs a peer to react, so they see a server whose only fault is what it puts in these frames
(every client would otherwise apply the same altered stream and converge on it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from harness.checkers.base import CRASH, RECV, RESTART, SEND, Event, Verdict
from harness.checkers.eventbus import SERVER, decoded, in_subtrees, snapshot_message
from harness.checkers.eventbus_views import VIA_CLIENT, ServerViews
from harness.checkers.external_wire import ExternalWire
from harness.protocols.codec import Message

# Frames of an event after its command frame (none for BROADCAST and PUB, "SYNC" for SYNC):
# topic, sequence, producer, timestamp, uuid, data. The sequence is the server's own.
FORWARDED = {"topic": 0, "producer": 2, "timestamp": 3, "uuid": 4, "data": 5}


class SnapshotFilter(ServerViews):
    """Every snapshot a server sends matches the SYNCSTART it answers: each SYNC is of a topic in
    the requested subtrees (``eventbus.server.sync-subtree-filter``, a prefix test, E-EVENTBUS-05)
    and above the requested sequence (``eventbus.server.sync-sequence-filter``; 0 asks for
    everything), and the SYNCEND echoes the request's subtree specification
    (``eventbus.server.syncend-subtree``, E-EVENTBUS-06: byte for byte in strict mode, the same
    list in the micro-toolkit dialect, whose bus rebuilds it from the parsed request).

    A client may ask again before the answer came (its timeout; its periodic resynchronisation):
    the answers to the requests still open may then interleave with each other as the client
    sees them, so a SYNC must fit one of them, and a SYNCEND closes the oldest it echoes. An
    external server (seen from the client) need not answer in the order it was asked: the
    deployed bus answers each SYNCSTART from its own asynchronous query, so a catch-up may be
    answered before an older request from 0. Of the requests its SYNCEND echoes, it then closes
    the one asking for the least (the highest sequence): the one that lets more SYNCs through
    stays open. Seen from the client, a crash of the server closes none either: ZeroMQ holds a
    request it had not written yet and sends it to the restarted server."""

    name = "snapshot-filter"
    clause = "eventbus.server.sync-sequence-filter"
    kinds = frozenset({SEND, RECV, CRASH, RESTART})
    roles = SERVER

    def __init__(self, dialect: str = "strict", **params: Any) -> None:
        super().__init__(**params)
        self.strict = dialect == "strict"
        # (server, client identity) -> the requests not answered yet, oldest first:
        # (the request's subtree frame, its subtrees, its sequence)
        self.open: dict[tuple[str, bytes], list[tuple[bytes, list[str], int]]] = {}
        self.bad: list[tuple[Event, str, str]] = []
        self.snapshots = 0
        self.syncs = 0

    def on_server_event(self, ev: Event) -> None:
        if ev.kind in (CRASH, RESTART):
            if ev.node not in self.external_servers.values():
                self.open = {k: v for k, v in self.open.items() if k[0] != ev.node}
            # else: seen from the client, a request sent before the crash may still reach the
            # restarted server (the DEALER queues it and sends it on the new connection); it
            # stays open until a SYNCEND closes it
            return
        found = snapshot_message(ev)
        if found is None or len(ev.frames or []) < 3:
            return
        key, msg = found
        if ev.kind == RECV and msg.name == "SYNCSTART":
            self.open.setdefault(key, []).append((ev.frames[2], list(msg["subtrees"]), msg["sequence"] or 0))
        elif ev.kind == SEND and self.open.get(key):
            if msg.name == "SYNC":
                self._judge_sync(ev, msg, self.open[key])
            elif msg.name == "SYNCEND":
                self._judge_end(ev, msg, self.open[key])

    def _who(self, ev: Event, subtrees: list[str], since: int) -> str:
        return f"{ev.node}'s snapshot for {subtrees or 'all topics'} above {since}"

    def _judge_sync(self, ev: Event, msg: Message, open_: list[tuple[bytes, list[str], int]]) -> None:
        self.syncs += 1
        topic, seq = str(msg["topic"]), msg["sequence"]
        within = [(subtrees, since) for _, subtrees, since in open_ if in_subtrees(topic, subtrees)]
        subtrees, since = open_[0][1:]  # the oldest: the one it answers unless it fits a later one
        if not within:
            self.bad.append((ev, f"{self._who(ev, subtrees, since)}: SYNC of {msg['topic']!r}, outside the "
                                 "requested subtrees", "eventbus.server.sync-subtree-filter"))
        elif isinstance(seq, int) and all(seq <= s for _, s in within):
            self.bad.append((ev, f"{self._who(ev, *within[0])}: SYNC {seq}, not above the requested sequence",
                             self.clause))

    def _judge_end(self, ev: Event, msg: Message, open_: list[tuple[bytes, list[str], int]]) -> None:
        self.snapshots += 1
        echoed = [i for i, (frame, subtrees, _) in enumerate(open_)
                  if (ev.frames[2] == frame if self.strict and ev.frames else list(msg["subtrees"]) == subtrees)]
        if echoed:
            # a probed server (ours) answers in the order asked; one seen from its clients may not
            del open_[max(echoed, key=lambda i: open_[i][2]) if ev.via == VIA_CLIENT else echoed[0]]
            return
        frame, subtrees, since = open_.pop(0)
        got = ev.frames[2] if ev.frames else b""
        self.bad.append((ev, f"{self._who(ev, subtrees, since)}: SYNCEND names {got!r}, the request "
                             f"{frame!r}", "eventbus.server.syncend-subtree"))

    def finish(self, end_ns: int) -> list[Verdict]:
        if not self.bad:
            return [self.ok(f"{self.snapshots} snapshot(s), {self.syncs} SYNC(s): each within the request's "
                            "subtrees and above its sequence, each SYNCEND echoing its subtrees")]
        return [self.first_problem(self.bad, "SYNC/SYNCEND(s) not matching their request")]


class ForwardUnchanged(ServerViews):
    """Every BROADCAST and SYNC a server sends carries the topic, producer id, timestamp, UUID
    and data of a PUB some server received with that UUID (``eventbus.server.forward-unchanged``,
    E-EVENTBUS-12): byte for byte in strict mode; in the micro-toolkit dialect, whose bus decodes
    and re-encodes them, the same data value and the same instant. Only the sequence is the
    server's own. An event whose PUB no server was seen to receive is not judged."""

    name = "forward-unchanged"
    clause = "eventbus.server.forward-unchanged"
    kinds = frozenset({SEND, RECV})
    roles = SERVER

    def __init__(self, dialect: str = "strict", **params: Any) -> None:
        super().__init__(**params)
        self.strict = dialect == "strict"
        self.published: dict[bytes, list[tuple[Any, ...]]] = {}  # raw uuid -> the fields of each PUB
        self.bad: list[tuple[Event, str]] = []
        self.judged = 0

    def fields(self, msg: Message, frames: list[bytes]) -> tuple[Any, ...]:
        if self.strict:
            return tuple(frames[i] for i in FORWARDED.values())
        return (msg["topic"], msg["producer"], _instant(msg["timestamp"]), msg["uuid"], msg["data"])

    def on_server_event(self, ev: Event) -> None:
        if not ev.frames:
            return
        if ev.kind == RECV and ev.socket == "collector":
            msg, frames = decoded(ev, skip=1), ev.frames[1:]
            if msg is not None and msg.name == "PUB" and len(frames) >= 6:
                self.published.setdefault(frames[4], []).append(self.fields(msg, frames))
            return
        if ev.kind != SEND or ev.msg_type not in ("BROADCAST", "SYNC"):
            return
        skip = 2 if ev.msg_type == "SYNC" else 0  # a SYNC: the client's identity, then "SYNC"
        msg = decoded(ev, skip=1) if ev.msg_type == "SYNC" else decoded(ev)
        frames = ev.frames[skip:]
        if msg is None or len(frames) < 6 or frames[4] not in self.published:
            return
        self.judged += 1
        sent = self.fields(msg, frames)
        if sent not in self.published[frames[4]]:
            pub = self.published[frames[4]][0]
            changed = [name for name, a, b in zip(FORWARDED, sent, pub) if a != b]
            self.bad.append((ev, f"{ev.node} sent {ev.msg_type} {msg['sequence']} of event {msg['uuid']} with "
                                 f"its {', '.join(changed)} changed from the PUB's"))

    def finish(self, end_ns: int) -> list[Verdict]:
        if not self.bad:
            return [self.ok(f"{self.judged} BROADCAST/SYNC(s) of {len(self.published)} published event(s), each "
                            "with its PUB's fields")]
        return [self.fail(f"{len(self.bad)} event(s) forwarded changed; first: {self.bad[0][1]}",
                          [e.describe() for e, _ in self.bad[:5]])]


def _instant(stamp: Any) -> Any:
    """An ISO-8601 timestamp as the instant it names (the micro-toolkit bus rewrites its form)."""
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return stamp


class EventBusExternalWire(ExternalWire):
    """`ExternalWire` of the Event BUS: a reference server's drop names the client by its routing
    id (in-process clients have their node name as identity on the snapshot port, and none on the
    collector, so a collector drop is an external client's only when there are external clients);
    a reference client's drop of what came on its sockets to server i is that server's, when it is
    external."""

    def __init__(self, clients: list[str] | None = None, external_servers: dict[int, str] | None = None,
                 external_clients: bool = True, **params: Any) -> None:
        super().__init__(**params)
        self.in_process_clients = {c.encode() for c in clients or ()}
        self.external_servers = dict(external_servers or {})
        self.external_clients = external_clients

    fan_in = SERVER

    def sender(self, ev: Event, routing_id: bytes | None) -> tuple[str, str | None] | None:
        channel, _, index = ev.socket.partition(".")
        if ev.role == "server":  # (a drop whose receipt is not found is not judged)
            if routing_id is None or routing_id in self.in_process_clients:
                return None
            if channel == "collector" and not self.external_clients:
                return None  # an in-process client's anonymous collector connection
            return f"the client with identity {routing_id!r}", channel
        server = self.external_servers.get(int(index) if index.isdigit() else 0)
        return None if server is None else (server, channel)
