"""A ZMQ Raft peer written only from the document (specs/zmq-raft.md, strict dialect, with the
errata the codec follows) and the Raft paper's Figure 2 — not from the reference peer, whose
code it does not import: the stand-in that shows the peer suite asks nothing of an
implementation that the document does not (tests/conformance/test_raft_standins.py).

It makes other choices than the reference wherever the document leaves one: a new leader
appends a checkpoint entry only when its log holds entries it does not know to be committed
(the reference always does; without one at all a cluster restarted whole never committed the
retried updates its log held: every client retry found its reqid in the log, so no entry of the
new term ever came to commit them — raft.algorithm.availability, Raft paper 5.4.2); a refused AppendEntries carries no conflict hints; ``false`` is
the byte 0x00 (the reference sends an empty frame); RequestUpdate is answered once, when
committed (no "accepted" answer first); RequestEntries with nothing new answers at once with no
entries; a repeated request is processed again (not answered from a cache; with
``--replay-cache`` a repeated AppendEntries or InstallSnapshot gets its last reply again,
whatever the term is by then, as node-zmq-raft does; with ``--prevent-spiral`` a candidate
that has not heard from a majority disregards higher terms of vote requests and answers and
starts no new election, node-zmq-raft's default; with ``--done-without-offset`` a leader takes a
snapshot transfer as done only on an answer without an offset, as node-zmq-raft's does); the leader's
heartbeat is 100 ms; durable state is one JSON file replaced atomically before every answer
that depends on it.

With ``--broadcast URL`` it is a BroadcastStateMachine (StateBroadcast MSG, E-RAFT-21/22/27): a
PUB bound at URL; while it leads, an empty StateBroadcast every 400 ms (not restarted by other
broadcasts) and, whenever its commit index moves (it applies what is committed at once), one
StateBroadcast with every newly applied entry; RequestBroadcastStateUrl is answered with the
URL by the leader, with frame 1 only by any other peer. Without it, RequestBroadcastStateUrl
gets no answer (E-RAFT-21: a peer without a BroadcastStateMachine may ignore it).

    python tests/standins/raft_peer.py --id iut --endpoint tcp://127.0.0.1:5000 \\
        --peers iut=tcp://127.0.0.1:5000,b=tcp://127.0.0.1:5001 --data-dir /tmp/x \\
        --election-min 300 --election-max 500 --seed 1

With ``--compact-every N`` it compacts its log (Raft paper section 7) once N applied entries lie
beyond its snapshot, into a snapshot of its key-value state machine (docs/raft.md's encoding of
log data, applied at once as entries commit) and of the reqids of the compacted entries (a
retried update still finds its entry, E-RAFT-16), keeping no entry after it. Its snapshot is
JSON of its own shape by default (``{"standin-snapshot": 1, "kv": {K: msgpack hex}, "requests":
{reqid hex: index}}``); ``--snapshot-format harness`` writes the harness's documented
``zmq-harness/raft-snapshot-1`` instead. A leader sends a follower whose next index lies at or
below its snapshot an InstallSnapshot in ``--chunk-size`` chunks (300 bytes), one at a time,
from the offset the follower names when it names one; as a follower it takes chunks in order
(a chunk at another offset is answered with the offset it expects, an accepted one with no
offset frame) and keeps the log entries after the snapshot when its log holds the snapshot's
last entry. A RequestEntries whose previous LOG INDEX is below its snapshot is answered with
the snapshot first, one status-3 chunk per request (its follow-ups carry the snapshot's LOG
INDEX, E-RAFT-19), then the entries after it.

Runs until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import time
from typing import Any

import msgpack
import zmq

RPC_TIMEOUT = 0.05
HEARTBEAT = 0.1
CLIENT_HEARTBEAT = 0.4  # its CLIENT_HEARTBEAT_INTERVAL (the document prefers 500 ms)
UPDATE_TTL = 8 * 3600  # REQUEST_UPDATE_TTL, seconds
HARNESS_FORMAT = "zmq-harness/raft-snapshot-1"  # docs/raft.md, the harness's snapshot format
OPS = ("put", "get", "cas", "delete")


def uint(n: int) -> bytes:
    return n.to_bytes(max(1, (n.bit_length() + 7) // 8), "little")


def read_uint(b: bytes, max_bytes: int = 8) -> int:
    if not 1 <= len(b) <= max_bytes:
        raise ValueError("uint of a wrong size")
    return int.from_bytes(b, "little")


def boolean(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def js(v: Any) -> bytes:
    return msgpack.packb(v, use_bin_type=True)


def operation(data: bytes) -> dict[str, Any] | None:
    """A key-value operation in a state entry's data (docs/raft.md), None for anything else."""
    try:
        body = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception:  # noqa: BLE001 - data that is no operation changes nothing
        return None
    if not isinstance(body, dict) or body.get("op") not in OPS or not isinstance(body.get("key"), str):
        return None
    if body["op"] in ("put", "cas") and body.get("value") is None:
        return None
    if body["op"] == "cas" and body.get("expected") is None:
        return None
    return body


