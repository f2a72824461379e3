"""Deliberately broken Event BUS nodes: each breaks one clause and is otherwise the reference node.

The conformance suites (scenarios/eventbus/conformance) and the chaos checkers
(harness/checkers/eventbus.py) are tested against these: a suite or checker that passes a
mutant has a hole. Each class overrides the least it can; its docstring names the clause.

``MUTANTS`` maps a mutant's name to ``(role, factory, clause id)``. ``ALSO_BREAKS`` names what
else a mutant's conformance failures may be attributed to, and why; ``DIALECTS`` the dialects in
which a mutant differs from the reference at all; ``OUT_OF_REACH`` the mutants no conformance
suite can see, because what they break is not on the wire (the chaos checkers catch them).
"""

from __future__ import annotations

from typing import Any, Callable

from harness.node import Action, NodeContext, Send, SocketSpec, SocketType
from harness.protocols import codec
from harness.protocols.codec import Message
from reference_nodes.eventbus.client import Client
from reference_nodes.eventbus.common import COLLECTOR, PUBLISHER, SNAPSHOT, Event, socket_name
from reference_nodes.eventbus.server import Server

# ---- server ------------------------------------------------------------------------------------


class VolatileSequenceServer(Server):
    """Breaks ``eventbus.server.sequence-increasing``: keeps its counter and history in memory,
    so after a restart it numbers from 1 again (E-EVENTBUS-10: clients would discard every new
    event as stale)."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.seq, self.events, self.seqs, self.uuids = 0, [], [], {}  # whatever the store says


class SyncEndLatestServer(Server):
    """Breaks ``eventbus.server.syncend-sequence`` (strict): SYNCEND always carries the latest
    sequence, as the deployed bus does, also when it sent SYNCs with lower ones (E-EVENTBUS-08)."""

    def syncend_sequence(self, highest_sync: int | None) -> int:
        return self.seq


class SyncEndRaceServer(Server):
    """Breaks ``eventbus.server.syncend-sequence`` as the deployed bus does (micro-toolkit/
    event-bus-zeromq, `lib/bus.js`): it answers a SYNCSTART from a query of its store that
    completes later, sending the SYNCs the query found and then a SYNCEND with its latest
    sequence at that moment, while it numbers and broadcasts every PUB at once. An event taken
    meanwhile is covered by the SYNCEND and in no SYNC. Here the query completes when the next
    PUB has been taken, or after ``RACE_NS``."""

    RACE_NS = 50_000_000

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.querying: list[tuple[int, list[Send]]] = []  # (when the query completes at the latest, the answer)

    def _on_snapshot(self, frames: list[bytes], now: int) -> list[Action]:
        now_out: list[Action] = []
        answer: list[Send] = []
        for a in super()._on_snapshot(frames, now):
            (answer if isinstance(a, Send) and a.socket == SNAPSHOT else now_out).append(a)
        if answer:
            self.querying.append((now + self.RACE_NS, answer))
        return now_out

    def _completed(self, now: int, pub_taken: bool) -> list[Action]:
        """The answers whose query completed, each SYNCEND with the latest sequence now."""
        out: list[Action] = []
        waiting = []
        for at, answer in self.querying:
            if not (pub_taken or at <= now):
                waiting.append((at, answer))
                continue
            *syncs, end = answer
            out.extend([*syncs, Send(SNAPSHOT, [*end.frames[:3], self.seq_frame(self.seq)], "SYNCEND",
                                     {"seq": self.seq})])
        self.querying = waiting
        return out

    def accept(self, msg: Message, frames: list[bytes]) -> list[Action]:
        return super().accept(msg, frames) + self._completed(0, pub_taken=True)

    def handle_timer(self, now: int) -> list[Action]:
        return super().handle_timer(now) + self._completed(now, pub_taken=False)

    def get_timer(self) -> int | None:
        times = [t for t in (super().get_timer(), *(at for at, _ in self.querying)) if t is not None]
        return min(times) if times else None


class SyncEndFilterServer(Server):
    """Breaks ``eventbus.server.syncend-sequence``: SYNCEND echoes the request's sequence filter
    instead of the highest SYNC (the reading E-EVENTBUS-08 rules out)."""

    def snapshot(self, identity: bytes, body: list[bytes], msg: Message) -> list[Action]:
        out = super().snapshot(identity, body, msg)
        last = out[-1]
        frames = list(last.frames)  # type: ignore[union-attr]
        frames[3] = self.seq_frame(msg["sequence"] or 0)
        return out[:-1] + [Send(SNAPSHOT, frames, "SYNCEND", {"seq": msg["sequence"] or 0})]


class SyncEndAheadServer(Server):
    """Breaks ``eventbus.server.syncend-sequence``: SYNCEND carries one more than it should, above
    the latest sequence, so a client discards the next event as stale."""

    def syncend_sequence(self, highest_sync: int | None) -> int:
        return super().syncend_sequence(highest_sync) + 1


class NoSequenceFilterServer(Server):
    """Breaks ``eventbus.server.sync-sequence-filter``: sends every event of the subtrees,
    whatever sequence the SYNCSTART asks to start above."""

    def selected(self, subtrees: list[str], since: int) -> list[Event]:
        return super().selected(subtrees, 0)


class NoSubtreeFilterServer(Server):
    """Breaks ``eventbus.server.sync-subtree-filter``: sends the events of every topic."""

    def selected(self, subtrees: list[str], since: int) -> list[Event]:
        return super().selected([], since)


class EmptySnapshotServer(Server):
    """Breaks ``eventbus.server.sync-response``: answers every SYNCSTART with a SYNCEND and no
    SYNC, as if it held no event (a client that joins late never gets the history)."""

    def selected(self, subtrees: list[str], since: int) -> list[Event]:
        return []


class EmptyTopicStallsServer(Server):
    """Breaks ``eventbus.server.sync-response`` as the deployed bus does: it reads an empty topic
    back from its store as null and throws while it filters, so a snapshot that reaches back to
    an event with an empty topic gets nothing at all, neither its SYNCs nor a SYNCEND."""

    def snapshot(self, identity: bytes, body: list[bytes], msg: Message) -> list[Action]:
        if any(ev.topic == "" for ev in self.selected([], msg["sequence"] or 0)):
            return []
        return super().snapshot(identity, body, msg)


class NoSyncEndServer(Server):
    """Breaks ``eventbus.server.sync-response``: sends the SYNCs but never the SYNCEND."""

    def snapshot(self, identity: bytes, body: list[bytes], msg: Message) -> list[Action]:
        return super().snapshot(identity, body, msg)[:-1]


class SyncEndNoSubtreesServer(Server):
    """Breaks ``eventbus.server.syncend-subtree``: SYNCEND's subtree frame is empty instead of
    the request's specification (E-EVENTBUS-06)."""

    def snapshot(self, identity: bytes, body: list[bytes], msg: Message) -> list[Action]:
        out = super().snapshot(identity, body, msg)
        frames = list(out[-1].frames)  # type: ignore[union-attr]
        frames[2] = b""
        return out[:-1] + [Send(SNAPSHOT, frames, "SYNCEND", out[-1].meta)]  # type: ignore[union-attr]


