"""ZMQ Raft — Raft over ZeroMQ (../shared/specs/zmq-raft.md), wire table.

Frames are given as a DEALER application hands them to its socket: the ROUTER identity that
precedes them on the receiving peer's socket is the transport's envelope, not a field.

Strict (the document with the errata decisions of docs/errata.md):

==========================  ============================================================  =========
message                     frames                                                        channel
==========================  ============================================================  =========
RequestVote                 message_id, 0x3f, cluster, peer_id, term, last_log_index,     request
                            last_log_term
RequestVoteResponse         message_id, term, vote_granted                                response
AppendEntries               message_id, 0x2b, cluster, peer_id, term, prev_log_index,     request
                            prev_log_term, commit_index, entries...
AppendEntriesResponse       message_id, term, success, [conflict_term, [conflict_index]]  response
InstallSnapshot             message_id, 0x24, cluster, peer_id, term,                     request
                            last_included_index, last_included_term, snapshot_offset,
                            snapshot_size, chunk
InstallSnapshotResponse     message_id, term, [next_offset]                               response
RequestConfig               reqid, 0x5e                                                   request
RequestConfigResponse       reqid, is_leader, leader_id, [peers]                          response
RequestUpdate               reqid, 0x3d, data                                             request
RequestUpdateResponse       reqid, success, [log_index (success) | leader_id (failure)]   response
RequestEntries              reqid, 0x3c, prev_log_index, [count]                          request
RequestEntriesResponse      reqid, status, then by status: 0: leader_id;                  response
                            1, 2: ignored, last_index, entries...;
                            3: snapshot_info, last_index, chunk
RequestLogInfo              reqid, 0x25                                                   request
RequestLogInfoResponse      reqid, is_leader, leader_id, term, first_index,               response
                            last_applied, commit_index, last_index, snapshot_size
RequestBroadcastStateUrl    reqid, 0x2a                                                   request
RequestBroadcastStateUrl-   reqid, [url]                                                  response
Response
StateBroadcast              cluster, term, last_applied, entries...                       broadcast
==========================  ============================================================  =========

``[...]`` are optional trailing frames: each may be left off only together with everything after
it. The RequestEntriesResponse frames per status follow E-RAFT-18 (frame 4 is required for
statuses 1-3, the chunk for status 3; status 0 has exactly three frames); RequestUpdateResponse
decodes into E-RAFT-15's five cases.

Responses carry no type byte: name them (``decode(frames, as_="AppendEntriesResponse")``);
without a name the codec reports the ambiguity. ``answers`` names the request of each response.
StateBroadcast is identified by ``channel="broadcast"``. Give the channel ("request",
"response", "broadcast") whenever the socket is known: without it a malformed request may be
tried against the keyless messages and decode as one of them.

Types: ``message_id`` is the peers' `uint` of 1-3 bytes (1..16777215, then 0); ``reqid`` the
12-byte client request id; other integers `uint` (1-8 bytes, LSB first, encoded in the fewest
bytes); ``bool`` is false for an empty frame or a first byte 0 (encoded 0x01 / empty); ``json``
is one MessagePack value; an ``entry`` is a `LogEntry` (12-byte reqid, type 0 state / 1 config
/ 2 checkpoint, 7-byte term LSB first, data). RequestEntries is type 0x3c ('<'): the document's
0x3d is RequestUpdate's byte (erratum).

**None and NULL.** ``None`` always means "this optional frame is absent". A frame that is
present and holds MessagePack ``nil`` (or, for the 0.7 ``nuint``, is empty) decodes as the
singleton `NULL` (falsy; ``show`` renders it as ``null``). The two differ on the wire and in
meaning: a RequestUpdateResponse with success false and a ``nil`` third frame means "not the
leader, leader unknown", while no third frame means "request expired".

Dialect ``raft:zmq-raft`` (node-zmq-raft 0.7, INTEROP.md; E-RAFT-24 calls it ``zmq-raft-0.7``):

* every client request carries the ``cluster`` ident frame right after the type byte;
* RequestConfig, RequestLogInfo, RequestEntries and RequestBroadcastStateUrl (requests and
  responses) use ``request_id``, a `uint32` (1-4 bytes, LSB first); RequestUpdate and
  ConfigUpdate keep the 12-byte ``reqid``. The two are different fields because a field name
  has one type per table;
* ConfigUpdate ('&', 0x26): ``reqid, 0x26, cluster, peers``; ConfigUpdateResponse: ``reqid,
  config_status, [leader_id (0) | result (1-4)]``, config_status 0..4;
* RequestEntries: ``request_id, 0x3c, cluster, prev_log_index, [count, [snapshot_offset]]``;
  ``count`` is a `nuint` (empty frame = NULL: read up to the commit index);
* RequestEntriesResponse frame 3 is MessagePack for every status: ``leader_id`` for 0, 1, 2
  (``nil`` when the peer is the leader); for 3 ``snapshot_info``, any MessagePack value here
  (INTEROP.md says a leader id for every status, the node-zmq-raft source sends
  ``[offset, size, term]``: E-RAFT-24 leaves it to be confirmed);
* RequestConfigResponse always has the ``peers`` frame; RequestLogInfoResponse has
  ``prune_index`` after ``snapshot_size``;
* AppendEntriesResponse: ``[conflict_index, [conflict_term]]`` (the document's order swapped).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from harness.protocols.errors import FieldError
from harness.protocols.table import Const, Field, Message, Opt, Rep, Table, When
from harness.protocols.types import Bool, FrameType, Raw, Text, VarUInt

PROTOCOL = "raft"
DIALECT = "raft:zmq-raft"

GRAMMAR = "raft.wire.grammar"
TYPE_CLAUSE = "raft.wire.message-type"
UINT = "raft.wire.uint"
BOOL = "raft.wire.bool"
JSON = "raft.wire.msgpack"
STRING = "raft.wire.string"
ENTRY = "raft.wire.entry"
REQID = "raft.wire.reqid"
MESSAGE_ID = "raft.wire.message-id"
CLUSTER = "raft.peer.cluster-ident"

# Type bytes (INTEROP.md; RequestEntries per erratum: '<' 0x3c, not the document's 0x3d).
REQUEST_VOTE = b"?"  # 0x3f
APPEND_ENTRIES = b"+"  # 0x2b
INSTALL_SNAPSHOT = b"$"  # 0x24
REQUEST_CONFIG = b"^"  # 0x5e
REQUEST_UPDATE = b"="  # 0x3d
REQUEST_ENTRIES = b"<"  # 0x3c
REQUEST_LOG_INFO = b"%"  # 0x25
REQUEST_BROADCAST_STATE_URL = b"*"  # 0x2a
CONFIG_UPDATE = b"&"  # 0x26, zmq-raft 0.7 only
TYPE_BYTES = {
    "RequestVote": REQUEST_VOTE, "AppendEntries": APPEND_ENTRIES, "InstallSnapshot": INSTALL_SNAPSHOT,
    "RequestConfig": REQUEST_CONFIG, "RequestUpdate": REQUEST_UPDATE, "RequestEntries": REQUEST_ENTRIES,
    "RequestLogInfo": REQUEST_LOG_INFO, "RequestBroadcastStateUrl": REQUEST_BROADCAST_STATE_URL,
    "ConfigUpdate": CONFIG_UPDATE,
}

# Log entry types.
ENTRY_STATE, ENTRY_CONFIG, ENTRY_CHECKPOINT = 0, 1, 2
ENTRY_TYPE_NAMES = {ENTRY_STATE: "state", ENTRY_CONFIG: "config", ENTRY_CHECKPOINT: "checkpoint"}

# RequestEntriesResponse status.
RE_NOT_LEADER, RE_LAST, RE_MORE, RE_SNAPSHOT = 0, 1, 2, 3
# ConfigUpdateResponse status, as INTEROP.md names them (see the report: node-zmq-raft's own
# PROTO.md reads 1 as "accepted or committed", 2 as "configuration error", 3 as "busy").
CU_NOT_LEADER, CU_ACCEPTED, CU_COMMITTED, CU_IN_TRANSITION, CU_EXPIRED = 0, 1, 2, 3, 4

MAX_MESSAGE_ID = (1 << 24) - 1
MAX_TERM = (1 << 56) - 1  # an entry's term has 7 bytes


# ---- NULL: a present frame holding null --------------------------------------------------


class _Null:
    """A present frame holding MessagePack ``nil`` (or an empty ``nuint``): not the same as an
    absent optional frame, which is None. Falsy; a singleton that survives copy and pickle."""

    _instance: "_Null | None" = None
    __slots__ = ()

    def __new__(cls) -> "_Null":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "NULL"

    def __reduce__(self) -> str:
        return "NULL"

    def __copy__(self) -> "_Null":
        return self

    def __deepcopy__(self, memo: Any) -> "_Null":
        return self

    def to_dict(self) -> None:
        """`types._show` renders objects through ``to_dict``: NULL shows as JSON null."""
        return None


NULL = _Null()


# ---- field types -------------------------------------------------------------------------
# Workaround for types.py (reported to the lead): MsgPack.decode passes ``max_buffer_size`` to
# msgpack.unpackb, which msgpack 1.x rejects, so every frame fails with "(TypeError)".


class Json(FrameType):
    """ZMQ Raft ``json``: exactly one MessagePack value filling the frame (E-RAFT-07: decoders
    accept any well-formed value, ``bin`` and extension types included; subclasses check the
    shape a frame table asks for). A top-level ``nil`` decodes as `NULL` (None is reserved for
    an absent frame); ``nil`` inside arrays/maps stays None."""

    name = "json"
    default: Any = NULL

    def unpack(self, b: bytes) -> Any:
        if not b:
            raise FieldError("empty frame is not a MessagePack value")
        n = len(b)
        try:
            return msgpack.unpackb(
                b, raw=False, strict_map_key=False, use_list=True,
                max_str_len=n, max_bin_len=n, max_array_len=n, max_map_len=n, max_ext_len=n,
            )
        except msgpack.ExtraData:
            raise FieldError("trailing bytes after the MessagePack value") from None
        except (ValueError, TypeError, msgpack.UnpackException, RecursionError) as e:
            raise FieldError(f"not a valid MessagePack value ({type(e).__name__})") from None

    def decode(self, b: bytes) -> Any:
        v = self.unpack(b)
        return NULL if v is None else v

    def encode(self, v: Any) -> bytes:
        if v is NULL or v is None:
            return b"\xc0"
        try:
            return msgpack.packb(v, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as e:
            raise FieldError(f"cannot be MessagePack-encoded: {e}") from None

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        scalars = (
            st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
            | st.floats(allow_nan=False) | st.text(max_size=12)
        )
        tree = st.recursive(
            scalars,
            lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
            max_leaves=8,
        )
        return tree.map(lambda v: NULL if v is None else v)


class LeaderId(Json):
    """``json`` holding a LEADER ID: a string, or ``nil`` (NULL) when no leader is known."""

    name = "json string or null"

    def decode(self, b: bytes) -> Any:
        v = self.unpack(b)
        if v is None:
            return NULL
        if not isinstance(v, str):
            raise FieldError(f"LEADER ID must be a JSON string or null, got {type(v).__name__}")
        return v

    def encode(self, v: Any) -> bytes:
        if v is not NULL and v is not None and not isinstance(v, str):
            raise FieldError(f"LEADER ID must be a string or NULL, not {type(v).__name__}")
        return super().encode(v)

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        return st.just(NULL) | st.text(max_size=16)


class JsonUInt(Json):
    """``json`` holding a LOG INDEX: a non-negative MessagePack integer."""

    name = "json number (unsigned)"
    default = 0

    def decode(self, b: bytes) -> int:
        v = self.unpack(b)
        if type(v) is not int or v < 0:
            raise FieldError(f"must be a JSON unsigned integer, got {v!r:.40}")
        return v

    def encode(self, v: Any) -> bytes:
        if type(v) is not int or not 0 <= v < 1 << 64:
            raise FieldError(f"{v!r} is not an unsigned 64-bit integer")
        return msgpack.packb(v)

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        return st.integers(0, 2**64 - 1)


class SnapshotInfo(Json):
    """``json`` array of a RequestEntries snapshot response: ``[chunk byte offset, snapshot total
    byte size, ...]``; further elements are ignored (E-RAFT-18: node-zmq-raft adds the
    snapshot's term)."""

    name = "json [chunk offset, snapshot size, ...]"
    default: Any = ()

    def __init__(self) -> None:
        self.default = [0, 0]

    def decode(self, b: bytes) -> list[Any]:
        v = self.unpack(b)
        self._check(v)
        return v

    @staticmethod
    def _check(v: Any) -> None:
        if not isinstance(v, list) or len(v) < 2:
            raise FieldError(f"must be a JSON array [chunk byte offset, snapshot byte size, ...], got {v!r:.60}")
        for x in v[:2]:
            if type(x) is not int or x < 0:
                raise FieldError(f"chunk byte offset and snapshot size must be unsigned integers, got {x!r:.40}")

    def encode(self, v: Any) -> bytes:
        if isinstance(v, tuple):
            v = list(v)
        self._check(v)
        return super().encode(v)

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        return st.lists(st.integers(0, 2**64 - 1), min_size=2, max_size=3)


class PeerList(Json):
    """``json`` cluster configuration: ``[[PEER_ID, PEER_URL], ...]``, all strings."""

    name = "json [[peer id, url], ...]"
    default: Any = ()

    def __init__(self) -> None:
        self.default = []

    def decode(self, b: bytes) -> list[list[str]]:
        v = self.unpack(b)
        self._check(v)
        return v

    @staticmethod
    def _check(v: Any) -> None:
        if not isinstance(v, list):
            raise FieldError(f"must be a JSON array of [PEER ID, PEER URL] pairs, got {type(v).__name__}")
        for i, p in enumerate(v):
            if not isinstance(p, list) or len(p) != 2 or not all(isinstance(x, str) for x in p):
                raise FieldError(f"item {i} must be a [PEER ID, PEER URL] pair of strings, got {p!r:.60}")

    def encode(self, v: Any) -> bytes:
        if isinstance(v, tuple):
            v = list(v)
        if isinstance(v, list):
            v = [list(p) if isinstance(p, tuple) else p for p in v]
        self._check(v)
        return msgpack.packb(v, use_bin_type=True)

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        pair = st.tuples(st.text(max_size=8), st.text(max_size=16)).map(list)
        return st.lists(pair, max_size=4)


class NUInt(VarUInt):
    """zmq-raft 0.7 ``nuint``: a `uint` of 1-8 bytes, or an empty frame meaning null, decoded as
    `NULL` (None is an absent frame: the RequestEntries count may be null and still be followed
    by the snapshot offset frame)."""

    def __init__(self) -> None:
        super().__init__(max_bytes=8)
        self.name = "nuint"
        self.default = NULL

    def decode(self, b: bytes) -> Any:
        if not b:
            return NULL
        return super().decode(b)

    def encode(self, v: Any) -> bytes:
        if v is NULL or v is None:
            return b""
        return super().encode(v)

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        return st.just(NULL) | st.integers(0, 2**64 - 1)


class UIntChoice(VarUInt):
    """A `uint` that must be one of a few values (a status). A malformed integer violates the
    field's clause; a value outside the table violates ``clause``."""

    def __init__(self, values: tuple[int, ...], clause: str = GRAMMAR) -> None:
        super().__init__(max_bytes=8)
        self.values = frozenset(values)
        self.ordered = tuple(values)
        self.clause = clause
        self.name = "uint in {" + ", ".join(map(str, values)) + "}"
        self.default = values[0]

    def decode(self, b: bytes) -> int:
        v = super().decode(b)
        if v not in self.values:
            raise FieldError(f"must be one of {self.ordered}, got {v}", clause=self.clause)
        return v

    def encode(self, v: Any) -> bytes:
        if type(v) is not int or v not in self.values:
            raise FieldError(f"must be one of {self.ordered}, got {v!r}")
        return super().encode(v)

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        return st.sampled_from(self.ordered)


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One Raft log entry: 12-byte reqid, type (0 state, 1 config, 2 checkpoint), term, data."""

    reqid: bytes
    type: int
    term: int
    data: bytes

    def to_dict(self) -> dict[str, Any]:
        return {"reqid": self.reqid.hex(), "type": ENTRY_TYPE_NAMES.get(self.type, self.type),
                "term": self.term, "data": self.data}


_new_object = object.__new__
# The slots' descriptors set a frozen LogEntry's fields directly: the decode hot path builds
# entries about twice as fast as through the dataclass __init__ (which goes through
# object.__setattr__ for each field).
_set_reqid = LogEntry.__dict__["reqid"].__set__
_set_type = LogEntry.__dict__["type"].__set__
_set_term = LogEntry.__dict__["term"].__set__
_set_data = LogEntry.__dict__["data"].__set__


def _make_entry(reqid: bytes, typ: int, term: int, data: bytes) -> LogEntry:
    e = _new_object(LogEntry)
    _set_reqid(e, reqid)
    _set_type(e, typ)
    _set_term(e, term)
    _set_data(e, data)
    return e


class Entry(FrameType):
    """ZMQ Raft ``entry``: 12-byte reqid, 1-byte type (0-2), 7-byte term LSB first, log data."""

    name = "entry"
    default = LogEntry(bytes(12), ENTRY_STATE, 0, b"")

    def decode(self, b: bytes) -> LogEntry:
        if b.__class__ is not bytes:
            b = bytes(b)
        if len(b) < 20:
            raise FieldError(f"a log entry needs at least 20 bytes (reqid, type, term), got {len(b)}")
        x = int.from_bytes(b[12:20], "little")  # type byte, then the 7-byte term
        t = x & 0xFF
        if t > 2:
            raise FieldError(f"log entry type must be 0 (state), 1 (config) or 2 (checkpoint), got {t}")
        return _make_entry(b[:12], t, x >> 8, b[20:])

    def encode(self, v: Any) -> bytes:
        if v.__class__ is not LogEntry:
            v = self._coerce(v)
        r, t, term, data = v.reqid, v.type, v.term, v.data
        if (r.__class__ is bytes and len(r) == 12 and t.__class__ is int and 0 <= t <= 2
                and term.__class__ is int and 0 <= term <= MAX_TERM and data.__class__ is bytes):
            return b"".join((r, (t | term << 8).to_bytes(8, "little"), data))
        if not isinstance(r, (bytes, bytearray)) or len(r) != 12:
            raise FieldError(f"log entry reqid must be 12 bytes, got {r!r:.40}")
        if type(t) is not int or not 0 <= t <= 2:
            raise FieldError(f"log entry type must be 0, 1 or 2, got {t!r}")
        if type(term) is not int or not 0 <= term <= MAX_TERM:
            raise FieldError(f"log entry term must fit 7 bytes, got {term!r}")
        if not isinstance(data, (bytes, bytearray)):
            raise FieldError(f"log entry data must be bytes, not {type(data).__name__}")
        return b"".join((bytes(r), (t | term << 8).to_bytes(8, "little"), bytes(data)))

    @staticmethod
    def _coerce(v: Any) -> LogEntry:
        if isinstance(v, LogEntry):
            return v
        if isinstance(v, dict):
            # As a case file writes one: reqid (12 bytes, default zeros) and type (default 0,
            # state) may be left out, text stands for its UTF-8 bytes.
            v = {"reqid": bytes(12), "type": ENTRY_STATE, **v}
            v = {k: x.encode() if k in ("reqid", "data") and isinstance(x, str) else x for k, x in v.items()}
            try:
                return LogEntry(**v)
            except TypeError as e:
                raise FieldError(f"not a log entry: {e}") from None
        raise FieldError(f"{type(v).__name__} is not a LogEntry")

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        return st.builds(
            LogEntry, st.binary(min_size=12, max_size=12), st.integers(0, 2),
            st.integers(0, MAX_TERM), st.binary(max_size=32),
        )


# ---- the tables --------------------------------------------------------------------------


def _uint(doc: str) -> Field:
    return Field(VarUInt(), clause=UINT, doc=doc)


FIELDS = {
    # identification
    "message_id": Field(VarUInt(max_bytes=3), clause=MESSAGE_ID,
                        doc="peer RPC message id (1 to 3 bytes): 1..16777215, then 0; echoed in the response"),
    "reqid": Field(Raw(size=12), clause=REQID, doc="client request id: 12 bytes (time, machine, pid, counter)"),
    "cluster": Field(Raw(), clause=CLUSTER, doc="cluster ident (any bytes)"),
    "peer_id": Field(Text(), clause=STRING, doc="the sender's PEER ID (candidate or leader)"),
    # Raft state
    "term": _uint("the sender's current TERM"),
    "last_log_index": _uint("candidate's last LOG INDEX"),
    "last_log_term": _uint("candidate's last LOG TERM"),
    "prev_log_index": _uint("LOG INDEX immediately preceding the new entries / requested entries"),
    "prev_log_term": _uint("LOG TERM of prev_log_index"),
    "commit_index": _uint("COMMIT INDEX"),
    "entries": Field(Entry(), clause=ENTRY, doc="log entries, one per frame"),
    "vote_granted": Field(Bool(), clause=BOOL, doc="vote granted"),
    "success": Field(Bool(), clause=BOOL, doc="AppendEntries: log updated; RequestUpdate: update status"),
    "conflict_term": _uint("updating log conflict TERM"),
    "conflict_index": _uint("updating log conflict LOG INDEX"),
    # snapshots
    "last_included_index": _uint("snapshot last included LOG INDEX"),
    "last_included_term": _uint("snapshot last included LOG TERM"),
    "snapshot_offset": _uint("byte offset of the chunk in the snapshot"),
    "snapshot_size": _uint("total snapshot byte size"),
    "chunk": Field(Raw(), clause=GRAMMAR, doc="snapshot chunk bytes"),
    "next_offset": _uint("byte offset to send the next snapshot chunk from"),
    # client RPCs
    "is_leader": Field(Bool(), clause=BOOL, doc="is the responding peer the leader"),
    "leader_id": Field(LeaderId(), clause=JSON, doc="LEADER ID as JSON string, or NULL (nil)"),
    "peers": Field(PeerList(), clause=JSON, doc="cluster config [[PEER_ID, PEER_URL], ...]"),
    "data": Field(Raw(), clause=GRAMMAR, doc="arbitrary state log data"),
    "log_index": Field(JsonUInt(), clause=JSON, doc="committed LOG INDEX as a JSON number"),
    "count": _uint("number of requested log entries (0 stops the responses)"),
    "status": Field(UIntChoice((RE_NOT_LEADER, RE_LAST, RE_MORE, RE_SNAPSHOT)), clause=UINT,
                    doc="0 not a leader, 1 last entry, 2 more entries coming, 3 snapshot chunk"),
    "ignored": Field(Json(), clause=JSON, doc="frame 3 of a status 1/2 RequestEntries response: to be ignored"),
    "snapshot_info": Field(SnapshotInfo(), clause=JSON,
                           doc="[chunk byte offset, snapshot total byte size, ...] (further elements ignored)"),
    "last_index": _uint("LOG INDEX of the last entry/chunk sent, or the log's last INDEX"),
    "first_index": _uint("peer's log first INDEX"),
    "last_applied": _uint("LAST APPLIED INDEX"),
    "url": Field(Text(), clause=STRING, doc="broadcast state ZMQ PUB socket url"),
}

REQUEST = ("request",)
RESPONSE = ("response",)
BROADCAST = ("broadcast",)


def _type(name: str) -> Const:
    return Const(TYPE_BYTES[name], "type", TYPE_CLAUSE)


def _peer_messages() -> tuple[Message, ...]:
    return (
        Message("RequestVote", ("message_id", _type("RequestVote"), "cluster", "peer_id", "term",
                                "last_log_index", "last_log_term"),
                channels=REQUEST, clause=GRAMMAR, doc="candidate -> peer"),
        Message("RequestVoteResponse", ("message_id", "term", "vote_granted"),
                channels=RESPONSE, clause=GRAMMAR, answers="RequestVote"),
        Message("AppendEntries", ("message_id", _type("AppendEntries"), "cluster", "peer_id", "term",
                                  "prev_log_index", "prev_log_term", "commit_index", Rep("entries")),
                channels=REQUEST, clause=GRAMMAR, doc="leader -> follower; no entries = heartbeat"),
        Message("AppendEntriesResponse",
                ("message_id", "term", "success", Opt("conflict_term", Opt("conflict_index"))),
                channels=RESPONSE, clause=GRAMMAR, answers="AppendEntries"),
        Message("InstallSnapshot", ("message_id", _type("InstallSnapshot"), "cluster", "peer_id", "term",
                                    "last_included_index", "last_included_term", "snapshot_offset",
                                    "snapshot_size", "chunk"),
                channels=REQUEST, clause=GRAMMAR, doc="leader -> follower: one snapshot chunk"),
        Message("InstallSnapshotResponse", ("message_id", "term", Opt("next_offset")),
                channels=RESPONSE, clause=GRAMMAR, answers="InstallSnapshot"),
        Message("StateBroadcast", ("cluster", "term", "last_applied", Rep("entries")),
                channels=BROADCAST, clause=GRAMMAR,
                doc="BroadcastStateMachine PUB: applied entries, or none as a heartbeat"),
    )


def _update_response() -> Message:
    return Message(
        "RequestUpdateResponse",
        ("reqid", "success", When("success", True, Opt("log_index")), When("success", False, Opt("leader_id"))),
        channels=RESPONSE, clause=GRAMMAR, answers="RequestUpdate",
        doc="success without log_index: accepted, not yet committed; failure with leader_id (maybe "
            "NULL): not the leader; failure without a third frame: the request expired",
    )


def _strict_client_messages() -> tuple[Message, ...]:
    return (
        Message("RequestConfig", ("reqid", _type("RequestConfig")), channels=REQUEST, clause=GRAMMAR),
        Message("RequestConfigResponse", ("reqid", "is_leader", "leader_id", Opt("peers")),
                channels=RESPONSE, clause=GRAMMAR, answers="RequestConfig"),
        Message("RequestUpdate", ("reqid", _type("RequestUpdate"), "data"), channels=REQUEST, clause=GRAMMAR),
        _update_response(),
        Message("RequestEntries", ("reqid", _type("RequestEntries"), "prev_log_index", Opt("count")),
                channels=REQUEST, clause=GRAMMAR),
        Message("RequestEntriesResponse",
                ("reqid", "status",
                 When("status", RE_NOT_LEADER, "leader_id"),
                 When("status", (RE_LAST, RE_MORE), "ignored"),
                 When("status", RE_SNAPSHOT, "snapshot_info"),
                 When("status", (RE_LAST, RE_MORE, RE_SNAPSHOT), "last_index"),
                 When("status", (RE_LAST, RE_MORE), Rep("entries")),
                 When("status", RE_SNAPSHOT, "chunk")),
                channels=RESPONSE, clause=GRAMMAR, answers="RequestEntries"),
        Message("RequestLogInfo", ("reqid", _type("RequestLogInfo")), channels=REQUEST, clause=GRAMMAR),
        Message("RequestLogInfoResponse",
                ("reqid", "is_leader", "leader_id", "term", "first_index", "last_applied", "commit_index",
                 "last_index", "snapshot_size"),
                channels=RESPONSE, clause=GRAMMAR, answers="RequestLogInfo"),
        Message("RequestBroadcastStateUrl", ("reqid", _type("RequestBroadcastStateUrl")),
                channels=REQUEST, clause=GRAMMAR),
        Message("RequestBroadcastStateUrlResponse", ("reqid", Opt("url")),
                channels=RESPONSE, clause=GRAMMAR, answers="RequestBroadcastStateUrl"),
    )


def _zmq_raft_client_messages() -> tuple[Message, ...]:
    rid = "request_id"
    return (
        Message("RequestConfig", (rid, _type("RequestConfig"), "cluster"), channels=REQUEST, clause=GRAMMAR),
        Message("RequestConfigResponse", (rid, "is_leader", "leader_id", "peers"),
                channels=RESPONSE, clause=GRAMMAR, answers="RequestConfig"),
        Message("RequestUpdate", ("reqid", _type("RequestUpdate"), "cluster", "data"),
                channels=REQUEST, clause=GRAMMAR),
        _update_response(),
        Message("ConfigUpdate", ("reqid", _type("ConfigUpdate"), "cluster", "peers"),
                channels=REQUEST, clause=GRAMMAR, doc="client -> leader: the new complete cluster configuration"),
        Message("ConfigUpdateResponse",
                ("reqid", "config_status",
                 When("config_status", CU_NOT_LEADER, Opt("leader_id")),
                 When("config_status", (CU_ACCEPTED, CU_COMMITTED, CU_IN_TRANSITION, CU_EXPIRED), Opt("result"))),
                channels=RESPONSE, clause=GRAMMAR, answers="ConfigUpdate"),
        Message("RequestEntries",
                (rid, _type("RequestEntries"), "cluster", "prev_log_index", Opt("count", Opt("snapshot_offset"))),
                channels=REQUEST, clause=GRAMMAR),
        Message("RequestEntriesResponse",
                (rid, "status",
                 When("status", (RE_NOT_LEADER, RE_LAST, RE_MORE), "leader_id"),
                 When("status", RE_SNAPSHOT, "snapshot_info"),
                 When("status", (RE_LAST, RE_MORE, RE_SNAPSHOT), "last_index"),
                 When("status", (RE_LAST, RE_MORE), Rep("entries")),
                 When("status", RE_SNAPSHOT, "chunk")),
                channels=RESPONSE, clause=GRAMMAR, answers="RequestEntries"),
        Message("RequestLogInfo", (rid, _type("RequestLogInfo"), "cluster"), channels=REQUEST, clause=GRAMMAR),
        Message("RequestLogInfoResponse",
                (rid, "is_leader", "leader_id", "term", "first_index", "last_applied", "commit_index",
                 "last_index", "snapshot_size", "prune_index"),
                channels=RESPONSE, clause=GRAMMAR, answers="RequestLogInfo"),
        Message("RequestBroadcastStateUrl", (rid, _type("RequestBroadcastStateUrl"), "cluster"),
                channels=REQUEST, clause=GRAMMAR),
        Message("RequestBroadcastStateUrlResponse", (rid, Opt("url")),
                channels=RESPONSE, clause=GRAMMAR, answers="RequestBroadcastStateUrl"),
    )


def _zmq_raft_peer_messages() -> tuple[Message, ...]:
    return (
        Message("AppendEntriesResponse",
                ("message_id", "term", "success", Opt("conflict_index", Opt("conflict_term"))),
                channels=RESPONSE, clause=GRAMMAR, answers="AppendEntries"),
    )


STRICT = Table(PROTOCOL, "strict", FIELDS, _peer_messages() + _strict_client_messages(),
               grammar_clause=GRAMMAR, doc="zmq-raft.md with docs/errata.md")

ZMQ_RAFT = STRICT.derive(
    DIALECT,
    fields={
        "request_id": Field(VarUInt(max_bytes=4), clause=UINT,
                            doc="uint32 request id (1-4 bytes) of RequestConfig, RequestLogInfo, "
                                "RequestEntries and RequestBroadcastStateUrl"),
        "count": Field(NUInt(), clause=UINT,
                       doc="nuint: number of requested entries, 0 stops the responses, NULL (empty "
                           "frame) reads up to the commit index"),
        "config_status": Field(UIntChoice((CU_NOT_LEADER, CU_ACCEPTED, CU_COMMITTED, CU_IN_TRANSITION, CU_EXPIRED)),
                               clause=UINT,
                               doc="0 not a leader, 1 accepted, 2 committed, 3 in transition, 4 expired request id"),
        "result": Field(Json(), clause=JSON, doc="ConfigUpdate result: the committed LOG INDEX (or an error object)"),
        "snapshot_info": Field(Json(), clause=JSON,
                               doc="frame 3 of a status 3 RequestEntries response (node-zmq-raft sends "
                                   "[chunk byte offset, snapshot size, snapshot term])"),
        "prune_index": _uint("the log's prune index"),
    },
    messages=_peer_messages() + _zmq_raft_client_messages() + _zmq_raft_peer_messages(),
    notes=(
        "every client request carries the cluster ident frame right after the type byte",
        "RequestConfig/RequestLogInfo/RequestEntries/RequestBroadcastStateUrl ids are uint32 "
        "(field request_id, 1-4 bytes); RequestUpdate/ConfigUpdate keep the 12-byte reqid",
        "ConfigUpdate ('&', 0x26) request and response, statuses 0-4",
        "RequestEntries: count (nuint, empty = NULL) is frame 5, optional snapshot byte offset frame 6",
        "RequestEntries response frame 3 is MessagePack for every status (leader id, nil when leader)",
        "RequestConfig response always has the peers frame",
        "RequestLogInfo response has the prune index after the snapshot size",
        "AppendEntries response optional frames: conflict index, then conflict term",
    ),
)

TABLES = {"strict": STRICT, DIALECT: ZMQ_RAFT}

__all__ = [
    "TABLES", "STRICT", "ZMQ_RAFT", "NULL", "LogEntry", "Entry", "Json", "LeaderId", "JsonUInt",
    "SnapshotInfo", "PeerList", "NUInt", "UIntChoice", "TYPE_BYTES",
]