def apply_op(kv: dict[str, Any], body: dict[str, Any]) -> None:
    key = body["key"]
    if body["op"] == "put":
        kv[key] = body["value"]
    elif body["op"] == "cas" and key in kv and kv[key] == body["expected"]:
        kv[key] = body["value"]
    elif body["op"] == "delete":
        kv.pop(key, None)


def encode_snapshot(kv: dict[str, Any], known: dict[str, int], fmt: str) -> bytes:
    if fmt == "harness":
        return msgpack.packb({"format": HARNESS_FORMAT, "state": {"kv": kv},
                              "reqids": [[bytes.fromhex(r), i] for r, i in known.items()]}, use_bin_type=True)
    return json.dumps({"standin-snapshot": 1, "kv": {k: js(v).hex() for k, v in kv.items()},
                       "requests": known}, sort_keys=True).encode()


def decode_snapshot(data: bytes) -> tuple[dict[str, Any], dict[str, int]]:
    """(key-value state, reqid hex -> index) of a snapshot in either format; ValueError else."""
    if data[:1] == b"{":
        body = json.loads(data)
        return ({k: msgpack.unpackb(bytes.fromhex(v), raw=False) for k, v in body["kv"].items()},
                dict(body["requests"]))
    body = msgpack.unpackb(data, raw=False, strict_map_key=False)
    if not isinstance(body, dict) or body.get("format") != HARNESS_FORMAT:
        raise ValueError("not a snapshot")
    return dict(body["state"]["kv"]), {r.hex(): i for r, i in body["reqids"]}