class FirstClientServer(Server):
    """Breaks ``eventbus.server.identity-prefix``: prefixes every snapshot answer with the
    identity of the first client that ever asked, not of the one asking."""

    first: bytes | None = None

    def snapshot(self, identity: bytes, body: list[bytes], msg: Message) -> list[Action]:
        if self.first is None:
            self.first = identity
        return super().snapshot(self.first, body, msg)


class PubSequenceServer(Server):
    """Breaks ``eventbus.server.own-sequence``: broadcasts each event with the sequence the
    producer put in its PUB instead of numbering it itself (E-EVENTBUS-03)."""

    def accept(self, msg: Message, frames: list[bytes]) -> list[Action]:
        theirs = msg["sequence"] or 0
        self.seq = theirs
        self._keep(Event(theirs, msg["topic"], msg["uuid"], frames))
        return [self.broadcast(theirs, msg["topic"], frames)]


class BroadcastTwiceServer(Server):
    """Breaks ``eventbus.server.broadcast``: sends every BROADCAST twice (E-EVENTBUS-12: exactly
    one per PUB)."""

    def _on_collector(self, frames: list[bytes], now: int) -> list[Action]:
        out = super()._on_collector(frames, now)
        return out + [a for a in out if isinstance(a, Send) and a.msg_type == "BROADCAST"]


