"""Event BUS reference client: subscriber and publisher (specs/eventbus.md with docs/errata.md).

Per server ``i`` of ``servers`` (one, or a primary and its backup) three sockets, named after the
server port they reach (`reference_nodes.eventbus.common`): ``snapshot`` (DEALER with a printable
identity, as the deployed bus requires), ``publisher`` (SUB) and ``collector`` (DEALER, with no
identity: the server never answers on it, and a restarted client's new collector connection is
then a new peer that no ROUTER can ignore as a second holder of its identity).

Synchronisation (E-EVENTBUS-11): the SUB sockets subscribe to every requested subtree (or to
everything) when they connect, before the first SYNCSTART. A full synchronisation (at start,
and after a failover) asks for every event (sequence 0) of the subtrees and holds the BROADCASTs
that arrive meanwhile; at SYNCEND the threshold becomes its sequence and the held BROADCASTs are
applied. Every event is applied once (by UUID): a SYNC, or a BROADCAST whose sequence is above
the threshold (the last SYNCEND or BROADCAST), which then becomes the threshold; the others are
discarded (``eventbus.client.discard-old``). Every applied event is delivered to the application
(``Deliver("event", ...)``; ``source`` says ``sync`` or ``broadcast``).

Every ``resync_ms`` (0: never) the client synchronises again, asking for the events above the
SYNCEND of the synchronisation before the last one (so each event is offered twice), while it
goes on applying BROADCASTs: this repairs BROADCASTs lost on the way (PUB/SUB drops at the
high-water mark and on reconnection) and doubles as the liveness check the protocol lacks
(E-EVENTBUS-04). A SYNCSTART unanswered after ``sync_timeout_ms`` is sent again, to the next
server when there are several (failover, ``eventbus.client.failover-resync``; every SYNC that
arrives meanwhile restarts the wait: a long snapshot is not a dead server). The second in a row
that goes unanswered goes on a new snapshot connection (Disconnect + Connect): a server whose
ROUTER ignored the old one, as libzmq does without handover while an older connection of this
identity still held unread messages, hears the new one. (Not the first: an answer that is late,
or waits for a loop that runs behind, is still read on the old connection.) A BROADCAST from
another server than the current one means that server took over, and the client moves to it.

Publishing (``{"op": "publish", "topic": ..., "data": ...}``): a PUB with the producer's own
counter as sequence (from 1, E-EVENTBUS-03), the producer id (``producer``, default the node
name), an ISO-8601 timestamp from the node clock and a v4 UUID from the node rng, to the
collector of every server (the passive one keeps it pending, Binary Star style). When the topic
is in the client's subtrees, the PUB is sent again, byte for byte, until the event comes back
(``publish_timeout_ms``, doubling, 0: never): a PUB has no acknowledgement, and an event lost
with a crashing server is otherwise lost for good. The resent event keeps its UUID, so nobody
applies it twice (E-EVENTBUS-13). The collector connection is never made anew: a new
connection drops the PUBs still queued on the old one (linger 0).

Standalone (``zmq-harness node eventbus client``): ``publish`` events on ``topic``, the first
right after the first synchronisation, one every ``interval_ms``.

Config: ``servers`` (list of server endpoints: ``tcp://host:P`` or ``[snapshot, publisher,
collector]``) or ``connect`` (one server, or a list), ``subtrees`` (list, or one string joined by
the dialect's separator; default everything), ``identity``, ``producer``, ``sync_timeout_ms``
(500), ``resync_ms`` (1000), ``publish_timeout_ms`` (1000), ``publish`` (0), ``topic``,
``interval_ms`` (100), ``dialect``, ``epoch_s``.
"""

from __future__ import annotations

from typing import Any

from harness.node import (
    Action, Deliver, Discard, NodeContext, Note, Send, SocketSpec, SocketType, reconnect,
)
from harness.protocols.codec import Message
from reference_nodes.eventbus.common import (
    COLLECTOR, DEFAULT_SNAPSHOT, NEW_CONNECTION_AFTER, PUBLISHER, SNAPSHOT, EventBusNode, channel_of, in_subtrees,
    iso8601, ms_to_ns, server_endpoints, server_index, socket_name, subtrees_value, uuid4,
)

DEFAULT_SYNC_TIMEOUT_MS = 500
DEFAULT_RESYNC_MS = 1000
DEFAULT_PUBLISH_TIMEOUT_MS = 1000
DEFAULT_INTERVAL_MS = 100
MAX_BACKOFF = 8  # a resent PUB waits at most this many timeouts


