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
"""

from __future__ import annotations

from typing import Any, Callable

from harness.node import Action, DurableStore, NodeContext
from harness.protocols.dafka import COMMAND_IDS, SIGNATURE
from reference_nodes.dafka.consumer import ConsumedPartition, Consumer
from reference_nodes.dafka.producer import Producer
from reference_nodes.dafka.store import Store

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
}
