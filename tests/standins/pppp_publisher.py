"""An independent PPPP publisher, written only from specs/pppp.txt, docs/errata.md (E-PPPP-*)
and docs/conformance-pppp.md (command line). It imports nothing of the harness or of the
reference nodes: plain pyzmq and its own framing. Its choices differ from the reference's where
the documents leave them open, so that a suite judging the reference's choices fails here:

* it starts slowly (half a second before it binds) and begins publishing 600 ms after the first
  SUBSCRIBE (the documents allow 200 ms to 1 s; the reference waits 200 ms);
* it heartbeats a little early (at 3/4 of the first idle and idle times);
* it answers no CUSTOM (a reply is optional, E-PPPP-17);
* a subscriber it counts as disconnected stays so until it SUBSCRIBEs again (the reference
  takes any message as its return);
* payloads are ``<channel>#<n>`` in two frames.

    python tests/standins/pppp_publisher.py --bind tcp://127.0.0.1:5560 --channels news,weather \\
        --count 5 --rate 20 --idle-ms 600 --first-idle-ms 100 --dead-multiple 3 --grace-ms 30000

It publishes ``--count`` messages on each channel, ``--rate`` per second per channel, and runs
until SIGTERM or SIGINT (exit 0), or ``--run-s`` seconds.
"""

from __future__ import annotations

import argparse
import sys
import time

import zmq
from pppp_program import number, run_program  # a sibling: this folder is first on the path

SUBSCRIBE, ACK, HEARTBEAT, CUSTOM = 1, 2, 3, 4
EARLY = 0.75  # heartbeats go out at this fraction of their deadline: "within" allows early
START_AFTER = 0.6  # seconds from the first SUBSCRIBE to the first message



class Peer:
    """One subscriber, by routing id (E-PPPP-09)."""

    def __init__(self, now: float) -> None:
        self.prefixes: list[bytes] = []
        self.live = True
        self.pending: dict[bytes, set[int]] = {}  # channel -> numbers owed, not yet acknowledged
        self.last_heard = now
        self.silent_since = now  # the later of its last ACK/NACK and our last PUBLISH to it
        self.next_heartbeat = now
        self.down_at = 0.0
        self.resent: dict[bytes, tuple[int, int]] = {}  # channel -> (number resent on silence, last then)

    def wants(self, channel: bytes) -> bool:
        return any(channel.startswith(p) for p in self.prefixes)


