"""Raw pyzmq peers for bench_live.py (run as subprocesses so they don't share a GIL with the
client): a ROUTER echo server, and a process of N DCP echo workers."""

from __future__ import annotations

import argparse
import signal
import sys

import zmq


def echo(bind: str) -> None:
    ctx = zmq.Context()
    s = ctx.socket(zmq.ROUTER)
    s.bind(bind)
    print("READY", flush=True)
    while True:
        s.send_multipart(s.recv_multipart(copy=True), copy=True)


def workers(connect: str, n: int) -> None:
    ctx = zmq.Context()
    socks = []
    poller = zmq.Poller()
    for i in range(n):
        w = ctx.socket(zmq.DEALER)
        w.setsockopt(zmq.IDENTITY, f"w{i}".encode())
        w.connect(connect)
        w.send_multipart([b"", b"DGBX\x01", b"\x01", b"echo"])
        poller.register(w, zmq.POLLIN)
        socks.append(w)
    print("READY", flush=True)
    while True:
        for sock, _ in poller.poll():
            fr = sock.recv_multipart()
            if fr[2] == b"\x04":  # REQUEST: [, DGBX, 04, service, client, '', md..., '', data...]
                sock.send_multipart([b"", b"DGBX\x01", b"\x05", *fr[4:]])


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("echo", "workers"))
    ap.add_argument("endpoint")
    ap.add_argument("--n", type=int, default=4)
    a = ap.parse_args()
    echo(a.endpoint) if a.mode == "echo" else workers(a.endpoint, a.n)
