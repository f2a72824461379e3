"""ZMTP 3.0/3.1 on the wire: the greeting, the NULL handshake, frames, commands, messages.

Just enough of https://rfc.zeromq.org/spec/23/ (ZMTP 3.0) and /spec/37/ (ZMTP 3.1) for a proxy
that relays a TCP stream unchanged but needs to see whole messages in it:

* ``Greeting``: signature (0xFF, 8 octets of padding, 0x7F), version, mechanism, as-server;
* frames: a flags octet (MORE, LONG, COMMAND; the other bits reserved) and a 1- or 8-octet size;
* commands: READY (properties such as Socket-Type and Identity), ERROR, PING, PONG, SUBSCRIBE,
  CANCEL, and any other name (passed on as it is);
* ``ZmtpStream``: an incremental parser of one direction of a connection. It cuts the bytes it is
  fed into *units* whose raw bytes, sent on in order, are exactly the bytes that came in: greeting
  bytes as they arrive (peers send the greeting in parts and wait for each other), handshake
  commands, then whole messages (all frames of a multipart message, or one command frame).

What it cannot follow — no ZMTP signature (garbage, ZMTP 1.0), a version below 3, a mechanism
other than NULL (its traffic is encrypted or needs state this parser does not keep), reserved
flag bits, a command inside a multipart message, a message over ``max_message`` octets — turns
the stream *opaque*: every byte from then on is one ``OPAQUE`` unit, passed on unchanged, and
``opaque_reason`` says why. The parser never raises on peer input.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Mapping, Sequence

SIGNATURE_LEN = 10
GREETING_LEN = 64
MORE, LONG, COMMAND = 0x01, 0x02, 0x04
RESERVED = 0xF8
MECHANISM_LEN = 20
DEFAULT_MAX_MESSAGE = 64 * 1024 * 1024
HANDSHAKE_MAX = 64 * 1024  # a READY with metadata is a few hundred octets

# Unit kinds (the first element of every unit tuple).
GREETING_BYTES = 0  # part of the greeting, as it arrived
HANDSHAKE = 1  # a command of the security handshake (READY, ERROR, ...)
MESSAGE = 2  # a whole data message: all its frames
CMD = 3  # a command after the handshake (PING, PONG, SUBSCRIBE, CANCEL, ...)
OPAQUE = 4  # bytes the parser does not follow (see opaque_reason)

# A unit: (kind, raw bytes, frames of a MESSAGE or None, Command of a HANDSHAKE/CMD or None).
Unit = tuple[int, bytes, "list[bytes] | None", "Command | None"]


class ZmtpError(ValueError):
    """Bytes that are not what ZMTP says (raised by the strict helpers, never by ZmtpStream)."""


# ---- greeting ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Greeting:
    major: int = 3
    minor: int = 1
    mechanism: str = "NULL"
    as_server: bool = False

    def encode(self) -> bytes:
        mech = self.mechanism.encode("ascii")
        if len(mech) > MECHANISM_LEN:
            raise ZmtpError(f"mechanism name {self.mechanism!r} is longer than {MECHANISM_LEN} octets")
        return (b"\xff" + b"\x00" * 8 + b"\x7f" + bytes([self.major, self.minor]) + mech.ljust(MECHANISM_LEN, b"\x00")
                + bytes([1 if self.as_server else 0]) + b"\x00" * 31)

    @classmethod
    def parse(cls, data: bytes) -> Greeting:
        if len(data) < GREETING_LEN:
            raise ZmtpError(f"a greeting is {GREETING_LEN} octets, got {len(data)}")
        if data[0] != 0xFF or not data[9] & 0x01:
            raise ZmtpError(f"no ZMTP signature: {data[:SIGNATURE_LEN].hex()}")
        mech = bytes(data[12:12 + MECHANISM_LEN]).rstrip(b"\x00")
        return cls(data[10], data[11], mech.decode("ascii", "replace"), bool(data[32]))


# ---- frames and commands -------------------------------------------------------------------------


def encode_frame(body: bytes, *, more: bool = False, command: bool = False) -> bytes:
    flags = (MORE if more else 0) | (COMMAND if command else 0)
    size = len(body)
    if size > 255:
        return bytes([flags | LONG]) + size.to_bytes(8, "big") + body
    return bytes([flags, size]) + body


def encode_message(frames: Sequence[bytes]) -> bytes:
    """A multipart data message as it goes on the wire (short sizes where they fit)."""
    last = len(frames) - 1
    return b"".join(encode_frame(f, more=i < last) for i, f in enumerate(frames))


def encode_command(name: str, data: bytes = b"") -> bytes:
    raw = name.encode("ascii")
    if not 0 < len(raw) < 256:
        raise ZmtpError(f"command name {name!r} must be 1-255 octets")
    return encode_frame(bytes([len(raw)]) + raw + data, command=True)


def encode_properties(props: Mapping[str, bytes]) -> bytes:
    out = bytearray()
    for name, value in props.items():
        raw = name.encode("ascii")
        out += bytes([len(raw)]) + raw + struct.pack(">I", len(value)) + value
    return bytes(out)


def ready_command(props: Mapping[str, bytes]) -> bytes:
    """READY with metadata, e.g. ``{"Socket-Type": b"DEALER", "Identity": b"w1"}``."""
    return encode_command("READY", encode_properties(props))


def parse_properties(data: bytes) -> dict[str, bytes]:
    """READY / INITIATE metadata; raises ZmtpError on a truncated property."""
    props: dict[str, bytes] = {}
    i, n = 0, len(data)
    while i < n:
        size = data[i]
        name_end = i + 1 + size
        if name_end + 4 > n:
            raise ZmtpError("truncated property name")
        name = bytes(data[i + 1:name_end]).decode("ascii", "replace")
        vsize = int.from_bytes(data[name_end:name_end + 4], "big")
        value_end = name_end + 4 + vsize
        if value_end > n:
            raise ZmtpError(f"truncated value of property {name!r}")
        props[name] = bytes(data[name_end + 4:value_end])
        i = value_end
    return props


@dataclass(frozen=True)
class Command:
    """A command frame's body: its name and the data after it."""

    name: str
    data: bytes = b""
    properties: dict[str, bytes] = field(default_factory=dict)  # READY / INITIATE metadata

    @classmethod
    def parse(cls, body: bytes) -> Command:
        if not body or len(body) < 1 + body[0]:
            raise ZmtpError("command frame shorter than its name")
        size = body[0]
        name = bytes(body[1:1 + size]).decode("ascii", "replace")
        data = bytes(body[1 + size:])
        props: dict[str, bytes] = {}
        if name in ("READY", "INITIATE"):
            props = parse_properties(data)
        return cls(name, data, props)

    @property
    def socket_type(self) -> str:
        return self.properties.get("Socket-Type", b"").decode("ascii", "replace")

    @property
    def identity(self) -> bytes:
        return self.properties.get("Identity", b"")


