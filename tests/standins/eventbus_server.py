"""A stand-in for an outside Event BUS server, written from the document alone
(/work/shared/specs/eventbus.md with the decisions of docs/errata.md, "Event BUS"): plain pyzmq,
its own framing and validation, nothing of the harness (no codec, no reference node).

It behaves like a program someone else wrote: it takes a host and a port P from its command line
and binds the three ports itself (snapshot ROUTER at P, publisher PUB at P+1, collector ROUTER at
P+2) after a slow start, one port after another; it keeps its sequence counter in a file of its
own (``--state``) so that its numbers keep increasing across a restart (E-EVENTBUS-10), but not
its history (a restart forgets the events: E-EVENTBUS-09 allows it); it talks on stdout.

Usage: eventbus_server.py --host H --port P [--state FILE] [--dialect strict|micro-toolkit]
       [--start-delay-ms 500] [--bind-gap-ms 200] [--break unguarded-pub|null-topic|syncend-race]

``--break`` gives it a defect of the deployed bus (micro-toolkit/event-bus-zeromq, read in its
source): ``unguarded-pub`` decodes a PUB's data and timestamp unguarded and exits on one it
cannot decode (also on a PUB of five frames); ``null-topic`` reads an empty topic back as null
and so answers no snapshot that reaches back to such an event (no SYNC, no SYNCEND);
``syncend-race`` answers a SYNCSTART as the deployed bus does, from a query of its store that
completes later (`lib/bus.js`: the SYNCs are what the query found, the SYNCEND carries the
latest sequence when it completed), so an event taken meanwhile is covered by the SYNCEND and in
no SYNC: a client then discards its BROADCAST as stale and never asks for it again. Here the
query completes at the next PUB, or after ``RACE_MS``.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import struct
import sys
import time
from dataclasses import dataclass

import msgpack
import zmq

# E-EVENTBUS-14: ISO-8601 extended date and time with seconds and a zone (the RFC 3339 profile).
TIMESTAMP = re.compile(rb"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})")
UUID4 = re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-4[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}")


@dataclass
class Dialect:
    separator: bytes
    ascii_sequences: bool  # micro-toolkit: "123", not 8 bytes in network order
    syncend_latest: bool  # micro-toolkit: SYNCEND carries the latest sequence, always
    reencode: bool  # micro-toolkit: data decoded and encoded again

    def sequence(self, raw: bytes) -> int | None:
        if self.ascii_sequences:
            if raw == b"null":
                return 0
            return int(raw) if raw.isdigit() else None
        return struct.unpack(">Q", raw)[0] if len(raw) == 8 else None

    def encode_sequence(self, n: int) -> bytes:
        return str(n).encode() if self.ascii_sequences else struct.pack(">Q", n)


DIALECTS = {"strict": Dialect(b";", False, False, False),
            "micro-toolkit": Dialect(b",", True, True, True), "eventbus:micro-toolkit": Dialect(b",", True, True, True)}


def subtrees_of(spec: bytes, dialect: Dialect) -> list[bytes] | None:
    """The subtrees of a specification ([] for an empty one: every topic), None if malformed."""
    if spec == b"":
        return []
    # E-EVENTBUS-05: "/" then segments each ending in "/"; a segment has no "/" and no separator.
    subtree = re.compile(rb"/(?:[^/" + re.escape(dialect.separator) + rb"]+/)+")
    parts = spec.split(dialect.separator)
    return parts if all(subtree.fullmatch(p) for p in parts) else None


def one_msgpack_value(data: bytes) -> bool:
    unpacker = msgpack.Unpacker(raw=True, strict_map_key=False)
    unpacker.feed(data)
    try:
        values = sum(1 for _ in unpacker)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError):
        return False
    return values == 1 and unpacker.tell() == len(data)


def utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class Bus:
    def __init__(self, dialect: Dialect, state: str | None, broken: str = "") -> None:
        self.dialect = dialect
        self.state = state
        self.broken = broken
        self.seq = self._load()
        self.events: list[tuple[int, list[bytes]]] = []  # (sequence, [topic, producer, timestamp, uuid, data])

    def _load(self) -> int:
        if self.state and os.path.exists(self.state):
            with open(self.state) as f:
                return int(f.read().strip() or 0)
        return 0

    def _save(self) -> None:
        if self.state:
            tmp = self.state + ".tmp"
            with open(tmp, "w") as f:
                f.write(str(self.seq))
            os.replace(tmp, self.state)

    def on_pub(self, frames: list[bytes]) -> list[bytes] | None:
        """A collector message (identity first): the BROADCAST to send, or None to drop it."""
        if self.broken == "unguarded-pub" and len(frames) in (6, 7) and (
                len(frames) == 6 or not TIMESTAMP.fullmatch(frames[4]) or not one_msgpack_value(frames[6])):
            raise ValueError("cannot decode the event")  # the deployed bus's unguarded decode
        if len(frames) != 7:
            return None
        _, topic, raw_seq, producer, timestamp, uuid, data = frames
        if (self.dialect.sequence(raw_seq) is None or not utf8(topic) or not utf8(producer)
                or not TIMESTAMP.fullmatch(timestamp) or not UUID4.fullmatch(uuid) or not one_msgpack_value(data)):
            return None
        if self.dialect.reencode:
            data = msgpack.packb(msgpack.unpackb(data, raw=False, strict_map_key=False), use_bin_type=True)
        self.seq += 1
        self._save()
        fields = [topic, producer, timestamp, uuid, data]
        self.events.append((self.seq, fields))
        return [topic, self.dialect.encode_sequence(self.seq), *fields[1:]]

    def on_syncstart(self, frames: list[bytes]) -> list[list[bytes]] | None:
        """A snapshot message (identity first): the SYNCs and the SYNCEND, or None to drop it."""
        if len(frames) != 4 or frames[1] != b"SYNCSTART":
            return None
        identity, _, spec, raw_seq = frames
        subtrees, since = subtrees_of(spec, self.dialect), self.dialect.sequence(raw_seq)
        if subtrees is None or since is None:
            return None
        if self.broken == "null-topic" and any(seq > since and not fields[0] for seq, fields in self.events):
            return []  # the deployed bus throws while filtering: nothing is sent
        out = []
        for seq, (topic, producer, timestamp, uuid, data) in self.events:
            if seq > since and (not subtrees or any(topic.startswith(s) for s in subtrees)):
                out.append([identity, b"SYNC", topic, self.dialect.encode_sequence(seq), producer, timestamp, uuid, data])
        highest = self.seq if (self.dialect.syncend_latest or not out) else max(
            seq for seq, (topic, *_) in self.events
            if seq > since and (not subtrees or any(topic.startswith(s) for s in subtrees)))
        out.append([identity, b"SYNCEND", spec, self.dialect.encode_sequence(highest)])
        return out


RACE_MS = 50  # --break syncend-race: how long a snapshot's query takes at most


class PendingSnapshots:
    """--break syncend-race: snapshot answers whose query has not completed (see the module
    docstring): each holds its SYNCs and gets its SYNCEND when it is sent."""

    def __init__(self) -> None:
        self.waiting: list[tuple[float, list[list[bytes]]]] = []  # (deadline, SYNCs then SYNCEND)

    def add(self, replies: list[list[bytes]]) -> None:
        self.waiting.append((time.monotonic() + RACE_MS / 1000, replies))

    def timeout_ms(self) -> int:
        if not self.waiting:
            return 1000
        return max(0, int((self.waiting[0][0] - time.monotonic()) * 1000) + 1)

    def due(self, bus: "Bus", pub_taken: bool) -> list[list[bytes]]:
        """What to send now: the answers whose query completed, each SYNCEND with the latest sequence."""
        now = time.monotonic()
        out: list[list[bytes]] = []
        keep = []
        for deadline, replies in self.waiting:
            if pub_taken or deadline <= now:
                *syncs, end = replies
                out.extend([*syncs, [*end[:3], bus.dialect.encode_sequence(bus.seq)]])
            else:
                keep.append((deadline, replies))
        self.waiting = keep
        return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--state", help="file keeping the sequence counter across restarts")
    ap.add_argument("--dialect", default="strict", choices=sorted(DIALECTS))
    ap.add_argument("--start-delay-ms", type=int, default=500)
    ap.add_argument("--bind-gap-ms", type=int, default=200, help="pause between binding one port and the next")
    ap.add_argument("--break", dest="broken", default="", choices=["", "unguarded-pub", "null-topic", "syncend-race"])
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    bus = Bus(DIALECTS[args.dialect], args.state, args.broken)
    print(f"event bus stand-in starting (sequence {bus.seq})", flush=True)
    time.sleep(args.start_delay_ms / 1000)
    ctx = zmq.Context()
    snapshot, publisher, collector = ctx.socket(zmq.ROUTER), ctx.socket(zmq.PUB), ctx.socket(zmq.ROUTER)
    for sock in (snapshot, publisher, collector):
        sock.linger = 0
    for offset, sock in enumerate((snapshot, publisher, collector)):
        if offset:
            time.sleep(args.bind_gap_ms / 1000)
        sock.bind(f"tcp://{args.host}:{args.port + offset}")
    print(f"listening on tcp://{args.host}:{args.port} (+1, +2)", flush=True)
    poller = zmq.Poller()
    poller.register(snapshot, zmq.POLLIN)
    poller.register(collector, zmq.POLLIN)
    pending = PendingSnapshots() if args.broken == "syncend-race" else None
    try:
        while True:
            pub_taken = False
            for sock, _ in poller.poll(pending.timeout_ms() if pending else 1000):
                frames = sock.recv_multipart()
                if sock is collector:
                    broadcast = bus.on_pub(frames)
                    if broadcast is None:
                        print(f"dropped a malformed PUB ({len(frames) - 1} frames)", flush=True)
                    else:
                        publisher.send_multipart(broadcast)
                        pub_taken = True
                else:
                    replies = bus.on_syncstart(frames)
                    if replies is None:
                        print(f"dropped a malformed snapshot request ({len(frames) - 1} frames)", flush=True)
                    elif pending is not None and replies:
                        pending.add(replies)  # the query completes later
                        continue
                    for reply in replies or []:
                        snapshot.send_multipart(reply)
            for reply in pending.due(bus, pub_taken) if pending else ():
                snapshot.send_multipart(reply)
    finally:
        ctx.destroy(linger=0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
