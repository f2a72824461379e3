"""Linearizability checker speed on key-value histories of 1k, 10k and 100k operations.

    .venv/bin/python bench/bench_linearizability.py [--repeat 5] [--no-record]
        [--jepsen-etcd PATH]   # a copy of anishathalye/porcupine (porcupine_test.go and
                               # test_data/jepsen): also check its Jepsen etcd logs against the
                               # answers its tests expect

Histories come from `harness.checkers.history_gen` (clients running one operation at a time on
a correct atomic store; latencies exponential around 2 ms, think time 0.5 ms, 2% of operations
10x slower; values from range(5), as Jepsen's cas-register test, or unique): the "realistic" rows have the
concurrency of a chaos scenario (8 clients, several keys, 1% timeouts); the "stress" rows put
16 clients on one key, or 10% timeouts. A non-linearizable row adds a stale read near the end
and times the check with the shrinking to a minimal counterexample. Goal: a 10,000-operation
history checked in under a second.

Each figure is the median wall time of ``--repeat`` runs (CPU time: the minimum), after one
warm-up run; the machine is shared, so CPU time is the steadier figure.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script from anywhere

from bench.common import command_line, record  # noqa: E402
from harness.checkers.history_gen import atomic_kv_history  # noqa: E402
from harness.checkers.linearizability import Result, check  # noqa: E402
from harness.checkers.models import Register  # noqa: E402

ROWS = [  # (kind, operations, clients, keys, info rate, values)
    ("realistic", 1_000, 8, 4, 0.01, 5),
    ("realistic", 10_000, 8, 4, 0.01, 5),
    ("realistic", 10_000, 8, 1, 0.01, 5),
    ("realistic", 10_000, 8, 4, 0.01, 10**6),
    ("realistic", 100_000, 8, 8, 0.01, 5),
    ("stress", 10_000, 16, 1, 0.0, 5),
    ("stress", 10_000, 16, 1, 0.0, 10**6),
    ("stress", 10_000, 8, 1, 0.10, 5),
    ("stress", 10_000, 8, 4, 0.30, 5),
]


def stale_read(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history with a stale read of key k0 after its last operation."""
    last = max(h["return"] or h["invoke"] for h in history)
    extra = [("put", 1001, last + 1_000), ("put", 1002, last + 3_000), ("get", 1001, last + 5_000)]
    for f, v, t in extra:
        inp: dict[str, Any] = {"key": "k0"} if f == "get" else {"key": "k0", "value": v}
        history.append({"process": "z", "f": f, "input": inp, "invoke": t, "return": t + 1_000,
                        "output": v if f == "get" else None})
    return history


def timed(history: list[dict[str, Any]], repeat: int, model: Any = None) -> tuple[Result, float, float]:
    check(history, model)  # warm-up
    walls, cpus = [], []
    result = None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        result = check(history, model)
        cpus.append(time.process_time() - c)
        walls.append(time.perf_counter() - w)
    assert result is not None
    return result, statistics.median(walls), min(cpus)


def outcome(r: Result) -> str:
    if r.ok:
        return "linearizable"
    if r.ok is None:
        return "unknown"
    cx = r.counterexample
    assert cx is not None
    return f"not linearizable: {len(cx.ops)}-op counterexample{' (minimal)' if cx.minimal else ''}"