class DropsPubServer(Server):
    """Breaks ``eventbus.server.broadcast``: silently drops every third well-formed PUB (neither
    kept nor broadcast)."""

    taken = 0

    def accept(self, msg: Message, frames: list[bytes]) -> list[Action]:
        self.taken += 1
        return [] if self.taken % 3 == 0 else super().accept(msg, frames)


class ReencodesDataServer(Server):
    """Breaks ``eventbus.server.forward-unchanged`` (strict): decodes the event data and encodes
    it again in the widest MessagePack forms (every integer as uint64 / int64), the same value
    in other bytes, as the deployed bus's re-encoding may (E-EVENTBUS-12)."""

    def accept(self, msg: Message, frames: list[bytes]) -> list[Action]:
        frames = [*frames[:4], _wide_msgpack(msg["data"])]
        return super().accept(msg, frames)


class AltersDataServer(Server):
    """Breaks ``eventbus.server.forward-unchanged``: wraps the event data in a list, a different
    value (and bytes) from the producer's."""

    def accept(self, msg: Message, frames: list[bytes]) -> list[Action]:
        import msgpack

        frames = [*frames[:4], msgpack.packb([msg["data"]], use_bin_type=True)]
        return super().accept(msg, frames)


class RestampsServer(Server):
    """Breaks ``eventbus.server.forward-unchanged``: replaces the producer's timestamp with its
    own (a fixed, well-formed one)."""

    def accept(self, msg: Message, frames: list[bytes]) -> list[Action]:
        return super().accept(msg, [frames[0], frames[1], b"2000-01-01T00:00:00.000Z", frames[3], frames[4]])


class UuidV1Server(Server):
    """Breaks ``eventbus.wire.uuid-v4``: turns the version nibble of every UUID it sends into 1."""

    def accept(self, msg: Message, frames: list[bytes]) -> list[Action]:
        u = frames[3]
        return super().accept(msg, [*frames[:3], u[:14] + b"1" + u[15:], frames[4]])


class NoZoneTimestampServer(Server):
    """Breaks ``eventbus.wire.timestamp-iso8601``: cuts the zone designator off every timestamp
    it sends (a local time cannot be compared, E-EVENTBUS-14)."""

    def accept(self, msg: Message, frames: list[bytes]) -> list[Action]:
        ts = frames[2].rstrip(b"Z")
        return super().accept(msg, [frames[0], frames[1], ts, frames[3], frames[4]])


class TrailingDataServer(Server):
    """Breaks ``eventbus.wire.data-msgpack``: appends a byte after the MessagePack value of
    every event's data."""

    def accept(self, msg: Message, frames: list[bytes]) -> list[Action]:
        return super().accept(msg, [*frames[:4], frames[4] + b"\xc0"])


