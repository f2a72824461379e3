"""DCP reference broker (specs/dcp-v1.md with docs/errata.md).

One ROUTER socket (``"router"``) bound to every endpoint of ``config["bind"]``. The routing
identity of each received message is the sender; every message starts at the empty delimiter
after it (E-DCP-01), and the broker sends each message with the recipient's identity as the
envelope (``dcp.broker.recipient-address``).

- REGISTER: remember the worker (identity -> services), echo the very same message back
  (``dcp.broker.register-confirm``, E-DCP-07), the worker is ready. A repeat is a no-op that
  is echoed again; a different service is added (E-DCP-12).
- REQUEST: insert the sender's identity as client address iff that part is missing
  (E-DCP-05); nothing else changes (metadata and data byte for byte, E-DCP-14). Requests wait
  in a FIFO queue per service and go to a ready worker of the service, one at a time per
  worker (E-DCP-06). A request from a registered worker also makes it ready (partial work
  passed on).
- REPLY: forwarded unchanged, client address included, to the peer whose identity is the
  client address (E-DCP-04); the worker that sent it is ready. A reply from an unknown peer
  (a worker the broker expired that still answers, E-DCP-13) is forwarded too.
- PING from a registered worker: PONG, and the worker is ready. A heartbeat (PING or PONG)
  from a peer that is not a registered worker: exactly one RECONNECT and no PONG (E-DCP-08).
- Expiry (E-DCP-09): a worker not heard from for ``heartbeat_ms * liveness`` is forgotten
  (Note ``worker-expired``); the request it held is dropped, clients retry.
- Anything that does not decode, or that no broker expects (RECONNECT), is discarded and the
  broker keeps serving (E-DCP-15).

Config: ``bind`` (endpoint or list, default ``["tcp://127.0.0.1:5555"]``), ``heartbeat_ms``
(1000), ``liveness`` (3), ``dialect`` (``"strict"`` | ``"dcp:dagbox"``), ``queue_limit``
(requests per service queue, default 1000; ``None`` = unbounded), ``handover`` (true: a worker
or client back with its identity takes it over at once; false: libzmq's default).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from harness.node import Action, Deliver, Discard, Note, NodeContext, Send, SocketSpec, SocketType
from harness.protocols import DecodeError
from harness.protocols.codec import Message
from reference_nodes import config
from reference_nodes.dcp.common import (
    PROTOCOL, DEFAULT_ENDPOINT, DEFAULT_HEARTBEAT_MS, DEFAULT_LIVENESS, DcpNode, corr_of, ms_to_ns,
    positive_int,
)

SOCKET = "router"
DEFAULT_QUEUE_LIMIT = 1000


class Queued:
    """A request waiting for (or held by) a worker: the message as it will be forwarded."""

    __slots__ = ("frames", "service", "corr", "client", "arrived")

    def __init__(self, frames: list[bytes], service: str, corr: str | None, client: bytes, arrived: int) -> None:
        self.frames = frames  # from the delimiter on, client address present
        self.service = service
        self.corr = corr
        self.client = client
        self.arrived = arrived


class WorkerState:
    """What the broker knows of one registered worker (keyed by routing identity)."""

    __slots__ = ("identity", "services", "last_heard", "busy", "held", "registered_at")

    def __init__(self, identity: bytes, service: str, now: int) -> None:
        self.identity = identity
        self.services = [service]
        self.last_heard = now
        self.busy = False
        self.held: Queued | None = None
        self.registered_at = now


class Broker(DcpNode):
    role = "broker"

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.bind = config.endpoints(PROTOCOL, self.config.get("bind", [DEFAULT_ENDPOINT]))
        self.handover = config.flag(PROTOCOL, self.config.get("handover", True), "handover")
        self.heartbeat_ns = ms_to_ns(self.config.get("heartbeat_ms", DEFAULT_HEARTBEAT_MS), "heartbeat_ms")
        if self.heartbeat_ns <= 0:
            raise ValueError("dcp broker config 'heartbeat_ms' must be positive")
        self.liveness = positive_int(self.config.get("liveness", DEFAULT_LIVENESS), "liveness")
        # None disables expiry (only the never-expire mutant does that).
        self.expiry_ns: int | None = self.heartbeat_ns * self.liveness
        limit = self.config.get("queue_limit", DEFAULT_QUEUE_LIMIT)
        self.queue_limit = None if limit is None else positive_int(limit, "queue_limit")
        self.workers: dict[bytes, WorkerState] = {}
        self.by_heard: dict[bytes, None] = {}  # registered workers, least recently heard first
        self.ready: dict[str, dict[bytes, None]] = {}  # service -> ready workers, longest-ready first
        self.queues: dict[str, deque[Queued]] = {}
        self.dropped = 0  # requests dropped: queue full or held by an expired worker
        self._pong = self.enc["PONG"]({})
        self._reconnect_frames = self.enc["RECONNECT"]({})

    def sockets(self) -> list[SocketSpec]:
        # Handover: a worker or client that comes back with its identity is reachable at once.
        return [SocketSpec(SOCKET, SocketType.ROUTER, bind=self.bind, handover=self.handover)]

    # ---- inputs ----------------------------------------------------------------------------

    def start(self, now: int) -> list[Action]:
        return []

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        out: list[Action] = []
        self._expire_due(now, out)
        if not frames:
            out.append(Discard(socket, [], reason="empty message (no routing identity)", clause="dcp.wire.grammar"))
            return out
        identity = frames[0]
        body = frames[1:]
        try:
            msg = self.decode(body)
        except DecodeError as e:
            out.extend(self.malformed(socket, frames, e))
            return out
        worker = self.workers.get(identity)
        if worker is not None:
            self._heard(worker, now)  # any message from a worker proves it is alive
        name = msg.name
        if name == "REQUEST":
            self._on_request(identity, worker, body, msg, now, out)
        elif name == "REPLY":
            self._on_reply(identity, worker, body, msg, out)
        elif name == "PING":
            if worker is None:
                out.extend(self._reconnect(identity))
            else:
                out.extend(self._answer_ping(identity))
                self._make_ready(worker, out)
        elif name == "PONG":
            if worker is None:
                out.extend(self._reconnect(identity))
            # from a registered worker: traffic only (E-DCP-08)
        elif name == "REGISTER":
            self._on_register(identity, worker, body, msg, now, out)
        else:  # RECONNECT: only the broker sends it
            out.extend(self.unexpected(socket, frames, msg, "only a broker sends RECONNECT"))
        return out

    def handle_timer(self, now: int) -> list[Action]:
        out: list[Action] = []
        self._expire_due(now, out)
        return out

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        op = request.get("op")
        if op == "status":
            return [Deliver("broker-status", self.status())]
        raise ValueError(f"dcp broker: unknown command {op!r} (known: 'status')")

    def status(self) -> dict[str, Any]:
        return {
            "workers": {
                w.identity: {"services": list(w.services), "busy": w.busy, "last_heard": w.last_heard}
                for w in self.workers.values()
            },
            "queues": {s: len(q) for s, q in self.queues.items() if q},
            "dropped": self.dropped,
        }

    # ---- messages --------------------------------------------------------------------------

    def _on_register(self, identity: bytes, worker: WorkerState | None, body: list[bytes], msg: Message,
                     now: int, out: list[Action]) -> None:
        service = msg["service"]
        if worker is None:
            worker = WorkerState(identity, service, now)
            self.workers[identity] = worker
            self.by_heard[identity] = None
            out.append(Note("worker-registered", {"worker": identity, "service": service, "at": now}))
        elif service not in worker.services:
            worker.services.append(service)
            out.append(Note("worker-registered", {"worker": identity, "service": service, "at": now}))
        # The confirmation is the very same message (E-DCP-07).
        out.append(self._send(identity, body, "REGISTER", {"topic": service}))
        self._make_ready(worker, out)

    def _on_request(self, identity: bytes, worker: WorkerState | None, body: list[bytes], msg: Message,
                    now: int, out: list[Action]) -> None:
        service = msg["service"]
        fwd = self.forward_request(identity, body, msg)
        client = msg["client_address"] or identity
        queue = self.queues.get(service)
        if queue is None:
            queue = self.queues[service] = deque()
        if self.queue_limit is not None and len(queue) >= self.queue_limit:
            self.dropped += 1
            out.append(Discard(SOCKET, [identity, *body],
                               reason=f"service queue {service!r} is full ({self.queue_limit} requests)",
                               clause="dcp.architecture.persistence-not-required"))
        else:
            queue.append(Queued(fwd, service, corr_of(msg["metadata"]), client, now))
        if worker is not None:
            self._make_ready(worker, out)  # partial work passed on: the worker has responded
        self._dispatch(service, out)

    def forward_request(self, identity: bytes, body: list[bytes], msg: Message) -> list[bytes]:
        """The request as a worker will receive it: the sender's identity inserted as client
        address iff the part is missing; every other part unchanged (E-DCP-05, E-DCP-14)."""
        if msg["client_address"] is None:
            # [delimiter, protocol, type, service, <here>, "", metadata..., "", data...]
            return [*body[:4], identity, *body[4:]]
        return list(body)

    def _on_reply(self, identity: bytes, worker: WorkerState | None, body: list[bytes], msg: Message,
                  out: list[Action]) -> None:
        client = msg["client_address"]
        topic = worker.held.service if worker is not None and worker.held is not None else None
        meta: dict[str, Any] = {"corr": corr_of(msg["metadata"])}
        if topic is not None:
            meta["topic"] = topic
        # Unchanged, client address kept, routed to the client (E-DCP-04).
        out.append(self._send(client, body, "REPLY", meta))
        if worker is not None:
            self._make_ready(worker, out)

    # ---- workers and queues ----------------------------------------------------------------

    def _heard(self, worker: WorkerState, now: int) -> None:
        worker.last_heard = now
        del self.by_heard[worker.identity]
        self.by_heard[worker.identity] = None

    def _make_ready(self, worker: WorkerState, out: list[Action]) -> None:
        """The worker responded (reply, request, ping or registration): it may take work."""
        worker.busy = False
        worker.held = None
        for s in worker.services:
            self.ready.setdefault(s, {}).setdefault(worker.identity, None)
        for s in worker.services:
            self._dispatch(s, out)

    def _dispatch(self, service: str, out: list[Action]) -> None:
        queue = self.queues.get(service)
        while queue:
            identity = self.pick_worker(service)
            if identity is None:
                return
            self._give(self.workers[identity], queue.popleft(), out)

    def pick_worker(self, service: str) -> bytes | None:
        """A worker that may take a request of this service now: the one ready the longest."""
        ready = self.ready.get(service)
        if not ready:
            return None
        return next(iter(ready))

    def _give(self, worker: WorkerState, item: Queued, out: list[Action]) -> None:
        worker.busy = True
        worker.held = item
        for s in worker.services:
            r = self.ready.get(s)
            if r is not None:
                r.pop(worker.identity, None)
        out.append(self._send(worker.identity, item.frames, "REQUEST", {"topic": item.service, "corr": item.corr}))

    def _expire_due(self, now: int, out: list[Action]) -> None:
        if self.expiry_ns is None:
            return
        while self.by_heard:
            worker = self.workers[next(iter(self.by_heard))]
            if worker.last_heard + self.expiry_ns > now:
                return
            self._expire(worker, now, out)

    def _expire(self, worker: WorkerState, now: int, out: list[Action]) -> None:
        identity = worker.identity
        del self.workers[identity]
        del self.by_heard[identity]
        for s in worker.services:
            r = self.ready.get(s)
            if r is not None:
                r.pop(identity, None)
        held = worker.held
        if held is not None:
            self.dropped += 1  # not required to keep it; the client retries
        out.append(Note("worker-expired", {
            "worker": identity,
            "service": worker.services[0],
            "services": list(worker.services),
            "last_heard": worker.last_heard,
            "expired_at": now,
            "limit_ns": self.expiry_ns,
            "dropped_request": None if held is None else held.corr,
        }))

    def get_timer(self) -> int | None:
        if self.expiry_ns is None or not self.by_heard:
            return None
        return self.workers[next(iter(self.by_heard))].last_heard + self.expiry_ns

    # ---- sending ---------------------------------------------------------------------------

    def _answer_ping(self, identity: bytes) -> list[Action]:
        return [self._send(identity, self._pong, "PONG", None)]

    def _reconnect(self, identity: bytes) -> list[Action]:
        return [self._send(identity, self._reconnect_frames, "RECONNECT", None)]

    def _send(self, identity: bytes, body: list[bytes], msg_type: str, meta: dict[str, Any] | None) -> Send:
        """Every message the broker sends goes out here: recipient identity, then the message."""
        return Send(SOCKET, [identity, *body], msg_type, meta)
