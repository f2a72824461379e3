"""Deliberately broken Dafka nodes: each breaks one clause and is otherwise the reference node.

The conformance suites and checkers are tested against these: a suite or checker that passes a
mutant has a hole. Each class overrides the least it can; its docstring names the clause.

``MUTANTS`` maps a mutant's name to ``(role, factory, clause id)``; every factory is a
``NodeFactory`` (``factory(ctx)`` gives a node).

Three of them break invariants that no sentence of the document states word for word; the
clause they name is the nearest one, and the docstring says why:

- ``memory-store``: durability is a goal of the document ("Store streams of records in a
  fault-tolerant durable way"), not a clause. After a restart the store no longer answers a
  FETCH for records it ACKed (an ACK claims they are stored, E-DAFKA-17), which the harness
  reports as ``dafka.fetch.direct-record-reply``.
- ``duplicate-delivery`` and ``out-of-order``: what a consumer hands to its application is not
  on the wire. Exactly once and in order is the consumer-side reading of
  ``dafka.record.offset-increments``: the records of a partition delivered to the application
  must have offsets that start where the consumer started and grow by exactly 1.

These three are for the chaos checkers: no conformance suite can see them (``OUT_OF_REACH``).
The others each break a clause on the wire, and the conformance suites
(scenarios/dafka/conformance) fail them on it; ``ALSO_BREAKS`` names what else a mutant's
failures may be attributed to, and why; ``DIALECTS`` the dialects in which a mutant differs
from the reference at all.
"""

from __future__ import annotations

from typing import Any, Callable

from harness.node import Action, Connect, Disconnect, DurableStore, NodeContext, Send, SocketSpec, Subscribe, Unsubscribe
from harness.protocols.codec import Message
from harness.protocols.dafka import COMMAND_IDS, SIGNATURE, subscription
from reference_nodes.dafka.common import PEER_SUB, TOWER_PUB, TOWER_SUB, XPUB, DafkaNode, new_address
from reference_nodes.dafka.consumer import ConsumedPartition, Consumer
from reference_nodes.dafka.producer import Producer
from reference_nodes.dafka.store import StoredPartition, Store

ZRE_COPY_SIGNATURE = b"\xaa\xa0"  # what the document's Protocol Signature section says (E-DAFKA-01)

# ---- producer ------------------------------------------------------------------------------


class SkipOffsetProducer(Producer):
    """Breaks ``dafka.record.offset-increments``: after offset ``skip_after`` (config, default 1)
    it skips one offset (0, 1, 3, 4, ...)."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.skip_after = int(self.config.get("skip_after", 1))

    def following_offset(self, offset: int) -> int:
        return offset + (2 if offset == self.skip_after else 1)


class OffsetOneProducer(Producer):
    """Breaks ``dafka.record.offset-starts-at-zero``: its first record has offset 1 (then 2, 3, ...)."""

    def first_offset(self) -> int:
        return 1


class EarlyReleaseProducer(Producer):
    """Breaks ``dafka.producer.keep-until-ack``: forgets every record as soon as it published it,
    before any ACK, so a FETCH for it gets no DIRECT-RECORD."""

    def after_publish(self, offset: int, out: list[Action]) -> None:
        self.records.pop(offset, None)


class DescendingFetchProducer(Producer):
    """Breaks ``dafka.fetch.ascending-order``: answers a FETCH with the highest offset first."""

    def fetch_order(self, offsets: list[int]) -> list[int]:
        return offsets[::-1]


class NoHeadProducer(Producer):
    """Breaks ``dafka.producer.head-interval``: never sends HEAD."""

    def on_command(self, op: Any, request: dict[str, Any], now: int) -> list[Action]:
        out = super().on_command(op, request, now)
        self.deadlines["head"] = None
        return out


class WrongSignatureProducer(Producer):
    """Breaks ``dafka.wire.signature``: its commands start with ``AA A0``, the ZRE-copied value of
    the document's Protocol Signature section, instead of ``AA A5`` (E-DAFKA-01)."""

    def encode(self, name: str, fields: dict[str, Any]) -> list[bytes]:
        frames = super().encode(name, fields)
        if name in COMMAND_IDS and len(frames) > 1 and frames[1][:2] == SIGNATURE:
            frames[1] = ZRE_COPY_SIGNATURE + frames[1][2:]
        return frames


# ---- store ---------------------------------------------------------------------------------


