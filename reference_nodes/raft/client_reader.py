"""The reference client's replica of the cluster's state machine, fed from the committed log.

The client learns the result of its own operations by replaying the committed log in index
order on a local `KVStateMachine`: it reads entries with RequestEntries (pipelined follow-ups,
snapshot chunks first when the leader has compacted them, E-RAFT-19) and, with ``subscribe``,
from the leader's StateBroadcast (E-RAFT-22: entries beyond its last applied index + 1 are
fetched with RequestEntries; broadcasts of a lower term than seen are ignored).

A response that does not continue the replica (a lost response left a gap) ends the RPC
(count 0) and a new one starts from the last applied index.

A snapshot's bytes are the state machine's business (E-RAFT-26): only one in the documented
key-value format (``zmq-harness/raft-snapshot-1``) gives the replica its state. After one in any
other format the replica knows only the keys written since (`Replica`): a result that depends on
what the snapshot held is unknown, and the operation ends ``info``, never with a guess.
"""

from __future__ import annotations

from typing import Any

from harness.node import Action, Connect, Disconnect, Send, Subscribe
from harness.protocols import DecodeError
from harness.protocols.raft import NULL, RE_LAST, RE_MORE, RE_NOT_LEADER, RE_SNAPSHOT, LogEntry
from harness.protocols.raft_kv import snapshot_body
from reference_nodes.raft.log import entry_reqid
from reference_nodes.raft.state_machine import KVStateMachine, snapshot_parts

SUB = "sub"
COMPACTED = object()  # the result of an entry the replica only knows from a snapshot
UNKNOWN = object()  # the result of an entry that read what a snapshot it cannot read held


class Replica(KVStateMachine):
    """The client's key-value replica. After a snapshot it cannot read (`forget`) a key is known
    again only once a put or delete has written it; a get or cas of another key returns
    `UNKNOWN` (a cas leaves the key unknown: it may or may not have swapped)."""

    def __init__(self) -> None:
        super().__init__()
        self.written: set[str] | None = None  # None: every key known

    def forget(self) -> None:
        self.kv, self.written = {}, set()

    def restore(self, state: Any) -> None:
        super().restore(state)
        self.written = None

    def apply_op(self, body: dict[str, Any]) -> Any:
        if self.written is not None:
            if body["op"] in ("put", "delete"):
                self.written.add(body["key"])
            elif body["key"] not in self.written:
                return UNKNOWN
        return super().apply_op(body)


class Read:
    """The RequestEntries RPC in flight."""

    __slots__ = ("key", "rid", "prev", "deadline", "buf", "snap_index")

    def __init__(self, key: Any, rid: Any, prev: int, deadline: int) -> None:
        self.key = key
        self.rid = rid  # the id field's value
        self.prev = prev  # the first request's previous LOG INDEX
        self.deadline = deadline
        self.buf = bytearray()  # snapshot being received
        self.snap_index = 0


