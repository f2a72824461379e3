"""DCP reference client (specs/dcp-v1.md with docs/errata.md).

One DEALER socket (``"dealer"``) connected to the broker; frames start at the empty delimiter
(E-DCP-01). A pure client never registers and never sends a heartbeat
(``dcp.heartbeat.client-no-heartbeat``, E-DCP-02).

The application asks with ``command``::

    {"op": "request", "service": "echo", "data": [b"hello"], "id": "req-1",
     "metadata": [b"extra"]}          # "metadata" optional, "id" optional (one is made up)

and the client sends a REQUEST without a client address (the broker inserts it) whose
metadata is ``[id, *metadata]`` (``dcp.client.track-by-metadata``). Any number of requests
may be outstanding (``dcp.client.pipelining``). A request without a reply after
``timeout_ms`` is sent again, byte for byte (same metadata, E-DCP-16), up to
``max_attempts`` sends in all (``dcp.client.retry``); then the application gets
``Deliver("request-failed", ...)``. A retry after a timeout in which nothing came from the
broker goes on a new connection (Disconnect + Connect, Note ``reconnect``, the Lazy Pirate's
remedy): a broker whose ROUTER ignored the old one, as libzmq does without handover while an
older connection of this identity still held unread messages, hears the new one.

The first REPLY whose first metadata part is an outstanding id becomes
``Deliver("reply", {"id", "service", "data", "metadata", "attempts", "sent_at",
"latency_ns", "topic", "corr"})`` (``sent_at`` is the first send, ``latency_ns`` counts from
it; ``topic``/``corr`` fill the trace columns). Later replies for the same id (retries answered
twice) are hidden from the application and noted (``duplicate-reply``); a reply after the
client gave up is noted (``late-reply``); a reply that matches nothing is discarded.

Config: ``connect`` (default ``"tcp://127.0.0.1:5555"``), ``timeout_ms`` (3000),
``max_attempts`` (3), ``identity`` (optional routing id), ``dialect``, ``dedup_window``
(answered ids remembered to recognise duplicates, default 100000).
"""

from __future__ import annotations

import heapq
from typing import Any

from harness.node import (
    Action, Deliver, Discard, Note, NodeContext, Send, SocketSpec, SocketType, reconnect,
)
from harness.protocols import DecodeError
from reference_nodes.dcp.common import (
    DEFAULT_ENDPOINT, DcpNode, as_bytes, endpoint_of, identity_of, ms_to_ns, positive_int,
    service_name,
)

SOCKET = "dealer"
DEFAULT_TIMEOUT_MS = 3000
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_DEDUP_WINDOW = 100_000


class Pending:
    """An outstanding request: the exact frames, so a retry is the same message."""

    __slots__ = ("id", "key", "corr", "service", "frames", "metadata", "attempts", "sent_at", "deadline")

    def __init__(self, id: Any, key: bytes, service: str, frames: list[bytes], metadata: list[bytes],
                 now: int, deadline: int) -> None:
        self.id = id
        self.key = key
        self.corr = key.decode("utf-8", "backslashreplace")  # the trace's correlation id
        self.service = service
        self.frames = frames
        self.metadata = metadata
        self.attempts = 1
        self.sent_at = now
        self.deadline = deadline


