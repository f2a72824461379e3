"""The requests a reference peer answers on its ROUTER, and its BroadcastStateMachine.

Peer RPCs (RequestVote, AppendEntries, InstallSnapshot) from a foreign cluster are ignored
(E-RAFT-10); a repeated request (same sender, same bytes, same term) is answered from the reply
cache (debouncing, E-RAFT-04). Client RPCs:

* RequestConfig: leader flag, LEADER ID (nil when unknown), every peer ``[id, url]``.
* RequestUpdate (leader only; others answer false with the LEADER ID or nil): a reqid already
  in the log is answered from its entry (true, then true with its index once committed), never
  appended twice (E-RAFT-16); a new reqid older than ``update_ttl_ms`` is refused (false, no
  third frame); else the entry is appended and answered "accepted" (true), then "committed"
  (true, index) when it commits. A leader that steps down answers its waiting updates false
  with nil.
* RequestEntries (leader only; others answer status 0): committed entries after the previous
  LOG INDEX, at most ``max_entries`` per response, with up to ``entries_pipeline`` unconfirmed
  responses per RPC; snapshot chunks (status 3) first when the entries are compacted. A
  follow-up (same id) confirms one response and carries the remaining count; count 0 ends it.
* RequestLogInfo: term, first index, last applied, commit index, last index, snapshot size.
* RequestBroadcastStateUrl: the PUB URL when leader (and broadcasting), else no second frame.

StateBroadcast (leader only, E-RAFT-22): applied entries as they are applied (at most
``max_entries`` per message, LAST APPLIED INDEX = the last one's index), an empty one every
``client_heartbeat_ms`` otherwise; frame 1 (the topic) is the cluster ident.
"""

from __future__ import annotations

from typing import Any

from harness.node import Action, Send
from harness.protocols import DecodeError
from harness.protocols.raft import NULL, RE_LAST, RE_MORE, RE_NOT_LEADER, RE_SNAPSHOT
from reference_nodes.raft.common import (
    DEFAULT_ENTRIES_PIPELINE, DEFAULT_UPDATE_TTL_MS, leader_field, positive_int,
)

PEER_RPCS = ("RequestVote", "AppendEntries", "InstallSnapshot")
ENTRIES_SESSION_IDLE_NS = 30_000_000_000  # a RequestEntries RPC not heard of for this long is dropped
ROUTER, PUB, LEADER = "router", "pub", "leader"
# Client RPC -> the method that answers it (looked up on the instance, so mutants may override).
CLIENT_HANDLERS = {
    "RequestConfig": "on_config",
    "RequestUpdate": "on_update",
    "RequestEntries": "on_entries",
    "RequestLogInfo": "on_log_info",
    "RequestBroadcastStateUrl": "on_broadcast_url",
}


class EntriesRpc:
    """One RequestEntries RPC being served: where it stands and what is unconfirmed."""

    __slots__ = ("next", "count", "unconfirmed", "snap", "offset", "touched")

    def __init__(self, prev: int, count: int | None, now: int) -> None:
        self.next = prev + 1  # the next entry to send
        self.count = count  # entries still wanted (None: up to the commit index)
        self.unconfirmed = 0
        self.snap: tuple[int, int, bytes] | None = None  # snapshot being sent
        self.offset = 0
        self.touched = now


