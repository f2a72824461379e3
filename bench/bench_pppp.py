"""PPPP speed.

1. Over real sockets on loopback: messages per second from one reference publisher to ten
   reference subscribers, every message delivered to all ten applications and ACKed (the
   publisher let it go), all eleven nodes in one live runtime, at most ``--window`` messages in
   flight; next to a raw pyzmq PUB -> 10 SUB stream of the same messages (channel frame, 8-byte
   number, 64-byte payload) measured in the same run, the ten SUB sockets read by one thread.
2. Simulated messages per wall second: the same topology in the simulator (trace on, every PPPP
   check on), and scenarios/pppp/chaos/lossy.yaml.

    .venv/bin/python bench/bench_pppp.py [--messages 5000] [--subscribers 10] [--rounds 3] [--no-record]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from typing import Callable, TypeVar

import zmq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script from anywhere

from bench.common import command_line, record  # noqa: E402
from harness.composition import run_sim, workload_streams  # noqa: E402
from harness.live.runtime import LiveRuntime  # noqa: E402
from harness.live.supervisor import free_port  # noqa: E402
from harness.node import Deliver, Note, Send  # noqa: E402
from harness.scenario import load_scenario, parse_scenario  # noqa: E402
from reference_nodes.pppp.publisher import Publisher  # noqa: E402
from reference_nodes.pppp.subscriber import Subscriber  # noqa: E402

PAYLOAD = b"x" * 64
T = TypeVar("T")
TIMES = {"first_idle_ms": 50, "idle_ms": 500, "liveness": 3}


def raw_pubsub(n: int, subscribers: int) -> float:
    """Messages per second of a bare PUB -> N SUB stream, each message read by every SUB."""
    ctx = zmq.Context()
    ep = f"tcp://127.0.0.1:{free_port()}"
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.SNDHWM, 0)
    pub.bind(ep)
    subs = []
    for _ in range(subscribers):
        s = ctx.socket(zmq.SUB)
        s.setsockopt(zmq.RCVHWM, 0)
        s.connect(ep)
        s.setsockopt(zmq.SUBSCRIBE, b"bench")
        subs.append(s)
    time.sleep(0.5)
    got = [0]
    poller = zmq.Poller()
    for s in subs:
        poller.register(s, zmq.POLLIN)

    def reader() -> None:
        want = n * subscribers
        while got[0] < want:
            ready = poller.poll(2000)
            if not ready:
                return
            for s, _ in ready:
                while True:
                    try:
                        s.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    got[0] += 1

    t = threading.Thread(target=reader)
    t.start()
    t0 = time.perf_counter()
    for k in range(n):
        pub.send_multipart([b"bench", k.to_bytes(8, "big"), PAYLOAD])
    t.join(60)
    rate = got[0] / subscribers / (time.perf_counter() - t0)
    for s in (pub, *subs):
        s.close(0)
    ctx.term()
    return rate


def live_pppp(n: int, subscribers: int, window: int, burst: bool = True) -> tuple[float, float]:
    """(messages/s delivered to every subscriber's application, messages/s ACKed by all).

    With ``burst`` the bench thread, once half of the window is free, hands the publisher what
    it has room for in one ``batch`` command, as an application with a queue of messages would
    (refilling at every completed message made nearly every command a single message); without
    ``burst`` one command per message (the figure before bursts). It sleeps on a condition the
    loop thread signals only when it has something to do, rather than polling the counters."""
    ep = f"tcp://127.0.0.1:{free_port()}"
    rt = LiveRuntime(None, seed=1, record_deliveries=False)
    rt.add_node("publisher", Publisher, role="publisher", config={**TIMES, "bind": [ep]})
    names = [f"sub.{i}" for i in range(subscribers)]
    for name in names:
        rt.add_node(name, Subscriber, role="subscriber", config={**TIMES, "connect": ep, "identity": name.encode(),
                                                                 "channels": ["bench"]})
    copies = [0] * (n + 1)  # per message number: how many applications have it
    state = {"sent": 0, "complete": 0, "released": 0}  # handed over; every application has; let go
    low = window // 2  # refill once half the window is free
    changed = threading.Condition()

    def hook(node: str, action, t: int) -> None:
        # called for every action: by class first (getattr with a default on a Send, which has
        # no kind, raises and catches inside; that was 5% of the loop thread)
        cls = action.__class__
        if cls is Send:
            return
        kind = action.kind if cls is Deliver or cls is Note else None
        if kind == "message":
            seq = action.data["seq"]
            copies[seq] += 1
            if copies[seq] == subscribers:
                # in order per subscriber, so the messages complete in order too
                state["complete"] += 1
                done = state["complete"]
                if done == n or not burst or state["sent"] - done == low:  # what the bench thread waits for
                    with changed:
                        changed.notify()
        elif kind == "released":
            state["released"] += len(action.data["seqs"])
            if state["released"] >= n:
                with changed:
                    changed.notify()

    rt.on_action(hook)
    rt.start()
    try:
        deadline = time.monotonic() + 10
        while rt.call(lambda: len(rt.node("publisher").subs)) < subscribers and time.monotonic() < deadline:
            time.sleep(0.05)  # every subscriber's SUBSCRIBE is in
        t0 = time.monotonic()
        limit = t0 + 120
        with changed:
            while state["sent"] < n and time.monotonic() < limit:
                in_flight = state["sent"] - state["complete"]
                if burst and in_flight > low or in_flight >= window:
                    changed.wait(0.1 if burst else 1.0)
                    continue
                room = min(window - in_flight, n - state["sent"]) if burst else 1
                state["sent"] += room  # before the command: the loop thread's hook compares with it
                rt.command(0, "publisher", {"op": "publish", "channel": b"bench", "batch": [PAYLOAD] * room})
            while state["complete"] < n and time.monotonic() < limit:
                changed.wait(1.0)
            t_delivered = time.monotonic() - t0
            while state["released"] < n and time.monotonic() < limit:
                changed.wait(1.0)
            t_acked = time.monotonic() - t0
    finally:
        rt.stop()
    return state["complete"] / t_delivered, state["released"] / t_acked


BENCH = """protocol: pppp
name: pppp-bench
duration: 10s
settle: 1s
nodes:
  publisher: {role: publisher, config: {idle: 500ms, first_idle: 50ms, liveness: 3}}
  subs: {role: subscriber, count: 10, config: {channels: [bench]}}
workload:
  - {nodes: publisher, op: publish, rate: 200/s, from: 500ms, until: 10s, channel: bench, size: 64}
"""


def cpu_per_message(fn: Callable[[], T], n: int) -> tuple[T, float]:
    """fn()'s result and the process's CPU time per message (us) while it ran."""
    c0 = time.process_time()
    out = fn()
    return out, (time.process_time() - c0) / n * 1e6


def sim_speed(text: str | None, path: str | None, checks: bool) -> tuple[float, float, float]:
    """(published messages, deliveries, simulated seconds) per wall second, median of 3."""
    scenario = parse_scenario(text, "bench.yaml") if text else load_scenario(path or "")
    runs = []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            r = run_sim(scenario, 1, d if checks else None, checks=checks)
            wall = time.perf_counter() - t0
        assert r.ok or not checks, [v.detail for v in r.failed]
        count = sum(1 for stream in workload_streams(scenario, 1) for _ in stream)  # publish operations
        runs.append((count / wall, r.stats["delivered"] / wall, (scenario.duration_ns + scenario.settle_ns) / 1e9 / wall))
    return tuple(statistics.median(x[i] for x in runs) for i in range(3))  # type: ignore[return-value]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=5000)
    ap.add_argument("--subscribers", type=int, default=10)
    ap.add_argument("--window", type=int, default=200, help="messages in flight at most")
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of raw, PPPP and PPPP without bursts")
    a = ap.parse_args()
    n, subs = a.messages, a.subscribers
    # Interleaved rounds, so that the three see the same load on a shared machine: each figure
    # is a median over rounds, and the ratio the median of each round's own ratio.
    rounds = []
    for _ in range(a.rounds):
        raw_r, raw_cpu = cpu_per_message(lambda: raw_pubsub(n, subs), n)  # the same count as PPPP
        live_r, live_cpu = cpu_per_message(lambda: live_pppp(n, subs, a.window), n)
        single_r, _ = cpu_per_message(lambda: live_pppp(n, subs, a.window, burst=False)[0], n)
        rounds.append((raw_r, live_r[0], live_r[1], single_r, raw_cpu, live_cpu, live_r[0] / raw_r, single_r / raw_r))
        print(f"round: raw {raw_r:,.0f}/s ({raw_cpu:.0f} us CPU/msg), PPPP {live_r[0]:,.0f}/s ({live_cpu:.0f} us CPU/msg), "
              f"{live_r[0] / raw_r:.1%}; without bursts {single_r:,.0f}/s", flush=True)
    raw, to_apps, acked, single, raw_cpu, live_cpu, ratio, single_ratio = (
        statistics.median(r[i] for r in rounds) for i in range(8))
    pub_c, dlv_c, vs_c = sim_speed(BENCH, None, True)
    pub_n, dlv_n, vs_n = sim_speed(BENCH, None, False)
    pub_l, dlv_l, vs_l = sim_speed(None, "scenarios/pppp/chaos/lossy.yaml", True)
    body = (
        f"| path, 1 publisher -> {a.subscribers} subscribers, 64-byte payloads | messages / s |\n|---|---|\n"
        f"| raw pyzmq PUB -> {a.subscribers} SUB, one reader thread (baseline, same run) | {raw:,.0f} |\n"
        f"| reference publisher -> every subscriber's application (live, loopback) | {to_apps:,.0f} |\n"
        f"| ... and ACKed by all of them (the publisher let the message go) | {acked:,.0f} |\n"
        f"| reference publisher -> every application, one publish command per message (no bursts) "
        f"| {single:,.0f} |\n\n"
        f"PPPP / raw: {ratio:.1%} (goal: at least 40%); without bursts {single_ratio:.1%}. Each figure is the "
        f"median of {a.rounds} interleaved rounds (raw, PPPP, PPPP without bursts), the ratios the median of each "
        f"round's own; the PPPP runs publish {a.messages} messages with at most {a.window} in flight, all eleven "
        f"nodes in one live runtime (one Python thread), the bench thread handing the publisher what the window "
        f"has room for in one command once half of it is free; raw PUB/SUB sends the same {a.messages} messages, "
        f"timed to the last delivery. CPU time of the whole process per message (every thread, libzmq's I/O "
        f"threads included; less sensitive to the machine's load than the rates): raw {raw_cpu:.0f} us, "
        f"PPPP {live_cpu:.0f} us.\n\n"
        f"| simulation | published messages / wall s | deliveries / wall s | simulated s / wall s |\n"
        f"|---|---|---|---|\n"
        f"| 1 publisher, 10 subscribers, 200 messages/s, trace and every PPPP check on | {pub_c:,.0f} | {dlv_c:,.0f} "
        f"| {vs_c:.2f} |\n"
        f"| the same, trace and checks off | {pub_n:,.0f} | {dlv_n:,.0f} | {vs_n:.2f} |\n"
        f"| scenarios/pppp/chaos/lossy.yaml (4 subscribers, loss, trace and checks on) | {pub_l:,.0f} | "
        f"{dlv_l:,.0f} | {vs_l:.2f} |\n\n"
        f"Deliveries count every message a node receives (PUBLISH, ACK/NACK, HEARTBEAT, ...)."
    )
    print(body)
    if not a.no_record:
        record("PPPP: messages to 10 subscribers with ACKs, simulation speed", body, command_line())


if __name__ == "__main__":
    main()
