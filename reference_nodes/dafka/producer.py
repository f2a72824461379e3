"""Dafka reference producer (specs/dafka-46.md with docs/errata.md).

One partition, named by the producer's address (``dafka.partition.name-is-producer-uuid``), on
one topic (``dafka.partition.one-partition-per-producer``): ``config["topic"]``, or the topic
of the first ``produce`` command. Offsets start at 0 and grow by 1 without gaps
(``dafka.record.offset-starts-at-zero``, ``dafka.record.offset-increments``).

The application asks with ``command``::

    {"op": "produce", "topic": "weather", "content": b"sunny"}   # topic optional once known
    {"op": "status"}                                              # Deliver("producer-status")

and the producer publishes ``RECORD`` (topic ``M`` + topic name). From the first record on it
publishes ``HEAD`` (topic ``H`` + topic name, sequence = last published offset, E-DAFKA-05,
E-DAFKA-16) every ``head_ms``.

It subscribes (``peer_sub``) to ``K`` + its address (ACK), ``F`` + its address (FETCH) and
``G`` + its topic (GET-HEADS, E-DAFKA-15), and compares topics exactly (E-DAFKA-20):

- FETCH (sequence s, count c: offsets s..s+c-1, E-DAFKA-19): one DIRECT-RECORD per requested
  record it still holds, ascending, topic ``D`` + the FETCH's address (E-DAFKA-07);
- ACK with sequence n (cumulative, E-DAFKA-17): records 0..n may go; with ``release_acked``
  (default true) they are released (Note ``records-released``). Nothing is released before an
  ACK covers it (``dafka.producer.keep-until-ack``);
- GET-HEADS for its topic once it has published: DIRECT-HEAD, topic ``E`` + the GET-HEADS's
  address, sequence = last published offset (``dafka.producer.direct-head-reply``).

Durability: none. Records and offsets live in memory; a restarted producer takes a new address
(a new UUID from the new incarnation's rng) and so starts a new partition at offset 0, the
choice E-DAFKA-21 allows and zeromq/dafka makes. Records not yet ACKed are lost with it.
Do not give a producer a fixed ``address`` and restart it: its offsets would restart at 0 under
the same partition name, which breaks ``dafka.record.offset-increments``.

Standalone (no application, e.g. as the implementation under test of a conformance suite):
``records`` (default 0) records are produced by the producer itself, the first ``delay_ms``
(default 500) after start and one every ``interval_ms`` (default 100) after that, record k with
the content ``<content>-<k>`` (``content`` default ``record``); needs ``topic``.

Config: ``topic``, ``head_ms`` (1000), ``release_acked`` (true), ``records``, ``delay_ms``,
``interval_ms``, ``content``, plus the shared keys of `reference_nodes.dafka.common`
(``towers``, ``bind``, ``beacon_ms``, ...).
"""

from __future__ import annotations

from typing import Any

from harness.node import Action, NodeContext, Note, Subscribe
from harness.protocols.codec import Message
from harness.protocols.dafka import subscription
from reference_nodes.dafka.common import (
    DEFAULT_HEAD_MS, PEER_SUB, DafkaNode, as_content, ms_to_ns, positive_ms, topic_name,
)


