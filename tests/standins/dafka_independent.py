"""An independent Dafka node (producer, store, consumer or tower) in plain pyzmq, written from
the document alone (specs/dafka-46.md as settled by docs/errata.md, and INTEROP.md for the tower
and the zproto dialect). It imports nothing of the harness or of the reference nodes, so the
suites and chaos checks meet logic that is not ours. Its habits differ from the reference's
wherever the document lets them:

* its address is a canonical lowercase UUID string with dashes (36 characters), not 32 hex
  digits (E-DAFKA-12: an opaque string);
* it binds a port the kernel picks (``tcp://127.0.0.1:*``) unless ``--bind`` names one, and
  announces it (or ``--advertise``) in beacons sent every ``--beacon-ms`` with a 10 % jitter,
  and at once when a tower welcomes it (``--no-welcome-beacon``: only every interval, the
  first one interval after its start: what a harness node sends before then is answered
  where the harness cannot hear it yet);
* producer: subscribes to all of ``G`` (not ``G`` + its topic) and answers only its own topic
  (``--no-get-heads``: no GET-HEADS subscription at all, E-DAFKA-15); sends a HEAD right after
  each RECORD besides the regular ones; releases records on a cumulative ACK (E-DAFKA-17);
  with ``--linger-ms`` it exits 0 that long after its last record is ACKed (exiting with a
  record no ACK covered would delete it: "A producer MUST NOT delete send records before
  receiving at least one ACK command");
* store: ACKs in batches (one cumulative ACK per partition every ``--ack-ms``, and again when a
  HEAD shows it already holds the head), takes a new address at every start, keeps records in
  an append-only file under ``--data-dir``; FETCH retries back off (x1.5 up to 4x);
* consumer: sends GET-HEADS when it subscribes and whenever its XPUB reports a new ``G``
  subscription that covers the topic; FETCH retries back off as the store's.

    python tests/standins/dafka_independent.py store --towers tcp://127.0.0.1:5556,tcp://127.0.0.1:5557

It prints ``READY`` once its sockets are bound and runs until SIGTERM or SIGINT (a producer
with ``--linger-ms`` also stops by itself).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import struct
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

import zmq

SIGNATURE = b"\xaa\xa5"
VERSION = 1
STR, U8, U4, STRS = "s", "q", "i", "l"
# command id -> field names and types in grammar order (the content frame comes apart)
FIELDS: dict[bytes, tuple[tuple[str, str], ...]] = {
    b"M": (("address", STR), ("subject", STR), ("sequence", U8)),
    b"D": (("address", STR), ("subject", STR), ("sequence", U8)),
    b"F": (("address", STR), ("subject", STR), ("sequence", U8), ("count", U4)),
    b"K": (("address", STR), ("subject", STR), ("sequence", U8)),
    b"H": (("address", STR), ("subject", STR), ("sequence", U8)),
    b"E": (("address", STR), ("subject", STR), ("sequence", U8)),
    b"G": (("address", STR),),
    b"W": (("address", STR), ("subjects", STRS)),
    b"L": (("address", STR),),
}
WITH_CONTENT = (b"M", b"D")


class Malformed(Exception):
    """A message that does not parse: the receiver drops it silently."""


# ---- a private codec ----------------------------------------------------------------------------
def pack(fields: tuple[tuple[str, str], ...], values: dict) -> bytes:
    out = bytearray()
    for name, kind in fields:
        v = values[name]
        if kind == STR:
            b = v.encode() if isinstance(v, str) else v
            out += bytes([len(b)]) + b
        elif kind == U8:
            out += struct.pack(">Q", v)
        elif kind == U4:
            out += struct.pack(">I", v)
        else:
            out += struct.pack(">I", len(v))
            for s in v:
                b = s.encode() if isinstance(s, str) else s
                out += struct.pack(">I", len(b)) + b
    return bytes(out)


def unpack(fields: tuple[tuple[str, str], ...], buf: bytes) -> dict:
    values, i = {}, 0

    def take(n: int) -> bytes:
        nonlocal i
        if i + n > len(buf):
            raise Malformed("short")
        i += n
        return buf[i - n:i]

    for name, kind in fields:
        if kind == STR:
            values[name] = take(take(1)[0]).decode("latin-1")
        elif kind == U8:
            values[name] = struct.unpack(">Q", take(8))[0]
        elif kind == U4:
            values[name] = struct.unpack(">I", take(4))[0]
        else:
            values[name] = [take(struct.unpack(">I", take(4))[0]).decode("latin-1")
                            for _ in range(struct.unpack(">I", take(4))[0])]
    if i != len(buf):
        raise Malformed("trailing octets")
    return values


def fields_of(cid: bytes, zproto: bool) -> tuple[tuple[str, str], ...]:
    return FIELDS[cid][1:] if zproto and cid == b"K" else FIELDS[cid]  # zproto ACK: no address


def encode(cid: bytes, topic: str, values: dict, content: bytes | None, zproto: bool) -> list[bytes]:
    body = pack(fields_of(cid, zproto), values)
    head = cid + topic.encode("latin-1")
    frames = [head + b"\x00" + bytes([VERSION]) + body] if zproto else [head, SIGNATURE + cid + bytes([VERSION]) + body]
    return frames + ([content if content is not None else b""] if cid in WITH_CONTENT else [])


def decode(frames: list[bytes], zproto: bool) -> tuple[bytes, str, dict, bytes | None]:
    """(command id, topic, fields, content); Malformed for anything the grammar does not allow."""
    if not frames or not frames[0]:
        raise Malformed("empty")
    cid = frames[0][:1]
    if cid not in FIELDS:
        raise Malformed("unknown id")
    want = 2 if cid in WITH_CONTENT else 1
    if zproto:
        topic, sep, rest = frames[0][1:].partition(b"\x00")
        if not sep or rest[:1] != bytes([VERSION]) or len(frames) != want:
            raise Malformed("zproto framing")
        body = rest[1:]
    else:
        b = frames[1] if len(frames) > 1 else b""
        if len(frames) != want + 1 or b[:2] != SIGNATURE or b[2:3] != cid or b[3:4] != bytes([VERSION]):
            raise Malformed("strict framing")
        topic, body = frames[0][1:], b[4:]
    values = unpack(fields_of(cid, zproto), body)
    return cid, topic.decode("latin-1"), values, (frames[-1] if cid in WITH_CONTENT else None)


# ---- the node skeleton --------------------------------------------------------------------------
@dataclass
class Timer:
    due: float
    every: float
    fn: Callable[[], None]


@dataclass
class Gap:
    """Records of one partition being fetched, and when to ask again."""

    first: int
    last: int
    due: float
    wait: float


class Node:
    role = "node"

    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.zproto = a.dialect in ("zproto", "dafka:zproto")
        self.address = str(uuid.uuid4())
        self.ctx = zmq.Context()
        self.xpub = self.ctx.socket(zmq.XPUB)
        self.xpub.setsockopt(zmq.XPUB_VERBOSE, 1)  # see every subscriber's subscriptions
        self.xpub.setsockopt(zmq.LINGER, 0)
        self.xpub.bind(a.bind or "tcp://127.0.0.1:*")
        bound = self.xpub.getsockopt_string(zmq.LAST_ENDPOINT)
        host, _, port = (a.advertise or bound).removeprefix("tcp://").rpartition(":")
        self.beacon_host, self.beacon_port = a.beacon_host or host, port
        self.tower_pub = self.ctx.socket(zmq.PUB)
        self.tower_sub = self.ctx.socket(zmq.SUB)
        self.peers = self.ctx.socket(zmq.SUB)
        for s in (self.tower_pub, self.tower_sub, self.peers):
            s.setsockopt(zmq.LINGER, 0)
        for pair in (p for p in a.towers.split(";") if p):
            xsub, xpub = pair.split(",")
            self.tower_pub.connect(xsub)
            self.tower_sub.connect(xpub)
        for prefix in (b"B", b"W"):
            self.tower_sub.setsockopt(zmq.SUBSCRIBE, prefix)
        for prefix in self.subscriptions():
            self.peers.setsockopt(zmq.SUBSCRIBE, prefix)
        self.known: dict[str, tuple[str, float]] = {}  # peer address -> (endpoint, last heard)
        self.connected: set[str] = set()
        self.timers: list[Timer] = []
        self.rng = random.Random()
        self.every(a.beacon_ms / 1000, self.beacon)
        if a.peer_expiry_ms > 0:
            self.every(0.25, self.expire)
        self.stopped = False

    # -- to be specialised
    def subscriptions(self) -> list[bytes]:
        return []

    def on_message(self, cid: bytes, topic: str, m: dict, content: bytes | None) -> None:
        pass

    def on_subscribe(self, prefix: bytes) -> None:
        pass

    # -- plumbing
    def every(self, seconds: float, fn: Callable[[], None], first: float | None = None) -> None:
        self.timers.append(Timer(time.monotonic() + (seconds if first is None else first), seconds, fn))

    def send(self, cid: bytes, topic: str, content: bytes | None = None, **values: object) -> None:
        self.xpub.send_multipart(encode(cid, topic, values, content, self.zproto))

    def beacon(self) -> None:
        self.tower_pub.send_multipart([b"B", self.address.encode(), self.beacon_host.encode(),
                                       self.beacon_port.encode()])
        for t in self.timers:  # jitter the next beacon by up to 10 %
            if t.fn == self.beacon:
                t.due += self.rng.uniform(-0.1, 0.1) * t.every

    def on_tower(self, frames: list[bytes]) -> None:
        if frames[:1] == [b"W"]:
            if not self.a.no_welcome_beacon:
                self.beacon()  # a tower is there: tell it at once
            return
        if len(frames) != 3 or frames[0] != b"B":
            return
        sender, endpoint = frames[1].decode("latin-1"), frames[2].decode("latin-1")
        if sender == self.address:
            return
        old = self.known.get(sender)
        self.known[sender] = (endpoint, time.monotonic())
        if old and old[0] != endpoint and old[0] in self.connected and not self.uses(old[0], sender):
            self.peers.disconnect(old[0])
            self.connected.discard(old[0])
        if endpoint not in self.connected:
            self.peers.connect(endpoint)
            self.connected.add(endpoint)

    def uses(self, endpoint: str, but: str) -> bool:
        return any(e == endpoint for p, (e, _) in self.known.items() if p != but)

    def expire(self) -> None:
        now = time.monotonic()
        for peer, (endpoint, heard) in list(self.known.items()):
            if now - heard > self.a.peer_expiry_ms / 1000:
                del self.known[peer]
                if endpoint in self.connected and not self.uses(endpoint, peer):
                    self.peers.disconnect(endpoint)
                    self.connected.discard(endpoint)

    def on_xpub(self, frames: list[bytes]) -> None:
        note = frames[0] if frames else b""
        if note[:1] == b"\x01":
            self.on_subscribe(note[1:])

    def on_peer(self, frames: list[bytes]) -> None:
        try:
            cid, topic, m, content = decode(frames, self.zproto)
        except (Malformed, UnicodeDecodeError, struct.error):
            return  # silently discarded (Protocol Signature, Versioning)
        self.on_message(cid, topic, m, content)

    def run(self) -> None:
        poller = zmq.Poller()
        handlers = {self.tower_sub: self.on_tower, self.xpub: self.on_xpub, self.peers: self.on_peer}
        for s in handlers:
            poller.register(s, zmq.POLLIN)
        while not self.stopped:
            now = time.monotonic()
            for t in self.timers:
                if t.due <= now:
                    t.due = max(t.due + t.every, now)
                    t.fn()
            wait = max(0.0, min((t.due for t in self.timers), default=now + 0.05) - time.monotonic())
            for sock, _ in poller.poll(timeout=min(50.0, wait * 1000)):
                for _ in range(100):  # drain, but let timers run
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    handlers[sock](frames)

    def close(self) -> None:
        self.ctx.destroy(linger=0)


# ---- producer -----------------------------------------------------------------------------------
class Producer(Node):
    role = "producer"

    def __init__(self, a: argparse.Namespace) -> None:
        super().__init__(a)
        self.topic = a.topic
        self.kept: dict[int, bytes] = {}  # offset -> content, until an ACK covers it
        self.next = 0
        self.started = time.monotonic()
        self.done_at: float | None = None
        self.every(a.interval_ms / 1000, self.produce, first=a.delay_ms / 1000)
        self.every(a.head_ms / 1000, self.head)

    def subscriptions(self) -> list[bytes]:
        subs = [b"K" + self.address.encode(), b"F" + self.address.encode()]
        return subs if self.a.no_get_heads else subs + [b"G"]

    def produce(self) -> None:
        if self.next >= self.a.records:
            # done once every record is ACKed (it MUST NOT delete one before): then linger, exit 0
            if self.done_at is None and not self.kept:
                self.done_at = time.monotonic()
            if self.a.linger_ms >= 0 and self.done_at is not None \
                    and time.monotonic() - self.done_at > self.a.linger_ms / 1000:
                self.stopped = True
            return
        content = f"{self.a.content}-{self.next}".encode()
        self.kept[self.next] = content
        self.send(b"M", self.topic, content, address=self.address, subject=self.topic, sequence=self.next)
        self.next += 1
        self.head()

    def head(self) -> None:
        if self.next:
            self.send(b"H", self.topic, address=self.address, subject=self.topic, sequence=self.next - 1)

    def on_message(self, cid: bytes, topic: str, m: dict, content: bytes | None) -> None:
        if cid == b"K" and topic == self.address and m["subject"] == self.topic:
            for k in [k for k in self.kept if k <= m["sequence"]]:
                del self.kept[k]  # cumulative (E-DAFKA-17)
        elif cid == b"F" and topic == self.address and m["subject"] == self.topic:
            for k in range(m["sequence"], min(m["sequence"] + m["count"], self.next)):
                if k in self.kept:
                    self.send(b"D", m["address"], self.kept[k], address=self.address, subject=self.topic, sequence=k)
        elif cid == b"G" and topic == self.topic and self.next:
            self.send(b"E", m["address"], address=self.address, subject=self.topic, sequence=self.next - 1)


# ---- the gap bookkeeping of stores and consumers ------------------------------------------------
Key = tuple[str, str]  # (partition, subject)


class Fetcher(Node):
    """Asks for the first run of missing records of a partition with FETCH, again after
    ``fetch_retry_ms`` while it is still missing, backing off (x1.5, up to 4x)."""

    def __init__(self, a: argparse.Namespace) -> None:
        super().__init__(a)
        self.gaps: dict[Key, Gap] = {}  # what was asked, per partition
        self.top: dict[Key, int] = {}  # the highest offset known to exist
        self.every(0.05, self.retry)

    def gap(self, key: Key) -> tuple[int, int] | None:
        """The first run of records of ``key`` that is missing, (first, last), or None."""
        raise NotImplementedError

    def learn(self, key: Key, seq: int) -> None:
        """Offset ``seq`` of the partition exists (a record, a head): FETCH what is newly missing."""
        self.top[key] = max(self.top.get(key, -1), seq)
        run = self.gap(key)
        asked = self.gaps.get(key)
        if run is None:
            self.gaps.pop(key, None)
        elif asked is None or run[1] > asked.last or run[0] < asked.first:
            base = self.a.fetch_retry_ms / 1000
            self.gaps[key] = Gap(run[0], run[1], time.monotonic() + base, base)
            self.fetch(key, *run)

    def fetch(self, key: Key, first: int, last: int) -> None:
        self.send(b"F", key[0], address=self.address, subject=key[1], sequence=first, count=last - first + 1)

    def retry(self) -> None:
        now = time.monotonic()
        for key, asked in list(self.gaps.items()):
            run = self.gap(key)
            if run is None:
                del self.gaps[key]
            elif asked.due <= now:
                asked.first, asked.last = run
                asked.wait = min(asked.wait * 1.5, 4 * self.a.fetch_retry_ms / 1000)
                asked.due = now + asked.wait
                self.fetch(key, *run)


def first_run(start: int, held: dict[int, bytes] | set[int], top: int) -> tuple[int, int] | None:
    """The first run of offsets from ``start`` to ``top`` not in ``held``."""
    if start > top:
        return None
    end = min((k for k in held if k > start), default=top + 1) - 1
    return (start, min(end, top))


# ---- store --------------------------------------------------------------------------------------
class Store(Fetcher):
    role = "store"

    def __init__(self, a: argparse.Namespace) -> None:
        self.records: dict[Key, dict[int, bytes]] = {}
        self.heads: dict[Key, int] = {}  # contiguous head per partition (-1: none)
        self.acked: dict[Key, int] = {}
        self.log = None
        super().__init__(a)
        if a.data_dir:
            os.makedirs(a.data_dir, exist_ok=True)
            path = os.path.join(a.data_dir, "records.log")
            self.load(path)
            self.log = open(path, "ab")
        self.every(a.ack_ms / 1000, self.ack)

    def subscriptions(self) -> list[bytes]:
        subs = [b"M", b"H", b"D" + self.address.encode(), b"F", b"G", b"W"]
        return [x for x in subs if x != b"F"] if self.a.mutant == "no-fetch-subscription" else subs

    def load(self, path: str) -> None:
        if not os.path.exists(path):
            return
        with open(path, "rb") as f:
            for line in f:
                parts = line.rstrip(b"\n").split(b" ")
                if len(parts) == 4:  # a torn last line is skipped
                    part, subject, seq, hexc = (bytes.fromhex(x.decode()) if i != 2 else x for i, x in enumerate(parts))
                    self.hold((part.decode("latin-1"), subject.decode("latin-1")), int(seq), hexc)

    def hold(self, key: Key, seq: int, content: bytes) -> bool:
        held = self.records.setdefault(key, {})
        if seq in held:
            return False
        held[seq] = content
        head = self.heads.get(key, -1)
        while head + 1 in held:
            head += 1
        self.heads[key] = head
        self.top[key] = max(self.top.get(key, -1), seq)
        return True

    def keep(self, key: Key, seq: int, content: bytes) -> None:
        if self.hold(key, seq, content) and self.log:
            self.log.write(b"%s %s %d %s\n" % (key[0].encode("latin-1").hex().encode(),
                                                key[1].encode("latin-1").hex().encode(), seq, content.hex().encode()))
            self.log.flush()
        self.learn(key, seq)

    def gap(self, key: Key) -> tuple[int, int] | None:
        return first_run(self.heads.get(key, -1) + 1, self.records.get(key, {}), self.top.get(key, -1))

    def ack(self) -> None:
        for key, head in self.heads.items():
            if head > self.acked.get(key, -1):
                self.acked[key] = head
                self.send_ack(key, head)

    def send_ack(self, key: Key, head: int) -> None:
        topic = key[1] if self.a.mutant == "ack-by-topic" else key[0]  # (the mutant: the topic name)
        self.send(b"K", topic, address=self.address, subject=key[1], sequence=head)

    def direct_heads(self, requestor: str, subject: str) -> None:
        for (part, subj), head in self.heads.items():
            if subj == subject and head >= 0:
                self.send(b"E", requestor, address=part, subject=subj, sequence=head)

    def on_message(self, cid: bytes, topic: str, m: dict, content: bytes | None) -> None:
        if cid == b"M" and topic == m["subject"] or cid == b"D" and topic == self.address:
            self.keep((m["address"], m["subject"]), m["sequence"], content or b"")
        elif cid == b"H" and topic == m["subject"]:
            key = (m["address"], m["subject"])
            self.learn(key, m["sequence"])
            if self.acked.get(key, -1) >= m["sequence"] >= 0:
                self.send_ack(key, self.acked[key])  # the producer may have missed the ACK
        elif cid == b"F" and m["address"] != self.address:
            held = self.records.get((topic, m["subject"]), {})
            for k in range(m["sequence"], m["sequence"] + m["count"]):
                if k in held:
                    self.send(b"D", m["address"], held[k], address=topic, subject=m["subject"], sequence=k)
        elif cid == b"G":
            self.direct_heads(m["address"], topic)
        elif cid == b"W" and topic == self.address:
            for subject in m["subjects"]:
                self.direct_heads(m["address"], subject)

    def on_subscribe(self, prefix: bytes) -> None:
        if prefix[:1] == b"L" and len(prefix) > 1:
            self.send(b"L", prefix[1:].decode("latin-1"), address=self.address)


# ---- consumer -----------------------------------------------------------------------------------
@dataclass
class Partition:
    next: int  # the next offset to hand to the application
    waiting: dict[int, bytes] = field(default_factory=dict)


class Consumer(Fetcher):
    role = "consumer"

    def __init__(self, a: argparse.Namespace) -> None:
        self.topics: list[str] = []
        self.parts: dict[Key, Partition] = {}
        self.delivered = 0
        super().__init__(a)
        wanted = [t.strip() for t in a.topics.strip("[]").split(",") if t.strip()]
        self.timers.append(Timer(time.monotonic() + a.subscribe_after_ms / 1000, 1e9,
                                 lambda: self.subscribe(wanted)))

    def subscriptions(self) -> list[bytes]:
        me = self.address.encode()
        return [b"D" + me, b"E" + me, b"L" + me]

    def subscribe(self, topics: list[str]) -> None:
        for t in topics:
            if t in self.topics:
                continue
            self.topics.append(t)
            self.peers.setsockopt(zmq.SUBSCRIBE, b"M" + t.encode("latin-1"))
            self.peers.setsockopt(zmq.SUBSCRIBE, b"H" + t.encode("latin-1"))
            self.send(b"G", t, address=self.address)

    def on_subscribe(self, prefix: bytes) -> None:
        if prefix[:1] == b"G":
            for t in self.topics:
                if (b"G" + t.encode("latin-1")).startswith(prefix):
                    self.send(b"G", t, address=self.address)

    def partition(self, key: Key, start: int) -> Partition:
        """The partition's state; a new one starts at 0 (earliest) or ``start`` (latest, E-DAFKA-25)."""
        if key not in self.parts:
            self.parts[key] = Partition(0 if self.a.offset_reset == "earliest" else start)
        return self.parts[key]

    def take(self, key: Key, seq: int, content: bytes) -> None:
        p = self.partition(key, seq)
        if seq >= p.next:
            p.waiting[seq] = content
        while p.next in p.waiting:
            self.deliver(key, p.next, p.waiting.pop(p.next))
            p.next += 1
        self.learn(key, seq)

    def deliver(self, key: Key, seq: int, content: bytes) -> None:
        self.delivered += 1
        if self.a.log:
            with open(self.a.log, "a") as f:
                f.write(f"{key[0]} {key[1]} {seq} {len(content)}\n")

    def gap(self, key: Key) -> tuple[int, int] | None:
        p = self.parts.get(key)
        return first_run(p.next, p.waiting, self.top.get(key, -1)) if p else None

    def on_message(self, cid: bytes, topic: str, m: dict, content: bytes | None) -> None:
        subject = m.get("subject")
        if subject not in self.topics:
            return  # prefix match of another topic (E-DAFKA-20), or not subscribed yet
        key = (m["address"], subject)
        if cid == b"M" and topic == subject or cid == b"D" and topic == self.address:
            self.take(key, m["sequence"], content or b"")
        elif cid == b"H" and topic == subject or cid == b"E" and topic == self.address:
            self.partition(key, m["sequence"] + 1)
            self.learn(key, m["sequence"])

    def on_peer(self, frames: list[bytes]) -> None:
        try:
            cid, topic, m, content = decode(frames, self.zproto)
        except (Malformed, UnicodeDecodeError, struct.error):
            return
        if cid == b"L":
            if topic == self.address and self.topics:  # MUST NOT hello without topics
                self.send(b"W", m["address"], address=self.address, subjects=self.topics)
            return
        self.on_message(cid, topic, m, content)


