"""Dafka reference store (specs/dafka-46.md with docs/errata.md).

Subscriptions (``peer_sub``, Store Subscriptions): ``M`` (every RECORD), ``H`` (every HEAD),
``D`` + its address (DIRECT-RECORD), ``F`` (every FETCH), ``G`` (every GET-HEADS) and ``W``
(every CONSUMER-HELLO; it acts only on those addressed to it, E-DAFKA-18).

- RECORD / DIRECT-RECORD (addressed to it): the record is written to ``ctx.store`` before
  anything else happens, so it survives a crash and restart. Records are kept per
  (topic, partition); offsets may arrive in any order and with gaps.
- ACK (E-DAFKA-17, E-DAFKA-09): cumulative. When the store holds every record 0..n of a
  partition and n grew, it sends ACK, topic ``K`` + partition, address = its own address,
  sequence n. It sends that ACK again on every HEAD of the partition (an ACK may be lost; the
  producer keeps records until one arrives).
- Gaps (``dafka.fetch.on-gap``): the highest offset known to exist comes from RECORD, HEAD and
  DIRECT-RECORD; offsets 0..that not held are FETCHed (topic ``F`` + partition, address = the
  store, sequence = first missing, count up to the last missing), again after
  ``fetch_retry_ms`` while still missing. Other stores answer too.
- FETCH (sequence s, count c = offsets s..s+c-1, E-DAFKA-19): one DIRECT-RECORD per requested
  record it holds, ascending, topic ``D`` + the FETCH's address.
- GET-HEADS (topic ``G`` + topic name, compared exactly, E-DAFKA-20): one DIRECT-HEAD per
  partition of that topic it holds records of, topic ``E`` + the requestor's address.
  The head (E-DAFKA-16) is n such that it holds every record 0..n; when it does not hold
  record 0 (the producer had released it before this store got it), the end of the run of
  offsets that starts at the lowest one it holds.
- CONSUMER-HELLO addressed to it (``W`` + its address): the DIRECT-HEADs of every topic in
  ``subjects``, as for GET-HEADS (E-DAFKA-18). Hellos for other stores are ignored.
- XPUB subscription ``01 'L' <consumer address>``: STORE-HELLO, topic ``L`` + that address
  (``dafka.store.hello-on-subscription``). The XPUB is verbose, so a consumer that reconnects
  is greeted again.

Durable layout in ``ctx.store`` (plain data): ``address`` (the store keeps its address across
restarts), ``part/<i>`` = ``{"topic": bytes, "partition": bytes}``, ``rec/<i>/<offset>`` = the
content. A restarted store rebuilds its index from these keys (Note ``store-loaded``).

Config: ``fetch_retry_ms`` (500), plus the shared keys of `reference_nodes.dafka.common`.
"""

from __future__ import annotations

from typing import Any

from harness.node import Action, DurableStore, NodeContext, Note
from harness.protocols.codec import Message
from harness.protocols.dafka import Subscription, subscription
from reference_nodes.dafka.common import (
    DEFAULT_FETCH_RETRY_MS, DafkaNode, FetchState, Runs, new_address, positive_ms, raw, unraw,
)


class StoredPartition:
    """What the store holds of one (topic, partition)."""

    __slots__ = ("idx", "topic", "partition", "held", "known_head", "fetch", "acked")

    def __init__(self, idx: int | None, topic: str, partition: str) -> None:
        self.idx = idx  # its number in the durable layout; None until its first record
        self.topic = topic
        self.partition = partition
        self.held = Runs()
        self.known_head = -1  # highest offset known to exist
        self.fetch = FetchState()
        self.acked = -1  # highest offset ACKed by this incarnation

    def head(self) -> int:
        """The head reported in DIRECT-HEAD (E-DAFKA-16; see the module docstring)."""
        return self.held.lowest_run_end()