class LogReader:
    """Mixed into `reference_nodes.raft.client.Client`."""

    def init_reader(self) -> None:
        self.sm = Replica()
        self.applied = 0
        self.unread_upto = 0  # the last index of a snapshot in a format the replica cannot read
        self.read: Read | None = None
        self.read_target = 0
        self.results: dict[bytes, tuple[int, Any]] = {}  # our reqid -> (index, result) once applied
        self.subscribe = bool(self.config.get("subscribe", False))
        self.sub_url: str | None = None
        self.url_deadline: int | None = None
        self.max_broadcast_term = 0

    # ---- applying -------------------------------------------------------------------------------
    def apply_raw(self, raws: list[bytes], first: int) -> list[Action]:
        """Apply entry frames starting at index ``first`` (those already applied are skipped)."""
        out: list[Action] = []
        for k, raw in enumerate(raws):
            i = first + k
            if i <= self.applied:
                continue
            if i != self.applied + 1:
                break
            try:
                entry = self.entry_type.decode(raw)
            except Exception:  # noqa: BLE001 - the codec validated it; a FieldError here is a peer bug
                entry = LogEntry(bytes(12), 0, 0, b"")
            result = self.sm.apply(i, entry)
            self.applied = i
            r = entry_reqid(raw)
            if r in self.my_reqids and r not in self.results:
                self.results[r] = (i, result)
        out += self.on_applied()
        return out

    def restore_snapshot(self, index: int, data: bytes) -> None:
        body = snapshot_body(data)
        state, reqids = snapshot_parts(body)
        if body is None:  # another implementation's own format (E-RAFT-26)
            self.sm.forget()
            self.unread_upto = index
        else:
            self.sm.restore(state)
        self.applied = index
        for r in self.my_reqids:  # our entries inside it: where they are, not what they returned
            if r in reqids and r not in self.results:
                self.results[r] = (reqids[r], COMPACTED)

    # ---- RequestEntries ---------------------------------------------------------------------------
    def read_to(self, target: int, now: int) -> list[Action]:
        """Make sure the replica reaches ``target``: start a read unless one is running."""
        self.read_target = max(self.read_target, target)
        if self.applied >= self.read_target or self.read is not None:
            return []
        return [self.start_read(now)]

    def start_read(self, now: int) -> Send:
        rid, key = self.new_id("RequestEntries")
        self.read = Read(key, rid, self.applied, now + self.response_ttl)
        return self.entries_request(rid, self.applied, None)

    def entries_request(self, rid: Any, prev: int, count: int | None, offset: int | None = None) -> Send:
        fields: dict[str, Any] = {self.d.rpc_id("RequestEntries"): rid, "prev_log_index": prev}
        if self.d.strict:
            if count is not None:
                fields["count"] = count
        else:
            fields["cluster"] = self.cluster
            fields["count"] = count if count is not None else NULL
            if offset is not None:
                fields["snapshot_offset"] = offset
        return Send("dealer", self.d.enc["RequestEntries"](fields), "RequestEntries", {"index": prev})

    def abort_read(self) -> list[Action]:
        """End the RPC in flight (count 0) so the peer stops sending."""
        r, self.read = self.read, None
        if r is None:
            return []
        return [self.entries_request(r.rid, self.applied, 0)]

    def on_entries_response(self, frames: list[bytes], now: int) -> list[Action]:
        r = self.read
        try:
            msg = self.d.dec["RequestEntriesResponse"](frames)
        except DecodeError as e:
            return self.malformed("dealer", frames, e)
        status = msg["status"]
        if status == RE_NOT_LEADER:
            self.read = None
            return self.broken_leader(msg["leader_id"], now)
        r.deadline = now + self.response_ttl
        last = msg["last_index"]
        if status == RE_SNAPSHOT:
            offset, size = msg["snapshot_info"][0], msg["snapshot_info"][1]
            if offset != len(r.buf) or (r.buf and r.snap_index != last):
                return self.abort_read() + self.read_to(self.read_target, now)
            r.buf += msg["chunk"]
            r.snap_index = last
            out: list[Action] = []
            if len(r.buf) >= size:
                if last > self.applied:
                    self.restore_snapshot(last, bytes(r.buf))
                    out += self.on_applied()
                r.buf = bytearray()
            out.append(self.entries_request(r.rid, last if self.d.strict else r.prev, None,
                                            None if self.d.strict else len(r.buf) or size))
            return out
        raws = frames[4:]
        first = last - len(raws) + 1
        if raws and first > self.applied + 1:  # a response was lost: start again from the replica
            return self.abort_read() + self.read_to(self.read_target, now)
        out = self.apply_raw(raws, first) if raws else []
        if status == RE_MORE:
            out.append(self.entries_request(r.rid, last, None))
        elif status == RE_LAST:
            self.read = None
            out += self.read_to(self.read_target, now)
        return out

    def reader_timer(self, now: int) -> list[Action]:
        out: list[Action] = []
        r = self.read
        if r is not None and r.deadline <= now:  # no answer within SERVER_RESPONSE_TTL: scenario 2
            self.read = None
            out += self.search(now)
        if self.url_deadline is not None and self.url_deadline <= now:
            self.url_deadline = None
            out += self.ask_broadcast_url(now)
        return out

    def reader_deadline(self) -> int | None:
        t = self.read.deadline if self.read is not None else None
        u = self.url_deadline
        if u is not None and (t is None or u < t):
            t = u
        return t

    # ---- StateBroadcast ---------------------------------------------------------------------------
    def ask_broadcast_url(self, now: int) -> list[Action]:
        if not self.subscribe or self.leader is None:
            return []
        rid, key = self.new_id("RequestBroadcastStateUrl")
        self.url_rpc = key
        self.url_deadline = now + self.response_ttl
        fields: dict[str, Any] = {self.d.rpc_id("RequestBroadcastStateUrl"): rid}
        if not self.d.strict:
            fields["cluster"] = self.cluster
        return [Send("dealer", self.d.enc["RequestBroadcastStateUrl"](fields), "RequestBroadcastStateUrl")]

    def on_url_response(self, frames: list[bytes], now: int) -> list[Action]:
        self.url_rpc = None
        try:
            msg = self.d.dec["RequestBroadcastStateUrlResponse"](frames)
        except DecodeError as e:
            return self.malformed("dealer", frames, e)
        url = msg.get("url")
        if url is None:  # not the leader: find it, then ask again (E-RAFT-21)
            self.url_deadline = now + self.election_grace
            return self.ask_config(now)
        self.url_deadline = None
        out: list[Action] = []
        if url != self.sub_url:
            if self.sub_url is not None:
                out.append(Disconnect(SUB, self.sub_url))
            self.sub_url = url
            out += [Connect(SUB, url), Subscribe(SUB, self.cluster)]
        return out

    def on_broadcast(self, frames: list[bytes], now: int) -> list[Action]:
        try:
            msg = self.d.dec["StateBroadcast"](frames)
        except DecodeError as e:
            return self.malformed(SUB, frames, e)
        if msg["cluster"] != self.cluster or msg["term"] < self.max_broadcast_term:
            return []
        self.max_broadcast_term = msg["term"]
        raws = frames[3:]
        last = msg["last_applied"]
        first = last - len(raws) + 1
        if raws and first <= self.applied + 1:
            return self.apply_raw(raws, first)
        if last > self.applied:  # a gap (a lost broadcast, a late subscriber): fetch it
            return self.read_to(last, now)
        return []
