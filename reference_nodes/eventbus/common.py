"""What the Event BUS reference server and client share (specs/eventbus.md with docs/errata.md):
the codec of the node's dialect, the three endpoints of a server, subtree matching, the event
record, v4 UUIDs from the node's rng and ISO-8601 timestamps from the node's clock.

Sockets are named after the server port they belong to (E-EVENTBUS-16): ``snapshot`` (P),
``publisher`` (P+1) and ``collector`` (P+2). A client of a dual-server bus has one set per
server: the sockets of server 0 carry the plain names, those of server ``i`` end in ``.i``
(``snapshot.1``); `channel_of` and `server_index` take a socket name apart.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Callable, Sequence

import msgpack

from harness.node import Action, BaseNode, Discard, NodeContext
from harness.protocols import DecodeError
from harness.protocols.codec import Message
from reference_nodes import config

PROTOCOL = "eventbus"
DIALECTS = ("strict", "eventbus:micro-toolkit")
ms_to_ns = functools.partial(config.ms_to_ns, PROTOCOL)
positive_int = functools.partial(config.positive_int, PROTOCOL)

SNAPSHOT, PUBLISHER, COLLECTOR = "snapshot", "publisher", "collector"
CHANNELS = (SNAPSHOT, PUBLISHER, COLLECTOR)
DEFAULT_SNAPSHOT = "tcp://127.0.0.1:5556"  # micro-toolkit's default ports: 5556, 5557, 5558
GRAMMAR = "eventbus.wire.grammar"
# A client's snapshot and a passive server's replica connect anew when this many requests in a row
# went unanswered (not at the first: a late answer, or one waiting for a loop that runs behind, is
# still read on the old connection)
NEW_CONNECTION_AFTER = 2
# Timestamps count from this instant (2023-11-14T22:13:20Z) on the node's clock: deterministic
# in simulation, and never the wall clock (DESIGN rule 1).
DEFAULT_EPOCH_S = 1_700_000_000

_TCP = re.compile(r"^(tcp://[^/\s]+):([0-9]{1,5})$")


# ---- endpoints and sockets -------------------------------------------------------------------


def server_endpoints(value: Any, what: str = "server") -> tuple[str, str, str]:
    """(snapshot, publisher, collector) of one server: three endpoints, or the snapshot
    endpoint ``tcp://host:P`` alone, whose publisher and collector are at P+1 and P+2."""
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if isinstance(value, str):
        m = _TCP.match(value)
        if m is None:
            raise ValueError(f"eventbus {what} endpoint {value!r}: give tcp://host:port (the snapshot port P; the "
                             "publisher and collector are at P+1 and P+2), or all three endpoints")
        base, port = m.group(1), int(m.group(2))
        if port + 2 > 65535:
            raise ValueError(f"eventbus {what} endpoint {value!r}: P+2 is not a port")
        return value, f"{base}:{port + 1}", f"{base}:{port + 2}"
    if isinstance(value, (list, tuple)) and len(value) == 3 and all(isinstance(e, str) and e for e in value):
        return value[0], value[1], value[2]
    raise ValueError(f"eventbus {what} endpoints must be 'tcp://host:P' or [snapshot, publisher, collector], "
                     f"got {value!r}")


def socket_name(channel: str, index: int) -> str:
    return channel if index == 0 else f"{channel}.{index}"


def channel_of(socket: str) -> str:
    """``snapshot.1`` -> ``snapshot``: the server port a socket belongs to."""
    return socket.split(".", 1)[0]


def server_index(socket: str) -> int:
    """``snapshot.1`` -> 1, ``snapshot`` -> 0."""
    _, _, index = socket.partition(".")
    return int(index) if index.isdigit() else 0


# ---- topics and subtrees ---------------------------------------------------------------------


def in_subtrees(topic: str, subtrees: Sequence[str]) -> bool:
    """A topic is in a subtree when it starts with it; an empty specification selects every
    topic (E-EVENTBUS-05)."""
    if not subtrees:
        return True
    for s in subtrees:
        if topic.startswith(s):
            return True
    return False


def subtrees_value(value: Any, subtree_type: Any) -> list[str]:
    """A subtree specification from config: a list of subtrees, or one string joined by the
    dialect's separator (as on the wire). ``subtree_type`` is the dialect's field type, so a node
    never sends a specification its own codec rejects (E-EVENTBUS-05)."""
    from harness.protocols.errors import FieldError

    try:
        if value is None:
            return []
        if isinstance(value, str):
            return list(subtree_type.decode(value.encode("utf-8")))
        if isinstance(value, (list, tuple)) and all(isinstance(s, str) for s in value):
            subtree_type.encode(list(value))
            if any(not s for s in value):
                raise FieldError("an empty subtree")
            return list(value)
    except FieldError as e:
        raise ValueError(f"eventbus subtrees {value!r}: {e.reason}") from None
    raise ValueError(f"eventbus subtrees must be a list of strings or one string, got {value!r}")


