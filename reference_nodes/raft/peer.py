"""Raft over ZeroMQ reference peer (specs/zmq-raft.md with docs/errata.md).

Sockets: ``router``, a ROUTER bound to the peer's own URL (peer and client requests arrive
here); ``peer:<ID>``, one DEALER per other peer, connected to its ROUTER (this peer's requests
and their responses); ``pub``, a PUB for the BroadcastStateMachine's StateBroadcast, when
``broadcast`` names its URL.

Raft (Ongaro & Ousterhout): followers, candidates and a leader per term; RequestVote with the
log-up-to-date rule; AppendEntries with the conflict TERM/INDEX hints (E-RAFT-20; the leader
never moves its next index forward on a hint); InstallSnapshot in chunks, resumed at the
follower's offset; a leader appends a checkpoint entry when elected, so entries of earlier
terms commit with it (it counts replicas only for entries of its own term).

Peer RPCs (E-RAFT-04): one outstanding request per destination; message ids per DEALER, 1,
2, ... 16777215, 0, 1, ...; an unanswered request is repeated byte for byte after
``rpc_timeout_ms`` until answered or superseded; a response whose id is not the outstanding
request's is dropped. The responder answers a repeated request (same id, same bytes, same
sender) from a cache of its last reply instead of processing it again (debouncing).

Durable state (the injected store): term, vote and the log (`reference_nodes.raft.log`), each
written before the answer that depends on it. Commit index, applied index and the state
machine are volatile: a restarted peer rebuilds them from its snapshot and the log.

Notes: ``role`` ``{"role", "term"}`` at start and on every role or term change (the package's
``leader`` fault target reads it); ``apply`` ``{"first", "last", "terms", "crcs"}`` for each
batch of applied entries (CRC-32 of the entry frame); ``snapshot`` ``{"index", "term"}`` on
compaction or install.

Config: ``id`` (default: the node name), ``endpoint`` (its ROUTER URL), ``peers`` (every peer
``[[id, url], ...]``, itself included), ``cluster`` (ident, default empty), ``broadcast`` (PUB
URL, optional), ``election_min_ms`` / ``election_max_ms`` (200 / 300), ``rpc_timeout_ms`` (50),
``heartbeat_ms`` (70), ``client_heartbeat_ms`` (500), ``max_entries`` (64 per AppendEntries),
``snapshot_every`` (compact after this many applied entries, 0 = never; default 0),
``snapshot_keep`` (applied entries left in the log after compaction, for readers a little behind; 0),
``chunk_size`` (snapshot chunk bytes, 4096), ``update_ttl_ms`` (8 h), ``entries_pipeline`` (5),
``state_machine`` (``kv``), ``dialect``, ``epoch_s``.
"""

from __future__ import annotations

import zlib
from typing import Any

from harness.node import Action, NodeContext, Note, Send, SocketSpec, SocketType
from harness.protocols import DecodeError
from harness.protocols.raft import ENTRY_CHECKPOINT
from reference_nodes.raft.common import (
    DEFAULT_CLIENT_HEARTBEAT_MS, DEFAULT_ELECTION_MAX_MS, DEFAULT_ELECTION_MIN_MS, DEFAULT_HEARTBEAT_MS,
    DEFAULT_RPC_TIMEOUT_MS, RaftNode, peer_list, positive_int, text,
)
from reference_nodes.raft.log import RaftLog, entry_reqid, entry_term
from reference_nodes.raft.peer_requests import RequestHandling
from reference_nodes.raft.state_machine import make_state_machine, pack_snapshot, unpack_snapshot

FOLLOWER, CANDIDATE, LEADER = "follower", "candidate", "leader"
ROUTER = "router"
PUB = "pub"
MAX_MESSAGE_ID = 0xFFFFFF
NO_REQID = bytes(12)
CHECKPOINT_DATA = b"\xc0"  # MessagePack nil