class DescendingFetchStore(Store):
    """Breaks ``dafka.fetch.ascending-order``: answers a FETCH with the highest offset first."""

    def fetch_order(self, offsets: list[int]) -> list[int]:
        return offsets[::-1]


class MemoryStore(Store):
    """Keeps its records (and its address) in memory only, so it loses them when it restarts.
    No clause requires durability word for word (see the module docstring); on the wire it
    breaks ``dafka.fetch.direct-record-reply`` for the records it ACKed before the restart."""

    def open_db(self, ctx: NodeContext) -> DurableStore:
        return DurableStore()


class NoHelloStore(Store):
    """Breaks ``dafka.store.hello-on-subscription``: never sends STORE-HELLO."""

    def greet(self, consumer: str) -> list[Action]:
        return []


# ---- consumer ------------------------------------------------------------------------------


class DuplicateDeliveryConsumer(Consumer):
    """Breaks exactly-once delivery, the consumer-side reading of
    ``dafka.record.offset-increments``: hands every duplicate record (a RECORD and a
    DIRECT-RECORD for one offset, a FETCH answered by producer and store) to the application
    again."""

    def accept(self, st: ConsumedPartition, offset: int, content: bytes, out: list[Action]) -> None:
        if offset < st.next or offset in st.buffer:
            self.deliver(st, offset, content, out)
            return
        super().accept(st, offset, content, out)


class OutOfOrderConsumer(Consumer):
    """Breaks in-order delivery, the consumer-side reading of ``dafka.record.offset-increments``:
    delivers each record when it arrives (still once, and it still FETCHes gaps), so the
    records of a gap reach the application after those above it."""

    def accept(self, st: ConsumedPartition, offset: int, content: bytes, out: list[Action]) -> None:
        if offset < st.next or offset in st.buffer:
            return
        self.deliver(st, offset, content, out)
        if offset > st.next:
            st.buffer[offset] = content  # remembered as delivered
            st.buffered.add(offset)
            return
        nxt = offset + 1
        while nxt in st.buffer:
            del st.buffer[nxt]
            nxt += 1
        st.next = nxt
        st.buffered.discard_below(nxt)
        self.store.put(st.key, nxt)


class SkipGapConsumer(Consumer):
    """Breaks ``dafka.fetch.on-gap``: never FETCHes; on a gap it jumps to the record that
    arrived, so the missing records are never delivered."""

    def accept(self, st: ConsumedPartition, offset: int, content: bytes, out: list[Action]) -> None:
        if offset > st.next:
            st.next = offset
        super().accept(st, offset, content, out)

    def plan_fetch(self, st: ConsumedPartition, now: int, out: list[Action]) -> None:
        return None


class HelloWithoutSubscriptionConsumer(Consumer):
    """Breaks ``dafka.consumer.no-hello-without-subscription``: answers every STORE-HELLO with a
    CONSUMER-HELLO, with empty subjects when it has no topic."""

    def hello(self, store: str) -> list[Action]:
        return [self.send("CONSUMER-HELLO", {"topic": store, "address": self.address,
                                             "subjects": list(self.topics)})]


class NoGetHeadsConsumer(Consumer):
    """Breaks ``dafka.consumer.get-heads-on-subscribe``: never sends GET-HEADS."""

    def get_heads(self, topic: str) -> list[Action]:
        return []


# ---- shared helpers of the mutants below ---------------------------------------------------


