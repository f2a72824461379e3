"""Raft speed.

1. Simulated seconds per wall second for a 5-peer cluster (election timeouts 200-300 ms,
   heartbeat 70 ms) under a steady load of 3 key-value clients: trace off, trace on, and with
   the probes and every Raft checker (trace off).
2. Time from a leader crash to the next leader (the first ``role`` note saying ``leader``
   after the crash), distribution over N seeds, 3 and 5 peers, no restart of the crashed one.
3. Over real sockets on loopback: committed key-value updates per second through a 3-peer
   reference cluster (`LiveRuntime`, C clients each with one update in flight), next to a raw
   pyzmq ROUTER/DEALER round trip with C requests in flight, measured in the same run.

    .venv/bin/python bench/bench_raft.py [--seeds 1000] [--seconds 30] [--live-seconds 5] [--no-record]
    .venv/bin/python bench/bench_raft.py --sim-only [--repeat 3] [--seconds 30]   # part 1 only, printed

``--sim-only`` measures part 1 alone (best CPU time of ``--repeat`` runs per configuration) and
records nothing: the quick before/after comparison of a change to the simulator's hot path.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

import zmq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script from anywhere

from bench.common import command_line, record  # noqa: E402
from harness.composition import run_sim  # noqa: E402
from harness.live.runtime import LiveRuntime  # noqa: E402
from harness.live.supervisor import free_port  # noqa: E402
from harness.node import Deliver, Note  # noqa: E402
from harness.scenario import parse_scenario  # noqa: E402
from reference_nodes.raft.client import Client  # noqa: E402
from reference_nodes.raft.peer import Peer  # noqa: E402

LOAD = """
protocol: raft
name: bench-raft-load
duration: {seconds}s
nodes:
  peers: {{role: peer, count: 5}}
  clients: {{role: client, count: 3}}
workload:
  - {{nodes: clients, op: put, rate: 5/s, from: 500ms, until: {until}s}}
  - {{nodes: clients, op: get, rate: 3/s, from: 500ms, until: {until}s}}
  - {{nodes: clients, op: cas, rate: 2/s, from: 500ms, until: {until}s}}
"""

CRASH = """
protocol: raft
name: bench-raft-leader-crash
duration: 3s
nodes:
  peers: {{role: peer, count: {peers}}}
faults:
  - {{at: 1s, crash: leader}}
check: [election-safety]
"""


def sim_speed(seconds: int, repeat: int = 1) -> list[tuple[str, float, float, float, int]]:
    """(configuration, wall s, simulated s per wall s, simulated s per CPU s, messages sent);
    with ``repeat`` > 1 the run of least CPU time of each configuration (the machine is shared)."""
    sc = parse_scenario(LOAD.format(seconds=seconds, until=seconds - 1), "bench.yaml")
    run_sim(parse_scenario(LOAD.format(seconds=2, until=1), "warmup.yaml"), 1, checks=False)
    out = []
    with tempfile.TemporaryDirectory() as d:
        for label, kw in (("trace off, no checkers", {"checks": False}),
                          ("trace on, no checkers", {"checks": False, "out_dir": d}),
                          ("trace off, probes + every Raft checker", {"checks": True})):
            runs = []
            for _ in range(repeat):
                t0, c0 = time.perf_counter(), time.process_time()
                r = run_sim(sc, 1, **kw)
                runs.append((time.process_time() - c0, time.perf_counter() - t0, r.stats["sent"]))
            cpu, wall, sent = min(runs)
            out.append((label, wall, seconds / wall, seconds / cpu, sent))
    return out


ROLE_LOG: list[tuple[int, str, str]] = []  # (time, node, role)


class RecordingPeer(Peer):
    """The reference peer, with its role notes copied to ROLE_LOG (the bench's own probe)."""

    def _log(self, actions: list[Any], now: int) -> list[Any]:
        for a in actions:
            if isinstance(a, Note) and a.kind == "role":
                ROLE_LOG.append((now, self.name, a.data["role"]))
        return actions

    def start(self, now: int) -> list[Any]:
        return self._log(super().start(now), now)

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Any]:
        return self._log(super().receive(socket, frames, now), now)

    def handle_timer(self, now: int) -> list[Any]:
        return self._log(super().handle_timer(now), now)


def failover(peers: int, seeds: int) -> list[float]:
    """Milliseconds from the leader crash at 1 s to the next leader, per seed (missing: none in 2 s)."""
    sc = parse_scenario(CRASH.format(peers=peers), "crash.yaml")
    names = [n for n in sc.node_names]
    out = []
    for seed in range(1, seeds + 1):
        ROLE_LOG.clear()
        run_sim(sc, seed, factories={n: RecordingPeer for n in names})
        after = [t for t, _, role in ROLE_LOG if role == "leader" and t > 1_000_000_000]
        if after:
            out.append((after[0] - 1_000_000_000) / 1e6)
    return out


def raw_round_trips(seconds: float, window: int) -> float:
    """Round trips per second of a bare ROUTER echo and a DEALER with ``window`` in flight."""
    ctx = zmq.Context()
    ep = f"tcp://127.0.0.1:{free_port()}"
    router = ctx.socket(zmq.ROUTER)
    router.bind(ep)
    stop = threading.Event()

    def echo() -> None:
        while not stop.is_set():
            if router.poll(100):
                router.send_multipart(router.recv_multipart())

    t = threading.Thread(target=echo)
    t.start()
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(ep)
    payload = [b"x" * 12, b"=", b"y" * 40]
    for _ in range(window):
        dealer.send_multipart(payload)
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        if not dealer.poll(5000):
            raise RuntimeError("the raw echo stopped answering")
        dealer.recv_multipart()
        dealer.send_multipart(payload)
        done += 1
    rate = done / (time.perf_counter() - t0)
    stop.set()
    t.join()
    for s in (dealer, router):
        s.close(0)
    ctx.term()
    return rate


