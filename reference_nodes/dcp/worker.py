"""DCP reference worker (specs/dcp-v1.md with docs/errata.md).

One DEALER socket (``"dealer"``) connected to the broker. Frames start at the empty
delimiter: a DEALER adds no envelope (E-DCP-01).

- On start: REGISTER its one service (``dcp.worker.register``). Without the broker's echo
  within one heartbeat interval it registers again (E-DCP-07).
- Heartbeats: a PING whenever ``heartbeat_ms`` passed since the last message it sent; any
  other message in the interval (a reply, a forwarded request, a registration) skips the ping
  (``dcp.heartbeat.skip-after-traffic``). While it holds a request that it finishes within
  the interval it therefore never pings; a request that takes longer than the interval gets
  a ping anyway, because ``dcp.heartbeat.worker-interval`` is a MUST (E-DCP-06).
- One request at a time: after ``service_time_ms`` (a timer) a REPLY with the client address
  and metadata copied unchanged (``dcp.worker.metadata-copied``) and the data transformed by
  ``behaviour``, or, for ``forward:<service>``, a REQUEST to that service that keeps the
  client address and the metadata, so the final reply reaches the client (E-DCP-05). A
  request that arrives while busy (the broker saw a ping as "ready", E-DCP-06) is queued and
  noted (``request-while-busy``), never dropped.
- The broker is lost after ``liveness * heartbeat_ms`` without any message from it: Note
  ``broker-lost``, Disconnect + Connect, REGISTER again (E-DCP-09). Requests in hand are
  still answered: replies are routed by client address (E-DCP-13).
- RECONNECT: REGISTER the same service again on the same connection (E-DCP-13).
- Malformed input, a request without a client address, and messages a worker never expects
  are discarded; the worker keeps serving (E-DCP-15).

Config: ``connect`` (broker endpoint, default ``"tcp://127.0.0.1:5555"``), ``service``
(str or bytes, default ``"echo"``), ``behaviour`` (``"echo"`` | ``"upper"`` | ``"reverse"``
| ``"forward:<service>"``), ``transform`` (for ``forward:``: what is done to the data before
passing it on, ``"echo"`` | ``"upper"`` | ``"reverse"``, default ``"echo"``),
``service_time_ms`` (0), ``heartbeat_ms`` (1000), ``liveness`` (3), ``identity`` (optional
routing id), ``dialect``.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

from harness.node import Action, Deliver, Discard, Note, NodeContext, Send, SocketSpec, SocketType, reconnect
from harness.protocols import DecodeError
from harness.protocols.codec import Message
from reference_nodes.dcp.common import (
    DEFAULT_ENDPOINT, DEFAULT_HEARTBEAT_MS, DEFAULT_LIVENESS, DcpNode, corr_of, endpoint_of,
    identity_of, ms_to_ns, positive_int, service_name,
)

SOCKET = "dealer"

TRANSFORMS: dict[str, Callable[[list[bytes]], list[bytes]]] = {
    "echo": lambda data: list(data),
    "upper": lambda data: [p.upper() for p in data],  # ASCII letters only; other bytes kept
    "reverse": lambda data: [p[::-1] for p in data],  # each part's bytes reversed, part order kept
}


class Job:
    """A request in the worker's hands."""

    __slots__ = ("client_address", "metadata", "data", "arrived")

    def __init__(self, client_address: bytes, metadata: list[bytes], data: list[bytes], arrived: int) -> None:
        self.client_address = client_address
        self.metadata = metadata
        self.data = data
        self.arrived = arrived


