"""Real pyzmq sockets from a node's `SocketSpec`.

Only the loop thread of a `LiveRuntime` calls these: ZeroMQ sockets are not thread-safe.
"""

from __future__ import annotations

import resource
import time

import zmq

from harness.node import SocketSpec, SocketType

ZMQ_TYPE: dict[SocketType, int] = {
    SocketType.PUB: zmq.PUB,
    SocketType.SUB: zmq.SUB,
    SocketType.XPUB: zmq.XPUB,
    SocketType.XSUB: zmq.XSUB,
    SocketType.ROUTER: zmq.ROUTER,
    SocketType.DEALER: zmq.DEALER,
}

# A socket closed with linger 0 is torn down asynchronously by the I/O thread, so a restarted
# node may find its old port still taken for a few milliseconds.
BIND_RETRY_S = 2.0

# The linger of every socket closed as the runtime stops (a crash keeps 0: its peers see the
# connections go at once, what it had queued is lost, and it waits for its own context's end,
# LiveRuntime._end_context). libzmq 4.3.5 aborts the process
# ("Resource temporarily unavailable (src/session_base.cpp:233)", libzmq issue 3442) when a
# session whose engine has sent part of a multipart message loses its TCP connection while its
# pipe is being torn down: clean_pipes must read the message's other frames and a terminated
# pipe yields nothing. Closing with linger 0 tears the pipe down at once, so closing both ends
# of a connection in one pass (the stop closes every node's sockets) aborts when one of them was
# still sending. With a linger the pipe stays readable until its last whole message is read
# (``waiting_for_delimiter``): the peer's close finds it so, or it ends cleanly at a message's
# boundary. It is reached only by a peer that keeps the connection and reads nothing (an
# external process stopped by SIGSTOP, a peer gone for good): the stop then waits this long.
STOP_LINGER_MS = 250

# Each in-process node has a ZeroMQ context of its own (`LiveRuntime._end_context`): about five
# descriptors more per node than one shared context. A run of a hundred nodes needs over a
# thousand, so the soft limit is raised towards this (never past the hard limit).
FILES_WANTED = 16_384


def enough_files(wanted: int) -> None:
    """Raise this process's soft limit of open files to ``wanted`` (or the hard limit, if
    lower) when it is below: a limit too low shows as sockets that fail to open mid-run."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


class SocketSetupError(RuntimeError):
    """A socket could not be created, bound or connected as its spec asks."""


def from_source(endpoint: str, source: str | None) -> str:
    """The endpoint to connect to so the connection comes from ``source`` (libzmq's
    ``tcp://SOURCE:0;HOST:PORT``); other transports and no source: unchanged."""
    if source is None or not endpoint.startswith("tcp://") or ";" in endpoint:
        return endpoint
    return f"tcp://{source}:0;{endpoint[len('tcp://'):]}"


def open_socket(
    ctx: zmq.Context,
    spec: SocketSpec,
    node: str,
    rebind: dict[str, str] | None = None,
    bind_retry: float = 0.0,
    source: str | None = None,
) -> tuple[zmq.Socket, list[str]]:
    """Create, configure, bind and connect one socket. Returns it and the bound endpoints as
    resolved by ZeroMQ (a wildcard port becomes the real one). ``rebind`` maps a spec endpoint
    to the endpoint it resolved to last time, so a restarted node keeps its port; ``bind_retry``
    is how long to retry a bind that finds the address in use (see BIND_RETRY_S); ``source`` the
    address TCP connections come from."""
    sock = ctx.socket(ZMQ_TYPE[SocketType(spec.type)])
    try:
        configure(sock, spec)
        bound = []
        for endpoint in spec.bind:
            target = (rebind or {}).get(endpoint, endpoint)
            bound.append(bind(sock, target, node, spec.name, bind_retry))
        for endpoint in spec.connect:
            try:
                sock.connect(from_source(endpoint, source))
            except zmq.ZMQError as exc:
                raise SocketSetupError(
                    f"node {node!r} socket {spec.name!r}: cannot connect to {endpoint!r}: {exc}"
                ) from exc
        if spec.type == SocketType.XSUB:
            for topic in spec.subscribe:  # XSUB subscribes by sending, after connecting
                sock.send(b"\x01" + topic, zmq.NOBLOCK)
    except BaseException:
        sock.close(linger=0)
        raise
    return sock, bound


def configure(sock: zmq.Socket, spec: SocketSpec) -> None:
    # Linger 0 from the start, not only at close: libzmq (4.3.5) tears down the pipe of a
    # disconnect() with the linger set at that moment, and with the default (forever) a pipe
    # holding messages for a peer that died never ends, so the context's term() hangs (a DCP
    # worker that reconnects to a broker process that crashed for good hung the live run).
    sock.setsockopt(zmq.LINGER, 0)
    if spec.identity is not None:
        sock.setsockopt(zmq.ROUTING_ID, spec.identity)
    sock.setsockopt(zmq.SNDHWM, spec.hwm)
    sock.setsockopt(zmq.RCVHWM, spec.hwm)
    if spec.type == SocketType.ROUTER:
        # Unroutable sends raise instead of vanishing, so the trace can record the drop; the
        # message is lost either way, as on a default ROUTER.
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        if spec.handover:
            sock.setsockopt(zmq.ROUTER_HANDOVER, 1)
    if spec.type == SocketType.XPUB:
        if spec.xpub_verbose:
            sock.setsockopt(zmq.XPUB_VERBOSE, 1)
        if spec.welcome is not None:
            sock.setsockopt(zmq.XPUB_WELCOME_MSG, spec.welcome)
    if spec.type == SocketType.SUB:
        for topic in spec.subscribe:
            sock.setsockopt(zmq.SUBSCRIBE, topic)


def bind(sock: zmq.Socket, endpoint: str, node: str, socket_name: str, retry: float = 0.0) -> str:
    deadline = time.monotonic() + retry
    while True:
        try:
            sock.bind(endpoint)
            return sock.getsockopt_string(zmq.LAST_ENDPOINT)
        except zmq.ZMQError as exc:
            if exc.errno == zmq.EADDRINUSE and time.monotonic() < deadline:
                time.sleep(0.01)
                continue
            raise SocketSetupError(
                f"node {node!r} socket {socket_name!r}: cannot bind {endpoint!r}: {exc}"
            ) from exc


def subscribe(sock: zmq.Socket, type_: SocketType, topic: bytes, on: bool) -> None:
    if type_ == SocketType.SUB:
        sock.setsockopt(zmq.SUBSCRIBE if on else zmq.UNSUBSCRIBE, topic)
    elif type_ == SocketType.XSUB:
        sock.send((b"\x01" if on else b"\x00") + topic, zmq.NOBLOCK)
    else:
        raise ValueError(f"cannot (un)subscribe on a {type_.value} socket")