class OtherSequenceFormatServer(Server):
    """Breaks ``eventbus.wire.sequence-format``: writes its sequences in the other dialect's
    form (ASCII decimal in strict, 8 bytes in eventbus:micro-toolkit)."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        other = "eventbus:micro-toolkit" if self.dialect == "strict" else "strict"
        self.seq_frame = codec("eventbus", other).table.fields["sequence"].type.encode


class SwappedPortsServer(Server):
    """Breaks ``eventbus.server.ports``: binds its PUB at P+2 and the collector at P+1."""

    def sockets(self) -> list[SocketSpec]:
        snap, pub, coll = self.endpoints
        return [SocketSpec(PUBLISHER, SocketType.PUB, bind=(coll,)),
                SocketSpec(COLLECTOR, SocketType.ROUTER, bind=(pub,), handover=True),
                SocketSpec(SNAPSHOT, SocketType.ROUTER, bind=(snap,), handover=True)]


class _CrashOnMalformed:
    """Raises on the first message that does not decode, instead of dropping it."""

    def decode_as(self, name: str, socket: str, frames: list[bytes]) -> tuple[Message | None, list[Action]]:
        msg, dropped = super().decode_as(name, socket, frames)  # type: ignore[misc]
        if msg is None:
            raise RuntimeError(f"crashed on a malformed {name}: {dropped[0]}")
        return msg, dropped

    def decode_snapshot(self, socket: str, frames: list[bytes]) -> tuple[Message | None, list[Action]]:
        msg, dropped = super().decode_snapshot(socket, frames)  # type: ignore[misc]
        if msg is None:
            raise RuntimeError(f"crashed on a malformed snapshot message: {dropped[0]}")
        return msg, dropped


class CrashOnMalformedServer(_CrashOnMalformed, Server):
    """Breaks ``eventbus.wire.grammar`` (drop malformed input and keep serving): raises on the
    first message that does not decode."""


def _wide_msgpack(value: Any) -> bytes:
    """MessagePack with every integer in its 8-byte form: the same value, other bytes."""
    import struct

    import msgpack

    def enc(v: Any) -> bytes:
        if isinstance(v, bool) or v is None:
            return msgpack.packb(v)
        if isinstance(v, int):
            return b"\xcf" + struct.pack(">Q", v) if v >= 0 else b"\xd3" + struct.pack(">q", v)
        if isinstance(v, list):
            return b"\xdd" + struct.pack(">I", len(v)) + b"".join(enc(x) for x in v)
        if isinstance(v, dict):
            return b"\xdf" + struct.pack(">I", len(v)) + b"".join(enc(k) + enc(x) for k, x in v.items())
        return msgpack.packb(v, use_bin_type=True)

    return enc(value)


# ---- client ------------------------------------------------------------------------------------


class NoDiscardClient(Client):
    """Breaks ``eventbus.client.discard-old``: applies every new BROADCAST whatever its
    sequence, also one at or below the last SYNCEND or BROADCAST (a reordered one, out of order)."""

    def apply_broadcast(self, msg: Message, threshold: int) -> list[Action]:
        seq = msg["sequence"]
        if seq is not None and seq > threshold:
            self.threshold = seq
        return self.apply(msg, "broadcast")


class AppliesTwiceClient(Client):
    """Breaks ``eventbus.client.discard-old``: applies every event it receives, also one it
    already applied (a duplicated BROADCAST, or the SYNC of a resynchronisation)."""

    def apply(self, msg: Message, source: str) -> list[Action]:
        self.applied.discard(msg["uuid"])
        return super().apply(msg, source)


class AppliesEarlyClient(Client):
    """Breaks ``eventbus.client.apply-after-syncend``: applies BROADCASTs as they arrive, also
    those that come before the SYNCEND of its synchronisation (E-EVENTBUS-11: hold them, apply
    after SYNCEND)."""

    def _on_broadcast(self, msg: Message, index: int, now: int) -> list[Action]:
        out = super()._on_broadcast(msg, index, now)
        if self.held and self.held[-1] is msg:
            out.extend(self.apply(msg, "broadcast"))
        return out


class ForeignTopicsClient(Client):
    """Breaks ``eventbus.client.apply-after-syncend``: subscribes to every topic and applies
    whatever arrives, also events outside the subtrees it synchronised."""

    def sockets(self) -> list[SocketSpec]:
        return [SocketSpec(s.name, s.type, connect=s.connect, identity=s.identity,
                           subscribe=(b"",) if s.type is SocketType.SUB else s.subscribe) for s in super().sockets()]


class NoFailoverClient(Client):
    """Breaks ``eventbus.client.failover-resync``: stays with the first server whatever happens:
    it asks it again and again, and ignores the other one's BROADCASTs."""

    def failover(self, to: int, now: int, why: str) -> list[Action]:
        return self._sync(now, full=self.full)

    def _on_broadcast(self, msg: Message, index: int, now: int) -> list[Action]:
        return [] if index != self.current else super()._on_broadcast(msg, index, now)


