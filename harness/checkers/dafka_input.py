"""Dafka: a store acts only on the records it received well formed (specs/dafka-46.md, Protocol
Signature and Versioning, with docs/errata.md E-DAFKA-01, -02).

A node must discard a message that does not start with the signature ``AA A5`` or that carries
another version than 1. What a store does with the records it holds shows on the wire: it ACKs
them and serves them in DIRECT-RECORDs. So a store that ACKs or serves a record it never
received in a well-formed RECORD or DIRECT-RECORD took it from a message it had to discard, or
made it up. Which received messages are well formed is what every checker of the run reads
from the event (`Event.decoded`, decoded once, as the store's peer SUB reads it).
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import RECV, SEND, Checker, Event, Verdict
from harness.checkers.dafka_duties import Problem
from harness.protocols import DecodeError
from harness.protocols.dafka import COMMAND_IDS, PEER

RECORDS = (COMMAND_IDS["RECORD"], COMMAND_IDS["DIRECT-RECORD"])
MADE_UP = "dafka.fetch.check-stored"  # a record served or acknowledged with no copy of it received at all
# The codec names the format rule a message breaks; what the store broke is the duty to discard it.
DISCARD = {"dafka.wire.signature": "dafka.wire.signature-discard", "dafka.wire.version": "dafka.wire.version-discard"}


class StoreInput(Checker):
    """A store ACKs a record, or serves it in a DIRECT-RECORD, only when it received that record
    (topic, partition, offset) in a well-formed RECORD or DIRECT-RECORD, in this life or an
    earlier one (its records are durable). A copy with a wrong signature or version must be
    discarded (``dafka.wire.signature-discard``, ``dafka.wire.version-discard``): the failure
    names the clause the last malformed record-like message the store received breaks (the one
    it took), or ``dafka.fetch.check-stored`` when it received none. An external store seen by
    the chaos proxy is not judged (the proxy sees a connection's bytes, not all the store reads)."""

    name = "store-input"
    clause = "dafka.wire.version-discard"
    kinds = frozenset({SEND, RECV})
    roles = frozenset({"store"})

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.received: set[tuple[str, str, str, int]] = set()  # (store, topic, partition, offset)
        self.malformed: dict[str, tuple[Event, str]] = {}  # store -> its last malformed record-like receipt
        self.bad: list[Problem] = []
        self.judged = 0

    def on_event(self, ev: Event) -> None:
        if ev.via or not ev.frames:
            return
        if ev.kind == RECV:
            if ev.frames[0][:1] in RECORDS:
                msg = ev.decoded(channel=PEER)
                if msg is None:
                    self.malformed[ev.node] = (ev, _broken_clause(ev))
                elif msg.name in ("RECORD", "DIRECT-RECORD"):
                    self.received.add((ev.node, msg["subject"], msg["address"], msg["sequence"]))
            return
        if ev.msg_type not in ("ACK", "DIRECT-RECORD"):
            return
        msg = ev.message()
        if msg is None or msg.name not in ("ACK", "DIRECT-RECORD"):
            return  # wire-conformance judges what does not decode
        partition = msg["topic"] if msg.name == "ACK" else msg["address"]
        self.judged += 1
        if (ev.node, msg["subject"], partition, msg["sequence"]) in self.received:
            return
        what = f"{ev.node} sent {msg.name} for offset {msg['sequence']} of {partition[:8]}.. without having received it well formed"
        taken = self.malformed.get(ev.node)
        if taken is None:
            self.bad.append((ev, what, MADE_UP))
        else:
            got, clause = taken
            self.bad.append((ev, f"{what}; the last malformed record it received ({got.time_ns / 1e6:.1f} ms) breaks "
                                 f"{clause}", clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        if self.bad:
            return [self.first_problem(self.bad, "record(s) acted on without a well-formed copy")]
        return [self.ok(f"{self.judged} ACK/DIRECT-RECORD(s) of stores, each for a record received well formed")]


def _broken_clause(ev: Event) -> str:
    """The clause a malformed receipt breaks, as the codec names it (decoded again only for the
    few messages that do not decode)."""
    if ev.codec is None or ev.frames is None:
        return StoreInput.clause
    try:
        ev.codec.decode(ev.frames, channel=PEER)
    except DecodeError as e:
        return DISCARD.get(e.clause, e.clause)
    return StoreInput.clause
