"""Simulator throughput: simulated message deliveries per wall second for a DCP scenario with
1 broker, 4 workers and 8 clients — every node decoding and encoding for real, probes and
checkers on, the Parquet trace on — next to a bare simpy callback loop measured in the same
run (the floor any simpy-based simulator pays per event).

    .venv/bin/python bench/bench_sim.py [--seconds 20] [--no-record]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import simpy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script from anywhere, like the other benches

from bench.common import command_line, record  # noqa: E402
from harness.composition import run_sim  # noqa: E402
from harness.scenario import Scenario, parse_scenario  # noqa: E402

SCENARIO = """
protocol: dcp
name: bench-sim
duration: {duration}s
nodes:
  broker: {{role: broker, config: {{heartbeat: 250ms}}}}
  workers: {{role: worker, count: 4, config: {{service: echo, behaviour: echo, service_time: 1ms}}}}
  clients: {{role: client, count: 8, config: {{timeout: 2s}}}}
workload:
  - {{nodes: clients, op: request, service: echo, rate: 150/s, from: 100ms, until: {until}s, size: 100}}
check: [exactly-once, metadata-unchanged, one-request-per-worker]
"""


GOAL = 50_000  # deliveries per wall second, nodes encoding/decoding and the trace on


def bench_scenario(seconds: float, name: str = "bench") -> Scenario:
    """The benchmark's scenario for ``seconds`` of virtual time (the workload stops half a
    second before the end, so every request can be answered)."""
    return parse_scenario(SCENARIO.format(duration=seconds, until=seconds - 0.5), name)


def bare_simpy(events: int) -> float:
    """Events per second of a simpy loop whose callbacks do nothing but reschedule."""
    env = simpy.Environment()
    left = [events]

    def tick(_event: object) -> None:
        left[0] -= 1
        if left[0] > 0:
            ev = env.timeout(1)
            ev.callbacks.append(tick)

    first = env.timeout(1)
    first.callbacks.append(tick)
    t0 = time.perf_counter()
    env.run()
    return events / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20, help="virtual seconds to simulate")
    ap.add_argument("--repeat", type=int, default=5, help="runs per configuration (the median is reported)")
    ap.add_argument("--no-record", action="store_true")
    args = ap.parse_args()
    scenario = bench_scenario(args.seconds)
    # One short run first: codecs compiled, Parquet writer and memory warmed up, so that no
    # configuration below pays the process's one-time costs.
    with tempfile.TemporaryDirectory() as tmp:
        run_sim(bench_scenario(1.0, "warm-up"), 1, tmp)
    configs = (("nodes encode/decode, trace on", True, False),
               ("nodes + trace + probes and 3 checkers", True, True),
               ("nodes, trace off, no checkers", False, False))
    runs: dict[str, list[tuple[int, float, float]]] = {label: [] for label, _, _ in configs}
    for _ in range(args.repeat):  # interleaved, so that a slow spell of the machine hits every configuration
        for label, trace_on, checks in configs:
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                c0 = time.process_time()
                r = run_sim(scenario, 1, tmp if trace_on else None, checks=checks)
                cpu = time.process_time() - c0
                wall = time.perf_counter() - t0
            assert r.ok, [v.to_dict() for v in r.failed]
            runs[label].append((r.stats["delivered"], wall, cpu))
    rows = []
    for label, _, _ in configs:
        n, wall, cpu = sorted(runs[label], key=lambda x: x[1])[len(runs[label]) // 2]  # the median run
        rows.append((label, n, wall, n / wall, n / cpu, args.seconds / wall))
    base = bare_simpy(1_000_000)
    lines = ["| DCP, 1 broker, 4 workers, 8 clients | deliveries | wall s | deliveries / wall s | deliveries / CPU s "
             "| virtual s per wall s |", "|---|---|---|---|---|---|"]
    for label, n, wall, rate, cpu_rate, speed in rows:
        lines.append(f"| {label} | {n} | {wall:.2f} | {rate:,.0f} | {cpu_rate:,.0f} | {speed:.2f} |")
    lines.append(f"| bare simpy callback loop (baseline, same run) | 1,000,000 events | | {base:,.0f} events/s | | |")
    ratio = base / rows[0][3]
    n_on, wall_on, n_off, wall_off = rows[0][1], rows[0][2], rows[2][1], rows[2][2]
    on_rate = rows[0][3]
    verdict = "met" if on_rate >= GOAL else f"not met: {on_rate:,.0f} is {100 * on_rate / GOAL:.0f}% of it"
    body = "\n".join(lines) + (
        f"\n\nPer delivery: {1e6 * wall_off / n_off:.1f} us nodes + simulator (trace off), "
        f"{1e6 * (wall_on / n_on - wall_off / n_off):.1f} us trace (on minus off). Each figure is the median "
        f"of {args.repeat} runs (configurations interleaved), after a one-second warm-up run that pays the "
        f"process's one-time costs (codecs compiled, Parquet writer and memory warmed up)."
        f"\n\nOverhead per delivery (nodes + trace) against a bare simpy event: {ratio:.1f}x. "
        f"Goal: at least {GOAL:,} deliveries per wall second with the trace on ({verdict}).")
    print(body)
    if not args.no_record:
        record("Simulator: DCP deliveries per wall second", body, command_line())


if __name__ == "__main__":
    main()
