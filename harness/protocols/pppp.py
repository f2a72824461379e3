"""PPPP — Paranoid Pirate Publishing Protocol (../shared/specs/pppp.txt), wire table.

Frames are a PPPP message as the application hands them to its socket; the ROUTER routing id
that precedes them on the publisher's socket is the transport's envelope (E-PPPP-09).

===========  ===========================================================  =================
message      frames                                                       channel
===========  ===========================================================  =================
SUBSCRIBE    0x01 + channel                                               to-publisher
ACK          0x02 + channel, sequence, NACK range ...                     to-publisher
HEARTBEAT    0x03                                                         both
CUSTOM       0x04, payload ...                                            to-publisher
PUBLISH      channel, sequence, payload ...                               to-subscriber
===========  ===========================================================  =================

Decisions (docs/errata.md): a sequence is 8 bytes big-endian (E-PPPP-01); a NACK frame
is 16 bytes, the first and last missing sequence inclusive, first <= last (E-PPPP-03); the
frame layouts above (E-PPPP-05); a channel is raw bytes, possibly empty, that do not start with
a byte 0x00-0x04 (E-PPPP-06, E-PPPP-07); PUBLISH flows only publisher -> subscriber, SUBSCRIBE,
ACK and CUSTOM only subscriber -> publisher (E-PPPP-06); SYNC has no wire format of its own: it
is a backlog of PUBLISH messages (E-PPPP-08). The document's "ACK/NACK" is the message ACK.

PUBLISH has no command byte (frame 0 is the channel), so it is the table's fallback: decode
with ``channel="to-subscriber"`` / ``"to-publisher"`` to decide by direction, as E-PPPP-06
requires. There is no public implementation (INTEROP.md), hence no dialect.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from harness.protocols.errors import FieldError
from harness.protocols.table import Field, Lit, Message, Packed, Rep, Table
from harness.protocols.types import FrameType, PackedType, Raw, UInt

PROTOCOL = "pppp"

SUBSCRIBE, ACK, HEARTBEAT, CUSTOM = 0x01, 0x02, 0x03, 0x04
COMMAND_BYTES = {"SUBSCRIBE": SUBSCRIBE, "ACK": ACK, "HEARTBEAT": HEARTBEAT, "CUSTOM": CUSTOM}

GRAMMAR = "pppp.wire.grammar"
TO_PUBLISHER = "to-publisher"
TO_SUBSCRIBER = "to-subscriber"

_U64_MAX = (1 << 64) - 1


class ChannelName(PackedType):
    """A channel: raw bytes, possibly empty, whose first byte is not 0x00-0x04 (E-PPPP-06), so
    that a PUBLISH can never read as a command or a ZeroMQ (un)subscription. Standing alone it
    is a whole frame; packed it is the rest of the frame after a command byte."""

    name = "channel"
    default = b""

    def unpack(self, b: bytes, p: int) -> tuple[bytes, int]:
        return self.decode(b[p:]), len(b)

    def pack(self, v: Any) -> bytes:
        return self.encode(v)

    # decode/encode are the hot path of PUBLISH: written out rather than through unpack/pack.
    def decode(self, b: bytes) -> bytes:
        if b and b[0] <= CUSTOM:
            raise FieldError(f"a channel name must not start with byte 0x{b[0]:02x} (0x00-0x04 are reserved)")
        return b if b.__class__ is bytes else bytes(b)

    def encode(self, v: Any) -> bytes:
        if v.__class__ is not bytes:
            if not isinstance(v, (bytes, bytearray, memoryview)):
                raise FieldError(f"{type(v).__name__} is not bytes")
            v = bytes(v)
        return self.decode(v)

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        return st.binary(max_size=40).filter(lambda b: not b or b[0] > CUSTOM)

    def show(self, v: Any) -> Any:
        return super().show(v)  # printable ASCII as text, anything else as 0x-hex


class SeqRange(NamedTuple):
    """An inclusive range of missing sequence numbers; equal to the plain tuple (first, last)."""

    first: int
    last: int


_RANGE = struct.Struct(">QQ")


class NackRange(FrameType):
    """One NACK frame: 16 bytes, the first and the last missing sequence number, inclusive,
    each 8-byte unsigned big-endian, first <= last (E-PPPP-03). Decodes to a `SeqRange`;
    encodes a `SeqRange`, a (first, last) tuple or a 2-list."""

    name = "nack-range"
    default = SeqRange(0, 0)

    def decode(self, b: bytes) -> SeqRange:
        if len(b) != 16:
            raise FieldError(f"must be 16 bytes (first and last missing sequence, 8 bytes each), got {len(b)}")
        first, last = _RANGE.unpack(b)
        if first > last:
            raise FieldError(f"first {first} is greater than last {last}")
        return SeqRange(first, last)

    def encode(self, v: Any) -> bytes:
        if not isinstance(v, (tuple, list)) or len(v) != 2:
            raise FieldError(f"{v!r} is not a (first, last) pair")
        first, last = v
        for x in (first, last):
            if type(x) is bool or not isinstance(x, int) or not 0 <= x <= _U64_MAX:
                raise FieldError(f"{x!r} is not an unsigned 64-bit sequence number")
        if first > last:
            raise FieldError(f"first {first} is greater than last {last}")
        return _RANGE.pack(first, last)

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        u64 = st.integers(0, _U64_MAX)
        return st.tuples(u64, u64).map(lambda t: SeqRange(min(t), max(t)))

    def show(self, v: Any) -> Any:
        """[first, last]; Codec.show hands a repeated field's whole list, shown item by item."""
        if isinstance(v, (list, tuple)) and not (len(v) == 2 and all(isinstance(x, int) for x in v)):
            return [self.show(x) for x in v]
        return [v[0], v[1]]