class Worker(DcpNode):
    role = "worker"

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.endpoint = endpoint_of(self.config.get("connect", DEFAULT_ENDPOINT))
        self.service = service_name(self.config.get("service", "echo"))
        behaviour = str(self.config.get("behaviour", "echo"))
        self.forward_to: str | None = None
        if behaviour.startswith("forward:"):
            self.forward_to = behaviour[len("forward:"):]
            transform = str(self.config.get("transform", "echo"))
        else:
            transform = behaviour
        if transform not in TRANSFORMS:
            raise ValueError(f"dcp worker: unknown behaviour/transform {transform!r}; known: "
                             f"{', '.join(TRANSFORMS)}, forward:<service>")
        self.behaviour = behaviour
        self.transform = TRANSFORMS[transform]
        self.service_time_ns = ms_to_ns(self.config.get("service_time_ms", 0), "service_time_ms")
        self.heartbeat_ns = ms_to_ns(self.config.get("heartbeat_ms", DEFAULT_HEARTBEAT_MS), "heartbeat_ms")
        if self.heartbeat_ns <= 0:
            raise ValueError("dcp worker config 'heartbeat_ms' must be positive")
        self.liveness = positive_int(self.config.get("liveness", DEFAULT_LIVENESS), "liveness")
        self.lost_ns = self.heartbeat_ns * self.liveness
        self.identity = identity_of(self.config.get("identity"))
        # state (memory only: a restarted worker registers afresh)
        self.confirmed = False  # the broker echoed our registration
        self.reg_sent_at = 0
        self.last_sent = 0
        self.last_heard = 0
        self.current: Job | None = None
        self.busy_until: int | None = None
        self.busy_since = 0
        self.backlog: deque[Job] = deque()
        self.handled = 0

    def sockets(self) -> list[SocketSpec]:
        return [SocketSpec(SOCKET, SocketType.DEALER, connect=(self.endpoint,), identity=self.identity)]

    # ---- inputs ----------------------------------------------------------------------------

    def start(self, now: int) -> list[Action]:
        self.last_heard = now
        return [self._register(now)]

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        out: list[Action] = []
        try:
            msg = self.decode(frames)
        except DecodeError as e:
            out.extend(self.malformed(socket, frames, e))
            return out
        self.last_heard = now  # any message from the broker proves it is alive
        name = msg.name
        if name == "REQUEST":
            self._on_request(socket, frames, msg, now, out)
        elif name == "PONG":
            pass
        elif name == "REGISTER":
            if msg["service"] != self.service:
                out.extend(self.unexpected(socket, frames, msg, f"confirms service {msg['service']!r}, "
                                                                f"this worker registered {self.service!r}"))
            elif not self.confirmed:
                self.confirmed = True
                out.append(Note("registered", {"service": self.service, "at": now}))
        elif name == "RECONNECT":
            out.extend(self.on_reconnect(now))
        else:  # PING, REPLY: nothing a broker sends to a worker
            out.extend(self.unexpected(socket, frames, msg, "a broker never sends it to a worker"))
        self._work(now, out)
        return out

    def handle_timer(self, now: int) -> list[Action]:
        out: list[Action] = []
        self._work(now, out)
        if now >= self.last_heard + self.lost_ns:
            out.append(Note("broker-lost", {"endpoint": self.endpoint, "last_heard": self.last_heard, "at": now}))
            out.extend(reconnect(SOCKET, self.endpoint))
            out.append(self._register(now))
            self.last_heard = now
        elif not self.confirmed and now >= self.reg_sent_at + self.heartbeat_ns:
            out.append(self._register(now))  # no echo within one interval (E-DCP-07)
        due = self.ping_deadline()
        if due is not None and now >= due:
            out.append(self._to_broker(self.enc["PING"]({}), "PING", None, now))
        return out

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        op = request.get("op")
        if op == "status":
            return [Deliver("worker-status", {"service": self.service, "busy": self.current is not None,
                                           "backlog": len(self.backlog), "handled": self.handled,
                                           "confirmed": self.confirmed})]
        raise ValueError(f"dcp worker: unknown command {op!r} (known: 'status')")

    # ---- requests --------------------------------------------------------------------------

    def _on_request(self, socket: str, frames: list[bytes], msg: Message, now: int, out: list[Action]) -> None:
        address = msg["client_address"]
        if address is None:
            # A request the broker forwards always carries a client address (E-DCP-05).
            out.append(Discard(socket, list(frames), reason="request without a client address: "
                               "the broker must insert it, and a reply cannot be routed without it",
                               clause="dcp.broker.insert-client-address"))
            return
        job = Job(address, msg["metadata"], msg["data"], now)
        if self.current is not None:
            out.append(Note("request-while-busy", {"corr": corr_of(job.metadata),
                                                   "holding": corr_of(self.current.metadata),
                                                   "queued": len(self.backlog) + 1}))
        self.backlog.append(job)

    def _work(self, now: int, out: list[Action]) -> None:
        """Finish the request in hand when its time has come, then take the next one."""
        while True:
            if self.current is not None:
                if self.busy_until is not None and self.busy_until > now:
                    return
                job, self.current, self.busy_until = self.current, None, None
                out.append(self.complete(job, now))
                self.handled += 1
            if not self.backlog:
                return
            self.current = self.backlog.popleft()
            self.busy_until = now + self.service_time_ns
            self.busy_since = now

    def complete(self, job: Job, now: int) -> Send:
        """The worker's response to one request: a reply, or the partial work passed on."""
        corr = corr_of(job.metadata)
        data = self.transform(job.data)
        if self.forward_to is not None:
            frames = self.enc["REQUEST"]({"service": self.forward_to, "client_address": job.client_address,
                                          "metadata": list(job.metadata), "data": data})
            return self._to_broker(frames, "REQUEST", {"topic": self.forward_to, "corr": corr}, now)
        frames = self.enc["REPLY"]({"client_address": job.client_address,
                                    "metadata": self.reply_metadata(job.metadata), "data": data})
        return self._to_broker(frames, "REPLY", {"topic": self.service, "corr": corr}, now)

    def reply_metadata(self, metadata: list[bytes]) -> list[bytes]:
        """Metadata parts are copied into the reply without any modification."""
        return list(metadata)

    # ---- registration and heartbeats ---------------------------------------------------------

    def _register(self, now: int) -> Send:
        self.confirmed = False
        self.reg_sent_at = now
        return self._to_broker(self.enc["REGISTER"]({"service": self.service}), "REGISTER",
                               {"topic": self.service}, now)

    def on_reconnect(self, now: int) -> list[Action]:
        """The broker forgot us: register the same service again (E-DCP-13)."""
        return [Note("reconnect", {"service": self.service, "at": now}), self._register(now)]

    def ping_deadline(self) -> int | None:
        """When the next ping is due: one interval after the last message sent, and while a
        request is in hand one interval after the work on it began. The broker reads a ping as
        "ready for more work" (E-DCP-06), so an idle worker that has just been given a request
        must not ping at once; only work that outlasts the interval gets a ping."""
        base = self.last_sent
        if self.current is not None and self.busy_since > base:
            base = self.busy_since
        return base + self.heartbeat_ns

    def _to_broker(self, frames: list[bytes], msg_type: str, meta: dict[str, Any] | None, now: int) -> Send:
        self.last_sent = now
        return Send(SOCKET, frames, msg_type, meta)

    def get_timer(self) -> int | None:
        at = self.last_heard + self.lost_ns
        if self.current is not None and self.busy_until is not None and self.busy_until < at:
            at = self.busy_until
        if not self.confirmed and self.reg_sent_at + self.heartbeat_ns < at:
            at = self.reg_sent_at + self.heartbeat_ns
        due = self.ping_deadline()
        if due is not None and due < at:
            at = due
        return at
