"""Event BUS reference server, the bus (specs/eventbus.md with docs/errata.md).

Three bound sockets (E-EVENTBUS-16): ``snapshot`` (ROUTER, P), ``publisher`` (PUB, P+1) and
``collector`` (ROUTER, P+2).

- PUB on the collector: the server numbers the event itself (``eventbus.server.own-sequence``,
  E-EVENTBUS-03), one more than the last (from 1, E-EVENTBUS-02; the counter is in the durable
  store, so it keeps increasing across a restart, E-EVENTBUS-10), keeps it, and broadcasts it
  once on the publisher with the producer's frames byte for byte (E-EVENTBUS-12).
- SYNCSTART on the snapshot: one SYNC per event it holds whose topic is in the requested
  subtrees and whose sequence is above the requested one (0: every event), in sequence order,
  then SYNCEND echoing the request's subtree frame byte for byte (E-EVENTBUS-06) with the
  highest SYNC sequence, or the latest sequence when no SYNC was sent (E-EVENTBUS-08). In the
  micro-toolkit dialect SYNCEND always carries the latest sequence, as the deployed bus does.
  Every reply is prefixed with the requester's routing identity.
- The history (every event since the store was new) is in the durable store too: a client
  that joins after a restart still gets everything (E-EVENTBUS-09 requires less).
- Anything that does not decode is dropped with a ``Discard`` naming the clause it breaks.

Dual-server (``ha: primary | backup`` and ``peer``, the other server's endpoints), Binary Star
style: one server is active (serves snapshots, broadcasts), the other passive. The passive one
keeps a replica: a SUB on the peer's publisher and a DEALER (identity ``replica:<name>``) on
its snapshot that asks for the events above what it holds every ``poll_ms`` (one request at a
time: the next goes out once the last was answered, or after ``ha_timeout_ms``; the second
request in a row sent for want of an answer goes on a new connection, Disconnect + Connect: a
peer whose ROUTER ignored the old one, as libzmq does without handover while an older
connection of this identity still held unread messages, hears the new one); PUBs reaching its
own collector wait in a pending list until the peer's broadcast of the same UUID arrives. It
takes over when the peer has been silent for ``ha_timeout_ms`` *and* a client came to it for a
snapshot (the client's vote: the peer is gone for the clients too, not just for the backup),
then broadcasts what is still pending; should the primary turn out to be alive after all (its
BROADCASTs reach the active backup), the backup yields and stands by again. A server
configured ``primary`` first asks its peer for
``check_ms``: if the peer answers, it is active (the primary restarted after a failover) and
this one becomes the passive replica (its history replaced by the peer's); if not, this one is
active (and answers then what the peer's replica asked meanwhile). A passive server ignores the
snapshot requests of clients.

Notes: ``ha-state`` ``{"state": "primary" | "backup"}`` at start and at every change, "primary"
while it serves clients (a single server is always primary); the package resolves the fault
target ``primary`` from it. ``replica-reconnect`` when the replica connects anew.
``{"op": "status"}`` answers ``Deliver("server-status", ...)``.

Config: ``bind`` (the snapshot endpoint ``tcp://host:P``, or all three endpoints), ``dialect``,
``ha``, ``peer``, ``poll_ms`` (100), ``ha_timeout_ms`` (1000), ``check_ms`` (300), ``hwm`` (the
high-water mark of its sockets, 1000; 0: none), ``handover`` (true: a client back with its
identity takes it over at once; false: libzmq's default).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from harness.node import Action, Deliver, Discard, NodeContext, Note, Send, SocketSpec, SocketType, reconnect
from harness.protocols.codec import Message
from reference_nodes import config
from reference_nodes.eventbus.common import (
    PROTOCOL, COLLECTOR, DEFAULT_SNAPSHOT, NEW_CONNECTION_AFTER, PUBLISHER, SNAPSHOT, Event, EventBusNode,
    event_frames, ms_to_ns, server_endpoints, with_sequence,
)

REPLICA = "replica"  # passive: DEALER to the peer's snapshot
FEED = "feed"  # passive: SUB on the peer's publisher
REPLICA_PREFIX = b"replica:"  # routing identity of a replica: its requests are not a client's vote
PRIMARY, BACKUP = "primary", "backup"  # the ha-state note
ACTIVE, PASSIVE, CHECKING = "active", "passive", "checking"
PROBE_SEQUENCE = (1 << 63) - 1  # a liveness probe asks for nothing

DEFAULT_POLL_MS = 100
DEFAULT_HA_TIMEOUT_MS = 1000
DEFAULT_CHECK_MS = 300
DEFAULT_HWM = 1000  # ZeroMQ's default; 0: no limit (a PUB drops what a slow subscriber cannot take)


class Server(EventBusNode):
    role = "server"

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.endpoints = server_endpoints(self.config.get("bind", DEFAULT_SNAPSHOT), "server 'bind'")
        self.ha = self.config.get("ha")
        if self.ha not in (None, PRIMARY, BACKUP):
            raise ValueError(f"eventbus server config 'ha' must be primary or backup, got {self.ha!r}")
        self.peer = server_endpoints(self.config["peer"], "server 'peer'") if self.ha else None
        if self.ha and self.peer is None:
            raise ValueError("eventbus server config 'ha' needs 'peer' (the other server's endpoints)")
        self.poll_ns = ms_to_ns(self.config.get("poll_ms", DEFAULT_POLL_MS), "poll_ms")
        self.ha_timeout_ns = ms_to_ns(self.config.get("ha_timeout_ms", DEFAULT_HA_TIMEOUT_MS), "ha_timeout_ms")
        self.check_ns = ms_to_ns(self.config.get("check_ms", DEFAULT_CHECK_MS), "check_ms")
        self.hwm = int(self.config.get("hwm", DEFAULT_HWM))
        self.handover = config.flag(PROTOCOL, self.config.get("handover", True), "handover")
        # Durable: the sequence counter and the history.
        self.seq = int(self.store.get("seq", 0))
        self.events: list[Event] = sorted((Event.from_store(self.store.get(k)) for k in self.store.keys("event/")),
                                          key=lambda e: e.seq)
        self.seqs = [e.seq for e in self.events]
        self.uuids: dict[str, int] = {}
        for e in self.events:
            self.uuids[e.uuid] = self.uuids.get(e.uuid, 0) + 1
        # Dual-server state (memory).
        self.state = ACTIVE if self.ha is None else (CHECKING if self.ha == PRIMARY else PASSIVE)
        self.pending: dict[str, list[bytes]] = {}  # passive: uuid -> event frames from our collector
        self.marks = [0, 0]  # passive: the last two SYNCEND sequences from the peer
        self.last_heard = 0
        self.voted = False
        self.next_poll: int | None = None
        self.asked_at: int | None = None  # a request to the peer not answered yet (one at a time)
        self.unanswered = 0  # requests to the peer in a row that timed out with no word on the replica
        self.check_until: int | None = None
        # checking: the peer replica's request, answered if this one turns active (dropped, the
        # peer would wait a whole ha_timeout for its next one and think this one silent: both
        # active at every start)
        self.replica_asks: dict[bytes, tuple[list[bytes], Message]] = {}

    def sockets(self) -> list[SocketSpec]:
        snap, pub, coll = self.endpoints
        # The snapshot port last: a supervisor that waits for P finds the others bound too.
        out = [SocketSpec(PUBLISHER, SocketType.PUB, bind=(pub,), hwm=self.hwm),
               SocketSpec(COLLECTOR, SocketType.ROUTER, bind=(coll,), hwm=self.hwm, handover=self.handover),
               SocketSpec(SNAPSHOT, SocketType.ROUTER, bind=(snap,), hwm=self.hwm, handover=self.handover)]
        if self.peer is not None:
            out.append(SocketSpec(REPLICA, SocketType.DEALER, connect=(self.peer[0],),
                                  identity=REPLICA_PREFIX + self.name.encode()))
            out.append(SocketSpec(FEED, SocketType.SUB, connect=(self.peer[1],), subscribe=(b"",)))
        return out

    # ---- inputs ----------------------------------------------------------------------------

    def start(self, now: int) -> list[Action]:
        self.last_heard = now
        if self.state == PASSIVE:
            return self._become_passive(now)
        if self.state == CHECKING:
            self.check_until = now + self.check_ns
            self.next_poll = now
            return [Note("ha-state", {"state": BACKUP, "why": "asking the peer whether it is active"}),
                    *self.handle_timer(now)]
        return [Note("ha-state", {"state": PRIMARY, "sequence": self.seq})]

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        if socket == COLLECTOR:
            return self._on_collector(frames, now)
        if socket == SNAPSHOT:
            return self._on_snapshot(frames, now)
        if socket == REPLICA:
            return self._on_replica(frames, now)
        if socket == FEED:
            return self._on_feed(frames, now)
        return []

    def handle_timer(self, now: int) -> list[Action]:
        out: list[Action] = []
        if self.state == CHECKING and self.check_until is not None and now >= self.check_until:
            out.extend(self._activate(now, "the peer did not answer"))
        if self.state == PASSIVE and self.voted and now - self.last_heard >= self.ha_timeout_ns:
            out.extend(self._activate(now, "the peer is silent and a client came for a snapshot"))
        if self.state != ACTIVE and self.next_poll is not None and now >= self.next_poll:
            if self.asked_at is not None and now - self.asked_at < self.ha_timeout_ns:
                self.next_poll = self.asked_at + self.ha_timeout_ns  # one request at a time
            else:
                if self.asked_at is not None:  # the last request went unanswered for ha_timeout
                    self.unanswered += 1
                    if self.unanswered >= NEW_CONNECTION_AFTER:
                        assert self.peer is not None  # (a server with a replica has a peer)
                        out.append(Note("replica-reconnect", {"unanswered": self.unanswered}))
                        out.extend(reconnect(REPLICA, self.peer[0]))
                since = PROBE_SEQUENCE if self.state == CHECKING else self.marks[0]
                out.append(Send(REPLICA, self.enc["SYNCSTART"]({"subtrees": [], "sequence": since}), "SYNCSTART",
                                {"seq": since}))
                self.next_poll = now + self.poll_ns
                self.asked_at = now
        return out

    def get_timer(self) -> int | None:
        if self.state == ACTIVE:
            return None
        times = [t for t in (self.next_poll, self.check_until) if t is not None]
        if self.state == PASSIVE and self.voted:
            times.append(self.last_heard + self.ha_timeout_ns)
        return min(times) if times else None

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        if request.get("op") == "status":
            return [Deliver("server-status", self.status())]
        raise ValueError(f"eventbus server: unknown command {request.get('op')!r} (known: 'status')")

    def status(self) -> dict[str, Any]:
        return {"state": PRIMARY if self.state == ACTIVE else BACKUP, "sequence": self.seq,
                "events": [[e.seq, e.uuid, e.topic] for e in self.events], "pending": len(self.pending)}

    # ---- the collector: events from producers ---------------------------------------------------

    def _on_collector(self, frames: list[bytes], now: int) -> list[Action]:
        if len(frames) < 2:
            return [Discard(COLLECTOR, list(frames), "no message after the routing identity", "eventbus.wire.grammar")]
        body = frames[1:]
        msg, dropped = self.decode_as("PUB", COLLECTOR, body)
        if msg is None:
            return dropped
        if self.state != ACTIVE:
            if msg["uuid"] not in self.uuids:
                self.pending.setdefault(msg["uuid"], event_frames(body))
            return []
        return self.accept(msg, event_frames(body))

    def accept(self, msg: Message, frames: list[bytes]) -> list[Action]:
        """Number, keep and broadcast one event: the server's own sequence, the producer's frames."""
        self.seq = seq = self.seq + 1
        self.store.put("seq", seq)
        self._keep(Event(seq, msg["topic"], msg["uuid"], frames))
        return [self.broadcast(seq, msg["topic"], frames)]

    def broadcast(self, seq: int, topic: str, frames: list[bytes]) -> Send:
        return Send(PUBLISHER, with_sequence(frames, self.seq_frame(seq)), "BROADCAST", {"topic": topic, "seq": seq})

    def _keep(self, ev: Event) -> None:
        if self.seqs and ev.seq <= self.seqs[-1]:
            i = bisect_right(self.seqs, ev.seq)
            self.seqs.insert(i, ev.seq)
            self.events.insert(i, ev)
        else:
            self.seqs.append(ev.seq)
            self.events.append(ev)
        self.uuids[ev.uuid] = self.uuids.get(ev.uuid, 0) + 1
        self.store.put(f"event/{ev.seq}", ev.to_store())

    # ---- the snapshot: synchronisation ---------------------------------------------------------

    def _on_snapshot(self, frames: list[bytes], now: int) -> list[Action]:
        if len(frames) < 2:
            return [Discard(SNAPSHOT, list(frames), "no message after the routing identity", "eventbus.wire.grammar")]
        identity, body = frames[0], frames[1:]
        msg, dropped = self.decode_snapshot(SNAPSHOT, body)
        if msg is None:
            return dropped
        if msg.name != "SYNCSTART":
            return self.unexpected(SNAPSHOT, frames, msg, "a server only receives SYNCSTART on its snapshot port")
        if self.state != ACTIVE:
            if not identity.startswith(REPLICA_PREFIX):
                self.voted = True
            elif self.state == CHECKING:
                self.replica_asks[identity] = (body, msg)
            return [Note("not-serving", {"client": identity, "state": self.state})]
        return self.snapshot(identity, body, msg)

    def snapshot(self, identity: bytes, body: list[bytes], msg: Message) -> list[Action]:
        """The SYNCs of the requested subtrees above the requested sequence, then SYNCEND."""
        subtrees = msg["subtrees"]
        since = msg["sequence"] or 0  # the dialect's "null": no filter
        out: list[Action] = []
        top = None
        for ev in self.selected(subtrees, since):
            out.append(Send(SNAPSHOT, [identity, b"SYNC", *with_sequence(ev.frames, self.seq_frame(ev.seq))], "SYNC",
                            {"topic": ev.topic, "seq": ev.seq}))
            top = ev.seq if top is None else max(top, ev.seq)
        end = self.syncend_sequence(top)
        out.append(Send(SNAPSHOT, [identity, b"SYNCEND", body[1], self.seq_frame(end)], "SYNCEND", {"seq": end}))
        return out

    def selected(self, subtrees: list[str], since: int) -> list[Event]:
        """The events of a snapshot: in the subtrees, above ``since``, in sequence order."""
        evs = self.events[bisect_right(self.seqs, since):]
        if not subtrees:
            return evs
        return [ev for ev in evs if any(ev.topic.startswith(s) for s in subtrees)]

    def syncend_sequence(self, highest_sync: int | None) -> int:
        """E-EVENTBUS-08; the deployed bus (micro-toolkit) always sends its latest."""
        if highest_sync is None or self.dialect != "strict":
            return self.seq
        return highest_sync

    # ---- dual server: the passive replica ---------------------------------------------------------

    def _on_replica(self, frames: list[bytes], now: int) -> list[Action]:
        msg, dropped = self.decode_snapshot(REPLICA, frames)
        if msg is None:
            return dropped
        self.unanswered = 0
        if self.state == ACTIVE:
            return []  # a late answer to a request of our passive days
        self._heard(now)
        if self.state == CHECKING:  # the peer is active: it took over while we were down
            return self._become_passive(now)
        if msg.name == "SYNC":
            self._replicate(msg, frames[1:])
        elif msg.name == "SYNCEND":
            self.marks = [self.marks[1], msg["sequence"] or 0]
            if self.asked_at is not None:
                self.next_poll = max(now, self.asked_at + self.poll_ns)
            self.asked_at = None
        return []

    def _on_feed(self, frames: list[bytes], now: int) -> list[Action]:
        msg, dropped = self.decode_as("BROADCAST", FEED, frames)
        if msg is None:
            return dropped
        if self.state == ACTIVE:
            if self.ha == BACKUP:  # both active (it took over from a primary that was only slow): yield
                self._heard(now)
                return self._become_passive(now, "the primary is active too")
            return []
        self._heard(now)
        if self.state == CHECKING:
            return self._become_passive(now)
        self._replicate(msg, frames)
        return []

    def _heard(self, now: int) -> None:
        self.last_heard = now
        self.voted = False

    def _replicate(self, msg: Message, body: list[bytes]) -> None:
        seq = msg["sequence"]
        if seq is None or (self.seqs and self.seqs[bisect_right(self.seqs, seq) - 1] == seq):
            return
        self._keep(Event(seq, msg["topic"], msg["uuid"], event_frames(body)))
        self.pending.pop(msg["uuid"], None)

    def _become_passive(self, now: int, why: str = "the peer is active") -> list[Action]:
        """Stand by as the peer's replica, starting from an empty history (the peer's numbering
        is the one clients see now); the own counter is kept for E-EVENTBUS-10."""
        self.state = PASSIVE
        for ev in self.events:
            self.store.delete(f"event/{ev.seq}")
        self.events, self.seqs, self.uuids = [], [], {}
        self.marks = [0, 0]
        self.next_poll = now
        self.asked_at = None
        self.unanswered = 0
        self.check_until = None
        self.replica_asks = {}
        return [Note("ha-state", {"state": BACKUP, "why": why})] + self.handle_timer(now)

    def _activate(self, now: int, why: str) -> list[Action]:
        """Take over: number on from everything held, then broadcast what is still pending."""
        self.state = ACTIVE
        self.check_until = self.next_poll = None
        self.seq = max(self.seq, self.seqs[-1] if self.seqs else 0)
        self.store.put("seq", self.seq)
        out: list[Action] = [Note("ha-state", {"state": PRIMARY, "sequence": self.seq, "why": why})]
        asks, self.replica_asks = self.replica_asks, {}
        for identity, (body, msg) in asks.items():
            out.extend(self.snapshot(identity, body, msg))
        pending, self.pending = self.pending, {}
        for uuid, frames in pending.items():
            if uuid in self.uuids:
                continue
            msg = Message("PUB", {"topic": frames[0].decode("utf-8"), "uuid": uuid, "sequence": None})
            out.extend(self.accept(msg, frames))
        return out