# ---- tower (INTEROP.md: XSUB in, XPUB out, W to every new subscriber) ---------------------------
def run_tower(a: argparse.Namespace, stop: Callable[[], bool]) -> None:
    ctx = zmq.Context()
    xsub, xpub = ctx.socket(zmq.XSUB), ctx.socket(zmq.XPUB)
    for s in (xsub, xpub):
        s.setsockopt(zmq.LINGER, 0)
    xpub.setsockopt(zmq.XPUB_WELCOME_MSG, b"W")
    xsub.bind(a.bind_sub)
    xpub.bind(a.bind_pub)
    xsub.send(b"\x01B")
    print("READY", flush=True)
    poller = zmq.Poller()
    poller.register(xsub, zmq.POLLIN)
    poller.register(xpub, zmq.POLLIN)
    try:
        while not stop():
            for sock, _ in poller.poll(100):
                frames = sock.recv_multipart()
                if sock is xsub and len(frames) == 4 and frames[0] == b"B":
                    host = frames[2].decode("latin-1") or "127.0.0.1"
                    xpub.send_multipart([b"B", frames[1], f"tcp://{host}:{frames[3].decode('latin-1')}".encode()])
                elif sock is xpub and frames and frames[0][1:2] not in (b"W", b"B"):
                    xsub.send(frames[0])
    finally:
        ctx.destroy(linger=0)


