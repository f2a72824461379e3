"""Dafka — ZeroMQ RFC 46 (../shared/specs/dafka-46.md), wire table.

Strict mode is the document as settled by docs/errata.md (E-DAFKA-01 to -04, -10,
-11, -22):

=====  ============================================================================
frame  content
=====  ============================================================================
0      topic frame: command id octet + topic bytes, no separator (PUB/SUB filters on it)
1      body: ``AA A5``, command id octet (equal to frame 0's), version ``01``, then the
       fields of the grammar except ``content``
2      RECORD and DIRECT-RECORD only: the record content, exactly one frame
=====  ============================================================================

``string`` is a 1-octet length + any octets (E-DAFKA-10), ``strings`` a 4-octet count, then
each value as a 4-octet length + octets; numbers are big-endian. What the topic after the
id octet names depends on the command (E-DAFKA-05 to -08), see `TOPIC_RULES`; the codec
carries it as the field ``topic`` and leaves the cross-message checks to the checkers.

Dialect ``dafka:zproto`` (INTEROP.md, zeromq/dafka's zproto codec): no signature; one frame
``[id][topic bytes][00][version 01][fields...]`` plus the content frame for RECORD and
DIRECT-RECORD; ACK carries only ``subject`` and ``sequence``.

Tower discovery (E-DAFKA-13, the same in both modes; not Dafka commands, so no signature,
version or topic frame): a node sends ``["B", sender, host, port]`` to the tower (BEACON),
the tower forwards ``["B", sender, "tcp://host:port"]`` (TOWER-BEACON) and greets each new
subscriber with ``"W"`` (TOWER-WELCOME, the XPUB welcome message). Channels tell them apart
from the peer commands: ``to-tower``, ``from-tower``, ``peer``.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from harness.protocols.errors import DecodeError, FieldError
from harness.protocols.table import Const, Field, Lit, Message, Packed, Table
from harness.protocols.types import CStr, Decimal, FrameType, Raw, Rest, Str, StrList, Text, UInt

PROTOCOL = "dafka"
VERSION = 1
SIGNATURE = b"\xaa\xa5"

# E-DAFKA-22: one octet, the ASCII code of the uppercase letter.
COMMAND_IDS: dict[str, bytes] = {
    "RECORD": b"M",
    "DIRECT-RECORD": b"D",
    "FETCH": b"F",
    "ACK": b"K",
    "HEAD": b"H",
    "DIRECT-HEAD": b"E",
    "GET-HEADS": b"G",
    "CONSUMER-HELLO": b"W",
    "STORE-HELLO": b"L",
}
COMMANDS_BY_ID: dict[bytes, str] = {v: k for k, v in COMMAND_IDS.items()}

BEACON_ID = b"B"
WELCOME_ID = b"W"

# Channels (where a message travels): the node <-> node XPUB/SUB mesh, and the two tower links.
PEER = "peer"
TO_TOWER = "to-tower"
FROM_TOWER = "from-tower"


class TopicRule(NamedTuple):
    """What the topic after the id octet must be, and the clause a wrong topic fails."""

    names: str
    clause: str
    errata: str


# E-DAFKA-05 to -08 and the grammar comments; checked by the checkers (they need context:
# the FETCH being answered, the producer's address, ...), not by the codec.
TOPIC_RULES: dict[str, TopicRule] = {
    "RECORD": TopicRule("the topic name (equals the subject field)", "dafka.wire.topic-record", ""),
    "HEAD": TopicRule("the topic name (equals the subject field)", "dafka.wire.topic-head", "E-DAFKA-05"),
    "GET-HEADS": TopicRule("the topic name whose heads are requested", "dafka.wire.topic-get-heads", "E-DAFKA-20"),
    "FETCH": TopicRule("the producer's (partition's) address", "dafka.wire.topic-fetch", "E-DAFKA-06"),
    "ACK": TopicRule("the producer's (partition's) address", "dafka.wire.topic-ack", ""),
    "DIRECT-RECORD": TopicRule("the requestor's address (the FETCH's address field)",
                               "dafka.wire.topic-direct-record", "E-DAFKA-07"),
    "DIRECT-HEAD": TopicRule("the requestor's (consumer's) address", "dafka.wire.topic-direct-head", "E-DAFKA-08"),
    "STORE-HELLO": TopicRule("the consumer's address (from its subscription)", "dafka.wire.topic-store-hello", ""),
    "CONSUMER-HELLO": TopicRule("the store's address (the STORE-HELLO's address field)",
                                "dafka.wire.topic-consumer-hello", "E-DAFKA-18"),
}


# ---- Dafka-specific field types -------------------------------------------------------------

_ENDPOINT = re.compile(r"^tcp://(?P<host>[^/\s]+):(?P<port>0|[1-9][0-9]{0,4})$")


class TcpEndpoint(FrameType):
    """A whole frame ``tcp://host:port`` as the tower forwards it (host: any non-empty text
    without ``/`` or white space, IPv6 literals included; port: decimal 0-65535, no leading
    zero). Kept as the exact string."""

    name = "tcp-endpoint"
    default = "tcp://127.0.0.1:5556"

    def decode(self, b: bytes) -> str:
        try:
            s = bytes(b).decode("utf-8")
        except UnicodeDecodeError as e:
            raise FieldError(f"not valid UTF-8 at byte {e.start}") from None
        self._check(s)
        return s

    def encode(self, v: Any) -> bytes:
        if not isinstance(v, str):
            raise FieldError(f"{type(v).__name__} is not a tcp:// endpoint string")
        self._check(v)
        return v.encode("utf-8")

    @staticmethod
    def _check(s: str) -> None:
        m = _ENDPOINT.match(s)
        if not m:
            raise FieldError(f"{s[:60]!r} is not a tcp://host:port endpoint")
        if int(m.group("port")) > 65535:
            raise FieldError(f"port {m.group('port')} is larger than 65535")

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        host = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="/"),
                       min_size=1, max_size=30)
        return st.builds(lambda h, p: f"tcp://{h}:{p}", host, st.integers(0, 65535))


# ---- fields (one type per name) -------------------------------------------------------------

_GRAMMAR = "dafka.wire.grammar"
_BEACON = "dafka.interconnect.address-beacon"

FIELDS: dict[str, Field] = {
    "topic": Field(Rest(text=True, any_bytes=True), clause="dafka.wire.topic-frame",
                   doc="the topic frame after the command id octet: a topic name or an address,"
                       " depending on the command (TOPIC_RULES); any octets"),
    "version": Field(UInt(1), clause="dafka.wire.version", const=VERSION,
                     doc="protocol version octet after the command id; must be 1 (E-DAFKA-02)"),
    "address": Field(Str(1, any_bytes=True), clause=_GRAMMAR,
                     doc="string: a node address (producer/partition, requestor, store or consumer,"
                         " per the grammar comments and E-DAFKA-09); opaque, at most 255 octets"),
    "subject": Field(Str(1, any_bytes=True), clause=_GRAMMAR,
                     doc="string: the topic name (at most 255 octets, E-DAFKA-11)"),
    "sequence": Field(UInt(8), clause=_GRAMMAR, doc="number-8: the record offset in its partition"),
    "count": Field(UInt(4), clause=_GRAMMAR, doc="number-4: how many records FETCH asks for"),
    "subjects": Field(StrList(4, Str(4, any_bytes=True)), clause=_GRAMMAR,
                      doc="strings: the topics the consumer is subscribed to (4-octet count,"
                          " 4-octet lengths)"),
    "content": Field(Raw(), clause=_GRAMMAR, doc="the record content: exactly one frame (E-DAFKA-03)"),
    # Tower discovery (E-DAFKA-13, INTEROP.md)
    "sender": Field(Text(any_bytes=True, non_empty=True), clause=_BEACON,
                    doc="the beaconing node's identifier: its address (E-DAFKA-12)"),
    "host": Field(Text(any_bytes=True, non_empty=True), clause=_BEACON,
                  doc="host part of the node's XPUB endpoint, as the node sends it"),
    "port": Field(Decimal(max_value=65535), clause=_BEACON,
                  doc="port of the node's XPUB endpoint as a decimal string"),
    "endpoint": Field(TcpEndpoint(), clause=_BEACON,
                      doc="the node's XPUB endpoint tcp://host:port, as the tower forwards it"),
}

# Which body fields each command carries (grammar order, E-DAFKA-04); content is frame 2.
BODY_FIELDS: dict[str, tuple[str, ...]] = {
    "RECORD": ("address", "subject", "sequence"),
    "DIRECT-RECORD": ("address", "subject", "sequence"),
    "FETCH": ("address", "subject", "sequence", "count"),
    "ACK": ("address", "subject", "sequence"),
    "HEAD": ("address", "subject", "sequence"),
    "DIRECT-HEAD": ("address", "subject", "sequence"),
    "GET-HEADS": ("address",),
    "CONSUMER-HELLO": ("address", "subjects"),
    "STORE-HELLO": ("address",),
}
WITH_CONTENT = ("RECORD", "DIRECT-RECORD")

_DOCS = {
    "RECORD": "producer -> consumers and stores: a record; topic = topic name",
    "DIRECT-RECORD": "producer or store -> requestor: a fetched record; topic = requestor's address",
    "FETCH": "consumer or store -> producer and stores: missing records; topic = partition address",
    "ACK": "store -> producer: records stored up to sequence; topic = partition address",
    "HEAD": "producer -> consumers and stores: last published offset; topic = topic name",
    "DIRECT-HEAD": "producer or store -> consumer: a partition head; topic = requestor's address",
    "GET-HEADS": "consumer -> stores (and producers): ask for heads; topic = topic name",
    "CONSUMER-HELLO": "consumer -> store: its subscriptions; topic = store's address",
    "STORE-HELLO": "store -> consumer on its subscription: topic = consumer's address",
}


def _topic_frame(cid: bytes) -> Packed:
    return Packed(Lit(cid, "id", "dafka.wire.topic-frame"), "topic")


def _strict_command(name: str) -> Message:
    cid = COMMAND_IDS[name]
    body = Packed(
        Lit(SIGNATURE, "signature", "dafka.wire.signature"),
        Lit(cid, "id", _GRAMMAR),  # must equal the topic frame's id octet (E-DAFKA-03)
        "version",
        *BODY_FIELDS[name],
    )
    layout: tuple = (_topic_frame(cid), body)
    if name in WITH_CONTENT:
        layout += ("content",)
    # Frame-count errors name the message's clause: for RECORD/DIRECT-RECORD that is the
    # single-frame-content rule, so a content split over several frames names it (E-DAFKA-03).
    # The engine cannot tell "missing" from "extra" here, so a missing content frame names it
    # too (E-DAFKA-03 would say dafka.wire.grammar for that case).
    return Message(name, layout, doc=_DOCS[name], channels=(PEER,),
                   clause="dafka.wire.single-frame-content" if name in WITH_CONTENT else "")


def _zproto_command(name: str) -> Message:
    cid = COMMAND_IDS[name]
    fields = BODY_FIELDS[name]
    if name == "ACK":
        fields = ("subject", "sequence")  # zproto's ACK has no address
    first = Packed(Lit(cid, "id", "dafka.wire.topic-frame"), "topic", "version", *fields)
    layout: tuple = (first,)
    if name in WITH_CONTENT:
        layout += ("content",)
    return Message(name, layout, doc=_DOCS[name], channels=(PEER,),
                   clause="dafka.wire.single-frame-content" if name in WITH_CONTENT else "")


TOWER_MESSAGES: tuple[Message, ...] = (
    Message("BEACON", (Const(BEACON_ID, "id", _BEACON), "sender", "host", "port"), channels=(TO_TOWER,),
            doc="node -> tower (PUB -> XSUB): the node's identifier and XPUB endpoint, at a regular interval",
            clause=_BEACON),
    Message("TOWER-BEACON", (Const(BEACON_ID, "id", _BEACON), "sender", "endpoint"), channels=(FROM_TOWER,),
            doc="tower -> nodes (XPUB -> SUB): a forwarded beacon; a node connects to the endpoint",
            clause=_BEACON),
    Message("TOWER-WELCOME", (Const(WELCOME_ID, "id", "dafka.interconnect.tower-sub-connect"),),
            channels=(FROM_TOWER,), doc="tower -> new subscriber: the XPUB welcome message",
            clause="dafka.interconnect.tower-sub-connect"),
)

STRICT = Table(
    PROTOCOL, "strict", FIELDS,
    tuple(_strict_command(n) for n in COMMAND_IDS) + TOWER_MESSAGES,
    grammar_clause=_GRAMMAR,
    doc="dafka-46.md with docs/errata.md: topic frame, signed body, content frame",
)

ZPROTO = STRICT.derive(
    "dafka:zproto",
    fields={
        "topic": Field(CStr(any_bytes=True), clause="dafka.wire.topic-frame",
                       doc="the topic after the command id octet, terminated by 0x00 (no NUL inside)"),
        # zeromq/dafka's default beacon/address is "": its tower puts the connection's address
        # in its place (INTEROP.md, E-DAFKA-13). Strict keeps the decision that a node names it.
        "host": Field(Text(any_bytes=True), clause=_BEACON,
                      doc="host part of the node's XPUB endpoint, as the node sends it; empty: the tower"
                          " substitutes the address of the connection the beacon came on"),
    },
    messages=tuple(_zproto_command(n) for n in COMMAND_IDS),
    notes=(
        "no signature octets",
        "one frame: [id][topic][0x00][version 0x01][fields...]; content as a separate second frame",
        "ACK carries only subject and sequence",
        "BEACON host may be empty (the tower substitutes the connection's address)",
    ),
)

TABLES = {"strict": STRICT, "dafka:zproto": ZPROTO}


# ---- subscriptions ----------------------------------------------------------------------------


def subscription(name: str, topic: str | bytes = "") -> bytes:
    """The SUB subscription (a prefix of the first frame) for a command and a topic or address:
    the command id octet followed by the topic, the same in both dialects ("M" + "" = every
    RECORD). ``name`` may also be BEACON/TOWER-BEACON ("B") or TOWER-WELCOME ("W")."""
    if name in COMMAND_IDS:
        cid = COMMAND_IDS[name]
    elif name in ("BEACON", "TOWER-BEACON"):
        cid = BEACON_ID
    elif name == "TOWER-WELCOME":
        cid = WELCOME_ID
    else:
        raise KeyError(f"dafka has no message {name!r}")
    raw = topic if isinstance(topic, bytes) else topic.encode("utf-8", "surrogateescape")
    return cid + raw


def matches(prefix: bytes, frames: list[bytes] | tuple[bytes, ...]) -> bool:
    """ZeroMQ PUB/SUB filtering: does a subscription prefix match this message's first frame?"""
    return bool(frames) and bytes(frames[0]).startswith(prefix)


class Subscription(NamedTuple):
    subscribe: bool  # False: an unsubscription
    message: str | None  # the command it selects; None for "" (everything) or a non-command prefix
    topic: str  # the bytes after the id octet (any bytes, surrogateescape)
    prefix: bytes  # the whole subscription prefix


def parse_subscription(notification: bytes) -> Subscription:
    """Decode an XPUB subscription notification (``01``/``00`` + prefix), e.g. the
    ``01 'L' <consumer address>`` a store answers with STORE-HELLO."""
    b = bytes(notification)
    if not b or b[0] not in (0, 1):
        got = "an empty frame" if not b else f"first octet 0x{b[0]:02x}"
        raise DecodeError(PROTOCOL, "strict", None, "subscription",
                          f"not an XPUB subscription notification ({got}; expected 0x01 or 0x00)",
                          "dafka.subscription.register")
    prefix = b[1:]
    name = COMMANDS_BY_ID.get(prefix[:1]) if prefix else None
    topic = prefix[1:].decode("utf-8", "surrogateescape") if name else ""
    return Subscription(b[0] == 1, name, topic, prefix)
