"""A stand-in for an outside Event BUS client, written from the document alone
(/work/shared/specs/eventbus.md with the decisions of docs/errata.md, "Event BUS"): plain pyzmq,
its own framing and validation, nothing of the harness (no codec, no reference node).

It behaves like a command-line program someone else wrote: it starts slowly, subscribes its SUB
(P+1) to its subtrees, sends SYNCSTART on its DEALER to P and asks again when no SYNCEND comes
within ``--sync-timeout-ms`` (the Reliability section's MAY), holds BROADCASTs until SYNCEND and
then applies those above the last SYNCEND or BROADCAST sequence (printing each applied event),
publishes ``--publish`` events on ``--topic`` through a DEALER to P+2 (after its first
synchronisation, or at once with ``--publish-early``: the document does not order PUBs against
SYNCSTART, E-EVENTBUS-15), and exits with status 0 once its events are out, as a publishing tool
does. With ``--publish 0`` it is a subscriber: it runs until stopped (or ``--run-s``).

Usage: eventbus_client.py --endpoint tcp://H:P [--subtrees "/a/;/b/"] [--publish N] [--topic T]
       [--dialect strict|micro-toolkit] [--publish-early]
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import signal
import struct
import sys
import time

import msgpack
import zmq

TIMESTAMP = re.compile(rb"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})")
UUID4 = re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-4[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}")
SEPARATORS = {"strict": ";", "micro-toolkit": ",", "eventbus:micro-toolkit": ","}


class Wire:
    """Sequences as 8 bytes in network order (strict) or ASCII decimal (micro-toolkit)."""

    def __init__(self, dialect: str) -> None:
        self.ascii = dialect != "strict"

    def sequence(self, raw: bytes) -> int | None:
        if self.ascii:
            return int(raw) if raw.isdigit() else None
        return struct.unpack(">Q", raw)[0] if len(raw) == 8 else None

    def encode(self, n: int) -> bytes:
        return str(n).encode() if self.ascii else struct.pack(">Q", n)

    def event(self, frames: list[bytes]) -> tuple[bytes, int, bytes] | None:
        """(topic, sequence, uuid) of a well-formed event [topic, seq, producer, timestamp, uuid,
        data], or None (then it is dropped: there is no error command)."""
        if len(frames) != 6:
            return None
        topic, raw_seq, producer, timestamp, uuid, data = frames
        seq = self.sequence(raw_seq)
        if seq is None or not TIMESTAMP.fullmatch(timestamp) or not UUID4.fullmatch(uuid):
            return None
        try:
            topic.decode()
            producer.decode()
            msgpack.unpackb(data, raw=True, strict_map_key=False)
        except (UnicodeDecodeError, ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError):
            return None
        return topic, seq, uuid


def uuid4() -> bytes:
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}".encode()


def now_iso() -> bytes:
    t = datetime.datetime.now(datetime.timezone.utc)
    return (t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z").encode()


class Client:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.wire = Wire(args.dialect)
        self.spec = args.subtrees.encode()
        self.subtrees = [s for s in self.spec.split(SEPARATORS[args.dialect].encode()) if s]
        base, _, port = args.endpoint.rpartition(":")
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        for s in self.subtrees or [b""]:
            self.sub.setsockopt(zmq.SUBSCRIBE, s)
        self.sub.connect(f"{base}:{int(port) + 1}")
        self.snapshot = self.ctx.socket(zmq.DEALER)
        self.snapshot.setsockopt(zmq.IDENTITY, f"standin-{os.getpid()}".encode())  # printable
        self.snapshot.connect(args.endpoint)
        self.collector = self.ctx.socket(zmq.DEALER)
        self.collector.connect(f"{base}:{int(port) + 2}")
        for sock in (self.sub, self.snapshot, self.collector):
            sock.linger = 1000
        self.synced = False
        self.threshold = 0
        self.held: list[list[bytes]] = []
        self.applied: set[bytes] = set()
        self.published = 0
        self.producer = f"standin-{os.getpid()}".encode()

    def syncstart(self) -> None:
        self.snapshot.send_multipart([b"SYNCSTART", self.spec, self.wire.encode(0)])
        self.sync_deadline = time.monotonic() + self.args.sync_timeout_ms / 1000

    def on_snapshot(self, frames: list[bytes]) -> None:
        if frames[:1] == [b"SYNC"]:
            ev = self.wire.event(frames[1:])
            if ev is not None:
                self.apply(ev, "sync")
            self.sync_deadline = time.monotonic() + self.args.sync_timeout_ms / 1000
        elif frames[:1] == [b"SYNCEND"] and len(frames) == 3:
            seq = self.wire.sequence(frames[2])
            if seq is None:
                return
            self.synced, self.threshold = True, seq
            print(f"synced at {seq}", flush=True)
            held, self.held = self.held, []
            for f in held:
                self.on_broadcast(f)

    def on_broadcast(self, frames: list[bytes]) -> None:
        if not self.synced:
            self.held.append(frames)
            return
        ev = self.wire.event(frames)
        if ev is None or ev[1] <= self.threshold:  # discard rule
            return
        self.threshold = ev[1]
        self.apply(ev, "broadcast")

    def apply(self, ev: tuple[bytes, int, bytes], source: str) -> None:
        topic, seq, uuid = ev
        if uuid not in self.applied:
            self.applied.add(uuid)
            print(f"{source} {seq} {topic.decode()} {uuid.decode()}", flush=True)

    def publish(self) -> None:
        self.published += 1
        data = msgpack.packb({"n": self.published, "from": self.producer.decode()})
        self.collector.send_multipart([self.args.topic.encode(), self.wire.encode(self.published), self.producer,
                                       now_iso(), uuid4(), data])
        print(f"published {self.published} on {self.args.topic}", flush=True)

    def run(self) -> int:
        poller = zmq.Poller()
        poller.register(self.sub, zmq.POLLIN)
        poller.register(self.snapshot, zmq.POLLIN)
        self.syncstart()
        next_pub = time.monotonic()
        end = time.monotonic() + self.args.run_s
        while time.monotonic() < end:
            can_publish = self.synced or self.args.publish_early
            if self.args.publish and self.published >= self.args.publish and can_publish:
                time.sleep(self.args.exit_after_ms / 1000)  # the sockets linger too
                return 0
            if can_publish and self.published < self.args.publish and time.monotonic() >= next_pub:
                self.publish()
                next_pub = time.monotonic() + 0.1
            if not self.synced and time.monotonic() >= self.sync_deadline:
                print("no SYNCEND: asking again", flush=True)
                self.syncstart()
            for sock, _ in poller.poll(50):
                frames = sock.recv_multipart()
                (self.on_snapshot if sock is self.snapshot else self.on_broadcast)(frames)
        return 0

    def close(self) -> None:
        self.ctx.destroy(linger=1000)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoint", required=True, help="the server's snapshot endpoint tcp://host:P")
    ap.add_argument("--subtrees", default="", help="joined with the dialect's separator; empty: every topic")
    ap.add_argument("--publish", type=int, default=0)
    ap.add_argument("--topic", default="/standin/event")
    ap.add_argument("--dialect", default="strict", choices=sorted(SEPARATORS))
    ap.add_argument("--publish-early", action="store_true", help="publish without waiting for a synchronisation")
    ap.add_argument("--sync-timeout-ms", type=int, default=2000)
    ap.add_argument("--start-delay-ms", type=int, default=500)
    ap.add_argument("--exit-after-ms", type=int, default=300, help="pause between the last PUB and the exit")
    ap.add_argument("--run-s", type=float, default=60.0, help="a subscriber stops after this long (bounded)")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("event bus client stand-in starting", flush=True)
    time.sleep(args.start_delay_ms / 1000)
    client = Client(args)
    try:
        return client.run()
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
