"""An independent PPPP subscriber, written only from specs/pppp.txt, docs/errata.md (E-PPPP-*)
and docs/conformance-pppp.md (command line, output lines). It imports nothing of the harness or
of the reference nodes: plain pyzmq and its own framing. It makes choices the reference does
not, all of which the documents allow, so that a suite judging the reference's choices instead
of the document's rules fails here:

* it ACK/NACKs as soon as it has read everything queued on its socket (the reference waits a
  short delay to cover more messages with one ACK);
* it hands each message to the application as it arrives, in arrival order (not sequence order);
* it heartbeats a little early (at 3/4 of the first idle and idle times);
* it starts slowly (half a second before it connects), as a real program may.

    python tests/standins/pppp_subscriber.py --connect tcp://127.0.0.1:5560 --channels news \\
        --idle-ms 600 --first-idle-ms 100 --dead-multiple 3

It prints one JSON line per delivered message (``{"channel", "sequence", "payload"}``, payload
frames joined in hex) and exits 0 on SIGTERM or SIGINT, or after ``--run-s`` seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import zmq
from pppp_program import number, run_program  # a sibling: this folder is first on the path

SUBSCRIBE, ACK, HEARTBEAT = b"\x01", b"\x02", b"\x03"
EARLY = 0.75  # heartbeats go out at this fraction of their deadline: "within" allows early



class Channel:
    """One channel: what the application has (every number ever delivered) and, for the current
    conversation, the highest number received and the numbers missing below it."""

    def __init__(self, name: bytes) -> None:
        self.name = name
        self.delivered: set[int] = set()
        self.highest = 0  # 0: nothing received in this conversation yet (E-PPPP-02)
        self.missing: set[int] = set()
        self.owe_ack = False

    def new_conversation(self) -> None:
        self.highest = 0
        self.missing = set()
        self.owe_ack = False

    def received(self, seq: int) -> bool:
        """Note ``seq``; True if the application has not had it yet."""
        if self.highest == 0:
            self.highest = seq  # gaps are judged from the first number of a conversation
        elif seq > self.highest:
            self.missing.update(range(self.highest + 1, seq))
            self.highest = seq
        self.missing.discard(seq)
        self.owe_ack = True  # duplicates are ACKed too
        if seq in self.delivered:
            return False
        self.delivered.add(seq)
        return True

    def ack(self) -> list[bytes]:
        """E-PPPP-03/04/05: [0x02 + channel, highest, one 16-byte range per run of missing numbers]."""
        frames = [ACK + self.name, number(self.highest)]
        run: list[int] = []
        for seq in sorted(self.missing):
            if run and seq != run[-1] + 1:
                frames.append(number(run[0]) + number(run[-1]))
                run = []
            run.append(seq)
        if run:
            frames.append(number(run[0]) + number(run[-1]))
        self.owe_ack = False
        return frames


def channel_text(name: bytes) -> str:
    return name.decode("utf-8", "backslashreplace")


class Subscriber:
    def __init__(self, sock: zmq.Socket, channels: list[bytes], idle: float, first_idle: float,
                 multiple: int) -> None:
        self.sock = sock
        self.channels = {c: Channel(c) for c in channels}
        self.idle, self.first_idle, self.multiple = idle, first_idle, multiple
        now = time.monotonic()
        self.last_heard = now
        self.next_heartbeat = now

    def send(self, frames: list[bytes], heartbeat: bool = False) -> None:
        self.sock.send_multipart(frames)
        # E-PPPP-14: after a message other than HEARTBEAT the next is due within first_idle,
        # after a HEARTBEAT within idle.
        self.next_heartbeat = time.monotonic() + EARLY * (self.idle if heartbeat else self.first_idle)

    def subscribe(self) -> None:
        """A new conversation: SUBSCRIBE for every channel (E-PPPP-10)."""
        for ch in self.channels.values():
            ch.new_conversation()
            self.send([SUBSCRIBE + ch.name])

    def on_message(self, frames: list[bytes]) -> None:
        self.last_heard = time.monotonic()  # any message is a heartbeat
        if frames == [HEARTBEAT]:
            return
        if len(frames) < 2 or len(frames[1]) != 8:
            return  # malformed: dropped
        ch = self.channels.get(frames[0])
        if ch is None:
            return  # not one of ours
        seq = int.from_bytes(frames[1], "big")
        if seq == 0:
            return  # 0 never numbers a message (E-PPPP-02)
        if ch.received(seq):
            line = {"channel": channel_text(ch.name), "sequence": seq, "payload": b"".join(frames[2:]).hex()}
            sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()

    def send_acks(self) -> None:
        for ch in self.channels.values():
            if ch.owe_ack:
                self.send(ch.ack())

    def run(self, until: float) -> None:
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        self.subscribe()
        while time.monotonic() < until:
            now = time.monotonic()
            wake = min(self.next_heartbeat, self.last_heard + self.multiple * self.idle, until)
            if poller.poll(max(0, int((wake - now) * 1000)) + 1):
                while True:  # everything queued, then one ACK/NACK per channel covers it all
                    try:
                        self.on_message(self.sock.recv_multipart(zmq.NOBLOCK))
                    except zmq.Again:
                        break
                self.send_acks()
            now = time.monotonic()
            if now >= self.last_heard + self.multiple * self.idle:
                self.last_heard = now  # the publisher is lost: start again (pppp.subscriber.resubscribe)
                self.subscribe()
            elif now >= self.next_heartbeat:
                self.send([HEARTBEAT], heartbeat=True)



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connect", required=True)
    ap.add_argument("--channels", required=True, help="comma-separated")
    ap.add_argument("--idle-ms", type=int, default=1000)
    ap.add_argument("--first-idle-ms", type=int, default=250)
    ap.add_argument("--dead-multiple", type=int, default=3)
    ap.add_argument("--identity", default="")
    ap.add_argument("--run-s", type=float, default=600.0, help="exit 0 after this long at most")
    a = ap.parse_args()

    channels = [c.encode() for c in a.channels.split(",") if c]

    def make_socket(ctx: zmq.Context) -> zmq.Socket:
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        if a.identity:
            sock.setsockopt(zmq.IDENTITY, a.identity.encode())
        sock.connect(a.connect)
        return sock

    return run_program(make_socket, lambda sock: Subscriber(
        sock, channels, a.idle_ms / 1000, a.first_idle_ms / 1000, a.dead_multiple).run(time.monotonic() + a.run_s))


if __name__ == "__main__":
    sys.exit(main())