FIELDS = {
    "channel": Field(ChannelName(), clause="pppp.wire.channel-name",
                     doc="channel name: raw bytes, possibly empty (SUBSCRIBE: all channels), not starting with 0x00-0x04"),
    "sequence": Field(UInt(8), clause="pppp.wire.sequence-format",
                      doc="PUBLISH: the message's channel-specific sequence number; ACK: the highest received"),
    "nacks": Field(NackRange(), clause="pppp.wire.nack-range-format",
                   doc="ranges of sequence numbers not received, one (first, last) range per frame"),
    "payload": Field(Raw(), clause=GRAMMAR, doc="opaque application frames"),
}


def _cmd(code: int) -> Lit:
    return Lit(bytes([code]), "command", GRAMMAR)


MESSAGES = (
    Message("SUBSCRIBE", (Packed(_cmd(SUBSCRIBE), "channel"),), channels=(TO_PUBLISHER,), clause=GRAMMAR,
            doc="subscriber -> publisher: subscribe to the channels starting with these bytes"),
    Message("ACK", (Packed(_cmd(ACK), "channel"), Packed("sequence"), Rep("nacks")), channels=(TO_PUBLISHER,),
            clause=GRAMMAR, doc="subscriber -> publisher: ACK/NACK of one channel"),
    Message("HEARTBEAT", (Packed(_cmd(HEARTBEAT)),), channels=(TO_SUBSCRIBER, TO_PUBLISHER), clause=GRAMMAR,
            doc="either way: the single byte 0x03"),
    Message("CUSTOM", (Packed(_cmd(CUSTOM)), Rep("payload")), channels=(TO_PUBLISHER,), clause=GRAMMAR,
            doc="subscriber -> publisher: application-specific payload"),
    Message("PUBLISH", ("channel", Packed("sequence"), Rep("payload")), channels=(TO_SUBSCRIBER,), clause=GRAMMAR,
            doc="publisher -> subscriber: a message of a channel (also SYNC backlog and resends)"),
)

STRICT = Table(PROTOCOL, "strict", FIELDS, MESSAGES, grammar_clause=GRAMMAR, doc="pppp.txt with docs/errata.md")
TABLES = {"strict": STRICT}


# ---- ranges of sequence numbers (NACK ranges, gaps), shared by nodes and checkers -----------


def ranges_without(first: int, last: int, numbers: Any) -> list[list[int]]:
    """first..last (inclusive) minus ``numbers``, as sorted inclusive [first, last] ranges."""
    out = []
    start = first
    for s in sorted(x for x in numbers if first <= x <= last):
        if s > start:
            out.append([start, s - 1])
        start = s + 1
    if start <= last:
        out.append([start, last])
    return out


def cut_number(ranges: list[list[int]], seq: int) -> bool:
    """Remove one number from sorted disjoint inclusive ranges, in place; whether it was there."""
    for i, (first, last) in enumerate(ranges):
        if first <= seq <= last:
            parts = [[first, seq - 1]] if first < seq else []
            if seq < last:
                parts.append([seq + 1, last])
            ranges[i:i + 1] = parts
            return True
    return False