def frames_of(raw: bytes) -> list[bytes]:
    """The frame bodies of a raw message (strict: raises ZmtpError on anything malformed)."""
    frames = []
    i, n = 0, len(raw)
    while i < n:
        if i + 2 > n:
            raise ZmtpError("truncated frame header")
        flags = raw[i]
        if flags & RESERVED:
            raise ZmtpError(f"reserved flag bits set: {flags:#04x}")
        if flags & LONG:
            if i + 9 > n:
                raise ZmtpError("truncated long frame header")
            size, start = int.from_bytes(raw[i + 1:i + 9], "big"), i + 9
        else:
            size, start = raw[i + 1], i + 2
        if start + size > n:
            raise ZmtpError("truncated frame body")
        frames.append(bytes(raw[start:start + size]))
        i = start + size
    return frames


def _split(raw: bytes) -> list[bytes]:
    """The frame bodies of a message ``ZmtpStream._walk`` has already checked."""
    frames = []
    i, n = 0, len(raw)
    while i < n:
        if raw[i] & LONG:
            start = i + 9
            i = start + int.from_bytes(raw[i + 1:start], "big")
        else:
            start = i + 2
            i = start + raw[i + 1]
        frames.append(raw[start:i])
    return frames


# ---- one direction of a connection ------------------------------------------------------------------