ROLES: dict[str, type[Node]] = {"producer": Producer, "store": Store, "consumer": Consumer}


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("role", choices=(*ROLES, "tower"))
    ap.add_argument("--towers", default="", help="each tower's XSUB,XPUB endpoints, ';' between towers")
    ap.add_argument("--dialect", default="strict", help="strict or zproto (dafka:zproto)")
    ap.add_argument("--bind", help="bind the XPUB here (default: a port the kernel picks)")
    ap.add_argument("--advertise", help="the endpoint its beacons announce (default: the one it binds)")
    ap.add_argument("--beacon-ms", type=int, default=300)
    ap.add_argument("--beacon-host", help="the host its beacons name (default: the bound or advertised one)")
    ap.add_argument("--no-welcome-beacon", action="store_true",
                    help="first beacon one interval after the start, not when a tower welcomes it")
    ap.add_argument("--peer-expiry-ms", type=int, default=5000, help="0: never forget a peer")
    ap.add_argument("--fetch-retry-ms", type=int, default=400)
    ap.add_argument("--data-dir", help="store: keep records in a file here")
    ap.add_argument("--ack-ms", type=int, default=150, help="store: ACK batching interval")
    ap.add_argument("--topic", default="weather")
    ap.add_argument("--records", type=int, default=20)
    ap.add_argument("--delay-ms", type=int, default=500)
    ap.add_argument("--interval-ms", type=int, default=100)
    ap.add_argument("--head-ms", type=int, default=300)
    ap.add_argument("--content", default="record")
    ap.add_argument("--linger-ms", type=int, default=-1,
                    help="producer: exit 0 this long after its last record is ACKed")
    ap.add_argument("--no-get-heads", action="store_true", help="producer: no GET-HEADS subscription")
    ap.add_argument("--topics", default="weather", help="consumer: comma-separated, or a YAML list")
    ap.add_argument("--offset-reset", choices=("earliest", "latest"), default="earliest")
    ap.add_argument("--subscribe-after-ms", type=int, default=0)
    ap.add_argument("--log", help="consumer: append each delivered record here")
    ap.add_argument("--mutant", choices=("no-fetch-subscription", "ack-by-topic"),
                    help="a deliberate defect, to show a check still fails (store: no FETCH subscription; "
                         "ACKs on the topic name)")
    ap.add_argument("--bind-sub", default="tcp://127.0.0.1:5556", help="tower: the XSUB endpoint")
    ap.add_argument("--bind-pub", default="tcp://127.0.0.1:5557", help="tower: the XPUB endpoint")
    return ap.parse_args(argv)


def main(argv: list[str]) -> int:
    a = parse(argv)
    stop = {"now": False}

    def on_signal(*_: object) -> None:
        stop["now"] = True

    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, on_signal)
    if a.role == "tower":
        run_tower(a, lambda: stop["now"])
        return 0
    node = ROLES[a.role](a)
    node.every(0.05, lambda: setattr(node, "stopped", node.stopped or stop["now"]))
    print("READY", flush=True)
    try:
        node.run()
    finally:
        node.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
