"""What the PPPP reference publisher and subscriber share (specs/pppp.txt with docs/errata.md):
the codec, the agreed-upon times, config parsing, and the one line of standard output per
delivered message.

The agreed-upon times are configuration given to every node of a run (E-PPPP-12), in the
node config as ``first_idle_ms`` (250), ``idle_ms`` (1000, larger than ``first_idle_ms``),
``liveness`` (the "multiple", 3) and ``grace_ms`` (30000). Reference nodes act at exactly
``liveness`` x the interval; "that interval" of disconnect detection is ``idle_ms``
(E-PPPP-13).

Sockets (E-PPPP-09): the publisher has one ROUTER (``"router"``), bound; each subscriber one
DEALER (``"dealer"``), connected. The ROUTER routing id identifies a subscriber; a PPPP message
is the frames after it. Input that does not decode is dropped with a ``Discard`` naming the
codec's clause, and the node keeps running (E-PPPP-05).
"""

from __future__ import annotations

import functools
import json
from typing import Any

from harness.node import Action, BaseNode, Discard, NodeContext
from harness.protocols import DecodeError
from harness.protocols.pppp import CUSTOM
from reference_nodes import config

PROTOCOL = "pppp"
DIALECTS = ("strict",)
ms_to_ns = functools.partial(config.ms_to_ns, PROTOCOL)
positive_int = functools.partial(config.positive_int, PROTOCOL)
endpoint_of = functools.partial(config.endpoint, PROTOCOL)
identity_of = functools.partial(config.identity, PROTOCOL)
as_bytes = config.as_bytes

DEFAULT_ENDPOINT = "tcp://127.0.0.1:5560"
DEFAULT_FIRST_IDLE_MS = 250
DEFAULT_IDLE_MS = 1000
DEFAULT_LIVENESS = 3
DEFAULT_GRACE_MS = 30_000

ROUTER = "router"
DEALER = "dealer"


def channel_name(value: Any, what: str = "a pppp channel") -> bytes:
    """A channel a message is published on: bytes not starting with 0x00-0x04 (E-PPPP-06)."""
    b = as_bytes(value, what)
    if b and b[0] <= CUSTOM:
        raise ValueError(f"{what} must not start with byte 0x{b[0]:02x} (0x00-0x04 are reserved, E-PPPP-06)")
    return b


def channel_list(value: Any, key: str) -> list[bytes]:
    """``channels`` of a node config: a list, or one comma-separated string ("" is one empty
    channel: for a subscriber, the subscription to every channel, E-PPPP-07)."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)):
        items: list[Any] = value.split("," if isinstance(value, str) else b",")
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise ValueError(f"pppp config {key!r} must be a list of channels or 'a,b,c', not {value!r}")
    out: list[bytes] = []
    for item in items:
        c = channel_name(item.strip() if isinstance(item, (str, bytes)) else item, f"pppp config {key!r} entry")
        if c not in out:
            out.append(c)
    return out


def channel_text(channel: bytes) -> str:
    """A channel for JSON output, trace topics and notes: UTF-8, other bytes as \\xNN."""
    return channel.decode("utf-8", "backslashreplace")


class Timing:
    """The agreed-upon times of one node, in ns (E-PPPP-12, E-PPPP-13)."""

    __slots__ = ("first_idle", "idle", "liveness", "grace", "dead_after", "silence_after")

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.first_idle = ms_to_ns(cfg.get("first_idle_ms", DEFAULT_FIRST_IDLE_MS), "first_idle_ms")
        self.idle = ms_to_ns(cfg.get("idle_ms", DEFAULT_IDLE_MS), "idle_ms")
        if self.first_idle <= 0:
            raise ValueError("pppp config 'first_idle_ms' must be positive")
        if self.idle <= self.first_idle:
            raise ValueError(f"pppp config 'idle_ms' ({cfg.get('idle_ms', DEFAULT_IDLE_MS)}) must be larger than "
                             f"'first_idle_ms' ({cfg.get('first_idle_ms', DEFAULT_FIRST_IDLE_MS)}) (E-PPPP-12)")
        self.liveness = positive_int(cfg.get("liveness", DEFAULT_LIVENESS), "liveness")
        self.grace = ms_to_ns(cfg.get("grace_ms", DEFAULT_GRACE_MS), "grace_ms")
        self.dead_after = self.liveness * self.idle  # E-PPPP-13: "that interval" is the idle time
        self.silence_after = self.liveness * self.first_idle  # resend on silence (E-PPPP-15)

    def next_due(self, last_sent: int, last_was_heartbeat: bool) -> int:
        """When the next message to the peer is due (E-PPPP-14): ``first_idle`` after a message
        other than HEARTBEAT, ``idle`` after a HEARTBEAT."""
        return last_sent + (self.idle if last_was_heartbeat else self.first_idle)


class PpppNode(BaseNode):
    """Base of the two reference nodes: codec, timing, malformed-input handling."""

    protocol = PROTOCOL

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.dialect, self.codec = config.dialect_codec(PROTOCOL, self.config, DIALECTS)
        self.timing = Timing(self.config)
        self.enc = {name: self.codec.encoder(name) for name in self.codec.messages}

    def malformed(self, socket: str, frames: list[bytes], err: DecodeError) -> list[Action]:
        """Drop what does not decode, record it, send nothing, keep running (E-PPPP-05)."""
        return [Discard(socket, list(frames), reason=str(err), clause=err.clause)]


def delivery_line(kind: str, data: dict[str, Any]) -> str | None:
    """The standard-output line of a subscriber's delivery to its application (the conformance
    runner reads these from any implementation): ``{"channel": text, "sequence": n, "payload":
    hex of the payload frames joined}``; None for deliveries of other kinds."""
    if kind != "message":
        return None
    payload = b"".join(data.get("payload") or [])
    return json.dumps({"channel": channel_text(bytes(data["channel"])), "sequence": int(data["seq"]),
                       "payload": payload.hex()}, separators=(", ", ": "))
