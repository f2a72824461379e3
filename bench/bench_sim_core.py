"""Micro-benchmark of the simulator core: simulated message deliveries per wall second.

One ROUTER echo server and N DEALER clients ping-ponging (each keeps ``window`` requests
outstanding), default latency, node handling and tracing (frames recorded) included.

    .venv/bin/python bench/bench_sim_core.py                  # traced, 8 clients
    .venv/bin/python bench/bench_sim_core.py --no-trace
    .venv/bin/python bench/bench_sim_core.py --profile        # cProfile top functions
    .venv/bin/python bench/bench_sim_core.py --record         # also write bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from harness.node import NS_PER_S  # noqa: E402
from harness.sim import Simulation  # noqa: E402
from harness.trace import RunInfo, TraceWriter  # noqa: E402
from tests.sim.sim_test_nodes import EchoServer, PingClient  # noqa: E402


def run(seconds: float, clients: int, window: int, traced: bool,
        deliver: bool) -> tuple[int, float, float, int]:
    """(deliveries, wall seconds, CPU seconds of this process, trace rows)."""
    with tempfile.TemporaryDirectory() as tmp:
        info = RunInfo("bench/1", 1, "bench", "echo")
        trace = TraceWriter(os.path.join(tmp, "bench.parquet"), info) if traced else None
        sim = Simulation(1, trace)
        sim.add_node("server", EchoServer, role="echo", config={"durable": False})
        for i in range(clients):
            sim.add_node(f"client-{i}", PingClient, role="client",
                         config={"endpoints": ["tcp://server:5555"], "count": 10**12,
                                 "window": window, "deliver": deliver})
        start, cpu = time.perf_counter(), time.process_time()
        sim.run(int(seconds * NS_PER_S))
        rows = 0
        if trace is not None:
            trace.close()
            rows = trace.rows_written
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return sim.stats.delivered, wall, cpu, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="virtual seconds to simulate")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--window", type=int, default=4, help="requests outstanding per client")
    ap.add_argument("--no-trace", action="store_true")
    ap.add_argument("--deliver", action="store_true", help="clients also Deliver each reply (+1 row)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--record", action="store_true", help="write the figures to bench/RESULTS.md")
    args = ap.parse_args()
    if args.profile:
        import cProfile
        import pstats
        cProfile.runctx("run(args.seconds, args.clients, args.window, not args.no_trace, args.deliver)",
                        globals(), {"args": args, "run": run}, "/tmp/bench_sim_core.prof")
        pstats.Stats("/tmp/bench_sim_core.prof").sort_stats("tottime").print_stats(25)
        return
    delivered, wall, cpu, rows = run(args.seconds, args.clients, args.window, not args.no_trace, args.deliver)
    config = (f"1 ROUTER echo + {args.clients} DEALER clients, window {args.window}, "
              f"trace {'off' if args.no_trace else 'on (frames recorded)'}"
              f"{', Deliver per reply' if args.deliver else ''}")
    # CPU time is the steadier figure on a shared machine; wall time is what a user waits.
    body = ("| configuration | deliveries | trace rows | wall s | CPU s | deliveries/wall s | deliveries/CPU s |\n"
            "|---|---|---|---|---|---|---|\n"
            f"| {config} | {delivered} | {rows} | {wall:.2f} | {cpu:.2f} | {delivered / wall:,.0f} "
            f"| {delivered / cpu:,.0f} |")
    print(body)
    if args.record:
        from bench.common import command_line, record
        record("Simulator core: ROUTER echo deliveries per wall second", body, command_line())


if __name__ == "__main__":
    main()