# ---- generated values ------------------------------------------------------------------------


def uuid4(rng: Any) -> str:
    """A version-4 UUID (RFC 4122 §4.4) from the node's rng, lowercase (E-EVENTBUS-14)."""
    n = rng.getrandbits(128)
    n = (n & ~(0xF000 << 64)) | (0x4000 << 64)  # version 4
    n = (n & ~(0xC000 << 48)) | (0x8000 << 48)  # variant 10
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def iso8601(now_ns: int, epoch_s: int = DEFAULT_EPOCH_S) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` for the node clock ``now_ns`` counted from ``epoch_s`` (UTC,
    milliseconds, as JavaScript's toISOString; E-EVENTBUS-14)."""
    total_ms = epoch_s * 1000 + now_ns // 1_000_000
    secs, ms = divmod(total_ms, 1000)
    days, rem = divmod(secs, 86400)
    hour, rem = divmod(rem, 3600)
    minute, second = divmod(rem, 60)
    year, month, day = _civil_from_days(days)
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{ms:03d}Z"


def _civil_from_days(z: int) -> tuple[int, int, int]:
    """Days since 1970-01-01 -> (year, month, day), proleptic Gregorian (H. Hinnant's algorithm)."""
    z += 719468
    era = (z if z >= 0 else z - 146096) // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return (y + 1 if m <= 2 else y), m, d


# ---- events ----------------------------------------------------------------------------------

_pack = msgpack.Packer(use_bin_type=True).pack


class Event:
    """One event as a server holds it: its sequence, its topic (text, for subtree matching) and
    the producer's frames byte for byte (topic, producer, timestamp, uuid, data; E-EVENTBUS-12),
    which every BROADCAST and SYNC of it carries around the server's own sequence frame."""

    __slots__ = ("seq", "topic", "uuid", "frames")

    def __init__(self, seq: int, topic: str, uuid: str, frames: list[bytes]) -> None:
        self.seq = seq
        self.topic = topic
        self.uuid = uuid
        self.frames = frames  # [topic, producer, timestamp, uuid, data]

    def to_store(self) -> bytes:
        # One MessagePack blob: the store copies what it keeps value by value, and bytes whole.
        return _pack([self.seq, self.topic, self.uuid, *self.frames])

    @classmethod
    def from_store(cls, value: bytes) -> "Event":
        seq, topic, uuid, *frames = msgpack.unpackb(value, raw=False)
        return cls(int(seq), str(topic), str(uuid), [bytes(f) for f in frames])


def event_frames(body: list[bytes]) -> list[bytes]:
    """The producer's frames of a PUB / BROADCAST body (its sequence frame left out)."""
    return [body[0], body[2], body[3], body[4], body[5]]


def with_sequence(frames: list[bytes], seq_frame: bytes) -> list[bytes]:
    """An event's frames with a sequence frame in second place: the body of a BROADCAST."""
    return [frames[0], seq_frame, frames[1], frames[2], frames[3], frames[4]]


# ---- the node base ---------------------------------------------------------------------------


class EventBusNode(BaseNode):
    """Base of the server and the client: the dialect's codec, its compiled decoders and
    sequence encoding, and dropping what does not decode (with the clause it breaks)."""

    protocol = PROTOCOL

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.dialect, self.codec = config.dialect_codec(PROTOCOL, self.config, DIALECTS)
        self.dec = {name: self.codec.decoder(name) for name in self.codec.messages}
        self.enc = {name: self.codec.encoder(name) for name in self.codec.messages}
        self.seq_frame: Callable[[Any], bytes] = self.codec.table.fields["sequence"].type.encode
        self.subtree_type = self.codec.table.fields["subtrees"].type
        self.epoch_s = int(self.config.get("epoch_s", DEFAULT_EPOCH_S))

    def decode_as(self, name: str, socket: str, frames: list[bytes]) -> tuple[Message | None, list[Action]]:
        """Decode a message of a known type; what does not decode is dropped and recorded."""
        try:
            return self.dec[name](frames), []
        except DecodeError as e:
            return None, [Discard(socket, list(frames), reason=str(e), clause=e.clause or GRAMMAR)]

    def decode_snapshot(self, socket: str, frames: list[bytes]) -> tuple[Message | None, list[Action]]:
        """A message on a snapshot socket (SYNCSTART, SYNC or SYNCEND: the command frame tells)."""
        try:
            return self.codec.decode(frames, channel=SNAPSHOT), []
        except DecodeError as e:
            return None, [Discard(socket, list(frames), reason=str(e), clause=e.clause or GRAMMAR)]

    def unexpected(self, socket: str, frames: list[bytes], msg: Message, why: str) -> list[Action]:
        return [Discard(socket, list(frames), reason=f"unexpected {msg.name}: {why}", clause=GRAMMAR)]