_GREETING, _HANDSHAKE, _TRAFFIC, _OPAQUE = "greeting", "handshake", "traffic", "opaque"


class ZmtpStream:
    """Incremental parser of the bytes one peer sends. ``feed`` bytes, then take units with
    ``units()`` (any phase) or, in the traffic phase, the raw bytes of whole messages with
    ``take_messages()`` (fast: it walks frame headers without copying frames)."""

    def __init__(self, max_message: int = DEFAULT_MAX_MESSAGE) -> None:
        self.max_message = max_message
        self.phase = _GREETING
        self.greeting: Greeting | None = None
        self.ready: Command | None = None  # the peer's READY: its Socket-Type and Identity
        self.opaque_reason = ""
        self.messages = 0  # whole messages and commands seen after the handshake
        self._buf = bytearray()
        self._greeting = bytearray()
        # Traffic phase: the index in _buf of the next frame header to look at; the frames of
        # the current (incomplete) message before it are complete and need no second look.
        self._scan = 0

    @property
    def traffic(self) -> bool:
        return self.phase == _TRAFFIC

    @property
    def opaque(self) -> bool:
        return self.phase == _OPAQUE

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> None:
        self._buf += data

    def make_opaque(self, reason: str) -> None:
        if self.phase != _OPAQUE:
            self.phase = _OPAQUE
            self.opaque_reason = reason

    # -- any phase

    def units(self) -> list[Unit]:
        """Every complete unit in the buffer, in order."""
        out: list[Unit] = []
        while self._buf:
            phase = self.phase
            if phase == _TRAFFIC:
                self._traffic_units(out)
                if self.phase == _TRAFFIC:
                    break
                continue
            if phase == _GREETING:
                unit = self._greeting_bytes()
            elif phase == _HANDSHAKE:
                unit = self._handshake_unit()
            else:
                unit = (OPAQUE, bytes(self._buf), None, None)
                self._buf.clear()
            if unit is None:
                break
            out.append(unit)
        return out

    def _greeting_bytes(self) -> Unit | None:
        """Greeting octets as they come (up to the end of the greeting), checked as they
        complete the signature, the version and the mechanism."""
        want = GREETING_LEN - len(self._greeting)
        chunk = bytes(self._buf[:want])
        del self._buf[:want]
        start = len(self._greeting)
        self._greeting += chunk
        g = self._greeting
        have = len(g)
        if start == 0 and g[0] != 0xFF:
            self.make_opaque(f"no ZMTP signature (first octet {g[0]:#04x})")
            return (OPAQUE, chunk, None, None)
        if start < SIGNATURE_LEN <= have and not g[9] & 0x01:
            self.make_opaque("ZMTP 1.0 peer (signature without the 0x7F octet)")
            return (OPAQUE, chunk, None, None)
        if start < 11 <= have and g[10] < 3:
            self.make_opaque(f"ZMTP version {g[10]} (only 3.x is parsed)")
            return (OPAQUE, chunk, None, None)
        if have == GREETING_LEN:
            self.greeting = Greeting.parse(bytes(g))
            if self.greeting.mechanism != "NULL":
                self.make_opaque(f"mechanism {self.greeting.mechanism} (only NULL is parsed)")
            else:
                self.phase = _HANDSHAKE
        return (GREETING_BYTES, chunk, None, None)

    def _frame_end(self, pos: int) -> tuple[int, int, int] | None:
        """(flags, body start, body end) of the frame at ``pos``, or None if incomplete."""
        buf = self._buf
        n = len(buf)
        if pos + 2 > n:
            return None
        flags = buf[pos]
        if flags & LONG:
            if pos + 9 > n:
                return None
            start = pos + 9
            end = start + int.from_bytes(buf[pos + 1:start], "big")
        else:
            start = pos + 2
            end = start + buf[pos + 1]
        return flags, start, end

    def _handshake_unit(self) -> Unit | None:
        head = self._frame_end(0)
        if head is None:
            return None
        flags, start, end = head
        if flags & RESERVED or not flags & COMMAND or flags & MORE:
            self.make_opaque(f"handshake frame with flags {flags:#04x} is not a command")
            return self._rest_opaque()
        if end - start > HANDSHAKE_MAX:
            self.make_opaque(f"handshake command of {end - start} octets (over {HANDSHAKE_MAX})")
            return self._rest_opaque()
        if end > len(self._buf):
            return None
        raw = bytes(self._buf[:end])
        del self._buf[:end]
        try:
            cmd = Command.parse(raw[start:])
        except ZmtpError as exc:
            self.make_opaque(f"malformed handshake command: {exc}")
            return (OPAQUE, raw, None, None)
        if cmd.name == "READY":
            self.ready = cmd
            self.phase = _TRAFFIC
            self._scan = 0
        return (HANDSHAKE, raw, None, cmd)

    def _rest_opaque(self) -> Unit:
        raw = bytes(self._buf)
        self._buf.clear()
        return (OPAQUE, raw, None, None)

    # -- traffic phase

    def _walk(self, start: int) -> int:
        """Advance ``_scan`` (an index into the buffer) over complete frames of the message that
        starts at ``start``. Returns the end of that message once it is complete, 0 while it is
        not, -1 after turning the stream opaque on malformed framing. The hot path: a short
        data frame (flags 0 or 1) costs a handful of byte codes."""
        buf = self._buf
        n = len(buf)
        pos = self._scan
        while pos + 2 <= n:
            flags = buf[pos]
            if flags < 2:  # short data frame, the common case
                end = pos + 2 + buf[pos + 1]
                if end > n:
                    break
                pos = end
                if not flags:
                    if end - start > self.max_message:
                        break  # said below
                    self._scan = end
                    return end
                continue
            if flags & LONG:
                if pos + 9 > n:
                    break
                end = pos + 9 + int.from_bytes(buf[pos + 1:pos + 9], "big")
            else:
                end = pos + 2 + buf[pos + 1]
            if flags & RESERVED:
                self.make_opaque(f"reserved flag bits set: {flags:#04x}")
                return -1
            if flags & COMMAND and (pos != start or flags & MORE):
                self.make_opaque("command frame with the MORE flag" if pos == start
                                 else "command frame inside a multipart message")
                return -1
            if end - start > self.max_message:
                self.make_opaque(f"message over {self.max_message} octets")
                return -1
            if end > n:
                break
            pos = end
            if not flags & MORE:
                self._scan = end
                return end
        if pos - start > self.max_message:  # endless short frames with MORE
            self.make_opaque(f"message over {self.max_message} octets")
            return -1
        self._scan = pos
        return 0

    def _traffic_units(self, out: list[Unit]) -> None:
        """Append every complete message and command to ``out``; the consumed bytes leave the
        buffer in one cut (cutting per message would move the rest of the buffer each time)."""
        buf = self._buf
        start = 0
        before = len(out)
        while True:
            end = self._walk(start)
            if end <= 0:
                break
            raw = bytes(buf[start:end])
            start = end
            if raw[0] & COMMAND:
                try:
                    cmd = Command.parse(raw[9 if raw[0] & LONG else 2:])
                except ZmtpError:
                    cmd = Command("")  # a command frame too short for its name: passed on as it is
                out.append((CMD, raw, None, cmd))
            else:
                out.append((MESSAGE, raw, _split(raw), None))
        self.messages += len(out) - before
        if end < 0:
            self._scan = 0
            out.append((OPAQUE, bytes(buf[start:]), None, None))
            buf.clear()
            return
        del buf[:start]
        self._scan -= start

    def take_messages(self) -> tuple[bytes, int]:
        """Traffic phase only: the raw bytes of every complete message (or command) in the
        buffer and how many there are, without copying frames. Malformed framing turns the
        stream opaque (the messages before it still come out; ``units()`` then returns the
        rest as OPAQUE)."""
        start = 0
        count = 0
        while True:
            end = self._walk(start)
            if end <= 0:
                break
            count += 1
            start = end
        buf = self._buf
        if start:
            raw = bytes(buf[:start])
            del buf[:start]
        else:
            raw = b""
        self._scan = 0 if end < 0 else self._scan - start
        self.messages += count
        return raw, count