class TwoFrameSyncStartClient(Client):
    """Breaks ``eventbus.wire.syncstart-frames``: sends SYNCSTART with the two frames the text
    announces, without the sequence (E-EVENTBUS-01)."""

    def _sync(self, now: int, full: bool, since: int | None = None) -> list[Action]:
        out = super()._sync(now, full, since)
        send = out[-1]
        return out[:-1] + [Send(send.socket, send.frames[:2], "SYNCSTART", send.meta)]  # type: ignore[union-attr]


class CommaSubtreesClient(Client):
    """Breaks ``eventbus.wire.subtree-format`` (strict): joins its subtrees with ',' as the
    deployed bus does, not ';'."""

    def _sync(self, now: int, full: bool, since: int | None = None) -> list[Action]:
        out = super()._sync(now, full, since)
        send = out[-1]
        frames = list(send.frames)  # type: ignore[union-attr]
        frames[1] = ",".join(self.subtrees).encode()
        return out[:-1] + [Send(send.socket, frames, "SYNCSTART", send.meta)]  # type: ignore[union-attr]


class OtherSequenceFormatClient(Client):
    """Breaks ``eventbus.wire.sequence-format``: writes the sequences of its SYNCSTARTs and PUBs
    in the other dialect's form (ASCII decimal in strict, 8 bytes in eventbus:micro-toolkit)."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        other = "eventbus:micro-toolkit" if self.dialect == "strict" else "strict"
        self.other_seq = codec("eventbus", other).table.fields["sequence"].type.encode

    def _sync(self, now: int, full: bool, since: int | None = None) -> list[Action]:
        out = super()._sync(now, full, since)
        send = out[-1]
        frames = list(send.frames)  # type: ignore[union-attr]
        frames[2] = self.other_seq(send.meta["seq"])  # type: ignore[union-attr,index]
        return out[:-1] + [Send(send.socket, frames, "SYNCSTART", send.meta)]  # type: ignore[union-attr]

    def pub_frames(self, fields: dict[str, Any]) -> list[bytes]:
        frames = super().pub_frames(fields)
        frames[1] = self.other_seq(fields["sequence"])
        return frames


class UuidV1Client(Client):
    """Breaks ``eventbus.wire.uuid-v4``: its event UUIDs say version 1."""

    def pub_frames(self, fields: dict[str, Any]) -> list[bytes]:
        frames = super().pub_frames(fields)
        frames[4] = frames[4][:14] + b"1" + frames[4][15:]
        return frames


class NoZoneTimestampClient(Client):
    """Breaks ``eventbus.wire.timestamp-iso8601``: its timestamps have no zone designator."""

    def pub_frames(self, fields: dict[str, Any]) -> list[bytes]:
        frames = super().pub_frames(fields)
        frames[3] = frames[3].rstrip(b"Z")
        return frames


class RawDataClient(Client):
    """Breaks ``eventbus.wire.data-msgpack``: sends an empty data frame, not a MessagePack value
    (E-EVENTBUS-14: no data is nil)."""

    def pub_frames(self, fields: dict[str, Any]) -> list[bytes]:
        return super().pub_frames(fields)[:5] + [b""]


class SameUuidClient(Client):
    """Breaks ``eventbus.client.uuid-unique``: every event it publishes has the same UUID."""

    def event_fields(self, topic: str, data: Any, now: int) -> dict[str, Any]:
        return {**super().event_fields(topic, data, now), "uuid": "0f8fad5b-d9cb-469f-a165-70867728950e"}


class ShiftingProducerClient(Client):
    """Breaks ``eventbus.client.producer-id``: a new producer id in every event."""

    def event_fields(self, topic: str, data: Any, now: int) -> dict[str, Any]:
        fields = super().event_fields(topic, data, now)
        return {**fields, "producer": f"{fields['producer']}-{self.counter}"}


class GivesUpClient(Client):
    """Breaks ``eventbus.client.failover-resync`` (a MAY): a SYNCSTART that goes unanswered is
    never sent again, to this server or another one."""

    def failover(self, to: int, now: int, why: str) -> list[Action]:
        self.syncing = False
        return []

    def _sync(self, now: int, full: bool, since: int | None = None) -> list[Action]:
        if self.syncing and self.sync_deadline is not None and now >= self.sync_deadline:
            self.syncing = False  # timed out: give up
            return []
        return super()._sync(now, full, since)


class DefaultSubtreeClient(Client):
    """Breaks ``eventbus.wire.subtree-empty`` (a MAY): given no subtrees, it asks for a default
    one (``/default/``) instead of sending the empty specification that means every topic."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.subtrees = self.subtrees or ["/default/"]