class Client(DcpNode):
    role = "client"

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.endpoint = endpoint_of(self.config.get("connect", DEFAULT_ENDPOINT))
        self.timeout_ns = ms_to_ns(self.config.get("timeout_ms", DEFAULT_TIMEOUT_MS), "timeout_ms")
        if self.timeout_ns <= 0:
            raise ValueError("dcp client config 'timeout_ms' must be positive")
        self.max_attempts = positive_int(self.config.get("max_attempts", DEFAULT_MAX_ATTEMPTS), "max_attempts")
        self.identity = identity_of(self.config.get("identity"))
        self.dedup_window = positive_int(self.config.get("dedup_window", DEFAULT_DEDUP_WINDOW), "dedup_window")
        self.pending: dict[bytes, Pending] = {}
        self.done: dict[bytes, str] = {}  # id -> "answered" | "failed", oldest first (bounded)
        self._deadlines: list[tuple[int, int, bytes]] = []  # heap (deadline, seq, id); stale entries skipped
        self._seq = 0
        self._made = 0  # ids made up for requests without one
        self.last_heard = -1  # when the broker last sent anything
        self.reconnected_at = -1

    def sockets(self) -> list[SocketSpec]:
        return [SocketSpec(SOCKET, SocketType.DEALER, connect=(self.endpoint,), identity=self.identity)]

    # ---- the application -------------------------------------------------------------------

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        op = request.get("op")
        if op != "request":
            raise ValueError(f"dcp client: unknown command {op!r} (known: 'request')")
        if "service" not in request:
            raise ValueError("dcp client: a request needs a 'service'")
        service = service_name(request["service"])
        rid = request.get("id")
        if rid is None:
            self._made += 1
            rid = f"{self.name}-{self._made}"
        key = as_bytes(rid, "a dcp request id")
        if not key:
            raise ValueError("dcp client: a request id must not be empty (metadata parts are non-empty)")
        if key in self.pending:
            raise ValueError(f"dcp client: request id {rid!r} is already outstanding")
        data = request.get("data", [])
        if isinstance(data, (bytes, bytearray, str)):
            data = [data]
        data = [as_bytes(p, "a dcp data part") for p in data]
        metadata = [key]
        extra = request.get("metadata")
        if extra:
            metadata.extend(as_bytes(p, "a dcp metadata part") for p in extra)
            if not all(metadata):
                raise ValueError("dcp client: metadata parts must not be empty")
        frames = self.enc["REQUEST"]({"service": service, "client_address": None,
                                      "metadata": metadata, "data": data})
        self.done.pop(key, None)  # an id used again starts afresh
        p = Pending(rid, key, service, frames, metadata, now, now + self.timeout_ns)
        self.pending[key] = p
        self._push(p)
        return [self._send(p, now)]

    # ---- inputs ----------------------------------------------------------------------------

    def start(self, now: int) -> list[Action]:
        # A standalone client (``zmq-harness node dcp client --set requests=2 ...``) has no
        # application to command it: config ``requests`` makes it send that many at start.
        out: list[Action] = []
        for k in range(int(self.config.get("requests", 0) or 0)):
            data = self.config.get("data", b"")
            out.extend(self.command({"op": "request", "service": self.config.get("service", "echo"),
                                     "data": [data.encode() if isinstance(data, str) else data],
                                     "id": f"{self.name}-start-{k}"}, now))
        return out

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        out: list[Action] = []
        self.last_heard = now
        try:
            msg = self.decode(frames)
        except DecodeError as e:
            out.extend(self.malformed(socket, frames, e))
            return out
        if msg.name != "REPLY":
            out.extend(self.unexpected(socket, frames, msg, "a pure client only ever receives replies"))
            return out
        metadata = msg["metadata"]
        key = metadata[0] if metadata else b""
        p = self.pending.pop(key, None)
        if p is not None:
            self._remember(key, "answered")
            out.append(Deliver("reply", {
                "id": p.id, "service": p.service, "data": msg["data"], "metadata": metadata,
                "attempts": p.attempts, "sent_at": p.sent_at, "latency_ns": now - p.sent_at,
                "topic": p.service, "corr": p.corr,
            }))
        elif self.done.get(key) == "answered":
            out.extend(self.on_duplicate(key, msg["data"], metadata, now))
        elif self.done.get(key) == "failed":
            out.append(Note("late-reply", {"id": key.decode("utf-8", "backslashreplace"), "at": now}))
        else:
            out.append(Discard(socket, list(frames), reason=f"reply for no request of this client "
                               f"(first metadata part {key!r})", clause="dcp.client.track-by-metadata"))
        return out

    def on_duplicate(self, key: bytes, data: list[bytes], metadata: list[bytes], now: int) -> list[Action]:
        """A second reply to an answered request (a retry answered too): hidden from the
        application, so it sees every request answered exactly once."""
        return [Note("duplicate-reply", {"id": key.decode("utf-8", "backslashreplace"), "at": now})]

    def handle_timer(self, now: int) -> list[Action]:
        out: list[Action] = []
        heap = self._deadlines
        while heap and heap[0][0] <= now:
            deadline, _, key = heapq.heappop(heap)
            p = self.pending.get(key)
            if p is None or p.deadline != deadline:
                continue  # answered, or retried since
            if p.attempts >= self.max_attempts:
                del self.pending[key]
                self._remember(key, "failed")
                out.append(Deliver("request-failed", {
                    "id": p.id, "service": p.service, "metadata": p.metadata, "attempts": p.attempts,
                    "sent_at": p.sent_at, "failed_at": now, "reason": "timeout",
                    "topic": p.service, "corr": p.corr,
                }))
                continue
            sent = p.deadline - self.timeout_ns  # its last attempt
            if self.last_heard < sent and self.reconnected_at <= sent:  # not since it went out on this connection
                self.reconnected_at = now
                out += [Note("reconnect", {"silent_since": sent, "at": now}), *reconnect(SOCKET, self.endpoint)]
            p.attempts += 1
            p.deadline = now + self.timeout_ns
            self._push(p)
            out.append(self._send(p, now))
        return out

    # ---- helpers ---------------------------------------------------------------------------

    def _send(self, p: Pending, now: int) -> Send:
        return Send(SOCKET, list(p.frames), "REQUEST", {"topic": p.service, "corr": p.corr, "attempt": p.attempts})

    def _push(self, p: Pending) -> None:
        self._seq += 1
        heapq.heappush(self._deadlines, (p.deadline, self._seq, p.key))

    def _remember(self, key: bytes, outcome: str) -> None:
        self.done[key] = outcome
        if len(self.done) > self.dedup_window:
            del self.done[next(iter(self.done))]

    def get_timer(self) -> int | None:
        heap = self._deadlines
        while heap:
            deadline, _, key = heap[0]
            p = self.pending.get(key)
            if p is not None and p.deadline == deadline:
                return deadline
            heapq.heappop(heap)  # stale
        return None
