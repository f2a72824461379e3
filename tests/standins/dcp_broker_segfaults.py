"""A DCP broker that dies of SIGSEGV on the first request it routes to a worker, as DagBox's
broker was seen to: it registers workers and answers pings like the reference broker (it is
one), then crashes instead of forwarding a request.

    python tests/standins/dcp_broker_segfaults.py --bind tcp://127.0.0.1:5555 --heartbeat-ms 150
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import sys
from typing import Any

from harness.live.standalone import run_standalone
from harness.protocols.codec import Message
from reference_nodes.dcp.broker import Broker


class SegfaultingBroker(Broker):
    def forward_request(self, identity: bytes, body: list[bytes], msg: Message) -> list[bytes]:
        print(f"routing a request for {msg['service']!r} to a worker", file=sys.stderr, flush=True)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file left behind
        os.kill(os.getpid(), signal.SIGSEGV)
        raise AssertionError("unreachable")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bind", required=True)
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    ap.add_argument("--liveness", type=int, default=3)
    ap.add_argument("--dialect", default="strict")
    args = ap.parse_args()
    config: dict[str, Any] = {"bind": [args.bind], "heartbeat_ms": args.heartbeat_ms, "liveness": args.liveness,
                              "dialect": args.dialect}
    return run_standalone(SegfaultingBroker, name="segfaulting-broker", role="broker", config=config)


if __name__ == "__main__":
    sys.exit(main())