class NoSubscriberClient(Client):
    """Breaks ``eventbus.client.connections``: opens no SUB socket to the publisher port, so it
    never gets a BROADCAST (only its snapshots)."""

    def sockets(self) -> list[SocketSpec]:
        return [s for s in super().sockets() if s.type is not SocketType.SUB]


class HelloFirstClient(Client):
    """Breaks ``eventbus.client.syncstart-first``: sends a SYNCEND of its own on the snapshot
    connection before its first SYNCSTART (a made-up greeting)."""

    greeted = False

    def _sync(self, now: int, full: bool, since: int | None = None) -> list[Action]:
        out = super()._sync(now, full, since)
        if self.greeted:
            return out
        self.greeted = True
        hello = self.enc["SYNCEND"]({"subtrees": self.subtrees, "sequence": 0})
        return [Send(socket_name(SNAPSHOT, self.current), hello, "SYNCEND"), *out]


class CrashOnMalformedClient(_CrashOnMalformed, Client):
    """Breaks ``eventbus.wire.grammar`` (drop malformed input and go on): raises on the first
    message that does not decode."""


MUTANTS: dict[str, tuple[str, Callable[[NodeContext], Any], str]] = {
    "volatile-sequence": ("server", VolatileSequenceServer, "eventbus.server.sequence-increasing"),
    "syncend-latest": ("server", SyncEndLatestServer, "eventbus.server.syncend-sequence"),
    "syncend-filter": ("server", SyncEndFilterServer, "eventbus.server.syncend-sequence"),
    "syncend-race": ("server", SyncEndRaceServer, "eventbus.server.syncend-sequence"),
    "syncend-ahead": ("server", SyncEndAheadServer, "eventbus.server.syncend-sequence"),
    "no-sequence-filter": ("server", NoSequenceFilterServer, "eventbus.server.sync-sequence-filter"),
    "no-subtree-filter": ("server", NoSubtreeFilterServer, "eventbus.server.sync-subtree-filter"),
    "empty-snapshot": ("server", EmptySnapshotServer, "eventbus.server.sync-response"),
    "no-syncend": ("server", NoSyncEndServer, "eventbus.server.sync-response"),
    "empty-topic-stalls": ("server", EmptyTopicStallsServer, "eventbus.server.sync-response"),
    "syncend-no-subtrees": ("server", SyncEndNoSubtreesServer, "eventbus.server.syncend-subtree"),
    "first-client": ("server", FirstClientServer, "eventbus.server.identity-prefix"),
    "pub-sequence": ("server", PubSequenceServer, "eventbus.server.own-sequence"),
    "broadcast-twice": ("server", BroadcastTwiceServer, "eventbus.server.broadcast"),
    "drops-pub": ("server", DropsPubServer, "eventbus.server.broadcast"),
    "reencodes-data": ("server", ReencodesDataServer, "eventbus.server.forward-unchanged"),
    "alters-data": ("server", AltersDataServer, "eventbus.server.forward-unchanged"),
    "restamps": ("server", RestampsServer, "eventbus.server.forward-unchanged"),
    "server-uuid-v1": ("server", UuidV1Server, "eventbus.wire.uuid-v4"),
    "server-no-zone": ("server", NoZoneTimestampServer, "eventbus.wire.timestamp-iso8601"),
    "trailing-data": ("server", TrailingDataServer, "eventbus.wire.data-msgpack"),
    "server-sequence-format": ("server", OtherSequenceFormatServer, "eventbus.wire.sequence-format"),
    "swapped-ports": ("server", SwappedPortsServer, "eventbus.server.ports"),
    "server-crash-on-malformed": ("server", CrashOnMalformedServer, "eventbus.wire.grammar"),
    "no-discard": ("client", NoDiscardClient, "eventbus.client.discard-old"),
    "applies-twice": ("client", AppliesTwiceClient, "eventbus.client.discard-old"),
    "applies-early": ("client", AppliesEarlyClient, "eventbus.client.apply-after-syncend"),
    "foreign-topics": ("client", ForeignTopicsClient, "eventbus.client.apply-after-syncend"),
    "no-failover": ("client", NoFailoverClient, "eventbus.client.failover-resync"),
    "two-frame-syncstart": ("client", TwoFrameSyncStartClient, "eventbus.wire.syncstart-frames"),
    "comma-subtrees": ("client", CommaSubtreesClient, "eventbus.wire.subtree-format"),
    "client-sequence-format": ("client", OtherSequenceFormatClient, "eventbus.wire.sequence-format"),
    "client-uuid-v1": ("client", UuidV1Client, "eventbus.wire.uuid-v4"),
    "client-no-zone": ("client", NoZoneTimestampClient, "eventbus.wire.timestamp-iso8601"),
    "raw-data": ("client", RawDataClient, "eventbus.wire.data-msgpack"),
    "same-uuid": ("client", SameUuidClient, "eventbus.client.uuid-unique"),
    "shifting-producer": ("client", ShiftingProducerClient, "eventbus.client.producer-id"),
    "no-subscriber": ("client", NoSubscriberClient, "eventbus.client.connections"),
    "gives-up": ("client", GivesUpClient, "eventbus.client.failover-resync"),
    "default-subtree": ("client", DefaultSubtreeClient, "eventbus.wire.subtree-empty"),
    "hello-first": ("client", HelloFirstClient, "eventbus.client.syncstart-first"),
    "client-crash-on-malformed": ("client", CrashOnMalformedClient, "eventbus.wire.grammar"),
}

