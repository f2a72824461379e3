"""scapy layers for ZMTP 3 and the five protocols.

ZMTP units, as they follow each other in one direction of a TCP stream:

* `ZMTPGreeting` — signature, version, mechanism, as-server;
* `ZMTPFrame` — flags (MORE, LONG, COMMAND), size, body; a command frame's body is a
  `ZMTPCommand` (name, then `ZMTPProperty` metadata for READY/INITIATE, the topic of
  SUBSCRIBE/CANCEL, the TTL and context of PING...);
* `ZMTP` — any run of them (a greeting starts with 0xff, which no frame's flags can be): the
  layer `bind_zmtp(ports)` puts on TCP. Its ``tcp_reassemble`` lets scapy's own `TCPSession`
  hand it whole units, so ``sniff(offline="run.pcap", session=TCPSession)`` shows them;

and one layer per protocol (`DCP`, `Dafka`, `EventBus`, `PPPP`, `Raft`; `protocol_layer` for a
dialect) on top of a `ZMTPMessage` (a whole multipart message), showing the decoded fields
by name. `messages(path, protocol)` reads a capture with the harness's own reassembly (which,
unlike `TCPSession`, notices missing segments) and yields those packets.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Iterator

from scapy.config import conf
from scapy.fields import (
    ByteEnumField, ByteField, ConditionalField, Field, FieldLenField, FlagsField, LongField,
    PacketListField, ShortField, StrField, StrFixedLenField, StrLenField, XByteField, XLongField,
)
from scapy.layers.inet import TCP
from scapy.packet import Packet, Padding, bind_layers

from harness.capture import zmtp as z
from harness.protocols import DecodeError, codec, tables

FLAGS = ["MORE", "LONG", "COMMAND", "bit3", "bit4", "bit5", "bit6", "bit7"]


class ZMTPGreeting(Packet):
    name = "ZMTP greeting"
    fields_desc = [
        XByteField("signature", 0xFF), XLongField("padding", 0), XByteField("signature_end", 0x7F),
        ByteField("major", 3), ByteField("minor", 1),
        StrFixedLenField("mechanism", b"NULL", 20),
        ByteEnumField("as_server", 0, {0: "client", 1: "server"}),
        StrFixedLenField("filler", b"", 31),
    ]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s

    def mysummary(self) -> str:
        mech = bytes(self.mechanism).rstrip(b"\x00").decode("ascii", "replace")
        return f"ZMTP {self.major}.{self.minor} greeting {mech}" + (" as-server" if self.as_server else "")


class ZMTPProperty(Packet):
    name = "ZMTP property"
    fields_desc = [
        FieldLenField("key_len", None, length_of="key", fmt="B"),
        StrLenField("key", b"", length_from=lambda p: p.key_len),
        FieldLenField("value_len", None, length_of="value", fmt="!I"),
        StrLenField("value", b"", length_from=lambda p: p.value_len),
    ]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s

    def mysummary(self) -> str:
        return f"{self.key.decode('ascii', 'replace')}={self.value!r}"


class ZMTPCommand(Packet):
    """A command frame's body: the name, then what the command carries."""

    name = "ZMTP command"
    fields_desc = [
        FieldLenField("name_len", None, length_of="cmd", fmt="B"),
        StrLenField("cmd", b"READY", length_from=lambda p: p.name_len),
        ConditionalField(PacketListField("properties", [], ZMTPProperty),
                         lambda p: p.cmd in (b"READY", b"INITIATE")),
        ConditionalField(ShortField("ttl", 0), lambda p: p.cmd == b"PING"),
        ConditionalField(StrField("context", b""), lambda p: p.cmd in (b"PING", b"PONG")),
        ConditionalField(StrField("topic", b""), lambda p: p.cmd in (b"SUBSCRIBE", b"CANCEL")),
        ConditionalField(StrField("data", b""),
                         lambda p: p.cmd not in (b"READY", b"INITIATE", b"PING", b"PONG", b"SUBSCRIBE", b"CANCEL")),
    ]

    def mysummary(self) -> str:
        name = self.cmd.decode("ascii", "replace")
        if self.cmd in (b"READY", b"INITIATE"):
            return f"{name} " + " ".join(p.mysummary() for p in self.properties)
        if self.cmd in (b"SUBSCRIBE", b"CANCEL"):
            return f"{name} {self.topic!r}"
        return name


