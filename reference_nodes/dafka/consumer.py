"""Dafka reference consumer (specs/dafka-46.md with docs/errata.md).

Topics come from ``config["topics"]`` and from the application::

    {"op": "subscribe", "topic": "weather"}
    {"op": "status"}                          # Deliver("consumer-status")

Subscriptions (``peer_sub``, Consumer Subscriptions): ``D``, ``E`` and ``L`` + its address, and
for each topic ``M`` + topic and ``H`` + topic. Topics and addresses are compared exactly
(E-DAFKA-20): ``M`` + ``foo`` also matches ``foobar``, whose records are ignored.

- Subscribing to a topic sends GET-HEADS (topic ``G`` + topic name,
  ``dafka.consumer.get-heads-on-subscribe``). GET-HEADS is sent again for the topics a new
  ``G`` subscription on its XPUB covers (a store or producer just connected to it and would
  have missed the first one), and every ``get_heads_ms`` (default 5000, 0 = never) so that a
  lost answer does not leave a partition of a dead producer unknown.
- STORE-HELLO addressed to it: CONSUMER-HELLO, topic ``W`` + the store's address, subjects =
  its topics, but only when it has topics (``dafka.consumer.no-hello-without-subscription``).
  A ``W`` + store address subscription on its XPUB (zeromq/dafka stores subscribe that way)
  gets the same CONSUMER-HELLO.
- Per (topic, partition) it keeps the next offset to deliver. A partition seen for the first
  time starts (Note ``partition-start``) at offset 0 with ``offset_reset: earliest``; with
  ``latest``, at the offset of the RECORD that revealed it, or after the sequence of the HEAD /
  DIRECT-HEAD that did.
- RECORD, DIRECT-RECORD (addressed to it): the record at the next offset is delivered, with
  every buffered record that follows it; a later one is buffered; an earlier or buffered one is
  a duplicate and dropped (several nodes may answer a FETCH, E-DAFKA-19). Delivery is
  ``Deliver("record", {"topic", "partition", "offset", "content", "corr"})``: each record of
  each partition exactly once, in offset order (``corr``: the correlation id its content
  carries, `common.corr_of`, for the trace).
- Gaps (``dafka.fetch.on-gap``): RECORD, HEAD, DIRECT-HEAD and DIRECT-RECORD tell the highest
  offset that exists; the missing offsets from the next one up to it are FETCHed (topic ``F`` +
  partition, address = the consumer, sequence = first missing, count up to the last missing);
  again after ``fetch_retry_ms`` while still missing. Producer and stores answer.

Durability: the next offset of every partition and the topics subscribed by command are kept
in ``ctx.store`` (``pos/<topic hex>/<partition hex>``, ``topics``), written in the same handler
that delivers, so a restarted consumer delivers neither a record twice nor out of order. Its
address is new at every start (a new UUID from the incarnation's rng), as in zeromq/dafka.

Config: ``topics`` (list, default none), ``offset_reset`` (``"earliest"`` | ``"latest"``,
default ``"earliest"``), ``fetch_retry_ms`` (500), ``get_heads_ms`` (5000; 0 = only on
subscription and on new ``G`` subscriptions), plus the shared keys of
`reference_nodes.dafka.common`.
"""

from __future__ import annotations

from typing import Any

from harness.node import Action, Deliver, NodeContext, Note, Subscribe
from harness.protocols.codec import Message
from harness.protocols.dafka import Subscription, subscription
from reference_nodes.dafka.common import (
    DEFAULT_FETCH_RETRY_MS, PEER_SUB, DafkaNode, FetchState, Runs, corr_of, ms_to_ns, positive_ms, raw,
    set_of_topics, topic_name, unraw,
)

DEFAULT_GET_HEADS_MS = 5000
RESETS = ("earliest", "latest")


class ConsumedPartition:
    """What the consumer knows of one (topic, partition)."""

    __slots__ = ("topic", "partition", "next", "known_head", "buffer", "buffered", "fetch", "key")

    def __init__(self, topic: str, partition: str, next_offset: int) -> None:
        self.topic = topic
        self.partition = partition
        self.next = next_offset  # the next offset to deliver
        self.known_head = next_offset - 1  # highest offset known to exist
        self.buffer: dict[int, bytes] = {}  # records above ``next`` waiting for the gap
        self.buffered = Runs()  # their offsets
        self.fetch = FetchState()
        self.key = f"pos/{raw(topic).hex()}/{raw(partition).hex()}"


