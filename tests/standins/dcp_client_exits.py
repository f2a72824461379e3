"""A DCP client that does its work and exits, as a command-line client does: it sends
``--requests`` requests at once, sends an unanswered one again (same frames) after
``--timeout-ms``, and exits with ``--status`` (default 0) once every request is answered.
It never sends heartbeats (a pure client, E-DCP-02).

    python tests/standins/dcp_client_exits.py --connect tcp://127.0.0.1:5555 --requests 2
"""

from __future__ import annotations

import argparse
import sys
import time

import zmq

from harness.protocols import DecodeError, codec

GIVE_UP_S = 30.0  # bounded: a client the harness never answers ends anyway


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--connect", required=True)
    ap.add_argument("--requests", type=int, default=1)
    ap.add_argument("--service", default="echo")
    ap.add_argument("--data", default="hello")
    ap.add_argument("--timeout-ms", type=int, default=300)
    ap.add_argument("--dialect", default="strict")
    ap.add_argument("--status", type=int, default=0, help="exit status once done (non-zero: a failing client)")
    args = ap.parse_args()
    c = codec("dcp", args.dialect)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 500)
    sock.connect(args.connect)
    pending: dict[bytes, tuple[list[bytes], float]] = {}
    for k in range(args.requests):
        meta = f"req-{k}".encode()
        frames = c.encode("REQUEST", {"service": args.service, "metadata": [meta], "data": [args.data.encode()]})
        sock.send_multipart(frames)
        pending[meta] = (frames, time.monotonic() + args.timeout_ms / 1000)
    end = time.monotonic() + GIVE_UP_S
    while pending and time.monotonic() < end:
        if sock.poll(20):
            try:
                msg = c.decode(sock.recv_multipart())
            except DecodeError:
                continue  # malformed: dropped, as the document asks
            if msg.name == "REPLY" and msg["metadata"]:
                pending.pop(bytes(msg["metadata"][0]), None)
        now = time.monotonic()
        for meta, (frames, due) in list(pending.items()):
            if now >= due:
                sock.send_multipart(frames)
                pending[meta] = (frames, now + args.timeout_ms / 1000)
    print(f"{args.requests - len(pending)} of {args.requests} request(s) answered", flush=True)
    sock.close()
    ctx.term()
    return args.status if not pending else 1


if __name__ == "__main__":
    sys.exit(main())
