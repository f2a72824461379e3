"""Raw TCP peers that speak (or deliberately break) ZMTP, for the parser and proxy tests."""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Iterator

from fault_injection.zmtp import Greeting, ready_command

TIMEOUT_S = 5.0


def recv_exactly(sock: socket.socket, n: int, timeout: float = TIMEOUT_S) -> bytes:
    sock.settimeout(timeout)
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def recv_for(sock: socket.socket, seconds: float) -> bytes:
    """Everything that arrives within ``seconds`` (until the peer closes)."""
    out = bytearray()
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return bytes(out)
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, socket.timeout):
            return bytes(out)
        except ConnectionResetError:
            return bytes(out)
        if not chunk:
            return bytes(out)
        out += chunk


def handshake(sock: socket.socket, socket_type: bytes, *, minor: int = 1, identity: bytes | None = None,
              as_server: bool = False) -> bytes:
    """Greet and send READY as a NULL-mechanism peer; return the peer's greeting + READY bytes."""
    sock.sendall(Greeting(3, minor, "NULL", as_server).encode())
    greeting = recv_exactly(sock, 64)
    props = {"Socket-Type": socket_type}
    if identity is not None:
        props["Identity"] = identity
    sock.sendall(ready_command(props))
    flags_size = recv_exactly(sock, 2)
    if flags_size[0] & 0x02:
        size = int.from_bytes(flags_size[1:] + recv_exactly(sock, 7), "big")
        body = recv_exactly(sock, size)
        return greeting + flags_size + body
    return greeting + flags_size + recv_exactly(sock, flags_size[1])


class RawServer:
    """A listening TCP socket on 127.0.0.1 that accepts in a thread and keeps what it gets."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.endpoint = f"tcp://127.0.0.1:{self.port}"
        self.accepted: list[socket.socket] = []

    def accept(self, timeout: float = TIMEOUT_S) -> socket.socket:
        self.listener.settimeout(timeout)
        conn, _ = self.listener.accept()
        self.accepted.append(conn)
        return conn

    def close(self) -> None:
        for s in self.accepted:
            s.close()
        self.listener.close()

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(endpoint: str, source: str | None = None) -> socket.socket:
    host, port = endpoint[len("tcp://"):].rsplit(":", 1)
    sock = socket.socket()
    if source is not None:
        sock.bind((source, 0))
    sock.settimeout(TIMEOUT_S)
    sock.connect((host, int(port)))
    return sock


def open_socket_fds() -> set[str]:
    """Inode names of the sockets this process has open (``socket:[123]``)."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            out.add(target)
    return out


def proxy_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "zmq-harness-proxy"]


def wait_until(predicate, timeout: float = TIMEOUT_S, step: float = 0.01) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def chunks(data: bytes, sizes: Iterator[int]) -> Iterator[bytes]:
    i = 0
    while i < len(data):
        n = max(1, next(sizes))
        yield data[i:i + n]
        i += n
