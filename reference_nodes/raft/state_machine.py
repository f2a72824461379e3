"""State machines of the Raft reference nodes, and the key-value encoding of log data.

A state machine consumes committed log entries in index order. The peer keeps one to compact
its log into a snapshot (its state is the snapshot); the reference client keeps a replica of
the same machine, fed with the committed entries it reads back (RequestEntries, StateBroadcast),
to learn the result of its own operations. Both sides must therefore agree on the encoding,
which docs/raft.md documents so that any implementation's log can be replayed by the harness:

Log data of a state entry (type 0) is one MessagePack map::

    {"op": "put",    "key": K, "value": V}                -> result nil
    {"op": "get",    "key": K}                            -> result: the value, nil if absent
    {"op": "cas",    "key": K, "expected": E, "value": V} -> result: true (swapped) / false
    {"op": "delete", "key": K}                            -> result nil

K is a string, V and E any MessagePack value but nil. Data that is not such a map (another
application's entries, garbage) changes nothing and yields nil; config and checkpoint entries
(types 1, 2) are skipped. The machine's snapshot is ``{"kv": {K: V, ...}}`` with the keys in
sorted order.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgpack

from harness.protocols.raft import ENTRY_STATE, LogEntry

OPS = ("put", "get", "cas", "delete")


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


def decode_op(data: bytes) -> dict[str, Any] | None:
    """The operation in a state entry's data, or None when it is not one."""
    try:
        body = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except (ValueError, TypeError, msgpack.UnpackException, RecursionError):
        return None
    if not isinstance(body, dict) or body.get("op") not in OPS or not isinstance(body.get("key"), str):
        return None
    op = body["op"]
    if op in ("put", "cas") and body.get("value") is None:
        return None
    if op == "cas" and body.get("expected") is None:
        return None
    return body


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
        op, key, kv = body["op"], body["key"], self.kv
        if op == "put":
            kv[key] = body["value"]
            return None
        if op == "get":
            return kv.get(key)
        if op == "cas":
            if key in kv and kv[key] == body["expected"]:
                kv[key] = body["value"]
                return True
            return False
        kv.pop(key, None)  # delete
        return None

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

SNAPSHOT_FORMAT = "zmq-harness/raft-snapshot-1"


def pack_snapshot(state: Any, reqids: dict[bytes, int]) -> bytes:
    """A peer snapshot: the state machine's state and the request ids of the compacted entries
    (a retried RequestUpdate must still find its entry, E-RAFT-16)."""
    return msgpack.packb({"format": SNAPSHOT_FORMAT, "state": state,
                          "reqids": [[r, i] for r, i in reqids.items()]}, use_bin_type=True)


def unpack_snapshot(data: bytes) -> tuple[Any, dict[bytes, int]]:
    """(state, reqids) of a snapshot; an empty or foreign snapshot is (None, {})."""
    if not data:
        return None, {}
    try:
        body = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except (ValueError, TypeError, msgpack.UnpackException, RecursionError):
        return None, {}
    if not isinstance(body, dict) or body.get("format") != SNAPSHOT_FORMAT:
        return None, {}
    reqids = {}
    for item in body.get("reqids") or []:
        if isinstance(item, list) and len(item) == 2 and isinstance(item[0], bytes) and isinstance(item[1], int):
            reqids[item[0]] = item[1]
    return body.get("state"), reqids
