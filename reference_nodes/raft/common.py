"""What the Raft reference peer and client share: config parsing, the dialect's codec and its
id fields, request ids, malformed-input handling.

Both nodes speak one dialect (``config["dialect"]``): ``"strict"`` (the document with
docs/errata.md) or ``"raft:zmq-raft"`` (node-zmq-raft 0.7, INTEROP.md). The dialects differ in
the client requests: 0.7 puts the cluster ident after the type byte and uses a ``uint32``
``request_id`` instead of the 12-byte ``reqid`` for RequestConfig, RequestLogInfo,
RequestEntries and RequestBroadcastStateUrl (`Dialect` hides that).
"""

from __future__ import annotations

import functools
from typing import Any

from harness.node import Action, BaseNode, Discard, NodeContext
from harness.protocols import DecodeError
from harness.protocols.raft import DIALECT, NULL
from reference_nodes import config

PROTOCOL = "raft"
DIALECTS = ("strict", DIALECT)
ms_to_ns = functools.partial(config.ms_to_ns, PROTOCOL)
positive_int = functools.partial(config.positive_int, PROTOCOL)

# Timings of node-zmq-raft 0.7 (INTEROP.md) and the document's preferred values.
DEFAULT_ELECTION_MIN_MS = 200
DEFAULT_ELECTION_MAX_MS = 300
DEFAULT_RPC_TIMEOUT_MS = 50
DEFAULT_HEARTBEAT_MS = 70
DEFAULT_CLIENT_HEARTBEAT_MS = 500  # StateBroadcast heartbeat (CLIENT_HEARTBEAT_INTERVAL)
DEFAULT_RESPONSE_TTL_MS = 500  # SERVER_RESPONSE_TTL
DEFAULT_ELECTION_GRACE_MS = 300  # SERVER_ELECTION_GRACE_MS
DEFAULT_UPDATE_TTL_MS = 8 * 3600 * 1000  # REQUEST_UPDATE_TTL
DEFAULT_ENTRIES_PIPELINE = 5  # REQUEST_ENTRIES_PIPELINES
# Request ids carry seconds since the Unix epoch; node clocks start at 0, so a configurable
# base (the start of the run on the epoch scale) is added. Peers and clients of a run share it.
DEFAULT_EPOCH_S = 1_700_000_000

# Clause for a message that decodes but that this role never expects (E-RAFT-23).
UNEXPECTED_CLAUSE = "raft.wire.grammar"

# Client RPCs whose id field is the dialect's (reqid in strict, request_id in 0.7).
DIALECT_ID_RPCS = ("RequestConfig", "RequestLogInfo", "RequestEntries", "RequestBroadcastStateUrl")


def text(value: Any, what: str) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, str):
        return value
    raise ValueError(f"raft config {what!r} must be a string, not {value!r}")


def cluster_ident(value: Any) -> bytes:
    """The cluster ident (E-RAFT-10): any bytes, configured identically on every peer."""
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise ValueError(f"raft config 'cluster' must be a string or bytes, not {value!r}")


def peer_list(value: Any) -> list[tuple[str, str]]:
    """``[[id, url], ...]``, ``{id: url}`` or ``"id=url,id=url"`` as (id, url) pairs."""
    if isinstance(value, str):
        pairs = [p.split("=", 1) for p in value.split(",") if p.strip()]
        if any(len(p) != 2 for p in pairs):
            raise ValueError(f"raft config 'peers' as text is 'ID=URL,ID=URL', got {value!r}")
        value = [[a.strip(), b.strip()] for a, b in pairs]
    if isinstance(value, dict):
        value = list(value.items())
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"raft config 'peers' must list [id, url] pairs, got {value!r}")
    out: list[tuple[str, str]] = []
    for p in value:
        if not isinstance(p, (list, tuple)) or len(p) != 2 or not all(isinstance(x, str) and x for x in p):
            raise ValueError(f"raft config 'peers': each peer is [id, url] (non-empty strings), got {p!r}")
        out.append((p[0], p[1]))
    ids = [p[0] for p in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"raft config 'peers': peer ids must be unique (raft.peer.unique-id), got {ids}")
    return out


def leader_field(leader: str | None) -> Any:
    """A LEADER ID frame value: the id, or NULL (MessagePack nil) when none is known."""
    return leader if leader is not None else NULL


class Dialect:
    """The codec of a dialect and the shapes of its client requests and responses."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.name, self.codec = config.dialect_codec(PROTOCOL, cfg, DIALECTS)
        self.strict = self.name == "strict"
        self.id_field = "reqid" if self.strict else "request_id"
        self.enc = {m: self.codec.encoder(m) for m in self.codec.messages}
        self.dec = {m: self.codec.decoder(m) for m in self.codec.messages}

    def rpc_id(self, rpc: str) -> str:
        """The name of the id field of a client RPC."""
        return self.id_field if rpc in DIALECT_ID_RPCS else "reqid"

    def id_key(self, frame: bytes, rpc: str) -> Any:
        """A key under which a request id frame is remembered: the reqid bytes, or the uint32's
        value in 0.7 (a response may encode the same number in more bytes)."""
        if rpc in DIALECT_ID_RPCS and not self.strict:
            return int.from_bytes(frame, "little")
        return frame


class RaftNode(BaseNode):
    """Base of the Raft reference nodes: dialect, malformed-input handling."""

    protocol = PROTOCOL

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.d = Dialect(self.config)
        self.cluster = cluster_ident(self.config.get("cluster", ""))
        self.epoch_s = int(self.config.get("epoch_s", DEFAULT_EPOCH_S))

    def ms(self, key: str, default: float) -> int:
        return ms_to_ns(self.config.get(key, default), key)

    def malformed(self, socket: str, frames: list[bytes], err: DecodeError) -> list[Action]:
        """E-RAFT-23: drop what does not decode, record it, send nothing, keep running."""
        return [Discard(socket, list(frames), reason=str(err), clause=err.clause or "raft.wire.grammar")]

    def unexpected(self, socket: str, frames: list[bytes], why: str, clause: str = UNEXPECTED_CLAUSE) -> list[Action]:
        return [Discard(socket, list(frames), reason=why, clause=clause)]

    def epoch_seconds(self, now: int) -> int:
        """Seconds since the Unix epoch on this node's clock (request id timestamps)."""
        return max(0, self.epoch_s + now // 1_000_000_000)