class _Rewrites(DafkaNode):
    """Changes the fields of the commands named in ``rewrite`` before they are encoded."""

    def rewrite(self, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        return fields

    def encode(self, name: str, fields: dict[str, Any]) -> list[bytes]:
        return super().encode(name, self.rewrite(name, dict(fields)))


class _DropsSubscriptions(DafkaNode):
    """Leaves out of its peer subscriptions those that start with one of ``dropped`` (ids)."""

    dropped: tuple[bytes, ...] = ()

    def peer_subscriptions(self) -> list[bytes]:
        return [s for s in super().peer_subscriptions() if s[:1] not in self.dropped]


class _Sockets(DafkaNode):
    """Changes its socket specs: ``unconnected`` sockets connect to nothing."""

    unconnected: tuple[str, ...] = ()

    def sockets(self) -> list[SocketSpec]:
        return [SocketSpec(s.name, s.type, bind=s.bind, connect=() if s.name in self.unconnected else s.connect,
                           subscribe=s.subscribe, identity=s.identity, hwm=s.hwm, xpub_verbose=s.xpub_verbose,
                           welcome=s.welcome) for s in super().sockets()]


def _version_at(frames: list[bytes], strict: bool) -> tuple[int, int]:
    """(frame, octet) of the version octet of a Dafka command."""
    if strict:
        return 1, 3
    return 0, bytes(frames[0]).index(b"\x00", 1) + 1


# ---- producer: more ------------------------------------------------------------------------


class WrongVersionProducer(_Rewrites, Producer):
    """Breaks ``dafka.wire.version``: every command carries version 2 instead of 1."""

    def rewrite(self, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        fields["version"] = 2
        return fields


class ShortSequenceProducer(Producer):
    """Breaks ``dafka.wire.grammar``: the sequence of its HEAD is 4 octets, not number-8."""

    def encode(self, name: str, fields: dict[str, Any]) -> list[bytes]:
        frames = super().encode(name, fields)
        if name == "HEAD":
            frames[-1] = frames[-1][:-4]
        return frames


class NoTopicFrameProducer(Producer):
    """Breaks ``dafka.wire.topic-frame`` in strict mode: its commands start with the body, without
    the topic frame. The codec cannot tell such a message from one with an unknown command id,
    so the harness reports ``dafka.wire.grammar`` (``ALSO_BREAKS``)."""

    def encode(self, name: str, fields: dict[str, Any]) -> list[bytes]:
        frames = super().encode(name, fields)
        return frames[1:] if self.dialect == "strict" else frames


class SplitContentProducer(Producer):
    """Breaks ``dafka.wire.single-frame-content``: the content of RECORD and DIRECT-RECORD
    travels as two frames."""

    def encode(self, name: str, fields: dict[str, Any]) -> list[bytes]:
        frames = super().encode(name, fields)
        if name in ("RECORD", "DIRECT-RECORD"):
            content = frames.pop()
            frames += [content[:1], content[1:]]
        return frames


class RecordByAddressProducer(_Rewrites, Producer):
    """Breaks ``dafka.wire.topic-record``: publishes its RECORDs on M + its address instead of
    M + the topic name."""

    def rewrite(self, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        if name == "RECORD":
            fields["topic"] = self.address
        return fields


class HeadByPartitionProducer(_Rewrites, Producer):
    """Breaks ``dafka.wire.topic-head``: publishes HEAD on H + its address (the partition), as
    the HEAD section's sentence says, which no consumer subscribes to (E-DAFKA-05)."""

    def rewrite(self, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        if name == "HEAD":
            fields["topic"] = self.address
        return fields


class DirectRecordBySenderProducer(_Rewrites, Producer):
    """Breaks ``dafka.wire.topic-direct-record``: sends DIRECT-RECORD on D + its own address, as
    the DIRECT-RECORD section's sentence says, not D + the requestor's (E-DAFKA-07)."""

    def rewrite(self, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        if name == "DIRECT-RECORD":
            fields["topic"] = self.address
        return fields


class DirectHeadBySenderProducer(_Rewrites, Producer):
    """Breaks ``dafka.wire.topic-direct-head``: sends DIRECT-HEAD on E + its own address, as the
    DIRECT-HEAD section's sentence says, not E + the requestor's (E-DAFKA-08)."""

    def rewrite(self, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        if name == "DIRECT-HEAD":
            fields["topic"] = self.address
        return fields


class HeadNextOffsetProducer(_Rewrites, Producer):
    """Breaks ``dafka.producer.head-sequence``: its HEAD carries the next offset, not the last
    published one."""

    def rewrite(self, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        if name == "HEAD":
            fields["sequence"] = fields["sequence"] + 1
        return fields


class IgnoresGetHeadsProducer(Producer):
    """Breaks ``dafka.producer.direct-head-reply``: subscribes to GET-HEADS for its topic but
    never answers with a DIRECT-HEAD."""

    def on_get_heads(self, msg: Message) -> list[Action]:
        return []


class FetchOffByOneProducer(Producer):
    """Breaks ``dafka.fetch.direct-record-reply``: answers a FETCH for offsets s..s+c-1 with the
    records s+1..s+c, so the first requested record never comes."""

    def fetch_order(self, offsets: list[int]) -> list[int]:
        return [o + 1 for o in offsets if o + 1 in self.records]


class OtherBeaconIdProducer(Producer):
    """Breaks ``dafka.partition.name-is-producer-uuid``: announces another identifier in its
    beacon than the address that names its partition."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.beacon_id = new_address(self.rng)

    def beacon(self) -> Send:
        frames = self.codec.encode("BEACON", {"sender": self.beacon_id, "host": self.host, "port": self.port})
        return Send(TOWER_PUB, frames, "BEACON", {"topic": None, "seq": None})


class SecondTopicProducer(_Rewrites, Producer):
    """Breaks ``dafka.partition.one-partition-per-producer``: from its seventh record on (offset
    6) it publishes to a second topic, ``<topic>-2``, under the same address."""

    def rewrite(self, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        if name == "RECORD" and fields["sequence"] >= 6:
            fields["topic"] = fields["subject"] = f"{fields['subject']}-2"
        return fields


class ImpostorProducer(Producer):
    """Breaks ``dafka.partition.single-producer``: takes the address of the first node it
    discovers in its first second as its own (beacons, subscriptions and records alike), so it
    publishes to that node's partition. It announces itself once it has taken it, or after
    that second under its own address."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.original = self.address
        self.adopted = False
        self.until: int | None = None

    def _quiet(self, out: list[Action], now: int) -> list[Action]:
        if self.adopted or (self.until is not None and now >= self.until):
            return out
        return [a for a in out if not (isinstance(a, Send) and a.msg_type == "BEACON")]

    def start(self, now: int) -> list[Action]:
        self.until = now + 1_000_000_000
        return self._quiet(super().start(now), now)

    def handle_timer(self, now: int) -> list[Action]:
        return self._quiet(super().handle_timer(now), now)

    def _on_tower(self, msg: Message, frames: list[bytes], now: int) -> list[Action]:
        mine, self.address = self.address, self.original  # the node it copies is still a peer
        try:
            out = super()._on_tower(msg, frames, now)
        finally:
            self.address = mine
        if not self.adopted and now < (self.until or 0) and any(isinstance(a, Connect) for a in out):
            old, self.address, self.adopted = self.address, msg["sender"], True
            for cmd in ("ACK", "FETCH"):
                out += [Unsubscribe(PEER_SUB, subscription(cmd, old)), Subscribe(PEER_SUB, subscription(cmd, self.address))]
            out.append(self.beacon())
        return self._quiet(out, now)


class RecordsAsDirectProducer(Producer):
    """Breaks ``dafka.record.publish-with-record``: publishes its records as DIRECT-RECORD
    (on D + the topic name), not with the RECORD command."""

    def encode(self, name: str, fields: dict[str, Any]) -> list[bytes]:
        return super().encode("DIRECT-RECORD" if name == "RECORD" else name, fields)


class NoFetchSubscriptionProducer(_DropsSubscriptions, Producer):
    """Breaks ``dafka.subscription.producer-fetch``: does not subscribe to FETCH."""

    dropped = (COMMAND_IDS["FETCH"],)


class NoAckSubscriptionProducer(_DropsSubscriptions, Producer):
    """Breaks ``dafka.subscription.producer-ack``: does not subscribe to ACK."""

    dropped = (COMMAND_IDS["ACK"],)


class XpubElsewhereProducer(Producer):
    """Breaks ``dafka.interconnect.xpub-bind``: binds its XPUB on another port than the one it
    is given and announces (port 0: any free one), so no other node reaches it."""

    def sockets(self) -> list[SocketSpec]:
        other = self.bind.rsplit(":", 1)[0] + ":0"
        return [SocketSpec(s.name, s.type, bind=(other,), xpub_verbose=s.xpub_verbose) if s.name == XPUB else s
                for s in super().sockets()]


# ---- store: more ---------------------------------------------------------------------------


class NoTowerSocketsStore(_Sockets, Store):
    """Breaks ``dafka.interconnect.tower-sockets``: its PUB and SUB for the towers connect to
    nothing, so it neither beacons nor hears of other nodes."""

    unconnected = (TOWER_PUB, TOWER_SUB)


class DeafToTowerStore(_Sockets, Store):
    """Breaks ``dafka.interconnect.tower-sub-connect``: its SUB for the towers connects to
    nothing (it still beacons), so it never discovers another node."""

    unconnected = (TOWER_SUB,)


class AcceptsAnyVersionStore(Store):
    """Breaks ``dafka.wire.version-discard``: takes a command of any version as version 1."""

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        if socket == PEER_SUB and frames and frames[0][:1] in COMMAND_IDS.values():
            try:
                f, i = _version_at(frames, self.dialect == "strict")
                if len(frames[f]) > i:
                    frames = list(frames)
                    frames[f] = frames[f][:i] + b"\x01" + frames[f][i + 1:]
            except (ValueError, IndexError):
                pass
        return super().receive(socket, frames, now)


class AcceptsZreSignatureStore(Store):
    """Breaks ``dafka.wire.signature-discard`` (strict mode): takes a command that starts with
    ``AA A0`` (the document's Protocol Signature section) as if it started with ``AA A5``."""

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        if socket == PEER_SUB and len(frames) > 1 and frames[1][:2] == ZRE_COPY_SIGNATURE:
            frames = [frames[0], SIGNATURE + frames[1][2:], *frames[2:]]
        return super().receive(socket, frames, now)


class AckByTopicStore(_Rewrites, Store):
    """Breaks ``dafka.wire.topic-ack``: publishes its ACKs on K + the topic name, not K + the
    producer's address (the partition)."""

    def rewrite(self, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        if name == "ACK":
            fields["topic"] = fields["subject"]
        return fields


class HelloToItselfStore(_Rewrites, Store):
    """Breaks ``dafka.wire.topic-store-hello``: sends STORE-HELLO on L + its own address, not
    L + the consumer's."""

    def rewrite(self, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        if name == "STORE-HELLO":
            fields["topic"] = self.address
        return fields


class NoFetchStore(Store):
    """Breaks ``dafka.fetch.on-gap``: never FETCHes the records it finds missing."""

    def plan_fetch(self, st: StoredPartition, now: int, out: list[Action]) -> None:
        return None


class FetchFromZeroStore(Store):
    """Breaks ``dafka.fetch.first-missed-and-count``: on a gap it FETCHes the whole partition,
    from offset 0 up to the highest it knows of, not from the first missed record."""

    def plan_fetch(self, st: StoredPartition, now: int, out: list[Action]) -> None:
        first, last = st.held.missing(0, st.known_head)
        if first > last:
            st.fetch.fetch_at = None
            return
        if st.fetch.fetch_at is not None and now < st.fetch.fetch_at + self.fetch_retry_ns:
            return
        st.fetch.fetch_at = now
        out.append(self.send("FETCH", {"topic": st.partition, "address": self.address, "subject": st.topic,
                                       "sequence": 0, "count": st.known_head + 1}, st.topic, 0, st.partition))


class FetchByRequestorStore(_Rewrites, Store):
    """Breaks ``dafka.wire.topic-fetch``: publishes FETCH on F + its own address, as the FETCH
    section's sentence says ("the consumers address"), which no producer subscribes to
    (E-DAFKA-06)."""

    def rewrite(self, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        if name == "FETCH":
            fields["topic"] = self.address
        return fields


class HeadsByPrefixStore(Store):
    """Breaks ``dafka.store.direct-head-per-partition``: answers GET-HEADS for a topic with the
    heads of every topic whose name starts with it (a prefix match, E-DAFKA-20)."""

    def heads_for(self, topic: str, requestor: str) -> list[Action]:
        out: list[Action] = []
        for t in dict.fromkeys(st.topic for st in self.parts.values() if st.topic.startswith(topic)):
            out.extend(super().heads_for(t, requestor))
        return out


class NoRecordSubscriptionStore(_DropsSubscriptions, Store):
    """Breaks ``dafka.subscription.store-record``: does not subscribe to RECORD."""

    dropped = (COMMAND_IDS["RECORD"],)


class NoHeadSubscriptionStore(_DropsSubscriptions, Store):
    """Breaks ``dafka.subscription.store-head``: does not subscribe to HEAD."""

    dropped = (COMMAND_IDS["HEAD"],)


class NoDirectRecordSubscriptionStore(_DropsSubscriptions, Store):
    """Breaks ``dafka.subscription.store-direct-record``: does not subscribe to the
    DIRECT-RECORDs addressed to it."""

    dropped = (COMMAND_IDS["DIRECT-RECORD"],)


class NoFetchSubscriptionStore(_DropsSubscriptions, Store):
    """Breaks ``dafka.subscription.store-fetch``: does not subscribe to FETCH."""

    dropped = (COMMAND_IDS["FETCH"],)


class NoGetHeadsSubscriptionStore(_DropsSubscriptions, Store):
    """Breaks ``dafka.subscription.store-get-heads``: does not subscribe to GET-HEADS."""

    dropped = (COMMAND_IDS["GET-HEADS"],)


class NoHelloSubscriptionStore(_DropsSubscriptions, Store):
    """Breaks ``dafka.subscription.store-consumer-hello``: does not subscribe to CONSUMER-HELLO."""

    dropped = (COMMAND_IDS["CONSUMER-HELLO"],)


# ---- consumer: more ------------------------------------------------------------------------


class MuteToTowerConsumer(_Sockets, Consumer):
    """Breaks ``dafka.interconnect.tower-pub-connect``: its PUB for the towers connects to
    nothing, so its beacons reach no tower."""

    unconnected = (TOWER_PUB,)


class BeaconOnceConsumer(Consumer):
    """Breaks ``dafka.interconnect.address-beacon``: announces itself when it starts, when a
    tower greets it and once an interval later, never again."""

    def handle_timer(self, now: int) -> list[Action]:
        out = super().handle_timer(now)
        if any(isinstance(a, Send) and a.msg_type == "BEACON" for a in out):
            self.deadlines["beacon"] = None
        return out


class NoConnectConsumer(Consumer):
    """Breaks ``dafka.interconnect.connect-on-discovery``: learns of other nodes from the tower
    but never connects its SUB socket to them."""

    def _on_tower(self, msg: Message, frames: list[bytes], now: int) -> list[Action]:
        return [a for a in super()._on_tower(msg, frames, now) if not isinstance(a, (Connect, Disconnect))]

    def _expire(self, now: int, out: list[Action]) -> None:
        mark = len(out)
        super()._expire(now, out)
        out[mark:] = [a for a in out[mark:] if not isinstance(a, Disconnect)]


class HeadsByAddressConsumer(_Rewrites, Consumer):
    """Breaks ``dafka.wire.topic-get-heads``: sends GET-HEADS on G + its own address, not G + the
    topic name."""

    def rewrite(self, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        if name == "GET-HEADS":
            fields["topic"] = self.address
        return fields


class EmptyHelloConsumer(_Rewrites, Consumer):
    """Breaks ``dafka.consumer.hello-subjects``: its CONSUMER-HELLO lists no topic, although it
    is subscribed to some."""

    def rewrite(self, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        if name == "CONSUMER-HELLO":
            fields["subjects"] = []
        return fields


class HelloToItselfConsumer(_Rewrites, Consumer):
    """Breaks ``dafka.wire.topic-consumer-hello``: sends CONSUMER-HELLO on W + its own address,
    not W + the store's."""

    def rewrite(self, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        if name == "CONSUMER-HELLO":
            fields["topic"] = self.address
        return fields


class NoHelloReplyConsumer(Consumer):
    """Breaks ``dafka.consumer.hello-reply`` (a SHOULD): never answers a STORE-HELLO."""

    def hello(self, store: str) -> list[Action]:
        return []


class NoRecordSubscriptionConsumer(Consumer):
    """Breaks ``dafka.subscription.consumer-record``: does not subscribe to the RECORDs of its
    topics."""

    def topic_subscriptions(self, topic: str) -> list[bytes]:
        return [s for s in super().topic_subscriptions(topic) if s[:1] != COMMAND_IDS["RECORD"]]


class NoHeadSubscriptionConsumer(Consumer):
    """Breaks ``dafka.subscription.consumer-head``: does not subscribe to the HEADs of its
    topics."""

    def topic_subscriptions(self, topic: str) -> list[bytes]:
        return [s for s in super().topic_subscriptions(topic) if s[:1] != COMMAND_IDS["HEAD"]]


class NoDirectRecordSubscriptionConsumer(_DropsSubscriptions, Consumer):
    """Breaks ``dafka.subscription.consumer-direct-record``: does not subscribe to the
    DIRECT-RECORDs addressed to it."""

    dropped = (COMMAND_IDS["DIRECT-RECORD"],)


class NoDirectHeadSubscriptionConsumer(_DropsSubscriptions, Consumer):
    """Breaks ``dafka.subscription.consumer-direct-head``: does not subscribe to the DIRECT-HEADs
    addressed to it."""

    dropped = (COMMAND_IDS["DIRECT-HEAD"],)


class NoStoreHelloSubscriptionConsumer(_DropsSubscriptions, Consumer):
    """Breaks ``dafka.subscription.consumer-store-hello``: does not subscribe to the STORE-HELLOs
    addressed to it."""

    dropped = (COMMAND_IDS["STORE-HELLO"],)


# ---- registry ----------------------------------------------------------------------------

MUTANTS: dict[str, tuple[str, Callable[[NodeContext], Any], str]] = {
    "skip-offset": ("producer", SkipOffsetProducer, "dafka.record.offset-increments"),
    "offset-one": ("producer", OffsetOneProducer, "dafka.record.offset-starts-at-zero"),
    "early-release": ("producer", EarlyReleaseProducer, "dafka.producer.keep-until-ack"),
    "descending-fetch-producer": ("producer", DescendingFetchProducer, "dafka.fetch.ascending-order"),
    "no-head": ("producer", NoHeadProducer, "dafka.producer.head-interval"),
    "wrong-signature": ("producer", WrongSignatureProducer, "dafka.wire.signature"),
    "descending-fetch-store": ("store", DescendingFetchStore, "dafka.fetch.ascending-order"),
    "memory-store": ("store", MemoryStore, "dafka.fetch.direct-record-reply"),
    "no-store-hello": ("store", NoHelloStore, "dafka.store.hello-on-subscription"),
    "duplicate-delivery": ("consumer", DuplicateDeliveryConsumer, "dafka.record.offset-increments"),
    "out-of-order": ("consumer", OutOfOrderConsumer, "dafka.record.offset-increments"),
    "skip-gaps": ("consumer", SkipGapConsumer, "dafka.fetch.on-gap"),
    "hello-without-subscription": ("consumer", HelloWithoutSubscriptionConsumer,
                                   "dafka.consumer.no-hello-without-subscription"),
    "no-get-heads": ("consumer", NoGetHeadsConsumer, "dafka.consumer.get-heads-on-subscribe"),
    # producer
    "wrong-version": ("producer", WrongVersionProducer, "dafka.wire.version"),
    "short-sequence": ("producer", ShortSequenceProducer, "dafka.wire.grammar"),
    "no-topic-frame": ("producer", NoTopicFrameProducer, "dafka.wire.topic-frame"),
    "split-content": ("producer", SplitContentProducer, "dafka.wire.single-frame-content"),
    "record-by-address": ("producer", RecordByAddressProducer, "dafka.wire.topic-record"),
    "head-by-partition": ("producer", HeadByPartitionProducer, "dafka.wire.topic-head"),
    "direct-record-by-sender": ("producer", DirectRecordBySenderProducer, "dafka.wire.topic-direct-record"),
    "direct-head-by-sender": ("producer", DirectHeadBySenderProducer, "dafka.wire.topic-direct-head"),
    "head-next-offset": ("producer", HeadNextOffsetProducer, "dafka.producer.head-sequence"),
    "ignores-get-heads": ("producer", IgnoresGetHeadsProducer, "dafka.producer.direct-head-reply"),
    "fetch-off-by-one": ("producer", FetchOffByOneProducer, "dafka.fetch.direct-record-reply"),
    "other-beacon-id": ("producer", OtherBeaconIdProducer, "dafka.partition.name-is-producer-uuid"),
    "second-topic": ("producer", SecondTopicProducer, "dafka.partition.one-partition-per-producer"),
    "impostor": ("producer", ImpostorProducer, "dafka.partition.single-producer"),
    "records-as-direct": ("producer", RecordsAsDirectProducer, "dafka.record.publish-with-record"),
    "no-fetch-subscription": ("producer", NoFetchSubscriptionProducer, "dafka.subscription.producer-fetch"),
    "no-ack-subscription": ("producer", NoAckSubscriptionProducer, "dafka.subscription.producer-ack"),
    "xpub-elsewhere": ("producer", XpubElsewhereProducer, "dafka.interconnect.xpub-bind"),
    # store
    "no-tower-sockets": ("store", NoTowerSocketsStore, "dafka.interconnect.tower-sockets"),
    "deaf-to-tower": ("store", DeafToTowerStore, "dafka.interconnect.tower-sub-connect"),
    "accepts-any-version": ("store", AcceptsAnyVersionStore, "dafka.wire.version-discard"),
    "accepts-zre-signature": ("store", AcceptsZreSignatureStore, "dafka.wire.signature-discard"),
    "ack-by-topic": ("store", AckByTopicStore, "dafka.wire.topic-ack"),
    "store-hello-to-itself": ("store", HelloToItselfStore, "dafka.wire.topic-store-hello"),
    "no-fetch-store": ("store", NoFetchStore, "dafka.fetch.on-gap"),
    "fetch-from-zero": ("store", FetchFromZeroStore, "dafka.fetch.first-missed-and-count"),
    "fetch-by-requestor": ("store", FetchByRequestorStore, "dafka.wire.topic-fetch"),
    "heads-by-prefix": ("store", HeadsByPrefixStore, "dafka.store.direct-head-per-partition"),
    "no-record-subscription-store": ("store", NoRecordSubscriptionStore, "dafka.subscription.store-record"),
    "no-head-subscription-store": ("store", NoHeadSubscriptionStore, "dafka.subscription.store-head"),
    "no-direct-record-subscription-store": ("store", NoDirectRecordSubscriptionStore,
                                            "dafka.subscription.store-direct-record"),
    "no-fetch-subscription-store": ("store", NoFetchSubscriptionStore, "dafka.subscription.store-fetch"),
    "no-get-heads-subscription": ("store", NoGetHeadsSubscriptionStore, "dafka.subscription.store-get-heads"),
    "no-hello-subscription": ("store", NoHelloSubscriptionStore, "dafka.subscription.store-consumer-hello"),
    # consumer
    "mute-to-tower": ("consumer", MuteToTowerConsumer, "dafka.interconnect.tower-pub-connect"),
    "beacon-once": ("consumer", BeaconOnceConsumer, "dafka.interconnect.address-beacon"),
    "no-connect": ("consumer", NoConnectConsumer, "dafka.interconnect.connect-on-discovery"),
    "heads-by-address": ("consumer", HeadsByAddressConsumer, "dafka.wire.topic-get-heads"),
    "empty-hello": ("consumer", EmptyHelloConsumer, "dafka.consumer.hello-subjects"),
    "consumer-hello-to-itself": ("consumer", HelloToItselfConsumer, "dafka.wire.topic-consumer-hello"),
    "no-hello-reply": ("consumer", NoHelloReplyConsumer, "dafka.consumer.hello-reply"),
    "no-record-subscription-consumer": ("consumer", NoRecordSubscriptionConsumer, "dafka.subscription.consumer-record"),
    "no-head-subscription-consumer": ("consumer", NoHeadSubscriptionConsumer, "dafka.subscription.consumer-head"),
    "no-direct-record-subscription-consumer": ("consumer", NoDirectRecordSubscriptionConsumer,
                                               "dafka.subscription.consumer-direct-record"),
    "no-direct-head-subscription": ("consumer", NoDirectHeadSubscriptionConsumer,
                                    "dafka.subscription.consumer-direct-head"),
    "no-store-hello-subscription": ("consumer", NoStoreHelloSubscriptionConsumer,
                                    "dafka.subscription.consumer-store-hello"),
}

# What else a mutant's conformance failures may be attributed to, and why.
ALSO_BREAKS: dict[str, dict[str, str]] = {
    "no-topic-frame": {"dafka.wire.grammar": "a message whose first frame is the body starts with the signature "
                                             "AA A5: the codec cannot tell it from a message with an unknown "
                                             "command id, which is a grammar error (E-DAFKA-03)"},
}

# Mutants that differ from the reference only in some dialects (in the others they are it).
DIALECTS: dict[str, tuple[str, ...]] = {
    "wrong-signature": ("strict",),  # dafka:zproto has no signature
    "no-topic-frame": ("strict",),  # in dafka:zproto the topic is not a frame of its own
    "accepts-zre-signature": ("strict",),
}

# Mutants no conformance suite can see (see the module docstring): the chaos checkers catch them.
OUT_OF_REACH: dict[str, str] = {
    "memory-store": "durability across a restart is not on the wire: a store whose state does not survive a "
                    "process restart (the standalone reference store too: its DurableStore lives in memory) "
                    "answers exactly like this mutant; the acked-retrievable checker catches it in scenarios",
    "duplicate-delivery": "what a consumer hands to its application is not on the wire; the consumer-order "
                          "checker catches it in scenarios",
    "out-of-order": "what a consumer hands to its application is not on the wire; the consumer-order checker "
                    "catches it in scenarios",
}
