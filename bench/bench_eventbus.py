"""Event BUS speed.

1. Over real sockets on loopback, events per second from a producer to 10 subscribers:
   a. baseline: a raw pyzmq PUB socket sending the BROADCAST frames of the events itself;
   b. through the reference server (`zmq-harness node eventbus server`, a process of its own):
      a raw DEALER sends PUBs to its collector, it numbers, keeps and broadcasts them;
   c. the same, to 10 reference clients (one live runtime) that decode, apply and deliver each.
   In a and b the same 10 raw SUB sockets receive, in a process of their own; the rate is events
   over the time from the first send to the last event at the last subscriber. Same run, same
   events (100 bytes of data), no high-water-mark drops (HWM 0 everywhere).
2. Simulated events per wall second: scenarios/eventbus/chaos/clean.yaml and hundred-clients.yaml.

    .venv/bin/python bench/bench_eventbus.py [--events 20000] [--no-record]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import random
import subprocess
import sys
import time
from typing import Any, Iterator

import zmq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script from anywhere

from bench.common import command_line, record  # noqa: E402
from harness.composition import run_sim  # noqa: E402
from harness.live.runtime import LiveRuntime  # noqa: E402
from harness.live.supervisor import free_port  # noqa: E402
from harness.protocols import codec  # noqa: E402
from harness.scenario import load_scenario  # noqa: E402
from reference_nodes.eventbus.client import Client  # noqa: E402
from reference_nodes.eventbus.common import uuid4  # noqa: E402

SUBSCRIBERS = 10
C = codec("eventbus")
EVENT = {"topic": "/bench/t", "producer": "bench", "timestamp": "2017-05-04T10:20:30.123Z", "data": b"x" * 100}


def events(name: str, n: int) -> list[list[bytes]]:
    """n distinct events (own UUIDs: a client applies each UUID once), encoded as ``name``."""
    rng = random.Random(n)
    return [C.encode(name, {**EVENT, "sequence": k + 1, "uuid": uuid4(rng)}) for k in range(n)]


def receivers(endpoint: str, n: int, count: int, ready: Any, done: Any) -> None:
    """``count`` SUB sockets in this process; reports the monotonic time the last of n events
    arrived at the last of them (or None on a timeout)."""
    ctx = zmq.Context()
    socks = []
    for _ in range(count):
        s = ctx.socket(zmq.SUB)
        s.setsockopt(zmq.RCVHWM, 0)
        s.setsockopt(zmq.SUBSCRIBE, b"")
        s.connect(endpoint)
        socks.append(s)
    poller = zmq.Poller()
    for s in socks:
        poller.register(s, zmq.POLLIN)
    time.sleep(0.5)  # connected and subscribed
    ready.send(True)
    got = dict.fromkeys(socks, 0)
    left = count * n
    last = None
    while left:
        events = poller.poll(5000)
        if not events:
            break
        for s, _ in events:
            while got[s] < n:
                try:
                    s.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                got[s] += 1
                left -= 1
        last = time.monotonic()
    done.send(last if not left else None)
    for s in socks:
        s.close(0)
    ctx.term()


def start_receivers(endpoint: str, n: int, count: int) -> tuple[Any, Any]:
    ready_r, ready_w = multiprocessing.Pipe(False)
    done_r, done_w = multiprocessing.Pipe(False)
    p = multiprocessing.get_context("fork").Process(target=receivers, args=(endpoint, n, count, ready_w, done_w))
    p.start()
    if not ready_r.poll(20):
        raise RuntimeError("the receivers did not start")
    ready_r.recv()
    return p, done_r


def finish(p: Any, done: Any, t0: float, n: int) -> float:
    last = done.recv() if done.poll(120) else None
    p.join(10)
    if last is None:
        raise RuntimeError("the subscribers did not get every event")
    return n / (last - t0)


def baseline(n: int, count: int = SUBSCRIBERS) -> float:
    """Raw PUB -> ``count`` SUB: the BROADCAST frames, sent by pyzmq directly."""
    ep = f"tcp://127.0.0.1:{free_port()}"
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.SNDHWM, 0)
    pub.bind(ep)
    p, done = start_receivers(ep, n, count)
    frames = events("BROADCAST", n)
    t0 = time.monotonic()
    for f in frames:
        pub.send_multipart(f)
    rate = finish(p, done, t0, n)
    pub.close(0)
    ctx.term()
    return rate


@contextlib.contextmanager
def reference_server() -> Iterator[int]:
    """The reference server as a process of its own, no high-water mark; yields its port P."""
    port = free_port(count=3)
    server = subprocess.Popen([sys.executable, "-m", "harness.cli", "node", "eventbus", "server", "--bind",
                               f"tcp://127.0.0.1:{port}", "--set", "hwm=0"], stdout=subprocess.PIPE, text=True)
    try:
        if not (server.stdout and server.stdout.readline().startswith("READY")):
            raise RuntimeError("the server did not start")
        yield port
    finally:
        server.terminate()
        server.wait(10)


def produce(port: int, n: int, settle_s: float) -> float:
    """Send n PUBs to the collector at P+2 as fast as pyzmq can; returns when the first went out."""
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.SNDHWM, 0)
    dealer.connect(f"tcp://127.0.0.1:{port + 2}")
    frames = events("PUB", n)
    time.sleep(settle_s)  # connected (and the receivers synchronised)
    t0 = time.monotonic()
    for f in frames:
        dealer.send_multipart(f)
    dealer.close(linger=10_000)  # hand everything to the server before the context goes
    ctx.term()
    return t0


def through_server(n: int, count: int = SUBSCRIBERS) -> float:
    """DEALER -> the reference server (its own process) -> ``count`` SUB."""
    with reference_server() as port:
        p, done = start_receivers(f"tcp://127.0.0.1:{port + 1}", n, count)
        t0 = produce(port, n, 0.3)
        return finish(p, done, t0, n)


def to_reference_clients(n: int) -> float:
    """DEALER -> the reference server -> 10 reference clients that apply and deliver each event."""
    rt = LiveRuntime(None, seed=1)
    counts = [0]
    last = [0.0]

    def hook(node: str, action: Any, t: int) -> None:
        if getattr(action, "kind", None) == "event":
            counts[0] += 1
            last[0] = time.monotonic()

    with reference_server() as port:
        try:
            for i in range(SUBSCRIBERS):
                rt.add_node(f"c{i}", Client, role="client", config={"connect": f"tcp://127.0.0.1:{port}",
                                                                     "resync_ms": 0})
            rt.on_action(hook)
            rt.start()
            t0 = produce(port, n, 1.0)
            deadline = time.monotonic() + 120
            while counts[0] < SUBSCRIBERS * n and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            rt.stop()
    if counts[0] < SUBSCRIBERS * n:
        raise RuntimeError(f"the clients applied {counts[0]} of {SUBSCRIBERS * n} events")
    return n / (last[0] - t0)


def sim_speed(path: str) -> tuple[float, float, int]:
    """(events per wall second, deliveries per wall second, events) of one seed, checks on."""
    scenario = load_scenario(path)
    t0 = time.perf_counter()
    r = run_sim(scenario, 1)
    wall = time.perf_counter() - t0
    assert r.ok, [v.detail for v in r.failed]
    events = int(next(v for v in r.verdicts if v.check == "complete-delivery").detail.split()[0])
    return events / wall, r.stats["delivered"] / wall, events


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    load = os.getloadavg()[0]
    raw = baseline(a.events)
    server = through_server(a.events)
    raw1 = baseline(a.events, 1)
    server1 = through_server(a.events, 1)
    clients = to_reference_clients(a.events // 4)
    sims = {name: sim_speed(f"scenarios/eventbus/chaos/{name}.yaml") for name in ("clean", "hundred-clients")}
    body = (
        f"| path (live, loopback) | events / s |\n|---|---|\n"
        f"| raw pyzmq PUB -> {SUBSCRIBERS} SUB (baseline, same run) | {raw:,.0f} |\n"
        f"| DEALER -> reference server -> {SUBSCRIBERS} SUB | {server:,.0f} |\n"
        f"| DEALER -> reference server -> {SUBSCRIBERS} reference clients (applied, delivered) | {clients:,.0f} |\n"
        f"| raw pyzmq PUB -> 1 SUB | {raw1:,.0f} |\n"
        f"| DEALER -> reference server -> 1 SUB | {server1:,.0f} |\n\n"
        f"Reference server / raw: {server / raw:.0%} with {SUBSCRIBERS} subscribers (goal: at least 50%), "
        f"{server1 / raw1:.0%} with one, where the receiving process does not set the pace as much and the "
        "server's own cost per event (decode, keep, encode the sequence, send) shows. Load average at the start: "
        f"{load:.1f} (the machine is shared: compare the rows of one run, not runs). "
        f"{a.events:,} events of 100 bytes of "
        f"data ({a.events // 4:,} to the reference clients), 6 frames each; the subscribers in a process of their "
        "own, the server in another (`zmq-harness node eventbus server --set hwm=0`), the reference clients in "
        "one live runtime.\n\n"
        + "\n".join(f"Simulation of scenarios/eventbus/chaos/{name}.yaml (seed 1, checkers on, trace off): "
                    f"{ev:,.0f} events per wall second ({n} events, {dl:,.0f} deliveries per wall second)."
                    for name, (ev, dl, n) in sims.items())
    )
    print(body)
    if not a.no_record:
        record("Event BUS: events through the server, simulation speed", body, command_line())


if __name__ == "__main__":
    main()
