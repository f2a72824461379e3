"""Processes for bench_proxy.py: a counting sink and the chaos proxy (the echo server is
bench.live_peers').

    python -m bench.proxy_peers sink ENDPOINT COUNT   # PULL; prints RESULT <s from 1st to last>
    python -m bench.proxy_peers proxy TARGET MODE     # MODE: plain | looked-at | observed; prints READY <endpoint>

``observed``: both ends count as external nodes, so the proxy reports every message to a
`harness.live_observe.ObservedTraffic` that feeds a live runtime's loop thread, an observer with
the wire check every run has, and a trace (in a temporary directory), as on a live run.

Each prints READY once it is bound and runs until its work is done or SIGTERM.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import zmq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sink(endpoint: str, count: int) -> None:
    ctx = zmq.Context()
    s = ctx.socket(zmq.PULL)
    s.setsockopt(zmq.RCVHWM, 100_000)
    s.bind(endpoint)
    print("READY", flush=True)
    while True:  # one measurement per batch of COUNT messages, until SIGTERM
        s.recv_multipart()
        t0 = time.perf_counter()
        for _ in range(count - 1):
            s.recv_multipart()
        print(f"RESULT {time.perf_counter() - t0:.6f}", flush=True)


def proxy(target: str, mode: str) -> None:
    from fault_injection.proxy import ChaosProxy, LinkSpec, codec_classifier
    from fault_injection.rules import RuleSet

    rules = RuleSet.from_dicts([{"message": "NO-SUCH-TYPE", "drop": True}]) if mode == "looked-at" else None
    p = ChaosProxy(rules=rules, classify=codec_classifier("dcp"), observe=(lambda a, b: True) if mode == "observed" else None)
    ep = p.add_link(LinkSpec(target, binder="server", connecter="client"))
    consumer = observed_consumer(p) if mode == "observed" else None
    p.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("READY", ep, flush=True)
    stop.wait()
    p.stop()
    if consumer is not None:
        consumer()


def observed_consumer(p: object) -> object:
    """Wire the proxy's reports into what a live run feeds them to; returns the clean-up."""
    import tempfile

    from harness.checkers.base import Observer
    from harness.checkers.wire import WireConformance
    from harness.live.runtime import LiveRuntime
    from harness.live_observe import ObservedTraffic
    from harness.protocols import codec
    from harness.registry import package
    from harness.trace import RunInfo, TraceWriter

    tmp = tempfile.TemporaryDirectory(prefix="bench-observed-")
    trace = TraceWriter(os.path.join(tmp.name, "t.parquet"), RunInfo("bench", 0, "bench", "dcp"))
    runtime = LiveRuntime(trace)
    observer = Observer([WireConformance("dcp", "strict", package("dcp").capture)], codec("dcp"),
                        {"client": "client", "server": "server"})
    traffic = ObservedTraffic(runtime, observer, trace)
    p.on_seen = traffic.push  # type: ignore[attr-defined]
    runtime.start()

    def done() -> None:
        runtime.call(traffic.close)
        runtime.stop()
        trace.close()
        print(f"OBSERVED {traffic.sends} {traffic.receives}", file=sys.stderr, flush=True)
        tmp.cleanup()

    return done


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "sink":
        sink(sys.argv[2], int(sys.argv[3]))
    elif role == "proxy":
        proxy(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(f"unknown role {role!r}")
