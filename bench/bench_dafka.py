"""Dafka speed.

1. Over real sockets on loopback: records per second end to end, producer -> store (ACKed)
   and producer -> consumer (delivered to the application), with 100-byte records, the
   reference tower, producer, store and consumer in one live runtime; next to a raw pyzmq
   PUB/SUB stream of the same records (topic frame + content) measured in the same run.
2. End-to-end delivery latency percentiles (produce command -> consumer delivery).
3. Simulated seconds per wall second for a 1-producer, 1-store, 2-consumer scenario.

    .venv/bin/python bench/bench_dafka.py [--records 20000] [--no-record]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time

import zmq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script from anywhere

from bench.common import command_line, record  # noqa: E402
from harness.composition import run_sim  # noqa: E402
from harness.live.runtime import LiveRuntime  # noqa: E402
from harness.live.supervisor import free_port  # noqa: E402
from harness.scenario import load_scenario  # noqa: E402
from reference_nodes.dafka.consumer import Consumer  # noqa: E402
from reference_nodes.dafka.producer import Producer  # noqa: E402
from reference_nodes.dafka.store import Store  # noqa: E402
from reference_nodes.dafka.tower import Tower  # noqa: E402

CONTENT = b"x" * 100


def raw_pubsub(n: int) -> float:
    """Records per second of a bare PUB -> SUB stream (topic frame + 100-byte content)."""
    ctx = zmq.Context()
    ep = f"tcp://127.0.0.1:{free_port()}"
    pub, sub = ctx.socket(zmq.PUB), ctx.socket(zmq.SUB)
    pub.setsockopt(zmq.SNDHWM, 0)
    sub.setsockopt(zmq.RCVHWM, 0)
    pub.bind(ep)
    sub.connect(ep)
    sub.setsockopt(zmq.SUBSCRIBE, b"M")
    time.sleep(0.3)
    got = [0]

    def reader() -> None:
        while got[0] < n and sub.poll(2000):
            sub.recv_multipart()
            got[0] += 1

    t = threading.Thread(target=reader)
    t.start()
    t0 = time.perf_counter()
    for _ in range(n):
        pub.send_multipart([b"Morders", CONTENT])
    t.join(30)
    rate = got[0] / (time.perf_counter() - t0)
    pub.close(0)
    sub.close(0)
    ctx.term()
    return rate


def live_cluster(n: int, window: int) -> tuple[float, float, list[float]]:
    """(records/s to the consumer, records/s ACKed by the store, latencies in ms)."""
    ports = {k: f"tcp://127.0.0.1:{free_port()}" for k in ("xsub", "xpub", "p", "s", "c")}
    towers = [[ports["xsub"], ports["xpub"]]]
    common = {"towers": towers, "beacon_ms": 100}
    rt = LiveRuntime(None, seed=1)
    rt.add_node("tower", Tower, role="tower", config={"bind_sub": ports["xsub"], "bind_pub": ports["xpub"]})
    rt.add_node("producer", Producer, role="producer", config={**common, "bind": ports["p"], "topic": "orders",
                                                               "head_ms": 200})
    rt.add_node("store", Store, role="store", config={**common, "bind": ports["s"]})
    rt.add_node("consumer", Consumer, role="consumer", config={**common, "bind": ports["c"], "topics": ["orders"],
                                                               "offset_reset": "earliest"})
    acked = [-1]
    delivered: dict[int, int] = {}
    sent_at: dict[int, int] = {}

    def hook(node: str, action, t: int) -> None:
        kind = getattr(action, "kind", None)
        if node == "consumer" and kind == "record":
            delivered[action.data["offset"]] = time.monotonic_ns()
        elif node == "store" and getattr(action, "msg_type", "") == "ACK":
            acked[0] = max(acked[0], (action.meta or {}).get("seq", -1) or -1)

    rt.on_action(hook)
    rt.start()
    try:
        time.sleep(1.0)  # discovery: beacons, subscriptions
        t0 = time.monotonic()
        for k in range(n):
            while k - len(delivered) > window:
                time.sleep(0.0005)
            sent_at[k] = time.monotonic_ns()
            rt.command("producer", {"op": "produce", "topic": "orders", "content": CONTENT})
        deadline = time.monotonic() + 60
        while (len(delivered) < n or acked[0] < n - 1) and time.monotonic() < deadline:
            time.sleep(0.01)
        t_consumer = max(delivered.values()) / 1e9 - t0 if delivered else float("nan")
        elapsed = time.monotonic() - t0
    finally:
        rt.stop()
    lat = sorted((delivered[k] - sent_at[k]) / 1e6 for k in delivered if k in sent_at)
    return len(delivered) / max(t_consumer, 1e-9), (acked[0] + 1) / elapsed, lat


def pct(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, int(p / 100 * len(values)))] if values else float("nan")


def sim_speed() -> tuple[float, float]:
    scenario = load_scenario("scenarios/dafka/chaos/clean.yaml")
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        r = run_sim(scenario, 1, d)
        wall = time.perf_counter() - t0
    assert r.ok
    return scenario.duration_ns / 1e9 / wall, r.stats["delivered"] / wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--window", type=int, default=2000, help="records in flight at most")
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    raw = raw_pubsub(a.records * 5)
    to_consumer, to_store, lat = live_cluster(a.records, a.window)
    speed, deliveries = sim_speed()
    body = (
        "| path | records / s |\n|---|---|\n"
        f"| raw pyzmq PUB/SUB stream of the same records (baseline, same run) | {raw:,.0f} |\n"
        f"| reference producer -> consumer application (live, loopback) | {to_consumer:,.0f} |\n"
        f"| reference producer -> store, ACKed (live, loopback) | {to_store:,.0f} |\n\n"
        f"Consumer / raw: {to_consumer / raw:.1%}. End-to-end delivery latency (produce command -> consumer "
        f"application, {len(lat)} records, window {a.window}): p50 {pct(lat, 50):.2f} ms, p90 {pct(lat, 90):.2f} ms, "
        f"p99 {pct(lat, 99):.2f} ms, max {max(lat) if lat else float('nan'):.2f} ms.\n\n"
        f"Simulation of scenarios/dafka/chaos/clean.yaml (1 tower, 1 producer, 1 store, 2 consumers, trace on): "
        f"{speed:.2f} simulated seconds per wall second ({deliveries:,.0f} deliveries / s)."
    )
    print(body)
    if not a.no_record:
        record("Dafka: records end to end, latency, simulation speed", body, command_line())


if __name__ == "__main__":
    main()
