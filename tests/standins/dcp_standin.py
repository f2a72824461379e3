"""A DCP broker, worker and client written from dcp-v1.md and docs/errata.md alone: plain pyzmq,
its own framing, nothing of the harness. Where the document leaves a choice, it takes one the
reference nodes do not:

* broker: hands a request to the worker of the service that has waited longest; forgets a worker
  after ``--liveness`` silent heartbeat intervals; a second REGISTER replaces the service; a
  worker's PING while it holds a request counts as asking for more work (E-DCP-06); it never
  pings workers itself; it drops what it cannot parse without a word;
* worker: does not wait for the registration's echo before it takes requests; skips a PING when
  it sent anything else within the interval (the document's MAY); works through its requests one
  at a time, queueing the rest; after ``--liveness`` intervals without a word from the broker it
  closes its socket, opens a new one and registers again;
* client: sends its requests with no client address (the broker inserts it), its own request
  number as the only metadata part, sends a request again (same frames) after ``--timeout-ms``
  up to ``--max-attempts`` times, and exits 0 once every request is answered (1 if it gave up).

    python tests/standins/dcp_standin.py broker --bind tcp://127.0.0.1:5555
    python tests/standins/dcp_standin.py worker --connect tcp://127.0.0.1:5555 --service echo
    python tests/standins/dcp_standin.py client --connect tcp://127.0.0.1:5555 --requests 2

``--dialect dcp:dagbox`` writes and reads the message type as DagBox does (4 bytes, little-endian).
Broker and worker run until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import deque

import zmq

REGISTER, PING, PONG, REQUEST, REPLY, RECONNECT = 1, 2, 3, 4, 5, 6
PROTOCOL = b"DGBX\x01"
LIFETIME_S = 120.0  # bounded: a stand-in nobody stops ends anyway


class Framing:
    """The DCP header (from the empty delimiter on: the DEALER side's view, E-DCP-01)."""

    def __init__(self, dialect: str) -> None:
        self.wide = dialect == "dcp:dagbox"

    def header(self, kind: int) -> list[bytes]:
        return [b"", PROTOCOL, kind.to_bytes(4, "little") if self.wide else bytes([kind])]

    def parse(self, frames: list[bytes]) -> tuple[int, list[bytes]] | None:
        """(type, the parts after the header), or None when it is not a DCP message of version 1."""
        if len(frames) < 3 or frames[0] != b"" or frames[1] != PROTOCOL:
            return None
        raw = frames[2]
        if len(raw) != (4 if self.wide else 1):
            return None
        return int.from_bytes(raw, "little"), frames[3:]


def _request_parts(body: list[bytes]) -> tuple[bytes, bytes | None, list[bytes], list[bytes]] | None:
    """service, client address (None: missing), metadata, data — of a REQUEST's parts."""
    if len(body) < 3:
        return None
    service, rest = body[0], body[1:]
    address: bytes | None = None
    if rest[0] != b"":
        address, rest = rest[0], rest[1:]
        if not rest or rest[0] != b"":
            return None
    rest = rest[1:]
    if b"" not in rest:
        return None
    cut = rest.index(b"")
    return service, address, rest[:cut], rest[cut + 1:]


def _reply_parts(body: list[bytes]) -> tuple[bytes, list[bytes], list[bytes]] | None:
    """client address, metadata, data — of a REPLY's parts."""
    if len(body) < 3 or body[0] == b"" or body[1] != b"":
        return None
    rest = body[2:]
    if b"" not in rest:
        return None
    cut = rest.index(b"")
    return body[0], rest[:cut], rest[cut + 1:]


class Stop:
    def __init__(self) -> None:
        self.stopped = False
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)

    def stop(self, *_: object) -> None:
        self.stopped = True


def run_broker(args: argparse.Namespace) -> int:
    f = Framing(args.dialect)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind(args.bind)
    stop = Stop()
    expiry = args.liveness * args.heartbeat_ms / 1000
    service_of: dict[bytes, bytes] = {}  # worker routing id -> its service
    last_heard: dict[bytes, float] = {}
    idle: dict[bytes, deque[bytes]] = {}  # service -> idle workers, longest waiting first
    queued: dict[bytes, deque[list[bytes]]] = {}  # service -> requests (their parts) waiting

    def forget(worker: bytes) -> None:
        service = service_of.pop(worker, None)
        last_heard.pop(worker, None)
        if service is not None and worker in idle.get(service, ()):
            idle[service].remove(worker)

    def ready(worker: bytes) -> None:
        service = service_of[worker]
        waiting = queued.get(service)
        if waiting:
            sock.send_multipart([worker, *f.header(REQUEST), *waiting.popleft()])
        elif worker not in idle.setdefault(service, deque()):
            idle[service].append(worker)

    def route(sender: bytes, body: list[bytes]) -> None:
        parts = _request_parts(body)
        if parts is None:
            return
        service, address, metadata, data = parts
        out = [service, address if address is not None else sender, b"", *metadata, b"", *data]
        free = idle.get(service)
        if free:
            sock.send_multipart([free.popleft(), *f.header(REQUEST), *out])
        else:
            queued.setdefault(service, deque()).append(out)

    deadline = time.monotonic() + LIFETIME_S
    while not stop.stopped and time.monotonic() < deadline:
        if sock.poll(50):
            frames = sock.recv_multipart()
            sender, parsed = frames[0], f.parse(frames[1:])
            if parsed is None:
                continue
            kind, body = parsed
            if sender in service_of:
                last_heard[sender] = time.monotonic()
            if kind == REGISTER and len(body) == 1:
                if sender in service_of:
                    forget(sender)
                service_of[sender], last_heard[sender] = body[0], time.monotonic()
                sock.send_multipart([sender, *f.header(REGISTER), body[0]])
                ready(sender)
            elif kind in (PING, PONG) and not body:  # both are heartbeats
                if sender not in service_of:
                    sock.send_multipart([sender, *f.header(RECONNECT)])
                elif kind == PING:
                    sock.send_multipart([sender, *f.header(PONG)])
                    ready(sender)
            elif kind == REQUEST:
                route(sender, body)
                if sender in service_of:
                    ready(sender)
            elif kind == REPLY:
                parts = _reply_parts(body)
                if parts is not None:
                    sock.send_multipart([parts[0], *f.header(REPLY), *body])
                if sender in service_of:
                    ready(sender)
        now = time.monotonic()
        for worker in [w for w, t in last_heard.items() if now - t > expiry]:
            forget(worker)
    sock.close()
    ctx.term()
    return 0


