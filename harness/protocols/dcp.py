"""DCP — DagBox Communication Protocol v1 (../shared/specs/dcp-v1.md), wire table.

Frames are given as a DEALER application hands them to its socket: they start with the empty
address delimiter. The ROUTER identity that precedes them on the broker's socket is the
transport's envelope (errata E-DCP-01) and is not part of the message.

Dialect ``dcp:dagbox`` (INTEROP.md): the message type is a 4-byte little-endian enum.
"""

from __future__ import annotations

from harness.protocols.table import Const, Field, Lit, Message, Packed, Rep, Table, Until
from harness.protocols.types import Raw, Text, UInt

PROTOCOL = "dcp"
VERSION = 1

REGISTER, PING, PONG, REQUEST, REPLY, RECONNECT = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
TYPE_CODES = {"REGISTER": REGISTER, "PING": PING, "PONG": PONG, "REQUEST": REQUEST,
              "REPLY": REPLY, "RECONNECT": RECONNECT}

FIELDS = {
    "version": Field(UInt(1), clause="dcp.wire.version", const=VERSION,
                     doc="DCP version after the DGBX characters; this harness speaks version 1"),
    "service": Field(Text(any_bytes=True),
                     doc="service name: any bytes"),
    "client_address": Field(Raw(non_empty=True),
                            doc="routing address of the requesting client; inserted by the broker if missing"),
    "metadata": Field(Raw(non_empty=True),
                      doc="non-empty parts the broker must not modify and workers copy into the reply"),
    "data": Field(Raw(), doc="data parts, service-specific"),
}


def _messages(type_bytes) -> tuple[Message, ...]:
    def header(code: int) -> tuple:
        return (
            Const(b"", "delimiter", "dcp.wire.header"),
            Packed(Lit(b"DGBX", "protocol", "dcp.wire.header"), "version"),
            Const(type_bytes(code), "type", "dcp.wire.message-type"),
        )

    return (
        Message("REGISTER", header(REGISTER) + ("service",), channels=("to-broker", "to-worker"),
                doc="worker -> broker registration; echoed back by the broker as confirmation",
                clause="dcp.worker.register"),
        Message("PING", header(PING), channels=("to-broker",), doc="worker heartbeat",
                clause="dcp.heartbeat.header-only"),
        Message("PONG", header(PONG), channels=("to-worker",), doc="broker's answer to a ping",
                clause="dcp.heartbeat.header-only"),
        Message("REQUEST", header(REQUEST) + ("service", Until("client_address", max=1), Until("metadata"), Rep("data")),
                channels=("to-broker", "to-worker"), clause="dcp.request.format"),
        # E-DCP-04: a reply always carries the client address (the broker routes by it).
        Message("REPLY", header(REPLY) + ("client_address", Const(b"", "address_delimiter", "dcp.reply.format"),
                                          Until("metadata"), Rep("data")),
                channels=("to-broker", "to-client"), clause="dcp.reply.format"),
        Message("RECONNECT", header(RECONNECT), channels=("to-worker",),
                doc="broker -> unknown worker: register again", clause="dcp.heartbeat.header-only"),
    )


# Fields shared by several messages carry no clause of their own: an error names the clause of
# the message it is in (a bad client address in a REPLY breaks dcp.reply.format).
STRICT = Table(PROTOCOL, "strict", FIELDS, _messages(lambda c: bytes([c])), grammar_clause="dcp.wire.grammar",
               doc="dcp-v1.md with docs/errata.md", unknown_clause="dcp.wire.message-type")
DAGBOX = STRICT.derive(
    "dcp:dagbox",
    messages=_messages(lambda c: c.to_bytes(4, "little")),
    notes=("the message-type part is a 4-byte little-endian enum, not one byte",),
)
TABLES = {"strict": STRICT, "dcp:dagbox": DAGBOX}