def jepsen_etcd(checkout: Path, repeat: int) -> str:
    """Porcupine's Jepsen etcd logs, with the answers its own tests expect."""
    tests = (checkout / "porcupine_test.go").read_text()
    expected = {int(n): v == "true" for n, v in re.findall(r"checkJepsen\(t, (\d+), (true|false)\)", tests)}
    line = re.compile(r"^INFO\s+jepsen\.util\s+-\s+(\d+)\s+:(invoke|ok|fail|info)\s+:(read|write|cas)\s+(.*)$")
    total_wall = total_cpu = 0.0
    mismatches = minimal = failing = 0
    for n in sorted(expected):
        events = []
        for i, text in enumerate((checkout / f"test_data/jepsen/etcd_{n:03d}.log").read_text().splitlines()):
            m = line.match(text)
            if not m:
                continue
            p, kind, f, value = int(m[1]), m[2], m[3], m[4]
            if kind == "invoke":
                inp = {} if f == "read" else {"value": int(value)} if f == "write" else \
                    dict(zip(("expected", "new"), map(int, value.strip("[]").split())))
                events.append({"process": p, "type": "invoke", "f": {"read": "get", "write": "put"}.get(f, f),
                               "input": inp, "time": i})
            elif kind == "ok":
                out = (None if value == "nil" else int(value)) if f == "read" else True if f == "cas" else None
                events.append({"process": p, "type": "ok", "output": out, "time": i})
            elif kind == "fail" and f == "cas":  # Jepsen's failed cas: it returned false
                events.append({"process": p, "type": "ok", "output": False, "time": i})
            else:  # info, or a read that timed out: outcome unknown
                events.append({"process": p, "type": "info", "time": i})
        result, wall, cpu = timed(events, repeat, Register())
        total_wall += wall
        total_cpu += cpu
        mismatches += result.ok is not expected[n]
        if result.ok is False:
            failing += 1
            minimal += bool(result.counterexample and result.counterexample.minimal)
    return (f"Porcupine's Jepsen etcd logs (`test_data/jepsen` of a copy of anishathalye/porcupine named "
            f"`{checkout.name}`, not part of this repository; {len(expected)} histories of about 150-400 events, "
            f"5-20 processes): "
            f"{mismatches} answers differ from Porcupine's; {total_wall:.2f} s wall, {total_cpu:.2f} s CPU in all, "
            f"shrinking included; {minimal} of {failing} counterexamples minimal.")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--jepsen-etcd", type=Path, help="a checkout of anishathalye/porcupine")
    args = ap.parse_args()
    lines = ["| history | operations | clients | keys | timeouts | values | result | model steps | wall s | CPU s "
             "| ops / CPU s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    cases = [(kind, n, c, k, i, v, False) for kind, n, c, k, i, v in ROWS] + [("stale read", 10_000, 8, 4, 0.01, 5, True)]
    goal = []
    load = os.getloadavg()[0]
    for kind, n, clients, keys, info, values, stale in cases:
        history = atomic_kv_history(random.Random(1), n, clients=clients, keys=keys, info_rate=info, values=values)
        if stale:
            history = stale_read(history)
        repeat = 1 if n >= 100_000 else args.repeat
        result, wall, cpu = timed(history, repeat)
        shown = "unique" if values > n else f"{values}"
        row = (f"| {kind} | {len(history):,} | {clients} | {keys} | {info:.0%} | {shown} | {outcome(result)} | {result.steps:,} "
               f"| {wall:.3f} | {cpu:.3f} | {len(history) / cpu:,.0f} |")
        print(row, flush=True)
        lines.append(row)
        if kind == "realistic" and n == 10_000:
            goal.append((wall, cpu))
    body = "\n".join(lines) + "\n\n"
    body += ("Histories from `harness.checkers.history_gen.atomic_kv_history` (seed 1): clients run one "
             "operation at a time on a correct atomic store, latency exponential around 2 ms (2% ten times "
             "slower), think time 0.5 ms, values from range(5) (or unique), 45% get / 30% put / 20% cas / 5% delete; "
             "timeouts are info operations that took effect or not. The stale-read row adds put 1001, put 1002, "
             "get -> 1001 at the end of key k0 and includes shrinking to the counterexample. Median wall time of "
             f"{args.repeat} runs after a warm-up (one run for 100k), minimum CPU time. Load average "
             f"when the run started: {load:.1f} on {os.cpu_count()} cores (a shared machine: wall times "
             f"stretch with it, CPU times much less).\n\n"
             f"Goal: a 10,000-operation history in under a second: "
             f"{'met' if max(c for _, c in goal) < 1 else 'NOT met'} in CPU time for the realistic rows "
             f"({', '.join(f'{c:.2f} s' for _, c in goal)}); wall time {', '.join(f'{w:.2f} s' for w, _ in goal)} "
             f"({'under' if max(w for w, _ in goal) < 1 else 'not all under'} a second on this loaded machine). "
             f"What costs is the number of operations in flight on one key: 16 clients writing a handful of "
             f"values to a single key take seconds (the stress row); with unique values the value-flow check "
             f"keeps that fast.\n")
    if args.jepsen_etcd:
        note = jepsen_etcd(args.jepsen_etcd, 1)
        print(note)
        body += "\n" + note + "\n"
    if not args.no_record:
        record("Linearizability checker", body, command_line())


if __name__ == "__main__":
    main()