class Producer(DafkaNode):
    role = "producer"

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        topic = self.config.get("topic")
        self.topic: str | None = None if topic is None else topic_name(topic, "dafka producer config 'topic'")
        self.head_ns = positive_ms(self.config.get("head_ms", DEFAULT_HEAD_MS), "head_ms")
        self.release_acked = bool(self.config.get("release_acked", True))
        self.records: dict[int, bytes] = {}  # offset -> content, the records still held, ascending
        self.next_offset = self.first_offset()
        self.last = -1  # offset of the last published record; -1 before the first
        self.acked = -1  # highest ACKed offset
        self.published = 0
        self.deadlines["head"] = None
        # standalone production (no application)
        self.records_to_produce = int(self.config.get("records", 0))
        self.produce_delay_ns = ms_to_ns(self.config.get("delay_ms", 500), "delay_ms")
        self.produce_every_ns = positive_ms(self.config.get("interval_ms", 100), "interval_ms")
        self.content_prefix = str(self.config.get("content", "record"))
        if self.records_to_produce and self.topic is None:
            raise ValueError("dafka producer: 'records' needs config 'topic'")
        self.produced = 0
        self.deadlines["produce"] = None

    def on_start(self, now: int) -> list[Action]:
        if self.records_to_produce > 0:
            self.deadlines["produce"] = now + self.produce_delay_ns
        return []

    # ---- offsets (the mutants change these) ----------------------------------------------------

    def first_offset(self) -> int:
        return 0

    def following_offset(self, offset: int) -> int:
        return offset + 1

    def after_publish(self, offset: int, out: list[Action]) -> None:
        """Called after each RECORD went out (a mutant releases records here)."""

    def fetch_order(self, offsets: list[int]) -> list[int]:
        return offsets

    # ---- sockets ---------------------------------------------------------------------------

    def peer_subscriptions(self) -> list[bytes]:
        subs = [subscription("ACK", self.address), subscription("FETCH", self.address)]
        if self.topic is not None:
            subs.append(subscription("GET-HEADS", self.topic))
        return subs

    # ---- the application ---------------------------------------------------------------------

    def on_command(self, op: Any, request: dict[str, Any], now: int) -> list[Action]:
        if op != "produce":
            raise ValueError(f"dafka producer: unknown command {op!r} (known: 'produce', 'status')")
        out: list[Action] = []
        topic = request.get("topic", self.topic)
        if topic is None:
            raise ValueError("dafka producer: the first 'produce' needs a 'topic' (or set config 'topic')")
        topic = topic_name(topic)
        if self.topic is None:
            self.topic = topic
            out.append(Subscribe(PEER_SUB, subscription("GET-HEADS", topic)))
        elif topic != self.topic:
            raise ValueError(f"dafka producer: it publishes to topic {self.topic!r} only (one partition per"
                             f" producer, dafka.partition.one-partition-per-producer), not {topic!r}")
        content = as_content(request.get("content", b""))
        offset = self.next_offset
        self.next_offset = self.following_offset(offset)
        self.records[offset] = content
        self.last = offset
        self.published += 1
        out.append(self.send("RECORD", {"topic": topic, "address": self.address, "subject": topic,
                                        "sequence": offset, "content": content},
                             topic, offset, self.address))
        if self.deadlines["head"] is None:
            self.deadlines["head"] = now + self.head_ns
        self.after_publish(offset, out)
        return out

    def status(self) -> dict[str, Any]:
        s = super().status()
        s.update({"topic": self.topic, "last": self.last, "acked": self.acked, "held": list(self.records),
                  "published": self.published})
        return s

    # ---- timers ------------------------------------------------------------------------------

    def on_timer(self, now: int) -> list[Action]:
        out: list[Action] = []
        due = self.deadlines.get("produce")
        if due is not None and now >= due:
            k = self.produced
            self.produced += 1
            more = self.produced < self.records_to_produce
            self.deadlines["produce"] = now + self.produce_every_ns if more else None
            out.extend(self.on_command("produce", {"op": "produce", "content": f"{self.content_prefix}-{k}"}, now))
        due = self.deadlines.get("head")
        if due is None or now < due:
            return out
        self.deadlines["head"] = now + self.head_ns
        return out + [self.head()]

    def head(self) -> Action:
        return self.send("HEAD", {"topic": self.topic, "address": self.address, "subject": self.topic,
                                  "sequence": self.last}, self.topic, self.last, self.address)

    # ---- peers -------------------------------------------------------------------------------

    def on_message(self, msg: Message, frames: list[bytes], now: int) -> list[Action]:
        name = msg.name
        if name == "FETCH":
            return self.on_fetch(msg)
        if name == "ACK":
            return self.on_ack(msg)
        if name == "GET-HEADS":
            return self.on_get_heads(msg)
        return [self.unexpected(frames, msg)]

    def on_fetch(self, msg: Message) -> list[Action]:
        if msg["topic"] != self.address or msg["subject"] != self.topic or not self.records:
            return []  # another partition (prefix match, E-DAFKA-20), or nothing held
        seq, count = msg["sequence"], msg["count"]
        lo = max(seq, next(iter(self.records)))
        hi = min(seq + count, self.last + 1)
        offsets = [o for o in range(lo, hi) if o in self.records]
        requestor, topic = msg["address"], self.topic
        return [self.send("DIRECT-RECORD", {"topic": requestor, "address": self.address, "subject": topic,
                                            "sequence": o, "content": self.records[o]},
                          topic, o, self.address)
                for o in self.fetch_order(offsets)]

    def on_ack(self, msg: Message) -> list[Action]:
        if msg["topic"] != self.address or msg["subject"] != self.topic:
            return []
        n = msg["sequence"]
        if n <= self.acked:
            return []
        self.acked = n
        out: list[Action] = []
        if self.release_acked:
            self.release(n, out)
        return out

    def release(self, upto: int, out: list[Action]) -> None:
        """Forget the held records with offsets up to ``upto``."""
        gone: list[int] = []
        for o in self.records:  # ascending
            if o > upto:
                break
            gone.append(o)
        for o in gone:
            del self.records[o]
        if gone:
            out.append(Note("records-released", {"topic": self.topic, "partition": self.address,
                                                 "upto": gone[-1], "count": len(gone)}))

    def on_get_heads(self, msg: Message) -> list[Action]:
        if self.topic is None or msg["topic"] != self.topic or self.last < 0:
            return []
        return [self.send("DIRECT-HEAD", {"topic": msg["address"], "address": self.address,
                                          "subject": self.topic, "sequence": self.last},
                          self.topic, self.last, self.address)]
