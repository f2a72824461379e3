"""A DCP "broker" that floods: it confirms every REGISTER by echoing it, then sends that worker
PONGs as fast as ZeroMQ takes them, and routes nothing. It stops by itself after ``--seconds``.

    python tests/standins/dcp_broker_floods.py --bind tcp://127.0.0.1:5555 --seconds 30
"""

from __future__ import annotations

import argparse
import sys
import time

import zmq

HEADER = [b"", b"DGBX\x01"]
REGISTER, PONG = b"\x01", b"\x03"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bind", required=True)
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args()
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.SNDHWM, 0)
    router.bind(args.bind)
    workers: list[bytes] = []
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        while router.poll(0):
            frames = router.recv_multipart()
            if frames[1:3] == HEADER and frames[3:4] == [REGISTER]:
                router.send_multipart(frames)  # the echo that confirms the registration
                workers.append(frames[0])
        for worker in workers:
            for _ in range(200):
                try:
                    router.send_multipart([worker, *HEADER, PONG], zmq.NOBLOCK)
                except zmq.Again:
                    break
        if not workers:
            time.sleep(0.001)
    router.close(0)
    ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