class RequestHandling:
    """Mixed into `reference_nodes.raft.peer.Peer` (which provides the Raft state used here)."""

    def init_request_handling(self) -> None:
        cfg = self.config
        self.update_ttl_ns = self.ms("update_ttl_ms", DEFAULT_UPDATE_TTL_MS)
        self.pipeline = positive_int(cfg.get("entries_pipeline", DEFAULT_ENTRIES_PIPELINE), "entries_pipeline")
        # sender -> (term, request, reply); a reply is replayed only within the term it was given
        # in: after a term change the log it spoke of may have changed.
        self.reply_cache: dict[bytes, tuple[int, list[bytes], list[bytes]]] = {}
        self.update_waiters: dict[bytes, list[bytes]] = {}  # reqid -> ROUTER ids waiting for its commit
        self.entries_rpcs: dict[tuple[bytes, Any], EntriesRpc] = {}

    # ---- dispatch ---------------------------------------------------------------------------
    def on_request(self, frames: list[bytes], now: int) -> list[Action]:
        if len(frames) < 2:
            return self.unexpected(ROUTER, frames, "a request needs a routing id and frames")
        ident, body = frames[0], frames[1:]
        try:
            msg = self.d.codec.decode(body, channel="request")
        except DecodeError as e:
            return self.malformed(ROUTER, frames, e)
        name = msg.name
        if name in PEER_RPCS:
            return self.on_peer_rpc(ident, body, msg, now)
        if not self.d.strict and msg.get("cluster") != self.cluster:
            return self.unexpected(ROUTER, frames, "foreign cluster ident", "raft.peer.cluster-ident")
        handler = CLIENT_HANDLERS.get(name)
        if handler is None:
            return self.unexpected(ROUTER, frames, f"{name} is not served by the reference peer")
        return getattr(self, handler)(ident, msg, now)

    def on_peer_rpc(self, ident: bytes, body: list[bytes], msg: Any, now: int) -> list[Action]:
        if msg["cluster"] != self.cluster:
            return self.unexpected(ROUTER, [ident] + body, "foreign cluster ident", "raft.peer.cluster-ident")
        name = msg.name
        cached = self.reply_cache.get(ident)
        if cached is not None and cached[0] == self.term and cached[1] == body and self.debounce():
            return [Send(ROUTER, [ident] + cached[2], name + "Response", {"term": self.term})]
        if name == "AppendEntries":
            out, fields = self.on_append_request(msg, body[8:], now)
        elif name == "RequestVote":
            out, fields = self.on_vote_request(msg, now)
        else:
            out, fields = self.on_snapshot_request(msg, now)
        reply = self.d.enc[name + "Response"]({"message_id": msg["message_id"], **fields})
        self.reply_cache[ident] = (self.term, body, reply)
        out.append(Send(ROUTER, [ident] + reply, name + "Response", {"term": self.term}))
        return out

    def debounce(self) -> bool:
        """Whether a repeated request is answered from the reply cache (E-RAFT-04)."""
        return True

    def reply(self, ident: bytes, name: str, fields: dict[str, Any]) -> Send:
        return Send(ROUTER, [ident] + self.d.enc[name](fields), name)

    def _id(self, rpc: str, msg: Any) -> dict[str, Any]:
        f = self.d.rpc_id(rpc)
        return {f: msg[f]}

    # ---- RequestConfig, RequestLogInfo, RequestBroadcastStateUrl ------------------------------------
    def on_config(self, ident: bytes, msg: Any, now: int) -> list[Action]:
        return [self.reply(ident, "RequestConfigResponse", {
            **self._id("RequestConfig", msg), "is_leader": self.state == LEADER,
            "leader_id": leader_field(self.leader_id), "peers": [list(p) for p in self.peers]})]

    def on_log_info(self, ident: bytes, msg: Any, now: int) -> list[Action]:
        log = self.log
        fields = {**self._id("RequestLogInfo", msg), "is_leader": self.state == LEADER,
                  "leader_id": leader_field(self.leader_id), "term": self.term, "first_index": log.first_index,
                  "last_applied": self.applied, "commit_index": self.commit_index, "last_index": log.last_index,
                  "snapshot_size": len(log.snapshot_data)}
        if not self.d.strict:
            fields["prune_index"] = log.snapshot_index
        return [self.reply(ident, "RequestLogInfoResponse", fields)]

    def on_broadcast_url(self, ident: bytes, msg: Any, now: int) -> list[Action]:
        fields = self._id("RequestBroadcastStateUrl", msg)
        if self.state == LEADER and self.broadcast_url:
            fields["url"] = str(self.broadcast_url)
        return [self.reply(ident, "RequestBroadcastStateUrlResponse", fields)]

    # ---- RequestUpdate ---------------------------------------------------------------------------
    def on_update(self, ident: bytes, msg: Any, now: int) -> list[Action]:
        reqid = msg["reqid"]
        if self.state != LEADER:
            return [self.update_reply(ident, reqid, False, leader_field(self.leader_id))]
        index = self.find_update(reqid)
        if index is not None:
            if index <= self.commit_index:
                return [self.update_reply(ident, reqid, True, index)]
            self.wait_commit(reqid, ident)
            return [self.update_reply(ident, reqid, True)]
        if self.expired(reqid, now):
            return [self.update_reply(ident, reqid, False)]
        raw = reqid + (self.term << 8).to_bytes(8, "little") + msg["data"]  # type 0: state
        self.append_entries_local([raw])
        self.wait_commit(reqid, ident)
        out: list[Action] = [self.update_reply(ident, reqid, True)]
        for link in self.links.values():
            if link.out is None:  # idle followers get the new entry now, the others with their answer
                out += self.replicate(link, now)
        out += self.advance_commit(now)  # a cluster of one commits at once
        return out

    def find_update(self, reqid: bytes) -> int | None:
        """The index of the entry a reqid already has in the log or snapshot (E-RAFT-16)."""
        return self.reqids.get(reqid)

    def expired(self, reqid: bytes, now: int) -> bool:
        """E-RAFT-16: the reqid's age (this peer's clock minus its timestamp) exceeds the TTL."""
        age_s = self.epoch_seconds(now) - int.from_bytes(reqid[:4], "big")
        return age_s * 1_000_000_000 > self.update_ttl_ns

    def wait_commit(self, reqid: bytes, ident: bytes) -> None:
        waiting = self.update_waiters.setdefault(reqid, [])
        if ident not in waiting:
            waiting.append(ident)

    def update_reply(self, ident: bytes, reqid: bytes, ok: bool, third: Any = None) -> Send:
        fields: dict[str, Any] = {"reqid": reqid, "success": ok}
        if third is not None:
            fields["log_index" if ok else "leader_id"] = third
        return Send(ROUTER, [ident] + self.d.enc["RequestUpdateResponse"](fields), "RequestUpdateResponse",
                    {"corr": reqid.hex(), "index": third if ok and isinstance(third, int) else None})

    def answer_committed(self, now: int) -> list[Action]:
        """Committed updates get their index (E-RAFT-15: the index only once committed)."""
        out: list[Action] = []
        for reqid in list(self.update_waiters):
            index = self.reqids.get(reqid)
            if index is not None and index <= self.commit_index:
                for ident in self.update_waiters.pop(reqid):
                    out.append(self.update_reply(ident, reqid, True, index))
        return out

    def lost_leadership(self, now: int) -> list[Action]:
        """A leader stepping down: waiting updates learn it is no longer the leader."""
        out: list[Action] = []
        for reqid, idents in self.update_waiters.items():
            out += [self.update_reply(ident, reqid, False, NULL) for ident in idents]
        self.update_waiters = {}
        self.entries_rpcs = {}
        return out

    # ---- RequestEntries ---------------------------------------------------------------------------
    def on_entries(self, ident: bytes, msg: Any, now: int) -> list[Action]:
        idf = self.d.rpc_id("RequestEntries")
        rid = msg[idf]
        key = (ident, rid)
        if self.state != LEADER:
            self.entries_rpcs.pop(key, None)
            return [self.reply(ident, "RequestEntriesResponse",
                               {idf: rid, "status": RE_NOT_LEADER, "leader_id": leader_field(self.leader_id)})]
        count = msg.get("count")
        count = count if isinstance(count, int) else None  # absent, or NULL in 0.7: up to the commit index
        rpc = self.entries_rpcs.get(key)
        if rpc is None:
            if count == 0:
                return []
            self._forget_idle_rpcs(now)
            rpc = self.entries_rpcs[key] = EntriesRpc(msg["prev_log_index"], count, now)
        else:  # a follow-up confirms one response (E-RAFT-19)
            rpc.unconfirmed = max(0, rpc.unconfirmed - 1)
            if count is not None:
                rpc.count = count
            if count == 0:
                del self.entries_rpcs[key]
                return []
        rpc.touched = now
        return self.pump_entries(ident, key, rpc, idf, rid)

    def _forget_idle_rpcs(self, now: int) -> None:
        for key in [k for k, r in self.entries_rpcs.items() if now - r.touched > ENTRIES_SESSION_IDLE_NS]:
            del self.entries_rpcs[key]

    def pump_entries(self, ident: bytes, key: Any, rpc: EntriesRpc, idf: str, rid: Any) -> list[Action]:
        out: list[Action] = []
        log = self.log
        done = False
        while rpc.unconfirmed < self.pipeline and not done:
            fields: dict[str, Any] = {idf: rid}
            extra: list[bytes] = []
            if rpc.snap is not None or rpc.next <= log.snapshot_index:
                if rpc.snap is None:
                    rpc.snap, rpc.offset = (log.snapshot_index, log.snapshot_term, log.snapshot_data), 0
                index, term, data = rpc.snap
                chunk = data[rpc.offset:rpc.offset + self.chunk_size]
                info = [rpc.offset, len(data)] if self.d.strict else [rpc.offset, len(data), term]
                fields.update(status=RE_SNAPSHOT, snapshot_info=info, last_index=index, chunk=chunk)
                rpc.offset += len(chunk)
                if rpc.offset >= len(data):
                    rpc.snap, rpc.next = None, index + 1
            else:
                last = min(self.commit_index, rpc.next + self.max_entries - 1)
                if rpc.count is not None:
                    last = min(last, rpc.next - 1 + rpc.count)
                n = max(0, last - rpc.next + 1)
                extra = log.slice(rpc.next, last) if n else []
                end = last >= self.commit_index or (rpc.count is not None and rpc.count - n <= 0)
                fields.update(status=RE_LAST if end else RE_MORE, last_index=rpc.next - 1 + n, entries=())
                fields["ignored" if self.d.strict else "leader_id"] = NULL
                rpc.next += n
                if rpc.count is not None:
                    rpc.count -= n
                done = end
            rpc.unconfirmed += 1
            frames = self.d.enc["RequestEntriesResponse"](fields)
            out.append(Send(ROUTER, [ident] + frames + extra, "RequestEntriesResponse",
                            {"index": fields["last_index"]}))
        if done:
            self.entries_rpcs.pop(key, None)
        return out

    # ---- StateBroadcast ---------------------------------------------------------------------------
    def broadcast(self, raws: list[bytes], now: int) -> list[Action]:
        """Publish applied entries (or an empty heartbeat) and restart the heartbeat interval."""
        self.broadcast_deadline = now + self.client_heartbeat
        enc = self.d.enc["StateBroadcast"]
        if not raws:
            return [Send(PUB, enc({"cluster": self.cluster, "term": self.term, "last_applied": self.applied,
                                   "entries": ()}), "StateBroadcast", {"term": self.term, "index": self.applied})]
        out: list[Action] = []
        first = self.applied - len(raws) + 1
        for k in range(0, len(raws), self.max_entries):
            part = raws[k:k + self.max_entries]
            last = first + k + len(part) - 1
            frames = enc({"cluster": self.cluster, "term": self.term, "last_applied": last, "entries": ()}) + part
            out.append(Send(PUB, frames, "StateBroadcast", {"term": self.term, "index": last}))
        return out