# Conformance failures of a mutant that may honestly be attributed to a second clause.
ALSO_BREAKS: dict[str, dict[str, str]] = {
    "swapped-ports": {"eventbus.server.broadcast": "a SUB connected to P+1 hears no BROADCAST when the server's PUB "
                                                   "socket is bound elsewhere: every case that waits for one fails "
                                                   "there, on the clause its BROADCASTs are judged on"},
}

# Mutants that differ from the reference only in some dialects (in the others they are it).
DIALECTS: dict[str, tuple[str, ...]] = {
    "syncend-latest": ("strict",),  # in eventbus:micro-toolkit the reference itself sends the latest
    "reencodes-data": ("strict",),  # the dialect compares data by value (the deployed bus re-encodes)
    "comma-subtrees": ("strict",),  # ',' is the dialect's own separator
}

# Mutants no conformance suite can see: the chaos checkers catch them (tests/checkers).
OUT_OF_REACH: dict[str, str] = {
    "no-discard": "what a client applies is not on the wire (eventbus.client.discard-old is INTERNAL); the "
                  "client-sequence checker catches it in scenarios",
    "applies-twice": "what a client applies is not on the wire; the applied-once checker catches it in scenarios",
    "applies-early": "what a client applies is not on the wire (E-EVENTBUS-11); the client-sequence checker "
                     "catches it in scenarios",
    "foreign-topics": "what a client applies is not on the wire, and its subscriptions are its own business; the "
                      "convergence checker catches it in scenarios",
    "no-failover": "the client suite plays one server, so no case can offer a backup; the convergence checker "
                   "catches it in the failover scenario",
}

# Mutants that die (raise) on the input that breaks their clause. A conformance suite reports a
# crash of the implementation as its own robustness failure (harness.robustness, MUST),
# whichever step was waiting, so that is the verdict these get.
CRASHES: frozenset[str] = frozenset({"server-crash-on-malformed", "client-crash-on-malformed"})
