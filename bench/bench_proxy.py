"""Chaos proxy overhead: messages per second and round-trip latency through the ZMTP proxy,
next to the same traffic direct, in one run.

    .venv/bin/python bench/bench_proxy.py [--messages 100000] [--roundtrips 5000] [--rounds 3] [--no-record]

Throughput: this process PUSHes ``--messages`` messages as fast as it can to a PULL sink
(a subprocess) that times the first to the last; the median of ``--rounds`` rounds, the paths
interleaved. Latency: one DEALER here, a ROUTER echo subprocess, one message in flight;
``--roundtrips`` round trips after a warm-up. The proxy runs in its own process, as ``plain``
(no fault touches the path: bulk relay at message boundaries), ``looked-at`` (a rule that
matches nothing: every message is cut out, named by the DCP codec and judged) and ``observed``
(both ends external nodes: every message cut out, named, and reported as a send and a receive to
the checkers and the trace through a live runtime's loop, `harness.live_observe`).

Messages: 1 frame of 64 bytes, and 6 frames as a DCP REQUEST (delimiter, header, type,
service, 2 x 32-byte data). Goal: at least 50% of direct throughput and under 100 us added
p50 latency per message (half the added round trip: a round trip passes the proxy twice).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import zmq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script from anywhere

from bench.common import command_line, record  # noqa: E402
from harness.live.supervisor import ManagedProcess, ReadyLine, free_port  # noqa: E402
from harness.protocols import codec  # noqa: E402

SHAPES = {
    "1 frame (64 B)": [b"m" * 64],
    "6 frames (DCP REQUEST)": codec("dcp").encode("REQUEST", {"service": "echo", "data": [b"d" * 32, b"e" * 32]}),
}
PATHS = ("direct", "proxy plain", "proxy looked-at", "proxy observed")


def peer(*args: str, module: str = "bench.proxy_peers") -> ManagedProcess:
    return ManagedProcess([sys.executable, "-m", module, *args], ready=ReadyLine("READY"),
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def proxied(target: str, path: str) -> tuple[ManagedProcess | None, str]:
    if path == "direct":
        return None, target
    proc = peer("proxy", target, path.split()[1]).start()
    assert proc.ready_match is not None
    return proc, proc.ready_match.string.split()[1]


def results(proc: ManagedProcess, n: int, timeout: float = 120.0) -> list[float]:
    deadline = time.monotonic() + timeout
    while True:
        lines = [ln for ln in proc.output("stdout").splitlines() if ln.startswith("RESULT")]
        if len(lines) >= n:
            return [float(ln.split()[1]) for ln in lines]
        if time.monotonic() > deadline or not proc.running:
            raise RuntimeError(f"sink gave {len(lines)} of {n} results: {proc.tail()}")
        time.sleep(0.01)


def throughput(frames: list[bytes], messages: int, rounds: int) -> dict[str, float]:
    """Messages per second per path (median over rounds, paths interleaved)."""
    rates: dict[str, list[float]] = {p: [] for p in PATHS}
    ctx = zmq.Context()
    try:
        for _ in range(rounds):
            for path in PATHS:
                target = f"tcp://127.0.0.1:{free_port()}"
                with peer("sink", target, str(messages)).start() as sink:
                    proxy, ep = proxied(target, path)
                    try:
                        push = ctx.socket(zmq.PUSH)
                        push.setsockopt(zmq.SNDHWM, 100_000)
                        push.setsockopt(zmq.LINGER, 0)
                        push.connect(ep)
                        for _ in range(messages):
                            push.send_multipart(frames)
                        seconds = results(sink, 1)[0]
                        rates[path].append(messages / seconds)
                        push.close()
                    finally:
                        if proxy is not None:
                            proxy.stop()
    finally:
        ctx.term()
    return {p: statistics.median(v) for p, v in rates.items()}


def latency(frames: list[bytes], roundtrips: int, batch: int = 500) -> dict[str, tuple[float, float]]:
    """(p50, p99) round-trip microseconds per path: the paths take turns, ``batch`` round trips
    at a time, so a change of the machine's load falls on all of them alike."""
    samples: dict[str, list[float]] = {p: [] for p in PATHS}
    ctx = zmq.Context()
    proxies: list[ManagedProcess] = []
    try:
        target = f"tcp://127.0.0.1:{free_port()}"
        with peer("echo", target, module="bench.live_peers").start():
            socks = {}
            for path in PATHS:
                proxy, ep = proxied(target, path)
                if proxy is not None:
                    proxies.append(proxy)
                s = ctx.socket(zmq.DEALER)
                s.setsockopt(zmq.LINGER, 0)
                s.connect(ep)
                socks[path] = s
            for i in range(-1, roundtrips // batch):  # round -1: warm-up
                for path, s in socks.items():
                    for _ in range(batch):
                        t0 = time.perf_counter_ns()
                        s.send_multipart(frames)
                        if not s.poll(5000):
                            raise RuntimeError(f"{path}: no echo within 5 s")
                        s.recv_multipart()
                        if i >= 0:
                            samples[path].append((time.perf_counter_ns() - t0) / 1000)
            for s in socks.values():
                s.close()
    finally:
        for proxy in proxies:
            proxy.stop()
        ctx.term()
    out = {}
    for path, v in samples.items():
        v.sort()
        out[path] = (v[len(v) // 2], v[int(len(v) * 0.99)])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--roundtrips", type=int, default=5_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--section", default="Chaos proxy: throughput and added latency",
                    help="the heading of bench/RESULTS.md the figures replace")
    a = ap.parse_args()
    load_before = os.getloadavg()[0]
    rows = []
    for shape, frames in SHAPES.items():
        rates = throughput(frames, a.messages, a.rounds)
        lat = latency(frames, a.roundtrips)
        d50, d99 = lat["direct"]
        for path in PATHS:
            p50, p99 = lat[path]
            ratio = rates[path] / rates["direct"]
            added = "" if path == "direct" else f"{p50 - d50:+.0f} / {p99 - d99:+.0f}"
            per_pass = "" if path == "direct" else f"{(p50 - d50) / 2:+.0f} / {(p99 - d99) / 2:+.0f}"
            rows.append(f"| {shape} | {path} | {rates[path]:,.0f} | {ratio:.0%} | {p50:.0f} / {p99:.0f} | {added} "
                        f"| {per_pass} |")
            print(rows[-1], flush=True)
    body = "\n".join([
        "| message | path | messages/s | of direct | round trip p50 / p99 (us) | added per round trip p50 / p99 (us) "
        "| added per message p50 / p99 (us) |",
        "|---|---|---|---|---|---|---|",
        *rows,
    ])
    body += (f"\n\nLoad average (1 min) of the shared machine: {load_before:.1f} at the start, "
             f"{os.getloadavg()[0]:.1f} at the end (2 cores).")
    body += ("\n\nThroughput: one PUSH in the bench process to a PULL sink subprocess, median of "
             f"{a.rounds} interleaved rounds of {a.messages:,} messages. Latency: one message in flight, DEALER "
             f"to a ROUTER echo subprocess, {a.roundtrips:,} round trips per path after 500 of warm-up, the paths "
             "taking turns 500 at a time; a round trip passes "
             "the proxy twice, so the added latency of one message is taken as half the added round trip. The "
             "proxy runs in its own process. Goal: at least 50% of direct throughput and under 100 us added p50."
             " The direct rates are bounded by the Python endpoints (pyzmq's send_multipart here, recv_multipart in the sink), not by ZeroMQ: what is measured is whether the proxy keeps up with the traffic a Python harness and its nodes produce, and what it adds to a message's latency.")
    if not a.no_record:
        record(a.section, body, command_line())
    print(body)


if __name__ == "__main__":
    main()