class Publisher:
    def __init__(self, sock: zmq.Socket, channels: list[bytes], count: int, rate: float, idle: float,
                 first_idle: float, multiple: int, grace: float) -> None:
        self.sock = sock
        self.channels, self.count, self.every = channels, count, 1.0 / rate
        self.idle, self.first_idle, self.multiple, self.grace = idle, first_idle, multiple, grace
        self.peers: dict[bytes, Peer] = {}
        self.last: dict[bytes, int] = {c: 0 for c in channels}
        self.kept: dict[tuple[bytes, int], list[bytes]] = {}  # (channel, number) -> payload
        self.next_publish: float | None = None
        self.published = 0

    # ---- sending ------------------------------------------------------------------------------
    def send(self, who: bytes, peer: Peer, frames: list[bytes], heartbeat: bool = False) -> None:
        try:
            self.sock.send_multipart([who, *frames], zmq.NOBLOCK)
        except zmq.ZMQError:
            pass  # gone or full: its ACK/NACKs or a resend on silence recover it
        # E-PPPP-14: after a message other than HEARTBEAT the next is due within first_idle,
        # after a HEARTBEAT within idle.
        peer.next_heartbeat = time.monotonic() + EARLY * (self.idle if heartbeat else self.first_idle)

    def send_message(self, who: bytes, peer: Peer, channel: bytes, seq: int) -> None:
        payload = self.kept.get((channel, seq))
        if payload is None or not peer.live:
            return
        self.send(who, peer, [channel, number(seq), *payload])
        peer.silent_since = time.monotonic()

    def publish(self, channel: bytes) -> None:
        seq = self.last[channel] + 1
        self.last[channel] = seq
        owed = [(w, p) for w, p in self.peers.items() if p.wants(channel)]
        if not owed:
            return  # owed to nobody: nothing to keep
        self.kept[(channel, seq)] = [channel + b"#", str(seq).encode()]
        for who, peer in owed:
            peer.pending.setdefault(channel, set()).add(seq)
            self.send_message(who, peer, channel, seq)

    def release(self, channel: bytes, seqs: set[int]) -> None:
        for seq in seqs:
            if not any(seq in p.pending.get(channel, ()) for p in self.peers.values()):
                self.kept.pop((channel, seq), None)

    # ---- receiving -------------------------------------------------------------------------------
    def on_message(self, frames: list[bytes]) -> None:
        if len(frames) < 2 or not frames[1]:
            return
        who, body = frames[0], frames[1:]
        kind = body[0][0]
        peer = self.peers.get(who)
        now = time.monotonic()
        if kind == SUBSCRIBE and len(body) == 1:
            self.on_subscribe(who, peer, body[0][1:], now)
            return
        if peer is None:
            return  # nothing before SUBSCRIBE (E-PPPP-10)
        if kind == ACK and len(body) >= 2 and len(body[1]) == 8 and all(len(f) == 16 for f in body[2:]):
            ranges = [(int.from_bytes(f[:8], "big"), int.from_bytes(f[8:], "big")) for f in body[2:]]
            if all(a <= b for a, b in ranges):
                peer.last_heard = now
                self.on_ack(peer, body[0][1:], int.from_bytes(body[1], "big"), ranges, now)
        elif kind in (HEARTBEAT, CUSTOM) and (kind == CUSTOM or len(body) == 1) and body[0] == bytes([kind]):
            peer.last_heard = now
        # anything else is malformed: dropped

    def on_subscribe(self, who: bytes, peer: Peer | None, prefix: bytes, now: float) -> None:
        if peer is None:
            peer = self.peers[who] = Peer(now)
        again = prefix in peer.prefixes or not peer.live
        if prefix not in peer.prefixes:
            peer.prefixes.append(prefix)
        peer.live = True
        peer.last_heard = peer.silent_since = now
        peer.next_heartbeat = now + EARLY * self.first_idle
        if self.next_publish is None and self.count:
            self.next_publish = now + START_AFTER
        if again:  # a new conversation: SYNC by backlog, what it has not acknowledged (E-PPPP-08)
            peer.resent.clear()
            for channel in sorted(peer.pending):
                if channel.startswith(prefix):
                    for seq in sorted(peer.pending[channel]):
                        self.send_message(who, peer, channel, seq)

    def on_ack(self, peer: Peer, channel: bytes, h: int, ranges: list[tuple[int, int]], now: float) -> None:
        peer.silent_since = now
        resent = peer.resent.pop(channel, None)
        if resent is not None and max(resent[0], h) < resent[1]:  # E-PPPP-15: the implicit NACK
            ranges = [*ranges, (max(resent[0], h) + 1, resent[1])]
        pending = peer.pending.get(channel)
        if not pending:
            return
        nacked = sorted(s for s in pending if any(a <= s <= b for a, b in ranges))
        acked = {s for s in pending if s <= h and not any(a <= s <= b for a, b in ranges)}
        pending -= acked
        self.release(channel, acked)
        who = next(w for w, p in self.peers.items() if p is peer)
        for seq in nacked:
            self.send_message(who, peer, channel, seq)

    # ---- time ------------------------------------------------------------------------------------
    def on_time(self, now: float) -> None:
        if self.next_publish is not None and now >= self.next_publish:
            for channel in self.channels:
                self.publish(channel)
            self.published += 1
            self.next_publish = self.next_publish + self.every if self.published < self.count else None
        for who, peer in list(self.peers.items()):
            if peer.live and now >= peer.last_heard + self.multiple * self.idle:
                peer.live, peer.down_at = False, now  # disconnected: sent nothing more (E-PPPP-13)
            if not peer.live:
                if now >= peer.down_at + self.grace:  # permanently disconnected: backlog dropped
                    del self.peers[who]
                    for channel, seqs in peer.pending.items():
                        self.release(channel, set(seqs))
                continue
            if now >= peer.silent_since + self.multiple * self.first_idle and any(peer.pending.values()):
                for channel, seqs in peer.pending.items():  # resend on silence: the last (E-PPPP-15)
                    if seqs:
                        peer.resent[channel] = (max(seqs), self.last[channel])
                        self.send_message(who, peer, channel, max(seqs))
                peer.silent_since = now
            if now >= peer.next_heartbeat:
                self.send(who, peer, [bytes([HEARTBEAT])], heartbeat=True)

    def wake_at(self) -> float:
        times = [p.next_heartbeat for p in self.peers.values() if p.live]
        times += [p.last_heard + self.multiple * self.idle for p in self.peers.values() if p.live]
        times += [p.silent_since + self.multiple * self.first_idle for p in self.peers.values()
                  if p.live and any(p.pending.values())]
        times += [p.down_at + self.grace for p in self.peers.values() if not p.live]
        if self.next_publish is not None:
            times.append(self.next_publish)
        return min(times, default=time.monotonic() + 1.0)

    def run(self, until: float) -> None:
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        while time.monotonic() < until:
            wait = min(self.wake_at(), until) - time.monotonic()
            if poller.poll(max(0, int(wait * 1000)) + 1):
                while True:
                    try:
                        self.on_message(self.sock.recv_multipart(zmq.NOBLOCK))
                    except zmq.Again:
                        break
            self.on_time(time.monotonic())



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bind", required=True)
    ap.add_argument("--channels", required=True, help="comma-separated")
    ap.add_argument("--count", type=int, default=0)
    ap.add_argument("--rate", type=float, default=10.0)
    ap.add_argument("--idle-ms", type=int, default=1000)
    ap.add_argument("--first-idle-ms", type=int, default=250)
    ap.add_argument("--dead-multiple", type=int, default=3)
    ap.add_argument("--grace-ms", type=int, default=30000)
    ap.add_argument("--run-s", type=float, default=600.0, help="exit 0 after this long at most")
    a = ap.parse_args()

    channels = [c.encode() for c in a.channels.split(",") if c]

    def make_socket(ctx: zmq.Context) -> zmq.Socket:
        sock = ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        sock.bind(a.bind)
        return sock

    return run_program(make_socket, lambda sock: Publisher(
        sock, channels, a.count, a.rate, a.idle_ms / 1000, a.first_idle_ms / 1000, a.dead_multiple,
        a.grace_ms / 1000).run(time.monotonic() + a.run_s))


if __name__ == "__main__":
    sys.exit(main())