class ZMTPFrame(Packet):
    name = "ZMTP frame"
    fields_desc = [
        FlagsField("flags", 0, 8, FLAGS),
        ConditionalField(ByteField("size", None), lambda p: not p.flags.LONG),
        ConditionalField(LongField("long_size", None), lambda p: bool(p.flags.LONG)),
    ]

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        if self.flags.LONG and self.long_size is None:
            pkt = pkt[:1] + len(pay).to_bytes(8, "big")
        elif not self.flags.LONG and self.size is None:
            pkt = pkt[:1] + bytes([len(pay) & 0xFF])
        return pkt + pay

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        n = self.long_size if self.flags.LONG else self.size
        return s[:n], s[n:]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return ZMTPCommand if self.flags.COMMAND else conf.raw_layer

    def mysummary(self) -> str:
        n = self.long_size if self.flags.LONG else self.size
        kind = "command" if self.flags.COMMAND else "frame"
        return f"ZMTP {kind} {n} byte(s)" + (" MORE" if self.flags.MORE else "")


def _unit(pkt: Packet, lst: list[Packet], cur: Packet | None, remain: bytes) -> type[Packet] | None:
    if not remain:
        return None
    return ZMTPGreeting if remain[0] == z.SIGNATURE_FIRST else ZMTPFrame


def unit_lengths(data: bytes) -> int:
    """How many bytes at the start of ``data`` are whole ZMTP units (greeting or frames)."""
    pos, n = 0, len(data)
    while pos < n:
        if data[pos] == z.SIGNATURE_FIRST:
            if n - pos < z.GREETING_SIZE:
                break
            pos += z.GREETING_SIZE
            continue
        if n - pos < 2:
            break
        if data[pos] & z.LONG:
            if n - pos < 9:
                break
            end = pos + 9 + int.from_bytes(data[pos + 1:pos + 9], "big")
        else:
            end = pos + 2 + data[pos + 1]
        if end > n:
            break
        pos = end
    return pos


class ZMTP(Packet):
    """ZMTP units carried by a TCP payload (or by a reassembled stream)."""

    name = "ZMTP"
    fields_desc = [PacketListField("units", [], next_cls_cb=_unit)]

    @classmethod
    def tcp_reassemble(cls, data: bytes, metadata: dict[str, Any], session: dict[str, Any]) -> Packet | None:
        whole = unit_lengths(data)
        if whole == 0:
            if data and data[0] & z.RESERVED and data[0] != z.SIGNATURE_FIRST:
                return conf.raw_layer(data)  # not ZMTP: no unit will ever complete
            return None  # wait for more
        pkt = cls(data[:whole])
        if whole < len(data):
            pkt.add_payload(Padding(data[whole:]))  # TCPSession keeps it for the next unit
        return pkt

    def mysummary(self) -> str:
        return " / ".join(u.summary() for u in self.units)


def bind_zmtp(ports: int | list[int] | tuple[int, ...]) -> None:
    """Dissect TCP traffic to or from these ports as ZMTP."""
    for p in [ports] if isinstance(ports, int) else ports:
        bind_layers(TCP, ZMTP, sport=p)
        bind_layers(TCP, ZMTP, dport=p)


# ---- whole messages and protocol layers ---------------------------------------------------------


class ZMTPMessage(Packet):
    """A whole multipart message. ``src`` and ``dst`` name the endpoints it travelled between
    (from the connection, not bytes of the message)."""

    name = "ZMTP message"
    fields_desc = [StrField("src", b""), StrField("dst", b""), PacketListField("frames", [], ZMTPFrame)]

    def do_build(self) -> bytes:
        return b"".join(bytes(f) for f in self.frames)

    def do_dissect(self, s: bytes) -> bytes:  # bytes are ZMTP frames only
        self.frames = []
        while s:
            f = ZMTPFrame(s)
            pad = f.getlayer(Padding)
            s = pad.load if pad is not None else b""
            if pad is not None:
                pad.underlayer.remove_payload()
            self.frames.append(f)
        return b""

    def bodies(self) -> list[bytes]:
        return [bytes(f.payload) for f in self.frames]

    def mysummary(self) -> str:
        return f"ZMTP {self.src.decode()} > {self.dst.decode()} {len(self.frames)} frame(s)"


def frame_list(bodies: list[bytes]) -> list[ZMTPFrame]:
    out = []
    for i, b in enumerate(bodies):
        flags = (z.MORE if i < len(bodies) - 1 else 0) | (z.LONG if len(b) > 255 else 0)
        out.append(ZMTPFrame(flags=flags) / conf.raw_layer(b) if b else ZMTPFrame(flags=flags))
    return out


