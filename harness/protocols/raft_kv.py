"""The key-value encoding of Raft log data and snapshots (docs/raft.md, "Key-value encoding of
log data"), shared by the reference nodes (their state machine) and the checkers (which replay
the committed log the wire shows to judge the snapshots the wire shows).

Log data of a state entry (type 0) is one MessagePack map::

    {"op": "put",    "key": K, "value": V}                -> result nil
    {"op": "get",    "key": K}                            -> result: the value, nil if absent
    {"op": "cas",    "key": K, "expected": E, "value": V} -> result: true (swapped) / false
    {"op": "delete", "key": K}                            -> result nil

K is a string, V and E any MessagePack value but nil. Data that is not such a map changes
nothing. A snapshot is ``{"format": SNAPSHOT_FORMAT, "state": {"kv": {K: V, ...}}, "reqids":
[[reqid, index], ...]}``.
"""

from __future__ import annotations

from typing import Any

import msgpack

OPS = ("put", "get", "cas", "delete")
SNAPSHOT_FORMAT = "zmq-harness/raft-snapshot-1"
ENTRY_HEADER = 20  # reqid (12), type (1), term (7) before an entry's data
STATE_ENTRY = 0


def unpack(data: bytes) -> Any:
    """MessagePack ``data`` decoded (maps with any keys, str for str, bytes for bin), or
    ``ValueError`` when it is not MessagePack."""
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except (ValueError, TypeError, msgpack.UnpackException, RecursionError) as e:
        raise ValueError(str(e)) from None


def pack(value: Any) -> bytes:
    """``value`` in MessagePack (str as str, bytes as bin)."""
    return msgpack.packb(value, use_bin_type=True)


def decode_op(data: bytes) -> dict[str, Any] | None:
    """The operation in a state entry's data, or None when it is not one."""
    try:
        body = unpack(data)
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get("op") not in OPS or not isinstance(body.get("key"), str):
        return None
    op = body["op"]
    if op in ("put", "cas") and body.get("value") is None:
        return None
    if op == "cas" and body.get("expected") is None:
        return None
    return body


def apply_op(kv: dict[str, Any], body: dict[str, Any]) -> Any:
    """Apply one decoded operation to ``kv``; its result."""
    op, key = body["op"], body["key"]
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


def apply_raw_entry(kv: dict[str, Any], raw: bytes) -> None:
    """Apply one entry frame as it crosses the wire (config and checkpoint entries, and data
    that is no operation, change nothing)."""
    if len(raw) > ENTRY_HEADER and raw[12] == STATE_ENTRY:
        body = decode_op(raw[ENTRY_HEADER:])
        if body is not None:
            apply_op(kv, body)


def snapshot_body(data: bytes) -> dict[str, Any] | None:
    """A snapshot's MessagePack map when it is in the documented format, else None (empty,
    foreign, garbage)."""
    if not data:
        return None
    try:
        body = unpack(data)
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get("format") != SNAPSHOT_FORMAT:
        return None
    return body


def snapshot_kv(data: bytes) -> dict[str, Any] | None:
    """The key-value map a documented snapshot holds, or None when it holds none (another
    format, or a state machine that is not the key-value one)."""
    body = snapshot_body(data)
    state = body.get("state") if body is not None else None
    kv = state.get("kv") if isinstance(state, dict) else None
    return kv if isinstance(kv, dict) else None
