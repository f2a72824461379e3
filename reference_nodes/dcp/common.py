"""What the three DCP reference nodes share: the codec, config parsing, the timer discipline.

Every DCP node speaks one dialect (``config["dialect"]``: ``"strict"``, the document plus
``docs/errata.md``, or ``"dcp:dagbox"``, the deployed implementation's 4-byte message
type) for everything it sends and receives. Frames are handled from the empty address
delimiter on (E-DCP-01); on the broker's ROUTER socket the routing identity precedes them.

Timers: a node keeps its own deadlines and answers ``get_timer()`` with the earliest; the
runtime asks after every input (harness.node).
"""

from __future__ import annotations

import functools
from typing import Any

from harness.node import Action, BaseNode, Discard, NodeContext
from harness.protocols import DecodeError
from harness.protocols.codec import Message
from harness.protocols.dcp import TYPE_CODES
from reference_nodes import config

PROTOCOL = "dcp"
DIALECTS = ("strict", "dcp:dagbox")
ms_to_ns = functools.partial(config.ms_to_ns, PROTOCOL)
positive_int = functools.partial(config.positive_int, PROTOCOL)
as_bytes = config.as_bytes

DEFAULT_ENDPOINT = "tcp://127.0.0.1:5555"
DEFAULT_HEARTBEAT_MS = 1000
DEFAULT_LIVENESS = 3  # E-DCP-09: intervals of silence before a peer is given up

# Clause for a message that decodes but is unexpected for the receiver's role (E-DCP-15).
UNEXPECTED_CLAUSE = "dcp.wire.grammar"


def service_name(value: Any) -> str:
    """A service name as the codec holds it: str, arbitrary bytes kept by surrogateescape."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "surrogateescape")
    if isinstance(value, str):
        return value
    raise ValueError(f"a dcp service name must be str or bytes, not {type(value).__name__}")


def service_bytes(service: str) -> bytes:
    return service.encode("utf-8", "surrogateescape")


def corr_of(metadata: list[bytes] | None) -> str | None:
    """The correlation id for the trace: the first metadata part (the reference client puts
    its request id there)."""
    if not metadata:
        return None
    return metadata[0].decode("utf-8", "backslashreplace")


def endpoint_of(value: Any, key: str = "connect") -> str:
    return config.endpoint(PROTOCOL, value, key)


def identity_of(value: Any) -> bytes | None:
    return config.identity(PROTOCOL, value)


class DcpNode(BaseNode):
    """Base of the DCP reference nodes: dialect codec, encoders, malformed-input handling."""

    protocol = PROTOCOL

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.dialect, self.codec = config.dialect_codec(PROTOCOL, self.config, DIALECTS)
        self.enc = {name: self.codec.encoder(name) for name in TYPE_CODES}

    # ---- decoding --------------------------------------------------------------------------

    def decode(self, frames: list[bytes]) -> Message:
        """Decode one message (from the delimiter on); raises DecodeError only."""
        return self.codec.decode(frames)

    def malformed(self, socket: str, frames: list[bytes], err: DecodeError) -> list[Action]:
        """E-DCP-15: drop what does not decode, record it, send nothing, keep running."""
        return [Discard(socket, list(frames), reason=str(err), clause=err.clause)]

    def unexpected(self, socket: str, frames: list[bytes], msg: Message, why: str) -> list[Action]:
        """E-DCP-15: a message that decodes but this role never expects is dropped the same way."""
        return [Discard(socket, list(frames), reason=f"unexpected {msg.name} for a {self.role}: {why}",
                        clause=UNEXPECTED_CLAUSE)]

    # ---- timers ----------------------------------------------------------------------------

    def get_timer(self) -> int | None:
        """The node's earliest deadline (ns, node clock), or None."""
        return None
