"""Live runtime speed: DCP requests per second through the reference broker (`zmq-harness node
dcp broker`, a real subprocess) served by raw pyzmq echo workers, next to a raw pyzmq
ROUTER/DEALER echo server measured in the same run with the same client (window of W requests
in flight, 100-byte payloads).

    .venv/bin/python bench/bench_live.py [--seconds 5] [--window 64] [--no-record]

Goal: the reference broker keeps at least 40% of the raw echo rate.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import zmq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script from anywhere

from bench.common import command_line, record  # noqa: E402
from harness.live.supervisor import ManagedProcess, ReadyLine, free_port  # noqa: E402


def cpu_seconds(pid: int | None) -> float:
    """User+system CPU time of a process (and its threads), from /proc."""
    import os

    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drive(endpoint: str, frames_for: callable, seconds: float, window: int) -> float:
    """Round trips per second from one DEALER keeping ``window`` requests in flight."""
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(endpoint)
    for i in range(window):
        s.send_multipart(frames_for(i))
    # warm-up
    t_end = time.monotonic() + 0.5
    done = 0
    while time.monotonic() < t_end:
        s.recv_multipart()
        s.send_multipart(frames_for(done))
        done += 1
    done = 0
    t0 = time.monotonic()
    t_end = t0 + seconds
    while True:
        if not s.poll(5000):
            raise RuntimeError("no reply for 5 s")
        s.recv_multipart()
        done += 1
        now = time.monotonic()
        if now >= t_end:
            break
        s.send_multipart(frames_for(done))
    s.close()
    ctx.term()
    return done / (now - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--workers", type=int, default=64, help="workers (DCP allows one request per worker)")
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    payload = b"x" * 100
    py = sys.executable

    echo_ep = f"tcp://127.0.0.1:{free_port()}"
    with ManagedProcess([py, "-m", "bench.live_peers", "echo", echo_ep], ready=ReadyLine("READY")) as echo:
        c0 = cpu_seconds(echo.pid)
        t0 = time.monotonic()
        # The same multipart DCP request the broker gets: per-frame costs are part of the work.
        echo_rate = drive(echo_ep, lambda i: [b"", b"DGBX\x01", b"\x04", b"echo", b"", str(i).encode(), b"", payload],
                          a.seconds, a.window)
        echo_cpu_us = (cpu_seconds(echo.pid) - c0) / (echo_rate * (time.monotonic() - t0)) * 1e6

    broker_ep = f"tcp://127.0.0.1:{free_port()}"
    broker = ManagedProcess([py, "-m", "harness.cli", "node", "dcp", "broker", "--bind", broker_ep,
                             "--set", "heartbeat=5s"], ready=ReadyLine("READY"))
    with broker:
        with ManagedProcess([py, "-m", "bench.live_peers", "workers", broker_ep, "--n", str(a.workers)],
                            ready=ReadyLine("READY")):
            time.sleep(0.3)  # registrations
            req = lambda i: [b"", b"DGBX\x01", b"\x04", b"echo", b"", str(i).encode(), b"", payload]  # noqa: E731
            c0 = cpu_seconds(broker.pid)
            t0 = time.monotonic()
            broker_rate = drive(broker_ep, req, a.seconds, a.window)
            broker_cpu_us = (cpu_seconds(broker.pid) - c0) / (broker_rate * (time.monotonic() - t0)) * 1e6
    ratio = broker_rate / echo_rate
    body = (f"| path | round trips / s | server CPU per round trip |\n|---|---|---|\n"
            f"| raw pyzmq ROUTER echo of the same 8-frame request (baseline, same run) | {echo_rate:,.0f} | {echo_cpu_us:.1f} us |\n"
            f"| DCP request through the reference broker ({a.workers} raw echo workers) | {broker_rate:,.0f} "
            f"| {broker_cpu_us:.1f} us |\n\n"
            f"Broker / raw echo: {ratio:.0%} (goal: at least 40%). Window {a.window} requests in flight, "
            f"100-byte payloads; broker, workers, client and echo server are separate processes on loopback.")
    print(body)
    if not a.no_record:
        record("Live: requests through the reference DCP broker", body, command_line())


if __name__ == "__main__":
    main()
