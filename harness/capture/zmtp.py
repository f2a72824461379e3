"""ZMTP 3.0/3.1 (ZeroMQ RFC 23 and 37) read from one direction of a TCP stream.

`ZmtpReader.feed(time_ns, data)` takes the next bytes of the stream and returns what they
complete: the `Greeting` (signature, version, mechanism, as-server), handshake and control
`Command`s (READY and its metadata — Socket-Type, Identity —, ERROR, PING/PONG, and ZMTP 3.1's
SUBSCRIBE/CANCEL), and whole multipart `Message`s (the frames as the sending application gave
them to its socket). The reader is incremental: a frame may arrive in any number of pieces.

A stream that breaks the framing rules gives one `Failure` (what is wrong and at which byte
offset of the stream) and nothing after it: past a framing error the frame boundaries are
unknowable. What ZMTP allows but a capture cannot show is said too: a CURVE connection's
messages are encrypted (`Encrypted`, counted, not decoded).
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Union

SIGNATURE_FIRST, SIGNATURE_LAST = 0xFF, 0x7F
GREETING_SIZE = 64
MORE, LONG, COMMAND = 0x01, 0x02, 0x04
RESERVED = 0xF8
# A frame longer than this is taken for garbage rather than waited for (it would pin the rest
# of the stream in memory); ZeroMQ's own default maximum message size is unlimited, so this
# is a reader's limit, named as such in the failure.
MAX_FRAME = 1 << 30
MECHANISMS = ("NULL", "PLAIN", "CURVE", "GSSAPI")
# Commands whose body is metadata (name-length, name, 4-byte value-length, value, ...).
METADATA_COMMANDS = ("READY", "INITIATE")


class Greeting(NamedTuple):
    time_ns: int
    major: int
    minor: int
    mechanism: str
    as_server: bool


class Command(NamedTuple):
    time_ns: int
    name: str
    data: bytes  # the command body after its name
    properties: dict[str, bytes] | None  # READY / INITIATE (NULL, PLAIN) metadata


class Message(NamedTuple):
    time_ns: int
    frames: list[bytes]


class Encrypted(NamedTuple):
    time_ns: int
    size: int


class Failure(NamedTuple):
    time_ns: int
    offset: int  # byte offset in this direction's stream
    reason: str


Event = Union[Greeting, Command, Message, Encrypted, Failure]


def parse_metadata(body: bytes) -> dict[str, bytes]:
    """ZMTP metadata properties; raises ValueError on a malformed list."""
    props: dict[str, bytes] = {}
    pos, n = 0, len(body)
    while pos < n:
        ln = body[pos]
        if ln == 0 or pos + 1 + ln + 4 > n:
            raise ValueError(f"malformed metadata property at byte {pos} of the command")
        name = body[pos + 1:pos + 1 + ln].decode("ascii", "replace")
        (vlen,) = struct.unpack_from("!I", body, pos + 1 + ln)
        start = pos + 1 + ln + 4
        if start + vlen > n:
            raise ValueError(f"metadata property {name!r} runs past the end of the command")
        props[name] = bytes(body[start:start + vlen])
        pos = start + vlen
    return props


class ZmtpReader:
    """The ZMTP parser of one direction of one connection."""

    def __init__(self) -> None:
        self._rest = b""  # unparsed bytes (an incomplete unit)
        self._chunks: list[bytes] | None = None  # pieces of a long unit, joined once it is whole
        self._have = 0
        self._need = 0
        self._offset = 0  # stream offset of the first unparsed byte
        self.greeting: Greeting | None = None
        self.ready = False  # the handshake of this direction is complete (READY sent)
        self.encrypted = False  # CURVE: messages travel as encrypted MESSAGE commands
        self.failed: Failure | None = None
        self._parts: list[bytes] = []
        self.messages = 0
        self.bytes = 0

    def feed(self, time_ns: int, data: bytes) -> list[Event]:
        if self.failed is not None:
            return []
        self.bytes += len(data)
        if self._chunks is not None:  # a long unit arriving in pieces: join once, when whole
            self._chunks.append(data)
            self._have += len(data)
            if self._have < self._need:
                return []
            buf = b"".join(self._chunks)
            self._chunks = None
        else:
            buf = self._rest + data if self._rest else data
        out: list[Event] = []
        pos = 0
        if self.greeting is None:
            pos = self._greeting(time_ns, buf, out)
            if self.greeting is None:
                self._keep(buf, pos, z_need=0)
                return out
        n = len(buf)
        parts = self._parts
        need = 0
        while n - pos >= 2:
            flags = buf[pos]
            if flags & RESERVED:
                self._fail(time_ns, pos, f"frame flags 0x{flags:02x} set reserved bits (ZMTP: bits 7-3 must be zero)",
                           out)
                return out
            if flags & LONG:
                if n - pos < 9:
                    break
                size = int.from_bytes(buf[pos + 1:pos + 9], "big")
                start = pos + 9
                if size > MAX_FRAME:
                    self._fail(time_ns, pos, f"frame of {size} bytes claimed; larger than this reader's limit of "
                                             f"{MAX_FRAME} bytes (the stream is not ZMTP framing)", out)
                    return out
            else:
                size, start = buf[pos + 1], pos + 2
            end = start + size
            if end > n:
                need = end - pos
                break
            if flags & COMMAND:
                if parts:
                    self._fail(time_ns, pos, "a command frame inside a multipart message", out)
                    return out
                self._command(time_ns, pos, buf[start:end], out)
                if self.failed is not None:
                    return out
                pos = end
                continue
            if not self.ready or self.encrypted:
                why = ("a message frame on a CURVE connection (CURVE sends MESSAGE commands only)" if self.encrypted
                       else "a message frame before the handshake finished (no READY yet)")
                self._fail(time_ns, pos, why, out)
                return out
            parts.append(buf[start:end])
            pos = end
            if not flags & MORE:
                self.messages += 1
                out.append(Message(time_ns, parts))
                parts = self._parts = []
        self._keep(buf, pos, need)
        return out

    # ---- internals ------------------------------------------------------------------------

    def _keep(self, buf: bytes, pos: int, z_need: int) -> None:
        """Keep what is left after ``pos``; a long unit still ``z_need`` bytes long is
        collected in pieces (joining each new segment to it would copy it again and again)."""
        rest = buf[pos:] if pos else buf
        self._offset += pos
        if z_need > 65536:
            self._chunks, self._have, self._need, self._rest = [rest], len(rest), z_need, b""
        else:
            self._rest = rest

    def _fail(self, time_ns: int, pos: int, reason: str, out: list[Event]) -> None:
        self.failed = Failure(time_ns, self._offset + pos, reason)
        out.append(self.failed)
        self._rest = b""
        self._chunks = None

    def _greeting(self, time_ns: int, buf: bytes, out: list[Event]) -> int:
        """Check the greeting as far as it has arrived; 64 when it is complete, else 0."""
        n = len(buf)
        if n >= 1 and buf[0] != SIGNATURE_FIRST:
            self._fail(time_ns, 0, f"not a ZMTP stream: first byte 0x{buf[0]:02x}, a greeting starts with 0xff", out)
            return 0
        if n >= 10 and buf[9] != SIGNATURE_LAST:
            self._fail(time_ns, 9, f"not a ZMTP 3 greeting: byte 9 is 0x{buf[9]:02x}, the signature ends with 0x7f "
                                   "(ZMTP/1.0 peer, or not ZMTP)", out)
            return 0
        if n >= 11 and buf[10] < 3:
            self._fail(time_ns, 10, f"ZMTP revision {buf[10]} (ZMTP/2.0 or older) is not supported by this reader; "
                                    "only ZMTP 3.x", out)
            return 0
        if n < GREETING_SIZE:
            return 0
        mech = buf[12:32].rstrip(b"\x00").decode("ascii", "replace")
        if mech not in MECHANISMS:
            self._fail(time_ns, 12, f"unknown security mechanism {mech!r} in the greeting", out)
            return 0
        self.greeting = Greeting(time_ns, buf[10], buf[11], mech, bool(buf[32]))
        self.encrypted = mech == "CURVE"
        out.append(self.greeting)
        return GREETING_SIZE

    def _command(self, time_ns: int, at: int, body: bytes, out: list[Event]) -> None:
        if not body or body[0] == 0 or 1 + body[0] > len(body):
            self._fail(time_ns, at, "malformed command frame (bad name length)", out)
            return
        name = body[1:1 + body[0]].decode("ascii", "replace")
        data = body[1 + body[0]:]
        if self.encrypted:
            if name == "MESSAGE":
                self.messages += 1
                out.append(Encrypted(time_ns, len(data)))
                return
            if name in ("READY", "INITIATE"):
                self.ready = True
            out.append(Command(time_ns, name, data, None))
            return
        props = None
        if name in METADATA_COMMANDS:
            try:
                props = parse_metadata(data)
            except ValueError as e:
                self._fail(time_ns, at, f"{name}: {e}", out)
                return
        if name in ("READY", "INITIATE"):  # PLAIN's client finishes with INITIATE, the rest with READY
            self.ready = True
        out.append(Command(time_ns, name, data, props))
