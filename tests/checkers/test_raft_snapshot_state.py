"""The snapshot-state check on hand-made wire traffic: what it judges, what it leaves unjudged
and says so, and a later snapshot judged from an earlier one when the log's prefix is unknown.
(The check against the snapshot-ahead mutant in a run: tests/checkers/test_raft_checkers.py.)"""

from __future__ import annotations

import msgpack

from harness.checkers.base import RECV, SEND, Event
from harness.checkers.raft import SnapshotState
from harness.protocols import codec
from harness.protocols.raft import LogEntry
from harness.protocols.raft_kv import SNAPSHOT_FORMAT
from reference_nodes.raft.state_machine import encode_op

RAFT = codec("raft", "strict")


class Wire:
    """Feeds one checker the events of a hand-made run: leader a, follower b, client x."""

    def __init__(self) -> None:
        self.checker = SnapshotState(peers=3)
        self.t = 0
        self.mid = 0

    def event(self, node: str, kind: str, socket: str, name: str, **fields: object) -> None:
        self.t += 1_000_000
        frames = RAFT.encode(name, fields)
        self.checker.on_event(Event(self.t, node, "peer", kind, socket, frames, codec=RAFT))

    def append(self, prev: int, ops: list[bytes], commit: int) -> None:
        """Leader a replicates entries after ``prev`` (term 1) and announces ``commit``."""
        self.mid += 1
        entries = [LogEntry(bytes(11) + bytes([prev + k + 1]), 0, 1, op) for k, op in enumerate(ops)]
        self.event("a", SEND, "peer:b", "AppendEntries", message_id=self.mid, cluster=b"", peer_id="a", term=1,
                   prev_log_index=prev, prev_log_term=1 if prev else 0, commit_index=commit, entries=entries)

    def install(self, index: int, data: bytes, chunk: int = 7) -> None:
        """Leader a sends a snapshot to b in chunks."""
        for off in range(0, len(data), chunk):
            self.mid += 1
            self.event("a", SEND, "peer:b", "InstallSnapshot", message_id=self.mid, cluster=b"", peer_id="a", term=1,
                       last_included_index=index, last_included_term=1, snapshot_offset=off,
                       snapshot_size=len(data), chunk=data[off:off + chunk])

    def read_snapshot(self, index: int, data: bytes, chunk: int = 9) -> None:
        """Client x reads a snapshot with RequestEntries (status 3 chunks)."""
        reqid = b"r" * 12
        self.event("x", SEND, "dealer", "RequestEntries", reqid=reqid, prev_log_index=0)
        for off in range(0, len(data), chunk):
            self.event("x", RECV, "dealer", "RequestEntriesResponse", reqid=reqid, status=3,
                       snapshot_info=[off, len(data)], last_index=index, chunk=data[off:off + chunk])

    def verdict(self):
        [v] = self.checker.finish(self.t)
        return v


def snap(kv: dict[str, object]) -> bytes:
    return msgpack.packb({"format": SNAPSHOT_FORMAT, "state": {"kv": kv}, "reqids": []}, use_bin_type=True)


OPS = [encode_op("put", "k", "1"), encode_op("put", "j", "2"), encode_op("cas", "k", "3", expected="1"),
       encode_op("delete", "j"), encode_op("get", "k")]


def test_a_snapshot_holding_the_committed_prefix_passes_and_one_ahead_of_it_fails() -> None:
    w = Wire()
    w.append(0, OPS, 5)
    w.install(2, snap({"k": "1", "j": "2"}))
    w.read_snapshot(4, snap({"k": "3"}))
    v = w.verdict()
    assert v.ok and "judged 2" in v.detail, v.detail

    w = Wire()
    w.append(0, OPS, 5)
    w.install(2, snap({"k": "3", "j": "2"}))  # numbered 2, holds entry 3 too (the snapshot-ahead bug)
    v = w.verdict()
    assert not v.ok and v.clause == "raft.safety.state-machine-safety"
    assert "index 2 sent by a" in v.detail
    assert v.evidence[0]["keys"] == {"k": {"model": "1", "snapshot": "3"}}


def test_foreign_snapshots_and_unknown_prefixes_are_not_judged_and_counted() -> None:
    w = Wire()
    w.append(0, OPS, 5)
    w.install(3, b"another implementation's own snapshot")
    w.install(4, msgpack.packb({"format": SNAPSHOT_FORMAT, "state": None, "reqids": []}))  # no key-value state
    v = w.verdict()
    assert v.ok and "judged 0" in v.detail and "2 not in the key-value snapshot format" in v.detail, v.detail

    w = Wire()
    w.append(2, OPS[2:], 5)  # entries 1 and 2 never cross the wire: whatever a snapshot holds is unknowable
    w.install(3, snap({"anything": "at all"}))
    v = w.verdict()
    assert v.ok and "judged 0" in v.detail and "1 with a committed entry of their prefix not shown" in v.detail
    assert "first 1" in v.detail


def test_a_later_snapshot_is_judged_from_an_earlier_one_when_the_prefix_is_unknown() -> None:
    w = Wire()
    w.append(2, OPS[2:], 5)
    w.install(2, snap({"k": "1", "j": "2"}))  # not judged: seeds the replay
    w.read_snapshot(4, snap({"k": "3"}))  # = the one at 2 plus entries 3 (cas) and 4 (delete j)
    v = w.verdict()
    assert v.ok and "judged 1" in v.detail, v.detail

    w = Wire()
    w.append(2, OPS[2:], 5)
    w.install(2, snap({"k": "1", "j": "2"}))
    w.read_snapshot(4, snap({"k": "3", "j": "2"}))  # entry 4 deleted j
    v = w.verdict()
    assert not v.ok and "one of the two is wrong" in v.detail, v.detail
    assert len(v.evidence) == 2 and v.evidence[1]["index"] == 2


def test_an_unfinished_transfer_is_not_judged() -> None:
    w = Wire()
    w.append(0, OPS, 5)
    data = snap({"k": "wrong"})
    w.event("a", SEND, "peer:b", "InstallSnapshot", message_id=99, cluster=b"", peer_id="a", term=1,
            last_included_index=2, last_included_term=1, snapshot_offset=0, snapshot_size=len(data), chunk=data[:5])
    v = w.verdict()
    assert v.ok and "0 snapshot(s) seen whole" in v.detail and "1 transfer(s) never whole" in v.detail, v.detail


def test_values_are_compared_as_values_not_objects() -> None:
    # a NaN equals no NaN in Python; in MessagePack it is the same value
    w = Wire()
    w.append(0, [encode_op("put", "x", float("nan")), encode_op("put", "m", {"a": 1, "b": 2})], 2)
    w.install(2, snap({"m": {"b": 2, "a": 1}, "x": float("nan")}))  # another key order, the same map
    v = w.verdict()
    assert v.ok and "judged 1" in v.detail, v.detail