def checkpoint_entry(term: int) -> bytes:
    """The entry a new leader appends: all-zero reqid, type checkpoint, data nil."""
    return NO_REQID + (ENTRY_CHECKPOINT | term << 8).to_bytes(8, "little") + CHECKPOINT_DATA


class Outstanding:
    """The one unanswered request to a peer: its exact frames, so a retry is the same message."""

    __slots__ = ("msg_id", "frames", "kind", "sent_at", "prev", "count", "offset", "length")

    def __init__(self, msg_id: int, frames: list[bytes], kind: str, sent_at: int,
                 prev: int = 0, count: int = 0, offset: int = 0, length: int = 0) -> None:
        self.msg_id = msg_id
        self.frames = frames
        self.kind = kind
        self.sent_at = sent_at
        self.prev = prev  # AppendEntries: previous LOG INDEX
        self.count = count  # AppendEntries: entries sent
        self.offset = offset  # InstallSnapshot: chunk offset
        self.length = length  # InstallSnapshot: chunk length


class Link:
    """What this peer knows about one other peer, and its requests to it."""

    __slots__ = ("id", "url", "socket", "last_id", "out", "deadline", "last_sent", "next_index",
                 "match_index", "snap")

    def __init__(self, pid: str, url: str) -> None:
        self.id = pid
        self.url = url
        self.socket = f"peer:{pid}"
        self.last_id = 0
        self.out: Outstanding | None = None
        self.deadline: int | None = None  # retry (outstanding) or next heartbeat (leader)
        self.last_sent = 0
        self.next_index = 1
        self.match_index = 0
        self.snap: tuple[int, int, bytes] | None = None  # snapshot being sent: index, term, data