def _transform(behaviour: str, data: list[bytes]) -> list[bytes]:
    if behaviour == "upper":
        return [d.upper() for d in data]
    if behaviour == "reverse":
        return [d[::-1] for d in data]
    return data


def run_worker(args: argparse.Namespace) -> int:
    f = Framing(args.dialect)
    ctx = zmq.Context()
    stop = Stop()
    interval = args.heartbeat_ms / 1000
    service = args.service.encode()

    def connect() -> zmq.Socket:
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(args.connect)
        s.send_multipart([*f.header(REGISTER), service])  # a DEALER sends the empty delimiter itself
        return s

    sock = connect()
    last_sent = last_heard = time.monotonic()
    work: deque[tuple[float, list[bytes]]] = deque()  # (when it is done, the reply's parts)
    deadline = time.monotonic() + LIFETIME_S

    def send(frames: list[bytes]) -> None:
        nonlocal last_sent
        sock.send_multipart(frames)
        last_sent = time.monotonic()

    while not stop.stopped and time.monotonic() < deadline:
        if sock.poll(10):
            parsed = f.parse(sock.recv_multipart())
            last_heard = time.monotonic()
            if parsed is not None:
                kind, body = parsed
                if kind == RECONNECT and not body:
                    send([*f.header(REGISTER), service])
                elif kind == REQUEST:
                    parts = _request_parts(body)
                    if parts is not None and parts[1] is not None:
                        _, address, metadata, data = parts
                        start = max(time.monotonic(), work[-1][0] if work else 0.0)  # one at a time
                        if args.behaviour.startswith("forward:"):
                            onward = args.behaviour[len("forward:"):].encode()
                            out = [*f.header(REQUEST), onward, address, b"", *metadata, b"", *data]
                        else:
                            out = [*f.header(REPLY), address, b"", *metadata, b"",
                                   *_transform(args.behaviour, data)]
                        work.append((start + args.service_time_ms / 1000, out))
        now = time.monotonic()
        while work and work[0][0] <= now:
            send(work.popleft()[1])
        if now - last_sent >= interval:
            send(f.header(PING))
        if now - last_heard > args.liveness * interval:
            sock.close()
            work.clear()
            sock = connect()
            last_sent = last_heard = time.monotonic()
    sock.close()
    ctx.term()
    return 0


def run_client(args: argparse.Namespace) -> int:
    f = Framing(args.dialect)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 500)
    sock.connect(args.connect)
    timeout = args.timeout_ms / 1000
    pending: dict[bytes, list] = {}  # request number -> [frames, attempts, due]
    for n in range(1, args.requests + 1):
        number = b"#%d" % n
        frames = [*f.header(REQUEST), args.service.encode(), b"", number, b"", args.data.encode()]
        sock.send_multipart(frames)
        pending[number] = [frames, 1, time.monotonic() + timeout]
    gave_up = 0
    while pending:
        if sock.poll(10):
            parsed = f.parse(sock.recv_multipart())
            if parsed is not None and parsed[0] == REPLY:
                parts = _reply_parts(parsed[1])
                if parts is not None and len(parts[1]) == 1:
                    pending.pop(parts[1][0], None)
        now = time.monotonic()
        for number, entry in list(pending.items()):
            if now < entry[2]:
                continue
            if entry[1] >= args.max_attempts:
                del pending[number]
                gave_up += 1
                continue
            sock.send_multipart(entry[0])
            entry[1] += 1
            entry[2] = now + timeout
    print(f"{args.requests - gave_up} of {args.requests} request(s) answered", flush=True)
    sock.close()
    ctx.term()
    return 1 if gave_up else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("role", choices=("broker", "worker", "client"))
    ap.add_argument("--bind")
    ap.add_argument("--connect")
    ap.add_argument("--dialect", default="strict")
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    ap.add_argument("--liveness", type=int, default=3)
    ap.add_argument("--service", default="echo")
    ap.add_argument("--behaviour", default="echo")
    ap.add_argument("--service-time-ms", type=int, default=0)
    ap.add_argument("--requests", type=int, default=1)
    ap.add_argument("--data", default="hello")
    ap.add_argument("--timeout-ms", type=int, default=300)
    ap.add_argument("--max-attempts", type=int, default=3)
    args = ap.parse_args()
    if args.role == "broker":
        return run_broker(args)
    if not args.connect:
        ap.error("--connect is required")
    return run_worker(args) if args.role == "worker" else run_client(args)


if __name__ == "__main__":
    sys.exit(main())