class Store(DafkaNode):
    role = "store"

    def __init__(self, ctx: NodeContext) -> None:
        self.db = self.open_db(ctx)
        super().__init__(ctx)
        self.fetch_retry_ns = positive_ms(self.config.get("fetch_retry_ms", DEFAULT_FETCH_RETRY_MS),
                                          "fetch_retry_ms")
        self.parts: dict[tuple[str, str], StoredPartition] = {}
        self._next_idx = 0
        self.loaded = self._load()

    # ---- durable state (a mutant keeps it in memory) ---------------------------------------------

    def open_db(self, ctx: NodeContext) -> DurableStore:
        return ctx.store

    def make_address(self) -> str:
        stored = self.db.get("address")
        configured = self.config.get("address")
        address = configured if configured is not None else stored
        if address is None:
            address = new_address(self.rng)
        if address != stored:
            self.db.put("address", address)
        return address

    def _load(self) -> int:
        records = 0
        for key in list(self.db.keys("part/")):
            idx = int(key[len("part/"):])
            meta = self.db.get(key)
            st = StoredPartition(idx, unraw(meta["topic"]), unraw(meta["partition"]))
            prefix = f"rec/{idx}/"
            for rk in list(self.db.keys(prefix)):
                st.held.add(int(rk[len(prefix):]))
            st.known_head = max(st.known_head, st.held.ends[-1] if st.held else -1)
            records += len(st.held)
            self.parts[(st.topic, st.partition)] = st
            self._next_idx = max(self._next_idx, idx + 1)
        return records

    def _persist(self, st: StoredPartition, offset: int, content: bytes) -> None:
        if st.idx is None:
            st.idx = self._next_idx
            self._next_idx += 1
            self.db.put(f"part/{st.idx}", {"topic": raw(st.topic), "partition": raw(st.partition)})
        self.db.put(f"rec/{st.idx}/{offset}", content)

    def content(self, st: StoredPartition, offset: int) -> bytes | None:
        if st.idx is None:
            return None
        return self.db.get(f"rec/{st.idx}/{offset}")

    # ---- sockets ---------------------------------------------------------------------------

    def peer_subscriptions(self) -> list[bytes]:
        return [subscription("RECORD"), subscription("HEAD"), subscription("DIRECT-RECORD", self.address),
                subscription("FETCH"), subscription("GET-HEADS"), subscription("CONSUMER-HELLO")]

    def on_start(self, now: int) -> list[Action]:
        if self.parts:
            return [Note("store-loaded", {"partitions": len(self.parts), "records": self.loaded})]
        return []

    def status(self) -> dict[str, Any]:
        s = super().status()
        s["partitions"] = {f"{st.topic}/{st.partition}": {"held": len(st.held), "head": st.head(),
                                                          "prefix": st.held.prefix_end(),
                                                          "known_head": st.known_head}
                           for st in self.parts.values()}
        return s

    # ---- peers -------------------------------------------------------------------------------

    def on_message(self, msg: Message, frames: list[bytes], now: int) -> list[Action]:
        name = msg.name
        if name == "RECORD":
            if msg["topic"] != msg["subject"]:
                return [self.inconsistent_topic(frames, msg, "dafka.wire.topic-record")]
            return self.on_record(msg, now)
        if name == "DIRECT-RECORD":
            if msg["topic"] != self.address:
                return []  # for another node whose address we prefix (E-DAFKA-20)
            return self.on_record(msg, now)
        if name == "HEAD":
            if msg["topic"] != msg["subject"]:
                return [self.inconsistent_topic(frames, msg, "dafka.wire.topic-head")]
            return self.on_head(msg, now)
        if name == "FETCH":
            return self.on_fetch(msg)
        if name == "GET-HEADS":
            return self.heads_for(msg["topic"], msg["address"])
        if name == "CONSUMER-HELLO":
            if msg["topic"] != self.address:
                return []  # a hello for another store (E-DAFKA-18)
            out: list[Action] = []
            for topic in dict.fromkeys(msg["subjects"]):
                out.extend(self.heads_for(topic, msg["address"]))
            return out
        return [self.unexpected(frames, msg)]

    def _part(self, topic: str, partition: str) -> StoredPartition:
        st = self.parts.get((topic, partition))
        if st is None:
            st = self.parts[(topic, partition)] = StoredPartition(None, topic, partition)
        return st

    def on_record(self, msg: Message, now: int) -> list[Action]:
        st = self._part(msg["subject"], msg["address"])
        offset = msg["sequence"]
        if st.held.add(offset):
            self._persist(st, offset, msg["content"])
        if offset > st.known_head:
            st.known_head = offset
        out: list[Action] = []
        head = st.held.prefix_end()
        if head > st.acked:
            out.append(self.ack(st, head))
        self.plan_fetch(st, now, out)
        return out

    def on_head(self, msg: Message, now: int) -> list[Action]:
        st = self._part(msg["subject"], msg["address"])
        if msg["sequence"] > st.known_head:
            st.known_head = msg["sequence"]
        out: list[Action] = []
        head = st.held.prefix_end()
        if head >= 0:
            out.append(self.ack(st, head))  # again: the last one may have been lost
        self.plan_fetch(st, now, out)
        return out

    def ack(self, st: StoredPartition, head: int) -> Action:
        st.acked = max(st.acked, head)
        return self.send("ACK", {"topic": st.partition, "address": self.address, "subject": st.topic,
                                 "sequence": head}, st.topic, head, st.partition)

    def plan_fetch(self, st: StoredPartition, now: int, out: list[Action]) -> None:
        first, last = st.held.missing(0, st.known_head)
        plan = st.fetch.plan(st.held, first, last, now, self.fetch_retry_ns)
        if plan is not None:
            seq, count = plan
            out.append(self.send("FETCH", {"topic": st.partition, "address": self.address, "subject": st.topic,
                                           "sequence": seq, "count": count}, st.topic, seq, st.partition))

    def fetch_order(self, offsets: list[int]) -> list[int]:
        return offsets

    def on_fetch(self, msg: Message) -> list[Action]:
        requestor = msg["address"]
        if requestor == self.address:
            return []
        st = self.parts.get((msg["subject"], msg["topic"]))
        if st is None or not st.held:
            return []
        seq, count = msg["sequence"], msg["count"]
        out: list[Action] = []
        for o in self.fetch_order(st.held.within(seq, seq + count)):
            content = self.content(st, o)
            if content is None:
                continue
            out.append(self.send("DIRECT-RECORD", {"topic": requestor, "address": st.partition,
                                                   "subject": st.topic, "sequence": o, "content": content},
                                 st.topic, o, st.partition))
        return out

    def heads_for(self, topic: str, requestor: str) -> list[Action]:
        """One DIRECT-HEAD per partition of ``topic`` that it holds records of."""
        out: list[Action] = []
        for st in self.parts.values():
            if st.topic == topic and st.held:
                head = st.head()
                out.append(self.send("DIRECT-HEAD", {"topic": requestor, "address": st.partition,
                                                     "subject": topic, "sequence": head},
                                     topic, head, st.partition))
        return out

    # ---- XPUB subscriptions --------------------------------------------------------------------

    def on_subscription(self, sub: Subscription, now: int) -> list[Action]:
        if sub.subscribe and sub.message == "STORE-HELLO" and sub.topic:
            return self.greet(sub.topic)
        return []

    def greet(self, consumer: str) -> list[Action]:
        return [self.send("STORE-HELLO", {"topic": consumer, "address": self.address})]

    # ---- timers ------------------------------------------------------------------------------

    def extra_deadline(self) -> int | None:
        times = [d for d in (st.fetch.deadline(self.fetch_retry_ns) for st in self.parts.values()) if d is not None]
        return min(times) if times else None

    def on_timer(self, now: int) -> list[Action]:
        out: list[Action] = []
        for st in self.parts.values():
            due = st.fetch.deadline(self.fetch_retry_ns)
            if due is not None and now >= due:
                self.plan_fetch(st, now, out)
        return out
