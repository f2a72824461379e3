"""Processes for bench_proxy.py: a counting sink and the chaos proxy (the echo server is
bench.live_peers').

    python -m bench.proxy_peers sink ENDPOINT COUNT   # PULL; prints RESULT <s from 1st to last>
    python -m bench.proxy_peers proxy TARGET MODE     # MODE: plain | looked-at; prints READY <endpoint>

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
    p = ChaosProxy(rules=rules, classify=codec_classifier("dcp"))
    ep = p.add_link(LinkSpec(target, binder="server", connecter="client"))
    p.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("READY", ep, flush=True)
    stop.wait()
    p.stop()


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "sink":
        sink(sys.argv[2], int(sys.argv[3]))
    elif role == "proxy":
        proxy(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(f"unknown role {role!r}")