def live_updates(seconds: float, clients: int) -> tuple[float, list[float]]:
    """(committed updates per second, latencies in ms) through 3 reference peers on loopback."""
    ids = ["p0", "p1", "p2"]
    urls = {p: f"tcp://127.0.0.1:{free_port()}" for p in ids}
    peers = [[p, urls[p]] for p in ids]
    rt = LiveRuntime(None, seed=1, record_deliveries=False)
    for p in ids:
        rt.add_node(p, Peer, role="peer", config={"id": p, "endpoint": urls[p], "peers": peers})
    names = [f"c{i}" for i in range(clients)]
    for n in names:
        rt.add_node(n, Client, role="client", config={"peers": peers})
    done: list[int] = []
    latencies: list[float] = []
    lock = threading.Lock()
    counter = [0]

    def hook(node: str, action: Any, t: int) -> None:
        if isinstance(action, Deliver) and action.kind == "op" and action.data["status"] == "ok":
            with lock:
                done.append(t)
                latencies.append((action.data["complete_ns"] - action.data["invoke_ns"]) / 1e6)
            counter[0] += 1
            rt.command(0, node, {"op": "put", "key": f"k{counter[0] % 8}", "value": f"v{counter[0]}"})

    rt.on_action(hook)
    rt.start()
    try:
        time.sleep(1.5)  # an election
        for n in names:
            rt.command(0, n, {"op": "put", "key": "k", "value": "v"})
        time.sleep(1.0)  # warm-up
        with lock:
            start_count, t0 = len(done), time.monotonic()
        time.sleep(seconds)
        with lock:
            count, elapsed = len(done) - start_count, time.monotonic() - t0
            lat = sorted(latencies[start_count:])
    finally:
        rt.stop()
    return count / elapsed, lat


def pct(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, int(p / 100 * len(values)))] if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=30, help="simulated seconds of the load run")
    ap.add_argument("--live-seconds", type=float, default=5.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--sim-only", action="store_true", help="part 1 only, printed and not recorded")
    ap.add_argument("--repeat", type=int, default=1, help="runs per configuration of part 1; the least CPU counts")
    a = ap.parse_args()
    cpu0 = time.process_time()
    speed = sim_speed(a.seconds, a.repeat)
    rows = "\n".join(f"| {label} | {wall:.2f} | {x:,.1f} | {y:,.1f} | {sent:,} |" for label, wall, x, y, sent in speed)
    if a.sim_only:
        print("| configuration | wall s | simulated s per wall s | simulated s per CPU s | messages sent |\n"
              "|---|---|---|---|---|\n" + rows)
        return
    body = ("### Simulation speed\n\n"
            f"5 peers (200-300 ms election timeouts, 70 ms heartbeat), 3 clients, 30 key-value operations per "
            f"second in all, {a.seconds} simulated seconds, seed 1:\n\n"
            "| configuration | wall s | simulated s per wall s | simulated s per CPU s | messages sent |\n"
            "|---|---|---|---|---|\n" + rows + "\n")
    off = speed[0]
    per_msg_us = a.seconds / off[3] / off[4] * 1e6
    msgs_per_s = off[4] / a.seconds
    body += (f"\nGoal (1,000x real time with the trace off, 300x with it on) not met: {off[3]:,.0f}x per CPU second. "
             f"The cluster sends {msgs_per_s:,.0f} messages per simulated second (five peers' 70 ms heartbeats and "
             f"their answers alone are {4 * 2 / 0.07:,.0f}), at {per_msg_us:,.0f} us of CPU each (simulator, Raft "
             f"node, codec). 1,000x would need {1e6 / 1000 / msgs_per_s:,.1f} us per message, below the simulator's "
             f"own cost per delivery (see 'Simulator: DCP deliveries per wall second').\n")
    body += "\n### Leader crash to new leader\n\n| peers | seeds | new leader found | p50 ms | p90 ms | p99 ms | max ms | " \
            "mean ms |\n|---|---|---|---|---|---|---|---|\n"
    for peers in (3, 5):
        ms = sorted(failover(peers, a.seeds))
        body += (f"| {peers} | {a.seeds} | {len(ms)} | {pct(ms, 50):.0f} | {pct(ms, 90):.0f} | {pct(ms, 99):.0f} | "
                 f"{max(ms):.0f} | {statistics.mean(ms):.0f} |\n")
    sim_cpu = time.process_time() - cpu0
    raw = raw_round_trips(a.live_seconds, a.clients)
    rate, lat = live_updates(a.live_seconds, a.clients)
    body += (f"\n### Committed updates over real sockets\n\n"
             f"| path | per second |\n|---|---|\n"
             f"| raw pyzmq ROUTER/DEALER round trips, {a.clients} in flight (baseline, same run) | {raw:,.0f} |\n"
             f"| committed puts through 3 reference peers, {a.clients} clients with one in flight each | "
             f"{rate:,.0f} |\n\n"
             f"Reference / raw: {rate / raw:.1%}. Update latency (command -> result from the replayed log, "
             f"{len(lat)} updates): p50 {pct(lat, 50):.2f} ms, p90 {pct(lat, 90):.2f} ms, p99 {pct(lat, 99):.2f} ms. "
             f"An update is a RequestUpdate to the leader, one AppendEntries round to a follower, the committed "
             f"answer and a RequestEntries read-back: about four round trips, all peers and clients in one "
             f"Python process. (CPU for the simulated parts: {sim_cpu:.0f} s.)\n")
    print(body)
    if not a.no_record:
        record("Raft: simulation speed, failover time, committed updates over real sockets", body, command_line())


if __name__ == "__main__":
    main()
