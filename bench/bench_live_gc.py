"""Full garbage collections during a live run in a big harness process, in three modes:
``frozen``, the runtime's default (the process's heap frozen while the run's loop runs,
`harness.live.collector_time.frozen_heap`, and a collection's CPU time inside a handler not
counted as the node's, `CollectorTime`); ``not frozen`` (only the latter); ``neither`` (the
runtime before both: a collection inside a handler was the node's own time).

Each run is a fresh process that first stages a long test session's heap: ``--heap`` small
containers, collected once (the collector's long-lived count), then 30% more that survive, and a
full collection made due: the collector runs one when generation 1 was collected more than 10
times since the last full one and the objects added since exceed a quarter of what it kept.
Automatic collections stay off until ``--due`` seconds into the live run of ``--file``
(in-process reference nodes); the next one, wherever an allocation crosses the threshold (most
likely inside a node's handler), is then a full one, as at some moment of a long session. With
the heap frozen it walks only what the run made. The run records every collection of the
process while its loop runs: how many were full, the longest, their sum, and the run's stall
figures (how late the loop fired a node's timer). The modes take turns, ``--rounds`` rounds.

Needs CPython's generational collector as in 3.11-3.13 (thresholds, the long-lived count).

    .venv/bin/python bench/bench_live_gc.py [--heap 2000000] [--rounds 3] [--due 2] [--file F]

Goal: in the default mode, no collection during the run holds the loop more than a few ms, and
no verdict is a false alarm.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script from anywhere

from bench.common import command_line, record  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r'''
import contextlib, gc, json, sys, tempfile, threading, time
heap_n, file, mode, due_s = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
import harness.live.loop as loop
from harness.composition import run_live
from harness.scenario import load_scenario
scenario = load_scenario(file)
heap = [[i] for i in range(heap_n)]
gc.collect()
kept = len(gc.get_objects(2))  # the collector's long-lived count: the heap and what the process imported
gc.disable()  # (else a full collection comes while they are made, and the count starts again)
pending = [[i] for i in range(kept * 3 // 10)]  # more than a quarter of it, not collected yet
# The pending objects long-lived (promoted by generation-1 collections): a full collection is
# due once generation 1 was collected more than its threshold of 10 times since the last full one.
def generation_1_collections():
    for _ in range(gc.get_threshold()[2] + 1):
        gc.collect(1)

generation_1_collections()

def make_due():
    """``due_s`` into the run: the next automatic collection is a full one, as at some moment of a
    long session (again, as `gc.freeze` starts the count of generation-1 collections afresh:
    these walk only what the run made since, a few ms on the timer's thread in every mode). It
    comes where an allocation next crosses the threshold, most likely inside a node's handler."""
    generation_1_collections()
    gc.enable()

heap_while_running = loop.frozen_heap if mode == "frozen" else contextlib.nullcontext
if mode == "neither":  # the runtime before: a collection inside a handler counted as the node's time
    class Uncounted(loop.CollectorTime):
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            pass
    loop.CollectorTime = Uncounted

@contextlib.contextmanager
def full_collection_due():
    """Entered on the loop thread as it begins: the full collection is made due ``due_s`` later."""
    timer = threading.Timer(due_s, make_due)
    with heap_while_running() as hold:
        running[0] = True
        timer.start()
        try:
            yield hold
        finally:
            timer.cancel()
            running[0] = False

loop.frozen_heap = full_collection_due  # (entered on the loop thread as it begins, left as it ends)
pauses, began, running = [], {}, [False]
def on_gc(phase, info):
    me = threading.get_ident()
    if phase == "start":
        began[me] = time.perf_counter_ns()
    elif me in began and running[0]:
        pauses.append((info["generation"], time.perf_counter_ns() - began.pop(me)))
gc.callbacks.append(on_gc)
result = run_live(scenario, 1, tempfile.mkdtemp())
gc.callbacks.remove(on_gc)
full = [ns for gen, ns in pauses if gen == 2]
print(json.dumps({"ok": result.ok, "collections": len(pauses), "full": len(full),
                  "full_max_ms": max(full, default=0) / 1e6, "full_sum_ms": sum(full) / 1e6,
                  "any_max_ms": max((ns for _, ns in pauses), default=0) / 1e6,
                  "pauses": sorted(((gen, round(ns / 1e6, 1)) for gen, ns in pauses), key=lambda p: -p[1])[:4],
                  "stalls": result.stats.get("stalls", {}), "failed": [v.check for v in result.failed]}))
'''

MODES = ("frozen", "not frozen", "neither")


def one(heap: int, file: str, mode: str, due_s: float) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(heap), file, mode, str(due_s)], capture_output=True,
                         text=True, cwd=ROOT, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"the {mode} run failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--heap", type=int, default=2_000_000, help="small containers the session holds (default 2M)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the three modes")
    ap.add_argument("--file", default="scenarios/pppp/chaos/lossy.yaml")
    ap.add_argument("--due", type=float, default=2.0, help="seconds into the run a full collection is made due")
    ap.add_argument("--no-record", action="store_true", help="print only; leave bench/RESULTS.md alone")
    a = ap.parse_args()
    rows = []
    began = time.monotonic()
    for i in range(a.rounds):
        for mode in (MODES if i % 2 == 0 else MODES[::-1]):  # (alternating: no mode always first)
            r = one(a.heap, a.file, mode, a.due)
            rows.append((mode, r))
            print(mode, json.dumps(r), flush=True)
    lines = ["| mode | full collections | longest (ms) | their sum (ms) | longest of any (ms) | stalls | "
             "worst stall (ms) | verdict |", "|---|---|---|---|---|---|---|---|"]
    for mode, r in rows:
        st = r["stalls"]
        verdict = "pass" if r["ok"] else "fail: " + ", ".join(r["failed"])
        lines.append(f"| {mode} | {r['full']} | {r['full_max_ms']:.1f} | {r['full_sum_ms']:.1f} | "
                     f"{r['any_max_ms']:.1f} | {st.get('count', '-')} | {st.get('worst_ms', '-')} | {verdict} |")
    body = "\n".join(lines) + (
        f"\n\nModes: frozen, the runtime's default (the heap frozen while the loop runs, and a collection's "
        f"CPU time inside a handler not the node's); not frozen (only the latter); neither (the runtime before). "
        f"{a.rounds} rounds of the three modes, {time.monotonic() - began:.0f} s in all. Each run is a fresh "
        f"process holding {a.heap:,} small containers plus 30% more not yet collected (a long test "
        f"session) and a full collection due from {a.due:g} s into the run, running `{a.file}` live with "
        "in-process reference nodes, seed 1. The collections counted are the process's, on any thread, while "
        "the run's loop runs.")
    print(body)
    if not a.no_record:
        record("Live: full garbage collections of a big harness process during a run", body, command_line())


if __name__ == "__main__":
    main()
