"""Echo round-trips/s: a raw pyzmq ROUTER echo loop vs the same echo as a node in LiveRuntime.

    .venv/bin/python tests/live/bench_echo.py [--n 200000] [--window 100] [--size 64]

The server runs in its own process (started through the supervisor, readiness by READY line);
the client is a raw pyzmq DEALER keeping ``window`` requests in flight, so the only thing that
changes between rows is the server. Not collected by pytest (no test_ prefix).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)

import zmq  # noqa: E402

from harness.live.supervisor import ManagedProcess, ReadyLine  # noqa: E402


def serve_raw() -> None:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.bind("tcp://127.0.0.1:*")
    print("READY raw", sock.getsockopt_string(zmq.LAST_ENDPOINT), flush=True)
    while True:
        sock.send_multipart(sock.recv_multipart())


def serve_live(trace_path: str | None) -> None:
    from harness.live.standalone import run_standalone
    from tests.live.live_test_nodes import EchoServer

    sys.exit(run_standalone(EchoServer, name="echo", role="server", config={},
                            trace_path=trace_path))


def client(endpoint: str, n: int, window: int, size: int) -> float:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.SNDHWM, 0)
    sock.setsockopt(zmq.RCVHWM, 0)
    sock.connect(endpoint)
    body = b"x" * size
    sock.send(body)
    sock.recv()  # connected and warm
    start = time.perf_counter()
    for _ in range(window):
        sock.send(body)
    for i in range(n):
        sock.recv()
        if i + window < n:
            sock.send(body)
    elapsed = time.perf_counter() - start
    sock.close(linger=0)
    ctx.term()
    return n / elapsed


def run(mode: str, args: argparse.Namespace) -> float:
    cmd = [sys.executable, __file__, "--serve", mode]
    if mode == "live-trace":
        cmd += ["--trace", os.path.join(args.tmp, "bench-trace.parquet")]
    with ManagedProcess(cmd, ready=ReadyLine(r"^READY \S+ (\S+)", "stdout")) as proc:
        assert proc.ready_match is not None
        rate = client(proc.ready_match.group(1), args.n, args.window, args.size)
    return rate


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--serve", choices=["raw", "live", "live-trace"])
    p.add_argument("--trace")
    p.add_argument("--n", type=int, default=200_000)
    p.add_argument("--window", type=int, default=100)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--tmp", default="/tmp")
    args = p.parse_args()
    if args.serve == "raw":
        serve_raw()
    elif args.serve:
        serve_live(args.trace)
        return
    rates = {mode: run(mode, args) for mode in ("raw", "live", "live-trace")}
    print(f"n={args.n} window={args.window} size={args.size}")
    for mode, rate in rates.items():
        print(f"{mode:11s} {rate:10.0f} round-trips/s  {rate / rates['raw']:6.1%} of raw")


if __name__ == "__main__":
    main()