class Unconfirmed:
    """A published event not seen back yet: its exact frames, resent until it is."""

    __slots__ = ("frames", "topic", "deadline", "attempts")

    def __init__(self, frames: list[bytes], topic: str, deadline: int) -> None:
        self.frames = frames
        self.topic = topic
        self.deadline = deadline
        self.attempts = 1


class Client(EventBusNode):
    role = "client"

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        servers = self.config.get("servers")
        if servers is None:
            connect = self.config.get("connect", DEFAULT_SNAPSHOT)
            servers = [connect] if isinstance(connect, str) else list(connect)
        if not isinstance(servers, list) or not servers:
            raise ValueError(f"eventbus client config 'servers' must be a non-empty list, got {servers!r}")
        self.servers = [server_endpoints(s, f"client server {i}") for i, s in enumerate(servers)]
        self.subtrees = subtrees_value(self.config.get("subtrees"), self.subtree_type)
        identity = self.config.get("identity") or self.name
        self.identity = identity.encode() if isinstance(identity, str) else bytes(identity)
        if not self.identity or not all(0x21 <= b < 0x7F for b in self.identity):
            raise ValueError(f"eventbus client identity must be printable ASCII (the deployed bus answers only "
                             f"those, INTEROP.md), got {self.identity!r}")
        self.producer = str(self.config.get("producer") or self.name)
        self.sync_timeout_ns = ms_to_ns(self.config.get("sync_timeout_ms", DEFAULT_SYNC_TIMEOUT_MS), "sync_timeout_ms")
        if self.sync_timeout_ns <= 0:
            raise ValueError("eventbus client config 'sync_timeout_ms' must be positive")
        self.resync_ns = ms_to_ns(self.config.get("resync_ms", DEFAULT_RESYNC_MS), "resync_ms")
        self.publish_timeout_ns = ms_to_ns(self.config.get("publish_timeout_ms", DEFAULT_PUBLISH_TIMEOUT_MS),
                                           "publish_timeout_ms")
        self.to_publish = int(self.config.get("publish", 0) or 0)
        self.topic = str(self.config.get("topic", "/conformance/event"))
        self.interval_ns = ms_to_ns(self.config.get("interval_ms", DEFAULT_INTERVAL_MS), "interval_ms")
        # Synchronisation state (memory: a restarted client starts afresh).
        self.current = 0
        self.syncing = False
        self.full = True  # the sync in flight is a full one: BROADCASTs are held until its SYNCEND
        self.sync_deadline: int | None = None
        self.unanswered = 0  # SYNCSTARTs in a row that timed out with no word from the snapshot port
        self.resync_at: int | None = None
        self.threshold: int | None = None  # the last SYNCEND or BROADCAST sequence; None before the first
        # From where the next resync asks (marks[0]: every event up to it was offered twice) and
        # the SYNCEND of the last synchronisation (marks[1])
        self.marks = [0, 0]
        self.since = 0  # what the sync in flight asked from
        self.held: list[Message] = []
        self.applied: set[str] = set()
        self.join_mark: int | None = None  # SYNCEND of the last full sync, until a BROADCAST confirms the SUB
        self.catch_up_from: int | None = None
        # Publishing.
        self.counter = 0
        self.unconfirmed: dict[str, Unconfirmed] = {}
        self.next_publish: int | None = None

    def sockets(self) -> list[SocketSpec]:
        subscribe = tuple(s.encode("utf-8") for s in self.subtrees) or (b"",)
        out = []
        for i, (snap, pub, coll) in enumerate(self.servers):
            out.append(SocketSpec(socket_name(SNAPSHOT, i), SocketType.DEALER, connect=(snap,), identity=self.identity))
            out.append(SocketSpec(socket_name(PUBLISHER, i), SocketType.SUB, connect=(pub,), subscribe=subscribe))
            out.append(SocketSpec(socket_name(COLLECTOR, i), SocketType.DEALER, connect=(coll,)))
        return out

    # ---- inputs ----------------------------------------------------------------------------

    def start(self, now: int) -> list[Action]:
        return self._sync(now, full=True)

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        channel = channel_of(socket)
        index = server_index(socket)
        if channel == PUBLISHER:
            msg, dropped = self.decode_as("BROADCAST", socket, frames)
            if msg is None:
                return dropped
            return self._on_broadcast(msg, index, now)
        if channel == SNAPSHOT:
            msg, dropped = self.decode_snapshot(socket, frames)
            if msg is None:
                return dropped
            if index != self.current:
                return []  # a late answer from the server we left
            self.unanswered = 0
            if msg.name == "SYNC":
                return self._on_sync(socket, frames, msg, now)
            if msg.name == "SYNCEND":
                return self._on_syncend(msg, now)
            return self.unexpected(socket, frames, msg, "a client never receives SYNCSTART")
        return [Discard(socket, list(frames), "a server sends nothing on its collector port", "eventbus.wire.grammar")]

    def handle_timer(self, now: int) -> list[Action]:
        out: list[Action] = []
        if self.syncing and self.sync_deadline is not None and now >= self.sync_deadline:
            out.append(Note("sync-timeout", {"server": self.current, "full": self.full}))
            self.unanswered += 1
            if self.unanswered >= NEW_CONNECTION_AFTER:
                out.extend(reconnect(socket_name(SNAPSHOT, self.current), self.servers[self.current][0]))
            if len(self.servers) > 1:
                out.extend(self.failover((self.current + 1) % len(self.servers), now, "no SYNCEND in time"))
            else:
                out.extend(self._sync(now, full=self.full))
        if not self.syncing and self.resync_at is not None and now >= self.resync_at:
            out.extend(self._sync(now, full=False))
        for uuid, u in list(self.unconfirmed.items()):
            if now >= u.deadline:
                u.attempts += 1
                u.deadline = now + self.publish_timeout_ns * min(1 << (u.attempts - 1), MAX_BACKOFF)
                out.extend(self._send_pub(u.frames, u.topic, uuid))
        if self.next_publish is not None and now >= self.next_publish:
            out.extend(self._publish_own(now))
        return out

    def get_timer(self) -> int | None:
        times = [self.sync_deadline if self.syncing else self.resync_at, self.next_publish]
        times.extend(u.deadline for u in self.unconfirmed.values())
        due = [t for t in times if t is not None]
        return min(due) if due else None

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        op = request.get("op")
        if op == "publish":
            return self.publish(str(request["topic"]), request.get("data"), now)
        if op == "status":
            return [Deliver("client-status", {"server": self.current, "synced": self.threshold is not None,
                                              "threshold": self.threshold, "applied": len(self.applied),
                                              "subtrees": list(self.subtrees), "unconfirmed": len(self.unconfirmed)})]
        raise ValueError(f"eventbus client: unknown command {op!r} (known: 'publish', 'status')")

    # ---- synchronisation --------------------------------------------------------------------

    def _sync(self, now: int, full: bool, since: int | None = None) -> list[Action]:
        """Send SYNCSTART to the current server: from 0 for a full synchronisation, else from
        ``since``, by default the SYNCEND of the synchronisation before the last."""
        self.syncing, self.full = True, full
        self.sync_deadline = now + self.sync_timeout_ns
        if full:
            since = 0
        elif since is None:
            since = self.marks[0]
        self.since = since
        frames = self.enc["SYNCSTART"]({"subtrees": self.subtrees, "sequence": since})
        return [Send(socket_name(SNAPSHOT, self.current), frames, "SYNCSTART", {"seq": since})]

    def failover(self, to: int, now: int, why: str) -> list[Action]:
        """Move to another server and synchronise fully: its numbering is not the old one's
        (E-EVENTBUS-10), so threshold and marks start again."""
        out: list[Action] = [Note("failover", {"from": self.current, "to": to, "why": why})]
        self.current = to
        self.threshold = None
        self.marks = [0, 0]
        self.held = []
        self.join_mark = self.catch_up_from = None
        out.extend(self._sync(now, full=True))
        return out

    def _on_sync(self, socket: str, frames: list[bytes], msg: Message, now: int) -> list[Action]:
        if self.syncing:  # the server is answering: a long snapshot is not a dead server
            self.sync_deadline = now + self.sync_timeout_ns
        if not in_subtrees(msg["topic"], self.subtrees):
            return [Discard(socket, list(frames), f"SYNC of topic {msg['topic']!r}, outside the requested subtrees",
                            "eventbus.server.sync-subtree-filter")]
        return self.apply(msg, "sync")

    def _on_syncend(self, msg: Message, now: int) -> list[Action]:
        if not self.syncing:
            return []  # the answer to a SYNCSTART sent again: the first one finished the sync
        seq = msg["sequence"] or 0
        out: list[Action] = [Note("synced", {"server": self.current, "sequence": seq, "full": self.full})]
        first = self.threshold is None
        full = self.full or first
        self.syncing = False
        self.sync_deadline = None
        # A resync from the lower mark offered everything up to the last SYNCEND a second time; a
        # catch-up from a later point did not, so the lower mark stays (else a SYNC lost in the
        # full sync before it would never be offered again)
        self.marks = [self.marks[1] if self.since <= self.marks[0] else self.marks[0], seq]
        self.resync_at = now + self.resync_ns if self.resync_ns else None
        if full:
            self.threshold = seq
            self.join_mark = seq
            held, self.held = self.held, []
            for b in held:
                out.extend(self._on_broadcast(b, self.current, now))
        elif self.threshold is not None:
            self.threshold = max(self.threshold, seq)
        out.extend(self._catch_up(now))
        if first and self.to_publish > 0 and self.next_publish is None:
            self.next_publish = now
            out.extend(self._publish_own(now))
        return out

    def _on_broadcast(self, msg: Message, index: int, now: int) -> list[Action]:
        if index != self.current:
            # Only an active server broadcasts: the other one has taken over.
            out = self.failover(index, now, "a BROADCAST from the other server")
            self.held.append(msg)
            return out
        threshold = self.threshold
        if threshold is None or (self.syncing and self.full):
            self.held.append(msg)
            return []
        if self.join_mark is not None:
            # The first BROADCAST since the last full sync shows that the subscription is in
            # place now. If it is newer than that snapshot, events broadcast between the two may
            # have passed before the subscription reached the server: ask for them.
            if msg["sequence"] is not None and msg["sequence"] > self.join_mark:
                self.catch_up_from = self.join_mark
            self.join_mark = None
        return self.apply_broadcast(msg, threshold) + self._catch_up(now)

    def _catch_up(self, now: int) -> list[Action]:
        since = self.catch_up_from
        if since is None or self.syncing:
            return []
        self.catch_up_from = None
        return self._sync(now, full=False, since=since)

    def apply_broadcast(self, msg: Message, threshold: int) -> list[Action]:
        """The discard rule (eventbus.client.discard-old), then apply once."""
        seq = msg["sequence"]
        if seq is None or seq <= threshold:
            return [Note("stale-broadcast", {"sequence": seq, "threshold": threshold, "uuid": msg["uuid"]})]
        self.threshold = seq
        return self.apply(msg, "broadcast")

    def apply(self, msg: Message, source: str) -> list[Action]:
        """Hand a new event to the application, once per UUID."""
        uuid = msg["uuid"]
        self.unconfirmed.pop(uuid, None)
        if uuid in self.applied:
            return []
        self.applied.add(uuid)
        f = msg.fields
        return [Deliver("event", {"topic": f["topic"], "sequence": f["sequence"], "uuid": uuid,
                                  "producer": f["producer"], "timestamp": f["timestamp"], "data": f["data"],
                                  "source": source, "server": self.current})]

    # ---- publishing ----------------------------------------------------------------------------

    def publish(self, topic: str, data: Any, now: int) -> list[Action]:
        self.counter += 1
        fields = self.event_fields(topic, data, now)
        uuid = fields["uuid"]
        frames = self.pub_frames(fields)
        out: list[Action] = [Deliver("published", {"topic": topic, "uuid": uuid, "sequence": self.counter})]
        if self.publish_timeout_ns and in_subtrees(topic, self.subtrees):
            self.unconfirmed[uuid] = Unconfirmed(frames, topic, now + self.publish_timeout_ns)
        out.extend(self._send_pub(frames, topic, uuid))
        return out

    def event_fields(self, topic: str, data: Any, now: int) -> dict[str, Any]:
        """A new event's PUB fields: the producer's counter, id, timestamp and a new v4 UUID."""
        return {"topic": topic, "sequence": self.counter, "producer": self.producer,
                "timestamp": iso8601(now, self.epoch_s), "uuid": uuid4(self.rng), "data": data}

    def pub_frames(self, fields: dict[str, Any]) -> list[bytes]:
        return self.enc["PUB"](fields)

    def _send_pub(self, frames: list[bytes], topic: str, uuid: str) -> list[Action]:
        return [Send(socket_name(COLLECTOR, i), list(frames), "PUB", {"topic": topic, "corr": uuid})
                for i in range(len(self.servers))]

    def _publish_own(self, now: int) -> list[Action]:
        """Standalone: the next of the ``publish`` events this client makes by itself."""
        if self.to_publish <= 0:
            self.next_publish = None
            return []
        self.to_publish -= 1
        self.next_publish = now + self.interval_ns if self.to_publish > 0 else None
        return self.publish(self.topic, {"n": self.counter + 1, "from": self.producer}, now)