class Peer(RequestHandling, RaftNode):
    role = "peer"

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        cfg = self.config
        self.id = text(cfg.get("id", self.name), "id")
        self.peers = peer_list(cfg.get("peers", [[self.id, cfg.get("endpoint", "tcp://127.0.0.1:8047")]]))
        urls = dict(self.peers)
        if self.id not in urls:
            raise ValueError(f"raft peer {self.id!r} is not in its own 'peers' list {list(urls)}")
        self.endpoint = text(cfg.get("endpoint", urls[self.id]), "endpoint")
        self.links = {pid: Link(pid, url) for pid, url in self.peers if pid != self.id}
        self.majority = len(self.peers) // 2 + 1
        self.election_min = self.ms("election_min_ms", DEFAULT_ELECTION_MIN_MS)
        self.election_max = self.ms("election_max_ms", DEFAULT_ELECTION_MAX_MS)
        self.rpc_timeout = self.ms("rpc_timeout_ms", DEFAULT_RPC_TIMEOUT_MS)
        self.heartbeat = self.ms("heartbeat_ms", DEFAULT_HEARTBEAT_MS)
        self.client_heartbeat = self.ms("client_heartbeat_ms", DEFAULT_CLIENT_HEARTBEAT_MS)
        if not 0 < self.election_min <= self.election_max:
            raise ValueError("raft config: need 0 < election_min_ms <= election_max_ms")
        if not 0 < self.rpc_timeout <= self.election_min // 2 or not 0 < self.heartbeat <= self.election_min // 2:
            # E-RAFT-11 / E-RAFT-12: retries and heartbeats within ELECTION_TIMEOUT_MIN / 2
            raise ValueError("raft config: rpc_timeout_ms and heartbeat_ms must be positive and at most "
                             "election_min_ms / 2")
        self.max_entries = positive_int(cfg.get("max_entries", 64), "max_entries")
        self.snapshot_every = int(cfg.get("snapshot_every", 0))
        self.snapshot_keep = int(cfg.get("snapshot_keep", 0))
        self.chunk_size = positive_int(cfg.get("chunk_size", 4096), "chunk_size")
        self.broadcast_url = cfg.get("broadcast")
        self.sm_name = cfg.get("state_machine", "kv")
        self.sm = make_state_machine(self.sm_name)
        self.init_request_handling()
        self.load_state()

    # ---- durable state ---------------------------------------------------------------------
    def load_state(self) -> None:
        """Term, vote and log from the store; the state machine from the snapshot."""
        self.term: int = self.store.get("term", 0)
        self.voted_for: str | None = self.store.get("vote")
        self.log = self.make_log()
        state, reqids = unpack_snapshot(self.log.snapshot_data)
        self.sm.restore(state)
        self.reqids: dict[bytes, int] = reqids
        for i in range(self.log.first_index, self.log.last_index + 1):
            self._remember_reqid(self.log.raw_at(i), i)
        self.commit_index = self.applied = self.log.snapshot_index
        self.state = FOLLOWER
        self.leader_id: str | None = None
        self.votes: set[str] = set()
        self.receiving: tuple[Any, bytearray] | None = None  # snapshot being received

    def make_log(self) -> RaftLog:
        return RaftLog(self.store)

    def persist_term(self) -> None:
        """Term and vote, written before any answer that depends on them."""
        self.store.put("term", self.term)
        self.store.put("vote", self.voted_for)

    # ---- node contract -----------------------------------------------------------------------
    def sockets(self) -> list[SocketSpec]:
        out = [SocketSpec(ROUTER, SocketType.ROUTER, bind=(self.endpoint,), handover=True)]
        out += [SocketSpec(link.socket, SocketType.DEALER, connect=(link.url,)) for link in self.links.values()]
        if self.broadcast_url:
            out.append(SocketSpec(PUB, SocketType.PUB, bind=(str(self.broadcast_url),)))
        return out

    def start(self, now: int) -> list[Action]:
        self.election_deadline: int | None = None
        self.broadcast_deadline: int | None = None
        self.reset_election_timer(now)
        out: list[Action] = [self.role_note()]
        if not self.links:  # a cluster of one elects itself at once
            out += self.start_election(now)
        return out

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        if socket == ROUTER:
            return self.on_request(frames, now)
        link = self.links.get(socket[5:]) if socket.startswith("peer:") else None
        if link is None:
            return self.unexpected(socket, frames, f"nothing is expected on socket {socket!r}")
        return self.on_response(link, frames, now)

    def get_timer(self) -> int | None:
        t = self.election_deadline
        for link in self.links.values():
            d = link.deadline
            if d is not None and (t is None or d < t):
                t = d
        b = self.broadcast_deadline
        if b is not None and (t is None or b < t):
            t = b
        return t

    def handle_timer(self, now: int) -> list[Action]:
        out: list[Action] = []
        if self.state == LEADER:
            for link in self.links.values():
                if link.deadline is not None and link.deadline <= now:
                    out += self.retry(link, now) if link.out is not None else self.replicate(link, now)
            if self.broadcast_deadline is not None and self.broadcast_deadline <= now:
                out += self.broadcast([], now)
            return out
        if self.election_deadline is not None and self.election_deadline <= now:
            return self.start_election(now)
        for link in self.links.values():  # a candidate's unanswered votes
            if link.deadline is not None and link.deadline <= now:
                out += self.retry(link, now) if link.out is not None else []
                if link.out is None:
                    link.deadline = None
        return out

    # ---- roles and terms -----------------------------------------------------------------------
    def role_note(self) -> Note:
        return Note("role", {"role": self.state, "term": self.term})

    def reset_election_timer(self, now: int) -> None:
        self.election_deadline = now + self.rng.randint(self.election_min, self.election_max)

    def observe_term(self, term: int, now: int) -> list[Action]:
        """Raft 5.1: a higher term in any request or response makes this peer a follower of it."""
        if term <= self.term:
            return []
        return self.step_down(term, now)

    def step_down(self, term: int, now: int) -> list[Action]:
        was_leader = self.state == LEADER
        changed = term != self.term or self.state != FOLLOWER
        if term != self.term:
            self.term, self.voted_for = term, None
            self.persist_term()
            self.leader_id = None
        self.state = FOLLOWER
        self.votes = set()
        self.broadcast_deadline = None
        for link in self.links.values():  # requests of the old role are superseded
            link.out, link.deadline, link.snap = None, None, None
        if was_leader:
            self.reset_election_timer(now)
        out: list[Action] = [self.role_note()] if changed else []
        if was_leader:
            out += self.lost_leadership(now)
        return out

    def start_election(self, now: int) -> list[Action]:
        self.state = CANDIDATE
        self.term += 1
        self.voted_for = self.id
        self.persist_term()
        self.leader_id = None
        self.votes = {self.id}
        self.reset_election_timer(now)
        out: list[Action] = [self.role_note()]
        if len(self.votes) >= self.majority:
            return out + self.become_leader(now)
        fields = {"cluster": self.cluster, "peer_id": self.id, "term": self.term,
                  "last_log_index": self.log.last_index, "last_log_term": self.log.last_term}
        for link in self.links.values():
            out.append(self.request(link, "RequestVote", fields, now))
        return out

    def election_entries(self) -> list[bytes]:
        """What a new leader appends before anything else: the checkpoint entry, so that the
        entries of earlier terms its log holds commit with one of its own term (E-RAFT-28)."""
        return [checkpoint_entry(self.term)]

    def become_leader(self, now: int) -> list[Action]:
        self.state = LEADER
        self.leader_id = self.id
        self.election_deadline = None
        out: list[Action] = [self.role_note()]
        first_new = self.log.last_index + 1
        self.append_entries_local(self.election_entries())
        for link in self.links.values():
            link.next_index, link.match_index, link.out, link.snap = first_new, 0, None, None
            out += self.replicate(link, now)
        if self.broadcast_url:
            out += self.broadcast([], now)
        return out

    # ---- peer RPCs: sending ---------------------------------------------------------------------
    def request(self, link: Link, kind: str, fields: dict[str, Any], now: int, extra: list[bytes] = (),
                **info: int) -> Send:
        """Send a new request to a peer, superseding any outstanding one."""
        link.last_id = (link.last_id + 1) & MAX_MESSAGE_ID
        frames = self.d.enc[kind]({"message_id": link.last_id, **fields})
        if extra:
            frames = frames + list(extra)
        link.out = Outstanding(link.last_id, frames, kind, now, **info)
        link.deadline = now + self.rpc_timeout
        link.last_sent = now
        return Send(link.socket, frames, kind, {"term": self.term, "index": info.get("prev")})

    def retry(self, link: Link, now: int) -> list[Action]:
        """RPC_TIMEOUT passed without an answer: repeat the request byte for byte (E-RAFT-04)."""
        out = link.out
        link.deadline = now + self.rpc_timeout
        link.last_sent = now
        return [Send(link.socket, list(out.frames), out.kind, {"term": self.term, "index": out.prev})]

    def replicate(self, link: Link, now: int) -> list[Action]:
        """The leader's next request to a follower: entries from its next index (none: a
        heartbeat), or the next snapshot chunk when those entries are compacted."""
        log = self.log
        if link.next_index <= log.snapshot_index:
            return [self.send_snapshot_chunk(link, now)]
        prev = link.next_index - 1
        last = min(log.last_index, prev + self.max_entries)
        raws = log.slice(prev + 1, last) if last > prev else []
        fields = {"cluster": self.cluster, "peer_id": self.id, "term": self.term, "prev_log_index": prev,
                  "prev_log_term": log.term_at(prev), "commit_index": self.commit_index, "entries": ()}
        return [self.request(link, "AppendEntries", fields, now, raws, prev=prev, count=len(raws))]

    def send_snapshot_chunk(self, link: Link, now: int, offset: int = 0) -> Send:
        log = self.log
        if link.snap is None or link.snap[0] < log.snapshot_index:
            link.snap, offset = (log.snapshot_index, log.snapshot_term, log.snapshot_data), 0
        index, term, data = link.snap
        chunk = data[offset:offset + self.chunk_size]
        fields = {"cluster": self.cluster, "peer_id": self.id, "term": self.term, "last_included_index": index,
                  "last_included_term": term, "snapshot_offset": offset, "snapshot_size": len(data), "chunk": chunk}
        return self.request(link, "InstallSnapshot", fields, now, prev=index, offset=offset, length=len(chunk))

    # ---- peer RPCs: responses ---------------------------------------------------------------------
    def on_response(self, link: Link, frames: list[bytes], now: int) -> list[Action]:
        out = link.out
        if out is None:
            return self.unexpected(link.socket, frames, "a response while no request is outstanding",
                                   "raft.rpc.response-id")
        try:
            msg = self.d.dec[out.kind + "Response"](frames)
        except DecodeError as e:
            return self.malformed(link.socket, frames, e)
        if not self.answers(out, msg["message_id"]):
            # Not the answer to the outstanding request; its term still counts (Raft 5.1).
            return self.unexpected(link.socket, frames, f"response id {msg['message_id']} is not that of the "
                                   f"outstanding request ({out.msg_id})", "raft.rpc.response-id") + \
                self.observe_term(msg["term"], now)
        link.out = None
        link.deadline = None
        if msg["term"] > self.term:
            return self.observe_term(msg["term"], now)
        if out.kind == "RequestVote":
            return self.on_vote(link, msg, now)
        if self.state != LEADER:
            return []
        if msg["term"] < self.term:
            # an answer of an older term to this term's request (a broken follower): ignored (Raft
            # 5.1), and the follower still gets the leader's next request at the heartbeat; without
            # a deadline the link would fall silent and the follower start elections
            link.deadline = link.last_sent + self.heartbeat
            return []
        if out.kind == "AppendEntries":
            return self.on_append_response(link, out, msg, now)
        return self.on_snapshot_response(link, out, msg, now)

    def answers(self, out: Outstanding, msg_id: int) -> bool:
        """Whether a response answers the outstanding request (E-RAFT-04: by message id)."""
        return msg_id == out.msg_id

    def on_vote(self, link: Link, msg: Any, now: int) -> list[Action]:
        if self.state != CANDIDATE or msg["term"] != self.term or not msg["vote_granted"]:
            return []
        self.votes.add(link.id)
        if len(self.votes) >= self.majority:
            return self.become_leader(now)
        return []

    def on_append_response(self, link: Link, out: Outstanding, msg: Any, now: int) -> list[Action]:
        if msg["success"]:
            link.match_index = max(link.match_index, out.prev + out.count)
            link.next_index = link.match_index + 1
            actions = self.advance_commit(now)
        else:
            hint = msg.get("conflict_index")
            nxt = link.next_index - 1
            if hint is not None and 0 < hint < nxt:
                nxt = hint  # never forward on a hint (E-RAFT-20)
            link.next_index = max(1, nxt)
            actions = []
        if link.next_index <= self.log.last_index or link.next_index <= self.log.snapshot_index:
            return actions + self.replicate(link, now)
        link.deadline = link.last_sent + self.heartbeat
        return actions

    def on_snapshot_response(self, link: Link, out: Outstanding, msg: Any, now: int) -> list[Action]:
        if link.snap is None:
            return []
        index, _, data = link.snap
        nxt = msg.get("next_offset")
        if nxt is None:
            nxt = out.offset + out.length
        if nxt >= len(data):
            link.snap = None
            link.match_index = max(link.match_index, index)
            link.next_index = link.match_index + 1
            return self.replicate(link, now)
        return [self.send_snapshot_chunk(link, now, nxt)]

    # ---- commit and apply ---------------------------------------------------------------------
    def advance_commit(self, now: int) -> list[Action]:
        """Raft 5.3/5.4.2: the highest index stored on a majority, if its entry is of this term."""
        matches = sorted([self.log.last_index] + [link.match_index for link in self.links.values()], reverse=True)
        n = matches[self.majority - 1]
        if n > self.commit_index and self.log.term_at(n) == self.term:
            return self.set_commit(n, now)
        return []

    def set_commit(self, index: int, now: int) -> list[Action]:
        self.commit_index = index
        return self.apply_committed(now)

    def apply_committed(self, now: int) -> list[Action]:
        first = self.applied + 1
        last = self.apply_limit()
        if last < first:
            return []
        raws = self.log.slice(first, last)
        sm, log = self.sm, self.log
        for i in range(first, last + 1):
            sm.apply(i, log.entry(i))
        self.applied = last
        out: list[Action] = [Note("apply", {"first": first, "last": last, "terms": [entry_term(b) for b in raws],
                                            "crcs": [zlib.crc32(b) for b in raws]})]
        if self.state == LEADER:
            out += self.answer_committed(now)
            if self.broadcast_url:
                out += self.broadcast(raws, now)
        if self.snapshot_every > 0 and self.applied - self.snapshot_keep - log.snapshot_index >= self.snapshot_every:
            out += self.compact()
        return out

    def apply_limit(self) -> int:
        """The last index that may be applied: the commit index (within the log)."""
        return min(self.commit_index, self.log.last_index)

    def compact(self) -> list[Action]:
        upto = self.applied - self.snapshot_keep
        reqids = {r: i for r, i in self.reqids.items() if i <= upto}
        self.log.compact(upto, pack_snapshot(self.state_at(upto), reqids))
        return [Note("snapshot", {"index": upto, "term": self.log.snapshot_term})]

    def state_at(self, index: int) -> Any:
        """The state machine's state after the entry at ``index`` (applied, not compacted). The
        live machine is at ``applied``; with ``snapshot_keep`` the snapshot ends earlier, and a
        snapshot holding later entries too would have them applied twice by whoever restores it
        and replays the kept entries (a restarted peer, a follower, a client's replica)."""
        if index == self.applied:
            return self.sm.snapshot()
        sm = make_state_machine(self.sm_name)
        sm.restore(unpack_snapshot(self.log.snapshot_data)[0])
        for i in range(self.log.snapshot_index + 1, index + 1):
            sm.apply(i, self.log.entry(i))
        return sm.snapshot()

    # ---- the log --------------------------------------------------------------------------------
    def _remember_reqid(self, raw: bytes, index: int) -> None:
        r = entry_reqid(raw)
        if r != NO_REQID:
            self.reqids[r] = index

    def append_entries_local(self, raws: list[bytes]) -> int:
        """Append entries (the leader's own); returns the last index."""
        first = self.log.last_index + 1
        last = self.log.append(raws)
        for k, raw in enumerate(raws):
            self._remember_reqid(raw, first + k)
        return last

    def truncate_log(self, index: int) -> None:
        for i in range(index, self.log.last_index + 1):
            r = entry_reqid(self.log.raw_at(i))
            if self.reqids.get(r) == i:
                del self.reqids[r]
        self.log.truncate_from(index)

    def append_from_leader(self, prev: int, raws: list[bytes]) -> None:
        """Raft 5.3: skip entries already present, delete a conflicting entry and all that follow
        it, append the rest."""
        log = self.log
        for k, raw in enumerate(raws):
            i = prev + 1 + k
            if i <= log.snapshot_index:
                continue
            t = log.term_at(i)
            if t is None:
                self.append_entries_local(raws[k:])
                return
            if t != entry_term(raw):
                self.truncate_log(i)
                self.append_entries_local(raws[k:])
                return

    # ---- peer RPCs: requests ---------------------------------------------------------------------
    def on_vote_request(self, msg: Any, now: int) -> tuple[list[Action], dict[str, Any]]:
        out = self.observe_term(msg["term"], now)
        granted = False
        if msg["term"] == self.term and self.grant_vote(msg["peer_id"], msg["last_log_index"], msg["last_log_term"]):
            self.voted_for = msg["peer_id"]
            self.persist_term()
            self.reset_election_timer(now)
            granted = True
        return out, {"term": self.term, "vote_granted": granted}

    def grant_vote(self, candidate: str, last_index: int, last_term: int) -> bool:
        """Raft 5.2 (one vote per term) and 5.4.1 (the candidate's log is at least as up to date)."""
        if self.voted_for not in (None, candidate):
            return False
        return self.log_up_to_date(last_index, last_term)

    def log_up_to_date(self, last_index: int, last_term: int) -> bool:
        mine = self.log.last_term
        return last_term > mine or (last_term == mine and last_index >= self.log.last_index)

    def accept_leader(self, msg: Any, now: int) -> list[Action]:
        """A valid AppendEntries or InstallSnapshot of the current term: follow its sender."""
        out = self.observe_term(msg["term"], now)
        if self.state != FOLLOWER:
            out += self.step_down(self.term, now)
        self.leader_id = msg["peer_id"]
        self.reset_election_timer(now)
        return out

    def on_append_request(self, msg: Any, raws: list[bytes], now: int) -> tuple[list[Action], dict[str, Any]]:
        if msg["term"] < self.term:
            return [], {"term": self.term, "success": False}
        out = self.accept_leader(msg, now)
        log, prev, prev_term = self.log, msg["prev_log_index"], msg["prev_log_term"]
        if prev > log.last_index:
            return out, {"term": self.term, "success": False, "conflict_term": log.last_term,
                         "conflict_index": log.last_index + 1}
        if prev >= log.snapshot_index and log.term_at(prev) != prev_term:
            t = log.term_at(prev)
            return out, {"term": self.term, "success": False, "conflict_term": t,
                         "conflict_index": log.first_index_of_term(prev)}
        self.append_from_leader(prev, raws)
        if msg["commit_index"] > self.commit_index:
            out += self.set_commit(min(msg["commit_index"], prev + len(raws)), now)
        return out, {"term": self.term, "success": True}

    def on_snapshot_request(self, msg: Any, now: int) -> tuple[list[Action], dict[str, Any]]:
        if msg["term"] < self.term:
            return [], {"term": self.term}
        out = self.accept_leader(msg, now)
        key = (msg["peer_id"], msg["term"], msg["last_included_index"], msg["snapshot_size"])
        rs = self.receiving
        if rs is None or rs[0] != key:
            if msg["snapshot_offset"] != 0:
                if msg["snapshot_offset"] >= msg["snapshot_size"] and msg["last_included_index"] <= self.commit_index:
                    # past the end of a snapshot whose entries it holds: nothing left to take (E-RAFT-30)
                    return out, {"term": self.term}
                return out, {"term": self.term, "next_offset": 0}
            rs = self.receiving = (key, bytearray())
        buf = rs[1]
        if msg["snapshot_offset"] != len(buf):
            return out, {"term": self.term, "next_offset": len(buf)}
        buf += msg["chunk"]
        if len(buf) >= msg["snapshot_size"]:
            self.receiving = None
            out += self.install_snapshot(msg["last_included_index"], msg["last_included_term"], bytes(buf))
            # the last chunk taken, without an offset: node-zmq-raft's leader counts a transfer done
            # only on such an answer (an offset there made it send the end again, forever)
            return out, {"term": self.term}
        return out, {"term": self.term, "next_offset": len(buf)}

    def install_snapshot(self, index: int, term: int, data: bytes) -> list[Action]:
        if index <= self.commit_index:
            return []  # nothing new: this log already holds (and has applied) what it covers
        self.log.install_snapshot(index, term, data)
        state, reqids = unpack_snapshot(data)
        self.sm.restore(state)
        self.reqids = reqids
        for i in range(self.log.first_index, self.log.last_index + 1):
            self._remember_reqid(self.log.raw_at(i), i)
        self.commit_index = self.applied = index
        return [Note("snapshot", {"index": index, "term": term, "installed": True})]