class Consumer(DafkaNode):
    role = "consumer"

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        cfg = self.config
        self.offset_reset = str(cfg.get("offset_reset", "earliest"))
        if self.offset_reset not in RESETS:
            raise ValueError(f"dafka consumer config 'offset_reset' must be one of {RESETS}, got {self.offset_reset!r}")
        self.fetch_retry_ns = positive_ms(cfg.get("fetch_retry_ms", DEFAULT_FETCH_RETRY_MS), "fetch_retry_ms")
        self.get_heads_ns = ms_to_ns(cfg.get("get_heads_ms", DEFAULT_GET_HEADS_MS), "get_heads_ms")
        topics = cfg.get("topics", [])
        if isinstance(topics, (str, bytes)):
            topics = [topics]
        stored = [unraw(t) for t in self.store.get("topics", [])]
        self.topics: list[str] = set_of_topics([*topics, *stored])
        self.parts: dict[tuple[str, str], ConsumedPartition] = {}
        self.delivered = 0
        for key in list(self.store.keys("pos/")):
            _, t, p = key.split("/")
            topic, partition = unraw(bytes.fromhex(t)), unraw(bytes.fromhex(p))
            self.parts[(topic, partition)] = ConsumedPartition(topic, partition, int(self.store.get(key)))
        self.deadlines["get_heads"] = None

    # ---- sockets ---------------------------------------------------------------------------

    def peer_subscriptions(self) -> list[bytes]:
        subs = [subscription("DIRECT-RECORD", self.address), subscription("DIRECT-HEAD", self.address),
                subscription("STORE-HELLO", self.address)]
        for t in self.topics:
            subs += self.topic_subscriptions(t)
        return subs

    def topic_subscriptions(self, topic: str) -> list[bytes]:
        return [subscription("RECORD", topic), subscription("HEAD", topic)]

    def on_start(self, now: int) -> list[Action]:
        out: list[Action] = []
        for t in self.topics:
            out.extend(self.get_heads(t))
        if self.get_heads_ns and self.topics:
            self.deadlines["get_heads"] = now + self.get_heads_ns
        return out

    def get_heads(self, topic: str) -> list[Action]:
        return [self.send("GET-HEADS", {"topic": topic, "address": self.address}, topic)]

    # ---- the application -----------------------------------------------------------------------

    def on_command(self, op: Any, request: dict[str, Any], now: int) -> list[Action]:
        if op != "subscribe":
            raise ValueError(f"dafka consumer: unknown command {op!r} (known: 'subscribe', 'status')")
        if "topic" not in request:
            raise ValueError("dafka consumer: 'subscribe' needs a 'topic'")
        topic = topic_name(request["topic"])
        if topic in self.topics:
            return []
        self.topics.append(topic)
        stored = self.store.get("topics", [])
        stored.append(raw(topic))
        self.store.put("topics", stored)
        out: list[Action] = [Subscribe(PEER_SUB, s) for s in self.topic_subscriptions(topic)]
        out.extend(self.get_heads(topic))
        if self.get_heads_ns and self.deadlines["get_heads"] is None:
            self.deadlines["get_heads"] = now + self.get_heads_ns
        return out

    def status(self) -> dict[str, Any]:
        s = super().status()
        s.update({"topics": list(self.topics), "delivered": self.delivered,
                  "partitions": {f"{st.topic}/{st.partition}": {"next": st.next, "known_head": st.known_head,
                                                                "buffered": len(st.buffer)}
                                 for st in self.parts.values()}})
        return s

    # ---- peers -------------------------------------------------------------------------------

    def on_message(self, msg: Message, frames: list[bytes], now: int) -> list[Action]:
        name = msg.name
        if name == "RECORD" or name == "HEAD":
            if msg["topic"] != msg["subject"]:
                clause = "dafka.wire.topic-record" if name == "RECORD" else "dafka.wire.topic-head"
                return [self.inconsistent_topic(frames, msg, clause)]
            if msg["subject"] not in self.topics:
                return []  # a topic our prefix subscription matched but we did not ask for
            if name == "RECORD":
                return self.on_record(msg["subject"], msg["address"], msg["sequence"], msg["content"], now)
            return self.on_head(msg["subject"], msg["address"], msg["sequence"], now)
        if name == "DIRECT-RECORD" or name == "DIRECT-HEAD" or name == "STORE-HELLO":
            if msg["topic"] != self.address:
                return []  # for a node whose address ours prefixes (E-DAFKA-20)
            if name == "STORE-HELLO":
                return self.hello(msg["address"])
            if msg["subject"] not in self.topics:
                return []
            if name == "DIRECT-RECORD":
                return self.on_record(msg["subject"], msg["address"], msg["sequence"], msg["content"], now)
            return self.on_head(msg["subject"], msg["address"], msg["sequence"], now)
        return [self.unexpected(frames, msg)]

    def hello(self, store: str) -> list[Action]:
        if not self.topics:
            return []  # dafka.consumer.no-hello-without-subscription
        return [self.send("CONSUMER-HELLO", {"topic": store, "address": self.address,
                                             "subjects": list(self.topics)})]

    def _part(self, topic: str, partition: str, start: int, out: list[Action]) -> ConsumedPartition:
        st = self.parts.get((topic, partition))
        if st is None:
            st = self.parts[(topic, partition)] = ConsumedPartition(topic, partition, start)
            self.store.put(st.key, start)
            out.append(Note("partition-start", {"topic": topic, "partition": partition, "offset": start,
                                                "reset": self.offset_reset}))
        return st

    def on_record(self, topic: str, partition: str, offset: int, content: bytes, now: int) -> list[Action]:
        out: list[Action] = []
        st = self._part(topic, partition, 0 if self.offset_reset == "earliest" else offset, out)
        if offset > st.known_head:
            st.known_head = offset
        self.accept(st, offset, content, out)
        self.plan_fetch(st, now, out)
        return out

    def on_head(self, topic: str, partition: str, head: int, now: int) -> list[Action]:
        out: list[Action] = []
        st = self._part(topic, partition, 0 if self.offset_reset == "earliest" else head + 1, out)
        if head > st.known_head:
            st.known_head = head
        self.plan_fetch(st, now, out)
        return out

    # ---- delivery (the mutants change these) ---------------------------------------------------

    def accept(self, st: ConsumedPartition, offset: int, content: bytes, out: list[Action]) -> None:
        """A record arrived: deliver it and what it unblocks, buffer it, or drop a duplicate."""
        if offset < st.next or offset in st.buffer:
            return
        if offset > st.next:
            st.buffer[offset] = content
            st.buffered.add(offset)
            return
        self.deliver(st, offset, content, out)
        nxt = offset + 1
        while nxt in st.buffer:
            self.deliver(st, nxt, st.buffer.pop(nxt), out)
            nxt += 1
        st.next = nxt
        st.buffered.discard_below(nxt)
        self.store.put(st.key, nxt)

    def deliver(self, st: ConsumedPartition, offset: int, content: bytes, out: list[Action]) -> None:
        self.delivered += 1
        out.append(Deliver("record", {"topic": st.topic, "partition": st.partition, "offset": offset,
                                      "content": content, "corr": corr_of(content)}))

    def missing(self, st: ConsumedPartition) -> tuple[int, int]:
        return st.buffered.missing(st.next, st.known_head)

    def plan_fetch(self, st: ConsumedPartition, now: int, out: list[Action]) -> None:
        first, last = self.missing(st)
        plan = st.fetch.plan(st.buffered, first, last, now, self.fetch_retry_ns)
        if plan is not None:
            seq, count = plan
            out.append(self.send("FETCH", {"topic": st.partition, "address": self.address, "subject": st.topic,
                                           "sequence": seq, "count": count}, st.topic, seq, st.partition))

    # ---- XPUB subscriptions --------------------------------------------------------------------

    def on_subscription(self, sub: Subscription, now: int) -> list[Action]:
        if not sub.subscribe:
            return []
        if sub.message == "GET-HEADS":
            # A store or producer connected: it missed our GET-HEADS so far.
            out: list[Action] = []
            for t in self.topics:
                if subscription("GET-HEADS", t).startswith(sub.prefix):
                    out.extend(self.get_heads(t))
            return out
        if sub.message == "CONSUMER-HELLO" and sub.topic:
            return self.hello(sub.topic)
        return []

    # ---- timers ------------------------------------------------------------------------------

    def extra_deadline(self) -> int | None:
        times = [d for d in (st.fetch.deadline(self.fetch_retry_ns) for st in self.parts.values()) if d is not None]
        return min(times) if times else None

    def on_timer(self, now: int) -> list[Action]:
        out: list[Action] = []
        due = self.deadlines.get("get_heads")
        if due is not None and now >= due:
            for t in self.topics:
                out.extend(self.get_heads(t))
            self.deadlines["get_heads"] = now + self.get_heads_ns
        for st in self.parts.values():
            due = st.fetch.deadline(self.fetch_retry_ns)
            if due is not None and now >= due:
                self.plan_fetch(st, now, out)
        return out
