"""What the two independent PPPP stand-ins (pppp_publisher.py, pppp_subscriber.py) share: the
sequence number encoding and a program's life (a slow start, one socket, exit 0 on SIGTERM or
SIGINT). Like them it imports nothing of the harness. They import it as a sibling module: run as
scripts, their own folder is first on the module path."""

from __future__ import annotations

import signal
import time
from typing import Callable

import zmq


def number(n: int) -> bytes:
    """E-PPPP-01: 8 bytes, network order."""
    return n.to_bytes(8, "big")


class Stop(Exception):
    pass


def run_program(make_socket: Callable[[zmq.Context], zmq.Socket], body: Callable[[zmq.Socket], None]) -> int:
    """Start slowly (half a second, as a real program may), make the socket, run ``body`` until it
    returns or a SIGTERM/SIGINT comes; close everything; exit status 0."""
    def stop(*_: object) -> None:
        raise Stop

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    time.sleep(0.5)
    ctx = zmq.Context()
    sock = make_socket(ctx)
    try:
        body(sock)
    except Stop:
        pass
    finally:
        sock.close(0)
        ctx.term()
    return 0