class _Value(Field):
    """One decoded field, kept as the codec's value and shown as the codec shows it."""

    __slots__ = ("protocol", "dialect")

    def __init__(self, name: str, protocol: str, dialect: str) -> None:
        super().__init__(name, None)
        self.protocol, self.dialect = protocol, dialect

    def i2repr(self, pkt: Packet, x: Any) -> str:
        table = codec(self.protocol, self.dialect).table
        shown = table.fields[self.name].type.show(x) if self.name in table.fields and x is not None else x
        return json.dumps(shown, default=str, ensure_ascii=False)

    def addfield(self, pkt: Packet, s: bytes, val: Any) -> bytes:
        return s  # the protocol layer builds all its frames at once (ProtocolLayer.do_build)

    def getfield(self, pkt: Packet, s: bytes) -> tuple[bytes, Any]:
        return s, None


class ProtocolLayer(Packet):
    """A decoded message of one protocol; its bytes are the message's ZMTP frames."""

    protocol = ""
    dialect = "strict"
    fields_desc: list[Field] = [StrField("msg_type", "")]

    def do_dissect(self, s: bytes) -> bytes:
        msg = ZMTPMessage(s)
        try:
            m = codec(self.protocol, self.dialect).decode(msg.bodies())
        except DecodeError as e:
            self.msg_type = b"(malformed)"
            self.setfieldval("error", str(e))
            return b""
        self.msg_type = m.name.encode()
        for k, v in m.fields.items():
            self.setfieldval(k, v)
        return b""

    def do_build(self) -> bytes:
        c = codec(self.protocol, self.dialect)
        name = self.msg_type.decode() if isinstance(self.msg_type, bytes) else self.msg_type
        fields = {k: self.getfieldval(k) for k in c.complete(name) if self.getfieldval(k) is not None}
        return b"".join(bytes(f) for f in frame_list(c.encode(name, fields)))

    def mysummary(self) -> str:
        name = self.msg_type.decode() if isinstance(self.msg_type, bytes) else self.msg_type
        present = [f"{k}={fd.i2repr(self, self.getfieldval(k))}" for fd in self.fields_desc[2:]
                   for k in [fd.name] if self.getfieldval(k) is not None][:4]
        return f"{self.protocol.upper()} {name} " + " ".join(present)


def protocol_layer(protocol: str, dialect: str = "strict") -> type[ProtocolLayer]:
    """The scapy layer of one protocol in one dialect (fields: every field of its table); one
    class per protocol and dialect, so ``pkt[DCP]`` finds it."""
    return _layer(protocol, dialect)


@lru_cache(maxsize=None)
def _layer(protocol: str, dialect: str) -> type[ProtocolLayer]:
    table = tables(protocol)[dialect]
    names = list(table.fields)
    fields: list[Field] = [StrField("msg_type", ""),
                           ConditionalField(_Value("error", protocol, dialect), lambda p: p.getfieldval("error"))]
    for n in names:
        fields.append(ConditionalField(_Value(n, protocol, dialect), lambda p, n=n: p.getfieldval(n) is not None))
    cls_name = {"dcp": "DCP", "dafka": "Dafka", "eventbus": "EventBus", "pppp": "PPPP", "raft": "Raft"}[protocol]
    if dialect != "strict":
        cls_name += "_" + dialect.split(":", 1)[1].replace("-", "_")
    return type(cls_name, (ProtocolLayer,), {"name": f"{protocol} ({dialect})", "protocol": protocol,
                                             "dialect": dialect, "fields_desc": fields, "__module__": __name__})


DCP, Dafka, EventBus, PPPP, Raft = (protocol_layer(p) for p in ("dcp", "dafka", "eventbus", "pppp", "raft"))


def messages(path: str, protocol: str, dialect: str = "strict", ports: list[int] | None = None) -> Iterator[Packet]:
    """Every message of the capture as ``ZMTPMessage / <protocol layer>`` (time set, ``src``
    and ``dst`` the endpoints), read with the harness's reassembly and ZMTP reader."""
    from harness.capture.streams import WireMessage, read_links

    layer = protocol_layer(protocol, dialect)
    for ev in read_links(path, set(ports) if ports else None):
        if isinstance(ev, WireMessage):
            built = [bytes(f) for f in frame_list(ev.frames)]
            pkt = ZMTPMessage(src=ev.sender.endpoint, dst=ev.receiver.endpoint, frames=[ZMTPFrame(b) for b in built]) \
                / layer(b"".join(built))
            pkt.time = ev.time_ns / 1e9
            yield pkt
