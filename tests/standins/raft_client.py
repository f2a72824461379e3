"""A ZMQ Raft client written only from the document's Client section (specs/zmq-raft.md,
strict dialect) — not from the reference client, whose code it does not import: the stand-in
that shows the client suite asks nothing the document does not
(tests/conformance/test_raft_standins.py).

Its choices differ from the reference's where the document leaves one: an update is done once
a peer answers it committed (it does not read the log back); it asks for the cluster state
again after 200 ms when no leader is known (the reference waits SERVER_ELECTION_GRACE_MS);
its update data is MessagePack of its own shape; it exits 0 when its updates are done (and,
with ``--subscribe true``, it holds a SUB on the leader's broadcast URL).

With ``--subscribe true`` it follows the StateBroadcast as the RequestBroadcastStateUrl section
says: once a leader is established it asks that peer for the URL; an answer without the 2nd
frame makes it perform RequestConfig (and ask again only when that names a leader); with the
URL it connects a SUB there. An unanswered URL request is given up after SERVER_RESPONSE_TTL
(a peer without a BroadcastStateMachine need not answer).

    python tests/standins/raft_client.py --peers a=tcp://127.0.0.1:5001 --updates 2 --key k
"""

from __future__ import annotations

import argparse
import os
import time

import msgpack
import zmq

RESPONSE_TTL = 0.5  # SERVER_RESPONSE_TTL
ELECTION_GRACE = 0.3  # SERVER_ELECTION_GRACE_MS
ASK_AGAIN = 0.2


class Client:
    def __init__(self, args: argparse.Namespace) -> None:
        self.peers = dict(p.split("=", 1) for p in args.peers.split(","))
        self.todo = [msgpack.packb({"set": args.key, "to": f"value-{k}"}) for k in range(args.updates)]
        self.machine = os.urandom(5)
        self.counter = int.from_bytes(os.urandom(3), "big")
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.connected: set[str] = set()
        self.connect_only(list(self.peers.values()))
        self.config_id: bytes | None = None
        self.config_at: float | None = None
        self.update: list[bytes] | None = None  # the update in flight, frame for frame
        self.deadline: float | None = None  # its response timeout, or the end of a grace period
        self.waiting_grace = False
        self.subscribe = args.subscribe == "true"
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub_url: str | None = None
        self.url_id: bytes | None = None  # the RequestBroadcastStateUrl in flight
        self.url_at: float | None = None  # when it is given up

    def reqid(self) -> bytes:
        self.counter = (self.counter + 1) & 0xFFFFFF
        return int(time.time()).to_bytes(4, "big") + self.machine + self.counter.to_bytes(3, "big")

    def connect_only(self, urls: list[str]) -> None:
        for u in self.connected - set(urls):
            self.sock.disconnect(u)
        for u in set(urls) - self.connected:
            self.sock.connect(u)
        self.connected = set(urls)

    def ask_config(self) -> None:
        self.config_id = self.reqid()
        self.config_at = time.monotonic() + RESPONSE_TTL  # no valid answer by then: ask again
        self.sock.send_multipart([self.config_id, b"^"])

    def send_update(self) -> None:
        if self.update is None and self.todo:
            self.update = [self.reqid(), b"=", self.todo.pop(0)]
        if self.update is not None:
            self.sock.send_multipart(self.update)
            self.deadline, self.waiting_grace = time.monotonic() + RESPONSE_TTL, False

    def search(self) -> None:
        """The leader is lost (no answer, or a refusal naming none): every peer, a grace, again."""
        self.connect_only(list(self.peers.values()))
        self.deadline, self.waiting_grace = time.monotonic() + ELECTION_GRACE, True

    def follow(self, leader: str) -> None:
        self.connect_only([self.peers[leader]])
        self.send_update()
        if self.subscribe and self.sub_url is None and self.url_id is None:  # the leader is established
            self.url_id = self.reqid()
            self.url_at = time.monotonic() + RESPONSE_TTL
            self.sock.send_multipart([self.url_id, b"*"])

    def on_url(self, frames: list[bytes]) -> None:
        self.url_id = self.url_at = None
        if len(frames) < 2:  # no URL: find the leader again before asking again
            self.ask_config()
            return
        self.sub_url = frames[1].decode("utf-8", "replace")
        self.sub.connect(self.sub_url)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")

    def on_message(self, frames: list[bytes]) -> None:
        if not frames:
            return
        if frames[0] == self.url_id:
            self.on_url(frames)
            return
        if frames[0] == self.config_id and len(frames) >= 3:
            try:
                leader = msgpack.unpackb(frames[2])
                peers = msgpack.unpackb(frames[3]) if len(frames) > 3 else None
            except (ValueError, msgpack.UnpackException):
                return  # malformed: dropped (asked again when its time is up)
            if isinstance(peers, list) and peers:
                self.peers = {str(p[0]): str(p[1]) for p in peers}
            self.config_id = None
            if isinstance(leader, str) and leader in self.peers:
                self.config_at = None
                self.follow(leader)
            else:
                self.config_at = time.monotonic() + ASK_AGAIN  # no leader yet: ask again
            return
        if self.update is None or frames[0] != self.update[0] or len(frames) < 2:
            return
        ok = frames[1][:1] not in (b"", b"\x00")
        third = frames[2] if len(frames) > 2 else None
        if ok and third is not None:  # committed at that index: done
            self.update, self.deadline = None, None
            self.send_update()
        elif ok:  # accepted: wait longer
            self.deadline = time.monotonic() + RESPONSE_TTL
        elif third is None:  # expired: given up
            self.update, self.deadline = None, None
            self.send_update()
        else:
            try:
                leader = msgpack.unpackb(third)
            except (ValueError, msgpack.UnpackException):
                return
            if isinstance(leader, str) and leader in self.peers:
                self.follow(leader)  # the first scenario: to the leader named, at once
            else:
                self.search()

    def run(self) -> int:
        self.ask_config()
        self.send_update()
        end = time.monotonic() + 120
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        poller.register(self.sub, zmq.POLLIN)
        while time.monotonic() < end:
            if self.update is None and not self.todo and (not self.subscribe or self.sub_url is not None):
                return 0
            ready = dict(poller.poll(10))
            if self.sock in ready:
                self.on_message(self.sock.recv_multipart())
            if self.sub in ready:
                self.sub.recv_multipart()  # a StateBroadcast: this client keeps no replica
            now = time.monotonic()
            if self.url_at is not None and now >= self.url_at:
                self.url_id = self.url_at = None  # unanswered: given up

            if self.config_at is not None and now >= self.config_at:
                self.ask_config()
            if self.deadline is not None and now >= self.deadline:
                if self.waiting_grace:
                    self.send_update()
                else:
                    self.search()
        return 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", required=True)
    ap.add_argument("--updates", type=int, default=1)
    ap.add_argument("--key", default="k")
    ap.add_argument("--subscribe", choices=("true", "false"), default="false")
    client = Client(ap.parse_args())
    try:
        code = client.run()
    finally:
        client.ctx.destroy(0)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
