"""A ZMQ Raft client written only from the document's Client section (specs/zmq-raft.md) and its
RequestEntries / RequestLogInfo / StateBroadcast sections with docs/errata.md — not from the
reference client, whose code it does not import: the stand-in that shows the client suite asks
nothing the document does not (tests/conformance/test_raft_standins.py).

Its choices differ from the reference's where the document leaves one: an update is done once
a peer answers it committed (it reads the log back only with ``--read each``); it asks for the
cluster state again after 200 ms when no leader is known (the reference waits
SERVER_ELECTION_GRACE_MS); its update data is MessagePack of its own shape; it exits 0 when its
work is done (and, with ``--subscribe true``, it holds a SUB on the leader's broadcast URL).
With ``--confirm-leader`` it takes a RequestConfig answer as node-zmq-raft's client does, only
from the leader itself: told by another peer that X leads, it asks X (RequestConfig) and follows
X once X answers as the leader (every peer again if X does not answer in time).

With ``--subscribe true`` it follows the StateBroadcast as the RequestBroadcastStateUrl section
says: once a leader is established it asks that peer for the URL; an answer without the 2nd
frame makes it perform RequestConfig (and ask again only when that names a leader); with the
URL it connects a SUB there. An unanswered URL request is given up after SERVER_RESPONSE_TTL
(a peer without a BroadcastStateMachine need not answer).

**Reader** (``--read end|each|start``): it reads the committed log with RequestEntries, from the
previous LOG INDEX ``--read-from`` (``end``: once its updates are done; ``start``: once it knows
the leader, before its first update) or from the index of each update it made minus one
(``each``: after each update), and prints every entry and snapshot as a JSON line. Its own lawful choices: no count frame unless ``--read-count N`` (then a follow-up
carries the count still wanted, E-RAFT-19); ``--stop-after K`` ends the RPC with a count-0
follow-up after K "more to come" answers (the MAY of "stop"); ``--log-info true`` asks
RequestLogInfo first and reads from the log's first INDEX - 1 when that lies beyond
``--read-from``; ``--redirect-read new`` answers "not the leader" with a new RPC (a new reqid)
from where it is instead of its last request again (both lawful, E-RAFT-31). A status 2 or 3 answer gets a follow-up at once, same reqid, previous LOG INDEX
replaced by the answer's (so any pipeline depth up to REQUEST_ENTRIES_PIPELINES works); status 1
ends the read; status 0 is the broken-leader procedure (scenario 1: the same request to the
leader named, at once; scenario 2: every peer, a grace, again). A snapshot chunk is kept at its
byte offset whatever its format; a whole snapshot in the key-value format of docs/raft.md
(``zmq-harness/raft-snapshot-1``) is printed as its map, any other as its size. An answer that
does not continue what it read (a lost answer) ends the RPC with count 0 and a new one starts
from there.

``--dialect raft:zmq-raft`` frames its requests as INTEROP.md's node-zmq-raft 0.7 (cluster ident
frame, uint32 request ids but for RequestUpdate, RequestEntries count frame 5 as a ``nuint``).
``--break`` makes it break one reading rule, for the proof that the suite catches it:
``new-reqid`` (a follow-up with a new reqid), ``no-follow-up`` (status 2 and 3 taken for the
end), ``ignore-not-leader`` (a status 0 answer ends the read, no redirect).

    python tests/standins/raft_client.py --peers a=tcp://127.0.0.1:5001 --updates 2 --key k --read end
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import msgpack
import zmq

RESPONSE_TTL = 0.5  # SERVER_RESPONSE_TTL
ELECTION_GRACE = 0.3  # SERVER_ELECTION_GRACE_MS
ASK_AGAIN = 0.2
SNAPSHOT_FORMAT = "zmq-harness/raft-snapshot-1"  # docs/raft.md


def uint(n: int) -> bytes:
    """``uint``: least significant byte first, the fewest bytes, at least one."""
    return n.to_bytes(max(1, (n.bit_length() + 7) // 8), "little")


def read_uint(b: bytes) -> int:
    return int.from_bytes(b, "little")


def unpack(b: bytes) -> Any:
    return msgpack.unpackb(b, raw=False, strict_map_key=False)


class Wire:
    """The frames of the client requests in one dialect."""

    def __init__(self, dialect: str, cluster: bytes) -> None:
        self.v07 = dialect != "strict"
        self.cluster = cluster
        self.machine = os.urandom(5)
        self.counter = int.from_bytes(os.urandom(3), "big")

    def reqid(self) -> bytes:
        self.counter = (self.counter + 1) & 0xFFFFFF
        return int(time.time()).to_bytes(4, "big") + self.machine + self.counter.to_bytes(3, "big")

    def rpc_id(self) -> bytes:
        """The id of a request other than RequestUpdate: a reqid, or a uint32 in 0.7."""
        if not self.v07:
            return self.reqid()
        self.counter = (self.counter + 1) & 0xFFFFFF
        return uint(self.counter)

    def same(self, a: bytes, b: bytes) -> bool:
        return a == b or (self.v07 and len(a) <= 4 and len(b) <= 4 and read_uint(a) == read_uint(b))

    def request(self, rid: bytes, kind: bytes, *rest: bytes) -> list[bytes]:
        return [rid, kind, *([self.cluster] if self.v07 else []), *rest]

    def entries(self, rid: bytes, prev: int, count: int | None, offset: int | None = None) -> list[bytes]:
        rest = [uint(prev)]
        offset = offset if self.v07 else None  # the offset frame is 0.7's (INTEROP.md)
        if count is not None or offset is not None:
            rest.append(b"" if count is None else uint(count))  # a 0.7 nuint: empty is null
        if offset is not None:
            rest.append(uint(offset))
        return self.request(rid, b"<", *rest)


class Read:
    """One RequestEntries RPC."""

    def __init__(self, rid: bytes, prev: int, count: int | None) -> None:
        self.rid = rid
        self.prev = prev  # the next entry wanted is prev + 1
        self.count = count  # entries still wanted, or None (up to the commit index)
        self.more = 0  # status 2 / 3 answers so far
        self.snap = bytearray()
        self.snap_index = -1


class Client:
    def __init__(self, args: argparse.Namespace) -> None:
        self.peers = dict(p.split("=", 1) for p in args.peers.split(","))
        self.todo = [msgpack.packb({"set": args.key, "to": f"value-{k}"}) for k in range(args.updates)]
        self.wire = Wire(args.dialect, args.cluster.encode())
        self.args = args
        self.brk = args.brk
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.connected: set[str] = set()
        self.connect_only(list(self.peers.values()))
        self.config_id: bytes | None = None
        self.config_at: float | None = None
        self.leader_known = False
        self.confirming = False  # --confirm-leader: asking the peer named leader whether it leads
        self.pending: list[bytes] | None = None  # the request in flight, frame for frame
        self.kind = ""  # "update", "entries" or "info"
        self.deadline: float | None = None  # its response timeout, or the end of a grace period
        self.waiting_grace = False
        self.subscribe = args.subscribe == "true"
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub_url: str | None = None
        self.url_id: bytes | None = None  # the RequestBroadcastStateUrl in flight
        self.url_at: float | None = None  # when it is given up
        self.reads: list[int] = [args.read_from] if args.read in ("end", "start") else []  # indexes to read from
        self.read: Read | None = None
        self.info_done = args.log_info != "true"
        self.idle = not self.todo and not self.reads and not self.subscribe  # nothing to ask the cluster

    def connect_only(self, urls: list[str]) -> None:
        for u in self.connected - set(urls):
            self.sock.disconnect(u)
        for u in set(urls) - self.connected:
            self.sock.connect(u)
        self.connected = set(urls)

    def ask_config(self) -> None:
        self.config_id = self.wire.rpc_id()
        self.config_at = time.monotonic() + RESPONSE_TTL  # no valid answer by then: ask again
        self.sock.send_multipart(self.wire.request(self.config_id, b"^"))

    # ---- the request in flight ------------------------------------------------------------------
    def send(self, frames: list[bytes], kind: str) -> None:
        self.pending, self.kind = frames, kind
        self.sock.send_multipart(frames)
        self.deadline, self.waiting_grace = time.monotonic() + RESPONSE_TTL, False

    def resend(self) -> None:
        if self.pending is not None:
            self.send(self.pending, self.kind)

    def done(self) -> None:
        self.pending, self.deadline = None, None
        self.next()

    def next(self) -> None:
        """Start the next piece of work: an update, then (``each``) its read-back, or the read."""
        if self.pending is not None or not self.leader_known:
            return
        if self.reads and (self.args.read != "end" or not self.todo):
            if not self.info_done:
                self.send(self.wire.request(self.wire.rpc_id(), b"%"), "info")
                return
            self.start_read(self.reads.pop(0))
        elif self.todo:
            self.send_update()

    def send_update(self) -> None:
        self.send(self.wire.request(self.wire.reqid(), b"=", self.todo.pop(0)), "update")

    def search(self) -> None:
        """The leader is lost (no answer, or a refusal naming none): every peer, a grace, again."""
        self.connect_only(list(self.peers.values()))
        self.deadline, self.waiting_grace = time.monotonic() + ELECTION_GRACE, True

    def redirect(self, third: bytes) -> None:
        """A refusal: scenario 1 (a leader named: the same request there, at once) or 2."""
        try:
            leader = unpack(third)
        except (ValueError, msgpack.UnpackException):
            return
        if isinstance(leader, str) and leader in self.peers:
            self.follow(leader)
            self.resend()
        else:
            self.search()

    def follow(self, leader: str) -> None:
        self.connect_only([self.peers[leader]])
        self.leader_known = True
        if self.subscribe and self.sub_url is None and self.url_id is None:  # the leader is established
            self.url_id = self.wire.rpc_id()
            self.url_at = time.monotonic() + RESPONSE_TTL
            self.sock.send_multipart(self.wire.request(self.url_id, b"*"))

    # ---- answers ------------------------------------------------------------------------------------
    def on_url(self, frames: list[bytes]) -> None:
        self.url_id = self.url_at = None
        if len(frames) < 2:  # no URL: find the leader again before asking again
            self.ask_config()
            return
        self.sub_url = frames[1].decode("utf-8", "replace")
        self.sub.connect(self.sub_url)
        self.sub.setsockopt(zmq.SUBSCRIBE, self.wire.cluster)

    def on_config(self, frames: list[bytes]) -> None:
        try:
            leader = unpack(frames[2])
            peers = unpack(frames[3]) if len(frames) > 3 else None
        except (ValueError, msgpack.UnpackException):
            return  # malformed: dropped (asked again when its time is up)
        if isinstance(peers, list) and peers and all(isinstance(p, list) and len(p) >= 2 for p in peers):
            self.peers = {str(p[0]): str(p[1]) for p in peers}
        self.config_id = None
        is_leader = len(frames) > 1 and frames[1][:1] not in (b"", b"\x00")
        self.confirming = False
        if isinstance(leader, str) and leader in self.peers and self.args.confirm_leader and not is_leader:
            # node-zmq-raft's client: only the leader's own answer is authoritative; ask it
            self.connect_only([self.peers[leader]])
            self.confirming = True
            self.ask_config()
            return
        if isinstance(leader, str) and leader in self.peers:
            self.config_at = None
            self.follow(leader)
            self.resend() if self.pending is not None else self.next()
        else:
            self.config_at = time.monotonic() + ASK_AGAIN  # no leader yet: ask again

    def on_update(self, frames: list[bytes]) -> None:
        ok = frames[1][:1] not in (b"", b"\x00")
        third = frames[2] if len(frames) > 2 else None
        if ok and third is not None:  # committed at that index: done
            try:
                index = unpack(third)
            except (ValueError, msgpack.UnpackException):
                return
            if self.args.read == "each" and isinstance(index, int) and index > 0:
                self.reads.append(index - 1)
            self.done()
        elif ok:  # accepted: wait longer
            self.deadline = time.monotonic() + RESPONSE_TTL
        elif third is None:  # expired: given up
            self.done()
        else:
            self.redirect(third)

    def on_info(self, frames: list[bytes]) -> None:
        if len(frames) < 8:
            return  # malformed
        if frames[1][:1] in (b"", b"\x00"):  # not the leader: its log may be behind
            self.redirect(frames[2])
            return
        first = read_uint(frames[4])
        self.info_done = True
        self.reads = [max(p, first - 1) for p in self.reads]
        self.done()

    def on_message(self, frames: list[bytes]) -> None:
        if not frames:
            return
        if self.url_id is not None and self.wire.same(frames[0], self.url_id):
            self.on_url(frames)
        elif self.config_id is not None and self.wire.same(frames[0], self.config_id) and len(frames) >= 3:
            self.on_config(frames)
        elif self.pending is not None and self.wire.same(frames[0], self.pending[0]) and len(frames) >= 2:
            {"update": self.on_update, "entries": self.on_entries, "info": self.on_info}[self.kind](frames)

    # ---- the reader ---------------------------------------------------------------------------------
    def start_read(self, prev: int) -> None:
        self.read = Read(self.wire.rpc_id(), prev, self.args.read_count)
        self.send(self.wire.entries(self.read.rid, prev, self.read.count), "entries")

    def follow_up(self, r: Read, prev: int, count: int | None, offset: int | None = None) -> None:
        rid = self.wire.rpc_id() if self.brk == "new-reqid" else r.rid
        self.send(self.wire.entries(rid, prev, count, offset), "entries")

    def end_read(self, why: str) -> None:
        r, self.read = self.read, None
        print(json.dumps({"read_end": why, "prev": r.prev if r else None}), flush=True)
        self.done()

    def restart_read(self, r: Read) -> None:
        """An answer that does not continue the read: stop this RPC, read again from where it is."""
        self.sock.send_multipart(self.wire.entries(r.rid, r.prev, 0))
        self.reads.insert(0, r.prev)
        self.read = None
        self.done()

    def on_entries(self, frames: list[bytes]) -> None:
        r = self.read
        status = read_uint(frames[1])
        if status == 0 and len(frames) >= 3:
            if self.brk == "ignore-not-leader":
                self.end_read("not the leader")
                return
            if r is not None and self.args.redirect_read == "new":  # a new RPC from where it is (E-RAFT-31)
                r.rid = self.wire.rpc_id()
                self.pending = self.wire.entries(r.rid, r.prev, r.count)
            self.redirect(frames[2])
            return
        if r is None or len(frames) < 4 or status not in (1, 2, 3):
            return  # malformed: dropped (the request is repeated when its time is up)
        last = read_uint(frames[3])
        if status == 3:
            self.on_chunk(r, frames, last)
            return
        raws = frames[4:]
        first = last - len(raws) + 1
        if raws and first > r.prev + 1:
            self.restart_read(r)
            return
        for k, raw in enumerate(raws):
            if first + k > r.prev:
                self.print_entry(first + k, raw)
        got = max(0, last - max(r.prev, first - 1)) if raws else 0
        r.prev = max(r.prev, last)
        if r.count is not None:
            r.count = max(0, r.count - got)
        if status == 1 or self.brk == "no-follow-up":
            self.end_read("last")
            return
        r.more += 1
        stop = self.args.stop_after is not None and r.more >= self.args.stop_after
        if stop or r.count == 0:
            self.follow_up(r, r.prev, 0)  # the MAY: no further answers
            self.end_read("stopped")
            return
        self.follow_up(r, r.prev, r.count)

    def on_chunk(self, r: Read, frames: list[bytes], last: int) -> None:
        try:
            info = unpack(frames[2])
            offset, size = int(info[0]), int(info[1])
        except (ValueError, TypeError, IndexError, msgpack.UnpackException):
            return
        chunk = frames[4] if len(frames) > 4 else b""
        if r.snap_index not in (-1, last) or offset != len(r.snap):
            self.restart_read(r)  # another snapshot, or a chunk lost
            return
        r.snap_index = last
        r.snap += chunk
        if len(r.snap) >= size:
            self.print_snapshot(last, bytes(r.snap))
            r.prev, r.snap, r.snap_index = last, bytearray(), -1
        if self.brk == "no-follow-up":
            self.end_read("last")
            return
        r.more += 1
        if self.args.stop_after is not None and r.more >= self.args.stop_after:
            self.follow_up(r, last, 0)
            self.end_read("stopped")
            return
        self.follow_up(r, last, r.count, len(r.snap) or size)  # the offset frame only in 0.7

    @staticmethod
    def print_entry(index: int, raw: bytes) -> None:
        out: dict[str, Any] = {"entry": index}
        if len(raw) >= 20:
            out.update(reqid=raw[:12].hex(), type=raw[12], term=int.from_bytes(raw[13:20], "little"))
            try:
                out["data"] = unpack(raw[20:])
            except (ValueError, msgpack.UnpackException):
                out["data_hex"] = raw[20:].hex()
        print(json.dumps(out, default=repr), flush=True)

    @staticmethod
    def print_snapshot(index: int, data: bytes) -> None:
        out: dict[str, Any] = {"snapshot": index, "size": len(data)}
        try:
            snap = unpack(data)
        except (ValueError, msgpack.UnpackException):
            snap = None
        if isinstance(snap, dict) and snap.get("format") == SNAPSHOT_FORMAT:
            out["kv"] = (snap.get("state") or {}).get("kv")
        print(json.dumps(out, default=repr), flush=True)

    # ---- the loop ---------------------------------------------------------------------------------
    def finished(self) -> bool:
        return (self.pending is None and not self.todo and not self.reads and self.read is None
                and (not self.subscribe or self.sub_url is not None))

    def run(self) -> int:
        self.ask_config()
        if self.todo and self.args.read != "start":  # the first update goes out at once, to whichever peer it knows
            self.send_update()
        end = time.monotonic() + 120
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        poller.register(self.sub, zmq.POLLIN)
        while time.monotonic() < end:
            if self.finished() and (self.leader_known or self.idle):
                return 0
            ready = dict(poller.poll(10))
            if self.sock in ready:
                self.on_message(self.sock.recv_multipart())
            if self.sub in ready:
                self.sub.recv_multipart()  # a StateBroadcast: this client keeps no replica
            self.tick(time.monotonic())
        return 1

    def tick(self, now: float) -> None:
        if self.url_at is not None and now >= self.url_at:
            self.url_id = self.url_at = None  # unanswered: given up
        if self.config_at is not None and now >= self.config_at:
            if self.confirming:  # the peer named leader did not answer: every peer again
                self.connect_only(list(self.peers.values()))
                self.confirming = False
            self.ask_config()
        if self.deadline is not None and now >= self.deadline:
            if self.waiting_grace:
                self.resend()
            else:
                self.search()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", required=True)
    ap.add_argument("--updates", type=int, default=1)
    ap.add_argument("--key", default="k")
    ap.add_argument("--subscribe", choices=("true", "false"), default="false")
    ap.add_argument("--dialect", default="strict", help="strict or raft:zmq-raft")
    ap.add_argument("--cluster", default="", help="the cluster ident (0.7 dialect)")
    ap.add_argument("--read", choices=("none", "end", "each", "start"), default="none")
    ap.add_argument("--read-from", type=int, default=0, help="--read end, start: the previous LOG INDEX to read from")
    ap.add_argument("--read-count", type=int, default=None, help="entries wanted (count frame); none: all")
    ap.add_argument("--stop-after", type=int, default=None, help="end a read with count 0 after K answers")
    ap.add_argument("--confirm-leader", action="store_true",
                    help="told by another peer which peer leads, ask that peer RequestConfig and follow it only "
                         "once it answers as the leader, as node-zmq-raft's client does")
    ap.add_argument("--log-info", choices=("true", "false"), default="false")
    ap.add_argument("--redirect-read", choices=("same", "new"), default="same",
                    help="after 'not the leader': the same request again, or a new RPC from where it is")
    ap.add_argument("--break", dest="brk", choices=("none", "new-reqid", "no-follow-up", "ignore-not-leader"),
                    default="none")
    client = Client(ap.parse_args())
    try:
        code = client.run()
    finally:
        client.ctx.destroy(0)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
