"""Naming the socket at the other end of an accepted connection from /proc, as the proxy does
for an external process that connects to a shared listener."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from harness.live.procnet import connection_inode
from harness.live_faults import connection_owner

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux's /proc")


def _listener() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


@contextmanager
def _timed_out_port() -> Iterator[tuple[int, socket.socket]]:
    """A local port whose last connection (to another listener) was closed from this side: the
    kernel keeps its row in TIME_WAIT, with inode 0, and lends the port to other destinations.
    Yields the port and a listener to connect to next."""
    first, second = _listener(), _listener()
    try:
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        c.bind(("127.0.0.1", 0))
        c.connect(first.getsockname())
        s, _ = first.accept()
        port = c.getsockname()[1]
        c.close()  # the active close: this side keeps TIME_WAIT
        s.close()
        yield port, second
    finally:
        first.close()
        second.close()


def test_the_connected_socket_is_named_by_its_pair_not_by_an_earlier_connection_from_its_port() -> None:
    # The local address alone matched the TIME_WAIT row about half the time (which row the
    # table lists first depends on the hash), so 20 trials would all pass by luck 1 in 10^6.
    for _ in range(20):
        with _timed_out_port() as (port, listener):
            c = socket.socket()
            c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            c.bind(("127.0.0.1", port))
            c.connect(listener.getsockname())
            accepted, addr = listener.accept()
            with c, accepted:
                assert addr == ("127.0.0.1", port)
                assert connection_inode(addr, accepted.getsockname()) == str(os.fstat(c.fileno()).st_ino)


def test_a_connection_no_socket_holds_any_more_is_named_by_nobody() -> None:
    with _timed_out_port() as (port, listener):
        assert connection_inode(("127.0.0.1", port), listener.getsockname()) is None


def test_the_process_that_holds_the_connection_is_its_owner() -> None:
    """A child connects from a port that has a closed connection of this process's in TIME_WAIT:
    the proxy's question names the child, whatever the table lists first."""
    with _timed_out_port() as (port, listener):
        child = subprocess.Popen(
            [sys.executable, "-c",
             "import socket, sys\n"
             "c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
             f"c.bind(('127.0.0.1', {port})); c.connect({listener.getsockname()!r})\n"
             "print('connected', flush=True); sys.stdin.read()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "connected"
            accepted, addr = listener.accept()
            with accepted:
                owners = {"other": os.getpid(), "child": child.pid, "gone": None}
                assert connection_owner(addr, accepted.getsockname(), owners) == "child"
        finally:
            if child.stdin is not None:
                child.stdin.close()
            child.wait(timeout=10)
