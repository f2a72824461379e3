"""State machines of the Raft reference nodes, and the key-value encoding of log data.

A state machine consumes committed log entries in index order. The peer keeps one to compact
its log into a snapshot (its state is the snapshot); the reference client keeps a replica of
the same machine, fed with the committed entries it reads back (RequestEntries, StateBroadcast),
to learn the result of its own operations. Both sides must therefore agree on the encoding,
which docs/raft.md documents so that any implementation's log can be replayed by the harness;
it lives in `harness.protocols.raft_kv` (the checkers replay logs with it too). Config and
checkpoint entries (types 1, 2) are skipped. The machine's snapshot is ``{"kv": {K: V, ...}}``
with the keys in sorted order.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgpack

from harness.protocols.raft import ENTRY_STATE, LogEntry
from harness.protocols.raft_kv import OPS, SNAPSHOT_FORMAT, apply_op, decode_op, snapshot_body

__all__ = [
    "OPS", "SNAPSHOT_FORMAT", "KVStateMachine", "NullStateMachine", "StateMachine", "decode_op", "encode_op",
    "make_state_machine", "pack_snapshot", "unpack_snapshot",
]


class StateMachine(Protocol):
    name: str

    def apply(self, index: int, entry: LogEntry) -> Any: ...

    def snapshot(self) -> Any: ...

    def restore(self, state: Any) -> None: ...


def encode_op(op: str, key: str, value: Any = None, expected: Any = None) -> bytes:
    """The log data of one key-value operation."""
    if op not in OPS:
        raise ValueError(f"unknown key-value operation {op!r} (known: {', '.join(OPS)})")
    if not isinstance(key, str):
        raise ValueError(f"a key is a string, not {key!r}")
    body: dict[str, Any] = {"op": op, "key": key}
    if op in ("put", "cas"):
        if value is None:
            raise ValueError(f"{op} needs a value (nil is not a value)")
        body["value"] = value
    if op == "cas":
        if expected is None:
            raise ValueError("cas needs an expected value (nil is not a value)")
        body["expected"] = expected
    return msgpack.packb(body, use_bin_type=True)


class KVStateMachine:
    """The default state machine: a key-value map updated by put/cas/delete entries."""

    name = "kv"

    def __init__(self) -> None:
        self.kv: dict[str, Any] = {}

    def apply(self, index: int, entry: LogEntry) -> Any:
        if entry.type != ENTRY_STATE:
            return None
        body = decode_op(entry.data)
        if body is None:
            return None
        return self.apply_op(body)

    def apply_op(self, body: dict[str, Any]) -> Any:
        return apply_op(self.kv, body)

    def snapshot(self) -> Any:
        return {"kv": {k: self.kv[k] for k in sorted(self.kv)}}

    def restore(self, state: Any) -> None:
        kv = state.get("kv") if isinstance(state, dict) else None
        self.kv = dict(kv) if isinstance(kv, dict) else {}


class NullStateMachine:
    """Applies nothing (a BroadcastStateMachine only re-publishes entries); snapshot is nil."""

    name = "none"

    def apply(self, index: int, entry: LogEntry) -> Any:
        return None

    def snapshot(self) -> Any:
        return None

    def restore(self, state: Any) -> None:
        pass


STATE_MACHINES: dict[str, type] = {"kv": KVStateMachine, "none": NullStateMachine}


def make_state_machine(name: Any) -> StateMachine:
    try:
        return STATE_MACHINES[str(name)]()
    except KeyError:
        raise ValueError(f"raft config 'state_machine' must be one of {', '.join(STATE_MACHINES)}, "
                         f"got {name!r}") from None


# ---- the peer's snapshot file ----------------------------------------------------------------

def pack_snapshot(state: Any, reqids: dict[bytes, int]) -> bytes:
    """A peer snapshot: the state machine's state and the request ids of the compacted entries
    (a retried RequestUpdate must still find its entry, E-RAFT-16)."""
    return msgpack.packb({"format": SNAPSHOT_FORMAT, "state": state,
                          "reqids": [[r, i] for r, i in reqids.items()]}, use_bin_type=True)


def unpack_snapshot(data: bytes) -> tuple[Any, dict[bytes, int]]:
    """(state, reqids) of a snapshot; an empty or foreign snapshot is (None, {})."""
    return snapshot_parts(snapshot_body(data))


def snapshot_parts(body: dict[str, Any] | None) -> tuple[Any, dict[bytes, int]]:
    """(state, reqids) of a snapshot's `snapshot_body` (None: (None, {}))."""
    if body is None:
        return None, {}
    reqids = {}
    for item in body.get("reqids") or []:
        if isinstance(item, list) and len(item) == 2 and isinstance(item[0], bytes) and isinstance(item[1], int):
            reqids[item[0]] = item[1]
    return body.get("state"), reqids