class Peer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.id = args.id
        self.checkpoints = not args.no_checkpoint
        # --replay-cache: requester identity -> (id of its last AppendEntries/InstallSnapshot, our reply)
        self.replay_cache: dict[bytes, tuple[bytes, list[bytes] | None]] | None = {} if args.replay_cache else None
        self.cluster = args.cluster.encode()  # E-RAFT-10: a peer request of another cluster is ignored
        self.peers = [tuple(p.split("=", 1)) for p in args.peers.split(",")]
        self.others = [p for p, _ in self.peers if p != self.id]
        self.majority = len(self.peers) // 2 + 1
        self.emin, self.emax = args.election_min / 1000, args.election_max / 1000
        self.rng = random.Random(args.seed * 1000 + sum(self.id.encode()))
        self.path = os.path.join(args.data_dir, "standin-state.json")
        self.compact_every, self.chunk_size, self.format = args.compact_every, args.chunk_size, args.snapshot_format
        self.ahead = args.snapshot_ahead
        self.breaks = set(args.breaks)
        # log: the entries after the snapshot, [reqid, type, term, data] (bytes as hex); the
        # snapshot: its last included index and term (base, base_term) and its bytes
        self.term, self.vote, self.log = 0, None, []
        self.base, self.base_term, self.snap = 0, 0, b""
        if os.path.exists(self.path):
            with open(self.path) as f:
                st = json.load(f)
            self.term, self.vote, self.log = st["term"], st["vote"], st["log"]
            snap = st.get("snap") or {"index": 0, "term": 0, "data": ""}
            self.base, self.base_term, self.snap = snap["index"], snap["term"], bytes.fromhex(snap["data"])
        self.kv, self.known = decode_snapshot(self.snap) if self.snap else ({}, {})
        self.state, self.leader = "follower", None
        self.commit = self.applied = self.base  # volatile: what the snapshot holds is committed
        self.receiving: tuple[tuple[Any, ...], bytearray] | None = None  # an InstallSnapshot coming in
        self.sending: dict[str, tuple[int, int, bytes] | None] = {}  # per follower: the snapshot going out
        self.reads: dict[tuple[bytes, bytes], list[Any]] = {}  # RequestEntries sending a snapshot
        self.votes: set[str] = set()
        # --prevent-spiral: the peers that answered this candidacy's RequestVote, itself included
        self.prevent_spiral = args.prevent_spiral
        self.done_without_offset = args.done_without_offset
        self.responded: set[str] = set()
        self.ctx = zmq.Context()
        self.router = self.ctx.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        self.router.bind(args.endpoint)
        self.dealers: dict[str, Any] = {}
        for pid, url in self.peers:
            if pid != self.id:
                d = self.ctx.socket(zmq.DEALER)
                d.setsockopt(zmq.LINGER, 0)
                d.connect(url)
                self.dealers[pid] = d
        self.msg_id = {p: 0 for p in self.others}
        self.outstanding: dict[str, tuple[int, list[bytes], float, int, int] | None] = {p: None for p in self.others}
        self.next_index = {p: 1 for p in self.others}
        self.match = {p: 0 for p in self.others}
        self.last_sent = {p: 0.0 for p in self.others}
        self.waiting: dict[bytes, bytes] = {}  # reqid of an update waiting for its commit -> client identity
        self.broadcast_url: str | None = args.broadcast
        self.pub = None
        if self.broadcast_url:
            self.pub = self.ctx.socket(zmq.PUB)
            self.pub.setsockopt(zmq.LINGER, 0)
            self.pub.bind(self.broadcast_url)
        self.broadcast_upto = 0  # the last index broadcast (applied = committed here)
        self.next_beat = 0.0
        self.reset_timer()
        if not self.others:
            self.deadline = time.monotonic()

    # ---- state ----
    def save(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"term": self.term, "vote": self.vote, "log": self.log,
                       "snap": {"index": self.base, "term": self.base_term, "data": self.snap.hex()}}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def reset_timer(self) -> None:
        self.deadline = time.monotonic() + self.rng.uniform(self.emin, self.emax)

    def last_index(self) -> int:
        return self.base + len(self.log)

    def last(self) -> tuple[int, int]:
        return self.last_index(), (self.log[-1][2] if self.log else self.base_term)

    def term_at(self, i: int) -> int:
        if i == self.base:
            return self.base_term
        return self.log[i - self.base - 1][2] if self.base < i <= self.last_index() else 0

    def entries(self, first: int, last: int) -> list[list[Any]]:
        """Entries first .. last (all after the snapshot)."""
        return self.log[first - self.base - 1:last - self.base]

    # ---- the key-value state machine and compaction ----
    def apply_committed(self) -> None:
        for e in self.entries(self.applied + 1, self.commit):
            body = operation(bytes.fromhex(e[3])) if e[1] == 0 else None
            if body is not None:
                apply_op(self.kv, body)
        self.applied = max(self.applied, self.commit)
        if self.compact_every and self.applied - self.base >= self.compact_every:
            self.compact()

    def compact(self) -> None:
        """Everything applied into the snapshot; no entry kept after it (``--snapshot-ahead``,
        broken on purpose: the snapshot is named one index lower than the state it holds, and
        whoever restores it applies that entry twice)."""
        upto = self.applied - (1 if self.ahead else 0)
        for i, e in enumerate(self.entries(self.base + 1, upto), self.base + 1):
            if e[0] != "00" * 12:
                self.known[e[0]] = i
        self.base_term = self.term_at(upto)
        self.log = self.log[upto - self.base:]
        self.base = upto
        self.snap = encode_snapshot(self.kv, self.known, self.format)
        self.save()
        if self.ahead:
            self.kv, self.known = decode_snapshot(self.snap)  # a restart's view: entry upto + 1 to apply again
            self.applied = upto

    def install(self, index: int, term: int, data: bytes) -> None:
        kv, known = decode_snapshot(data)  # ValueError: dropped unanswered
        if index <= self.last_index() and index >= self.base and self.term_at(index) == term:
            self.log = self.log[index - self.base:]  # Raft paper figure 13, step 6
        else:
            self.log = []
        self.base, self.base_term, self.snap, self.kv, self.known = index, term, data, kv, known
        self.commit = self.applied = index
        self.broadcast_upto = max(self.broadcast_upto, index)
        self.save()

    def entry_bytes(self, e: list[Any]) -> bytes:
        return bytes.fromhex(e[0]) + (e[1] | e[2] << 8).to_bytes(8, "little") + bytes.fromhex(e[3])

    def adopt(self, term: int) -> None:
        if term > self.term:
            self.term, self.vote = term, None
            if self.state != "follower":
                self.reset_timer()
            self.state, self.leader = "follower", None
            for p in self.others:
                self.outstanding[p] = None
            self.save()

    # ---- requests arriving at the ROUTER ----
    def on_router(self, frames: list[bytes]) -> None:
        ident, body = frames[0], frames[1:]
        cache = self.replay_cache if len(body) > 1 and body[1] in (b"+", b"$") else None
        if cache is not None:
            last = cache.get(ident)
            if last is not None and last[0] == body[0]:
                # a repeat of the last request: the last reply again, whatever our term is now
                if last[1] is not None:
                    self.router.send_multipart([ident] + last[1])
                return
        try:
            reply = self.handle(body, ident)
        except (ValueError, IndexError, KeyError, UnicodeDecodeError, msgpack.UnpackException):
            return  # malformed: dropped
        if cache is not None:
            cache[ident] = (body[0], reply)
        if reply is not None:
            self.router.send_multipart([ident] + reply)

    def handle(self, b: list[bytes], ident: bytes) -> list[bytes] | None:
        kind = b[1] if len(b) > 1 else b""
        if kind in (b"?", b"+", b"$") and len(b) > 2 and b[2] != self.cluster:
            return None
        if kind == b"?" and len(b) == 7:
            read_uint(b[0], 3)  # the message id must be a valid number
            cand, term, lidx, lterm = b[3].decode(), read_uint(b[4]), read_uint(b[5]), read_uint(b[6])
            if self.spiral_guard():
                return [b[0], uint(self.term), boolean(False)]  # its own term, no vote
            self.adopt(term)
            my_idx, my_term = self.last()
            ok = term == self.term and self.vote in (None, cand) and (lterm, lidx) >= (my_term, my_idx)
            if ok:
                self.vote = cand
                self.save()
                self.reset_timer()
            return [b[0], uint(self.term), boolean(ok)]
        if kind == b"+" and len(b) >= 8:
            read_uint(b[0], 3)
            lead, term, prev, pterm, lcommit = b[3].decode(), read_uint(b[4]), read_uint(b[5]), read_uint(b[6]), \
                read_uint(b[7])
            entries = []
            for raw in b[8:]:
                if len(raw) < 20:
                    raise ValueError("short entry")
                head = int.from_bytes(raw[12:20], "little")
                entries.append([raw[:12].hex(), head & 0xFF, head >> 8, raw[20:].hex()])
            if term < self.term:
                return [b[0], uint(self.term), boolean(False)]
            self.adopt(term)
            self.state, self.leader = "follower", lead
            self.reset_timer()
            # below the snapshot every entry is committed, hence the leader's too (log matching)
            if prev > self.last_index() or (prev >= self.base and prev > 0 and self.term_at(prev) != pterm):
                return [b[0], uint(self.term), boolean(False)]
            if "truncate-on-append" in self.breaks and prev + 1 > self.base:
                if prev < self.commit:  # node-zmq-raft's sanity check before the cut: the process ends
                    raise SystemExit(f"cowardly refusing to truncate log to {prev} before commit index {self.commit}")
                del self.log[prev - self.base:]  # broken on purpose: node-zmq-raft's FileLog cut
            for k, e in enumerate(entries):
                i = prev + 1 + k
                if i <= self.base:
                    continue
                if i <= self.last_index() and self.log[i - self.base - 1][2] != e[2]:
                    del self.log[i - self.base - 1:]
                if i > self.last_index():
                    self.log.append(e)
            self.save()
            self.commit = max(self.commit, min(lcommit, prev + len(entries)))
            self.apply_committed()
            return [b[0], uint(self.term), boolean(True)]
        if kind == b"$" and len(b) == 10:
            return self.on_install_snapshot(b)
        if len(b[0]) != 12:
            raise ValueError("not a reqid")
        leader = self.id if self.state == "leader" else self.leader
        if kind == b"^" and len(b) == 2:
            return [b[0], boolean(self.state == "leader"), js(leader), js([list(p) for p in self.peers])]
        if kind == b"%" and len(b) == 2:
            n, _ = self.last()
            return [b[0], boolean(self.state == "leader"), js(leader), uint(self.term), uint(self.base + 1),
                    uint(self.applied), uint(self.commit), uint(n), uint(len(self.snap))]
        if kind == b"=" and len(b) == 3:
            if self.state != "leader":
                return [b[0], boolean(False), js(leader)]
            if int.from_bytes(b[0][:4], "big") < time.time() - UPDATE_TTL:
                return [b[0], boolean(False)]  # expired: no third frame
            if b[0].hex() in self.known or any(e[0] == b[0].hex() for e in self.log):
                return self.committed(b[0], ident)
            self.log.append([b[0].hex(), 0, self.term, b[2].hex()])
            self.save()
            self.advance()
            return self.committed(b[0], ident)
        if kind == b"*" and len(b) == 2 and self.pub is not None:
            return [b[0], self.broadcast_url.encode()] if self.state == "leader" else [b[0]]
        if kind == b"<" and len(b) in (3, 4):
            if self.state != "leader":
                return [b[0], uint(0), js(leader)]
            prev = read_uint(b[2])
            chunk = self.snapshot_chunk((ident, b[0]), prev, len(b) == 4 and read_uint(b[3]) == 0)
            if chunk is not None:
                return chunk
            upto = self.commit if len(b) == 3 else min(self.commit, prev + read_uint(b[3]))
            out = [self.entry_bytes(e) for e in self.entries(prev + 1, upto)]
            return [b[0], uint(1), js(None), uint(prev + len(out))] + out
        raise ValueError("unknown request")

    def snapshot_chunk(self, key: tuple[bytes, bytes], prev: int, stop: bool) -> list[bytes] | None:
        """The next status-3 answer of a RequestEntries that reads the snapshot, or None when it
        reads entries. A follow-up carries the snapshot's LOG INDEX as its previous LOG INDEX
        until the last chunk is sent: the offset is this peer's to remember, per RPC."""
        read = self.reads.get(key)
        if stop or (read is not None and (prev != read[0] or read[2] >= len(read[1]))):
            self.reads.pop(key, None)
            read = None
        if read is None:
            if prev >= self.base or stop:
                return None
            while len(self.reads) >= 64:  # RPCs a client left: forget the oldest
                self.reads.pop(next(iter(self.reads)))
            read = self.reads[key] = [self.base, self.snap, 0]
        index, data, offset = read
        read[2] = offset + len(data[offset:offset + self.chunk_size])
        return [key[1], uint(3), js([offset, len(data)]), uint(index), data[offset:offset + self.chunk_size]]

    def on_install_snapshot(self, b: list[bytes]) -> list[bytes]:
        read_uint(b[0], 3)
        lead, term, index, lterm = b[3].decode(), read_uint(b[4]), read_uint(b[5]), read_uint(b[6])
        offset, size, chunk = read_uint(b[7]), read_uint(b[8]), b[9]
        if term < self.term:
            return [b[0], uint(self.term)]
        self.adopt(term)
        self.state, self.leader = "follower", lead
        self.reset_timer()
        if index <= self.commit:  # it holds (and has applied) all of that already: nothing more to send
            self.receiving = None
            return [b[0], uint(self.term), uint(size)]
        key = (lead, term, index, size)
        if self.receiving is None or self.receiving[0] != key:
            if offset != 0:
                return [b[0], uint(self.term), uint(0)]
            self.receiving = (key, bytearray())
        buf = self.receiving[1]
        if offset != len(buf):
            return [b[0], uint(self.term), uint(len(buf))]
        buf += chunk
        if len(buf) >= size:
            self.receiving = None
            self.install(index, lterm, bytes(buf))
        return [b[0], uint(self.term)]  # taken: no offset frame (it is optional)

    def committed(self, reqid: bytes, ident: bytes) -> list[bytes] | None:
        """The answer to an update once it is committed; until then the client waits for it."""
        at = self.known.get(reqid.hex())
        for i, e in enumerate(self.entries(self.base + 1, self.commit), self.base + 1):
            if at is None and e[0] == reqid.hex():
                at = i
        if at is not None:
            self.waiting.pop(reqid, None)
            return [reqid, boolean(True), js(at)]
        self.waiting[reqid] = ident
        return None

    # ---- this peer's own requests ----
    def send(self, p: str, frames: list[bytes], prev: int = 0, n: int = 0) -> None:
        self.dealers[p].send_multipart(frames)
        self.outstanding[p] = (read_uint(frames[0], 3), frames, time.monotonic(), prev, n)
        self.last_sent[p] = time.monotonic()

    def next_id(self, p: str) -> bytes:
        self.msg_id[p] = (self.msg_id[p] + 1) & 0xFFFFFF
        return uint(self.msg_id[p])

    def start_election(self) -> None:
        self.state, self.term, self.vote, self.leader = "candidate", self.term + 1, self.id, None
        self.save()
        self.votes = {self.id}
        self.responded = {self.id}
        self.reset_timer()
        if len(self.votes) >= self.majority:
            return self.become_leader()
        idx, t = self.last()
        for p in self.others:
            self.send(p, [self.next_id(p), b"?", self.cluster, self.id.encode(), uint(self.term), uint(idx), uint(t)])

    def spiral_guard(self) -> bool:
        """node-zmq-raft's preventSpiralElections: a candidate that has not heard from a majority
        ignores higher terms in vote requests and answers, and starts no new election (E-RAFT-34)."""
        return self.prevent_spiral and self.state == "candidate" and len(self.responded) < self.majority

    def become_leader(self) -> None:
        self.state, self.leader = "leader", self.id
        self.broadcast_upto = self.commit  # applied as a follower: not this leader's news
        if self.commit < self.last_index() and self.checkpoints:
            # Entries of earlier terms commit only under one of this term (Raft paper 5.4.2): a
            # checkpoint entry (the document's example: zero reqid, type 2, data 0xc0) commits
            # them even when the only updates clients send are retries of what the log holds.
            self.log.append(["00" * 12, 2, self.term, "c0"])
            self.save()
        for p in self.others:
            self.next_index[p], self.match[p], self.outstanding[p] = self.last_index() + 1, 0, None
            self.sending[p] = None
            self.append_entries(p)
        self.advance()

    def append_entries(self, p: str) -> None:
        prev = self.next_index[p] - 1
        if prev < self.base:  # the entries it needs are compacted away
            return self.send_snapshot(p)
        entries = [self.entry_bytes(e) for e in self.entries(prev + 1, prev + 32)]
        self.send(p, [self.next_id(p), b"+", self.cluster, self.id.encode(), uint(self.term), uint(prev),
                      uint(self.term_at(prev)), uint(self.commit)] + entries, prev, len(entries))

    def send_snapshot(self, p: str, offset: int = 0) -> None:
        sending = self.sending.get(p)
        if sending is None or sending[0] != self.base and offset == 0:
            sending = self.sending[p] = (self.base, self.base_term, self.snap)
        index, term, data = sending
        chunk = data[offset:offset + self.chunk_size]
        self.send(p, [self.next_id(p), b"$", self.cluster, self.id.encode(), uint(self.term), uint(index), uint(term),
                      uint(offset), uint(len(data)), chunk], offset, len(chunk))

    def advance(self) -> None:
        for n in range(self.last_index(), self.commit, -1):
            held = 1 + sum(1 for p in self.others if self.match[p] >= n)
            if "commit-no-majority" in self.breaks:
                held = self.majority  # broken on purpose: its own copy is enough
            if held >= self.majority and self.term_at(n) == self.term:
                self.commit = n
                break
        for reqid, ident in list(self.waiting.items()):
            reply = self.committed(reqid, ident)
            if reply is not None:
                self.router.send_multipart([ident] + reply)
        if self.pub is not None and self.state == "leader" and self.commit > self.broadcast_upto:
            applied = [self.entry_bytes(e) for e in self.entries(self.broadcast_upto + 1, self.commit)]
            self.pub.send_multipart([self.cluster, uint(self.term), uint(self.commit)] + applied)
        self.broadcast_upto = max(self.broadcast_upto, self.commit)
        self.apply_committed()

    def on_dealer(self, p: str, frames: list[bytes]) -> None:
        out = self.outstanding[p]
        try:
            mid, term = read_uint(frames[0], 3), read_uint(frames[1])
        except (ValueError, IndexError):
            return
        if out is None or mid != out[0]:
            return  # not the answer to this peer's outstanding request
        self.outstanding[p] = None
        if out[1][1] == b"?":
            self.responded.add(p)
        if term > self.term and self.spiral_guard():
            return
        if term > self.term:
            self.adopt(term)
            return
        ok = len(frames) > 2 and frames[2][:1] not in (b"", b"\x00")
        if self.state == "candidate" and out[1][1] == b"?" and term == self.term and ok:
            self.votes.add(p)
            if len(self.votes) >= self.majority:
                self.become_leader()
        elif self.state == "leader" and out[1][1] == b"$":
            sending = self.sending.get(p)
            if sending is None:
                return
            nxt = read_uint(frames[2]) if len(frames) > 2 else out[3] + out[4]
            if nxt < len(sending[2]) or (self.done_without_offset and len(frames) > 2):
                # --done-without-offset: node-zmq-raft's leader takes a transfer as done only on an
                # answer to its last chunk without an offset; any offset gets a chunk from there
                return self.send_snapshot(p, nxt)
            self.sending[p] = None
            self.match[p] = max(self.match[p], sending[0])
            self.next_index[p] = self.match[p] + 1
            self.advance()
            self.append_entries(p)
        elif self.state == "leader" and out[1][1] == b"+":
            if ok:
                self.match[p] = max(self.match[p], out[3] + out[4])
                self.next_index[p] = self.match[p] + 1
                self.advance()
            else:
                self.next_index[p] = max(1, self.next_index[p] - 1)
            if self.last_index() >= self.next_index[p]:
                self.append_entries(p)

    def tick(self) -> None:
        now = time.monotonic()
        if self.pub is not None and self.state == "leader" and now >= self.next_beat:
            self.pub.send_multipart([self.cluster, uint(self.term), uint(self.commit)])
            self.next_beat = now + CLIENT_HEARTBEAT
        if self.state != "leader" and now >= self.deadline:
            if self.spiral_guard():
                self.reset_timer()  # no new term while no majority has answered this one
                return
            self.start_election()
            return
        for p in self.others:
            out = self.outstanding[p]
            if out is not None and now - out[2] >= RPC_TIMEOUT:
                self.dealers[p].send_multipart(out[1])  # the same message again (E-RAFT-04)
                self.outstanding[p] = (out[0], out[1], now, out[3], out[4])
            elif out is None and self.state == "leader" and now - self.last_sent[p] >= HEARTBEAT:
                self.append_entries(p)

    def run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.router, zmq.POLLIN)
        names = {}
        for p, d in self.dealers.items():
            poller.register(d, zmq.POLLIN)
            names[d] = p
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        signal.signal(signal.SIGINT, lambda *_: stop.append(1))
        while not stop:
            for sock, _ in poller.poll(10):
                frames = sock.recv_multipart()
                if sock is self.router:
                    self.on_router(frames)
                else:
                    self.on_dealer(names[sock], frames)
            self.tick()
        self.ctx.destroy(0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--id", required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--peers", required=True)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--election-min", type=int, default=200)
    ap.add_argument("--election-max", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cluster", default="")
    ap.add_argument("--broadcast", default=None, help="the StateBroadcast PUB URL (a BroadcastStateMachine)")
    ap.add_argument("--compact-every", type=int, default=0,
                    help="compact the log once this many applied entries lie beyond the snapshot (0: never)")
    ap.add_argument("--chunk-size", type=int, default=300, help="snapshot chunk bytes")
    ap.add_argument("--snapshot-format", choices=("json", "harness"), default="json",
                    help="its own JSON snapshot, or the harness's documented zmq-harness/raft-snapshot-1")
    ap.add_argument("--snapshot-ahead", action="store_true",
                    help="broken on purpose: a snapshot holds the state one entry past the index it names")
    ap.add_argument("--no-checkpoint", action="store_true",
                    help="broken on purpose: never append a checkpoint entry (how it was before a restarted "
                         "cluster showed it never committing retried updates again)")
    ap.add_argument("--prevent-spiral", action="store_true",
                    help="a candidate that has not heard from a majority answers a vote request of any term with "
                         "its own and no vote, ignores higher terms in vote answers and starts no new election, "
                         "as node-zmq-raft's preventSpiralElections does (E-RAFT-34)")
    ap.add_argument("--done-without-offset", action="store_true",
                    help="as leader, take a snapshot transfer as done only on an answer to its last chunk without "
                         "an offset, and send a chunk from any offset named (node-zmq-raft's leader)")
    ap.add_argument("--replay-cache", action="store_true",
                    help="answer a repeated AppendEntries or InstallSnapshot (same requester, same id) with the last "
                         "reply to it, whatever its term is now, as node-zmq-raft's debounce cache does (E-RAFT-04)")
    ap.add_argument("--break", dest="breaks", action="append", default=[],
                    choices=("commit-no-majority", "truncate-on-append"),
                    help="broken on purpose: commit-no-majority commits every entry of its term as soon as it "
                         "holds it (raft.algorithm.commit-majority); truncate-on-append cuts its log after the "
                         "previous entry of every AppendEntries it accepts, as node-zmq-raft's FileLog does "
                         "(raft.algorithm.keep-matching-entries), and exits where that is below its commit index")
    Peer(ap.parse_args()).run()


if __name__ == "__main__":
    main()
