"""Deliberately broken DCP nodes: each breaks one clause and is otherwise the reference node.

The conformance suites and checkers are tested against these: a suite that passes a mutant
has a hole. Each class overrides the least it can; its docstring names the clause it breaks.

``MUTANTS`` maps a mutant's name to ``(role, factory, clause id)``; every factory is a
``NodeFactory`` (``factory(ctx)`` gives a node). The clause is the one the mutant breaks, and
a conformance suite must attribute every failure of the mutant to it. ``ALSO_BREAKS`` lists the
few mutants whose change honestly breaks a second clause, or that the harness can only
attribute to a second clause, with the reason.
"""

from __future__ import annotations

from typing import Any, Callable

from harness.node import Action, Deliver, Discard, NS_PER_MS, NodeContext, Send
from harness.protocols import DecodeError
from harness.protocols.codec import Message
from reference_nodes.dcp.broker import Broker
from reference_nodes.dcp.client import SOCKET as CLIENT_SOCKET, Client
from reference_nodes.dcp.worker import Worker

# ---- broker ------------------------------------------------------------------------------


class BusyWorkerBroker(Broker):
    """Breaks ``dcp.broker.one-request-per-worker``: when no worker of the service is ready, it
    gives the request to a busy one instead of queueing it."""

    def pick_worker(self, service: str) -> bytes | None:
        ready = super().pick_worker(service)
        if ready is not None:
            return ready
        for identity, w in self.workers.items():
            if service in w.services:
                return identity
        return None


class NoPongBroker(Broker):
    """Breaks ``dcp.heartbeat.pong``: never answers a ping (it still counts it as traffic)."""

    def _answer_ping(self, identity: bytes) -> list[Action]:
        return []


class NoReconnectBroker(Broker):
    """Breaks ``dcp.heartbeat.reconnect-unknown``: ignores heartbeats from unregistered peers."""

    def _reconnect(self, identity: bytes) -> list[Action]:
        return []


class NeverExpireBroker(Broker):
    """Breaks ``dcp.broker.service-queue``: never forgets a silent worker, so requests of its
    service go on being given to a worker that has been dead for many heartbeat intervals
    instead of waiting for a worker that is "available to accept work" — they are lost. No
    clause covers expiry itself (E-DCP-09), and as long as the broker still counts the worker
    as registered, the PONG it gives the worker's late ping is not a wrong answer; the clause
    it breaks is the queue's: requests are served to a worker that cannot take them. No
    ``worker-expired`` Note ever appears."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.expiry_ns = None


class AltersMetadataBroker(Broker):
    """Breaks ``dcp.broker.metadata-unmodified``: appends a byte to the first metadata part of
    every request it forwards (or adds a part when there is none)."""

    def forward_request(self, identity: bytes, body: list[bytes], msg: Message) -> list[bytes]:
        metadata = list(msg["metadata"])
        if metadata:
            metadata[0] = metadata[0] + b"~"
        else:
            metadata = [b"~"]
        return self.enc["REQUEST"]({"service": msg["service"], "client_address": msg["client_address"] or identity,
                                    "metadata": metadata, "data": msg["data"]})


class StripsMetadataBroker(Broker):
    """Breaks ``dcp.broker.metadata-unmodified``: forwards requests without their metadata."""

    def forward_request(self, identity: bytes, body: list[bytes], msg: Message) -> list[bytes]:
        return self.enc["REQUEST"]({"service": msg["service"], "client_address": msg["client_address"] or identity,
                                    "metadata": [], "data": msg["data"]})


class NoClientAddressBroker(Broker):
    """Breaks ``dcp.broker.insert-client-address``: forwards a request without a client address
    as it came."""

    def forward_request(self, identity: bytes, body: list[bytes], msg: Message) -> list[bytes]:
        return list(body)


class WrongHeaderBroker(Broker):
    """Breaks ``dcp.wire.header``: its protocol part reads ``DBGX`` (a transposition) instead
    of ``DGBX``."""

    def _send(self, identity: bytes, body: list[bytes], msg_type: str, meta: dict[str, Any] | None) -> Send:
        body = list(body)
        body[1] = b"DBGX" + body[1][4:]
        return super()._send(identity, body, msg_type, meta)


class WrongVersionBroker(Broker):
    """Breaks ``dcp.wire.version``: sends ``DGBX`` followed by version 2 (E-DCP-10)."""

    def _send(self, identity: bytes, body: list[bytes], msg_type: str, meta: dict[str, Any] | None) -> Send:
        body = list(body)
        body[1] = b"DGBX\x02"
        return super()._send(identity, body, msg_type, meta)


class DagboxTypeBroker(Broker):
    """Breaks ``dcp.wire.message-type``: the message-type part in the other dialect's width
    (4-byte little-endian in strict, the DagBox form; 1 byte in ``dcp:dagbox``)."""

    def _send(self, identity: bytes, body: list[bytes], msg_type: str, meta: dict[str, Any] | None) -> Send:
        body = list(body)
        code = int.from_bytes(body[2], "little")
        body[2] = bytes([code]) if len(body[2]) == 4 else code.to_bytes(4, "little")
        return super()._send(identity, body, msg_type, meta)


class CrashOnMalformedBroker(Broker):
    """Breaks E-DCP-15 / ``dcp.wire.grammar`` (drop malformed input and keep running), as
    DagBox's broker loop does (INTEROP.md): raises on the first message that does not decode.
    The runtime must turn that into a failed verdict, not a hung harness."""

    def malformed(self, socket: str, frames: list[bytes], err: Exception) -> list[Action]:
        raise RuntimeError(f"broker crashed on malformed input: {err}")


class NoRegisterEchoBroker(Broker):
    """Breaks ``dcp.broker.register-confirm``: registers the worker but never echoes the
    registration (E-DCP-07: silence is the failure)."""

    def _on_register(self, identity: bytes, worker: Any, body: list[bytes], msg: Message, now: int,
                     out: list[Action]) -> None:
        mine: list[Action] = []
        super()._on_register(identity, worker, body, msg, now, mine)
        out.extend(a for a in mine if not (isinstance(a, Send) and a.msg_type == "REGISTER"))


class LosesRegistrationBroker(Broker):
    """Breaks ``dcp.broker.register-confirm``: the first REGISTER of each worker identity is lost,
    as a race in a broker may lose it: neither remembered nor confirmed (E-DCP-07: silence is the
    failure). The worker's PINGs then get RECONNECTs and its next REGISTER is taken as the
    reference broker takes it, so every request is still served."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.lost: set[bytes] = set()  # identities whose first REGISTER it lost

    def _on_register(self, identity: bytes, worker: Any, body: list[bytes], msg: Message, now: int,
                     out: list[Action]) -> None:
        if worker is None and identity not in self.lost:
            self.lost.add(identity)
            return
        super()._on_register(identity, worker, body, msg, now, out)


class AnyServiceBroker(Broker):
    """Breaks ``dcp.broker.route-by-service``: gives a request to any ready worker, of whatever
    service, when one of the request's service is not ready."""

    def pick_worker(self, service: str) -> bytes | None:
        mine = super().pick_worker(service)
        if mine is not None:
            return mine
        for ready in self.ready.values():
            if ready:
                return next(iter(ready))
        return None


class NoQueueBroker(Broker):
    """Breaks ``dcp.broker.service-queue``: a request that finds no ready worker of its service
    is dropped instead of queued."""

    def _on_request(self, identity: bytes, worker: Any, body: list[bytes], msg: Message, now: int,
                    out: list[Action]) -> None:
        if self.pick_worker(msg["service"]) is None and not self.queues.get(msg["service"]):
            self.dropped += 1
            out.append(Discard("router", [identity, *body], reason="no ready worker: dropped (no-queue mutant)",
                               clause="dcp.broker.service-queue"))
            if worker is not None:
                self._make_ready(worker, out)
            return
        super()._on_request(identity, worker, body, msg, now, out)


class ReplacesClientAddressBroker(Broker):
    """Breaks ``dcp.broker.keep-client-address``: always puts the sender's address in the
    client-address part, also when the request already carried one (a worker passing partial
    work on), so the final reply goes to the worker instead of the client."""

    def forward_request(self, identity: bytes, body: list[bytes], msg: Message) -> list[bytes]:
        return self.enc["REQUEST"]({"service": msg["service"], "client_address": identity,
                                    "metadata": list(msg["metadata"]), "data": list(msg["data"])})


class DropsEmptyDataBroker(Broker):
    """Breaks ``dcp.broker.data-unmodified``: forwards requests without their empty data parts
    (a frame filter gone wrong)."""

    def forward_request(self, identity: bytes, body: list[bytes], msg: Message) -> list[bytes]:
        return self.enc["REQUEST"]({"service": msg["service"], "client_address": msg["client_address"] or identity,
                                    "metadata": list(msg["metadata"]), "data": [d for d in msg["data"] if d]})


class DropsTrailingEmptyBroker(Broker):
    """Breaks ``dcp.request.format``: strips trailing empty frames from the requests it forwards,
    so a request without data parts loses its metadata delimiter (and, with no metadata, the
    client-address delimiter too). A request whose data ends with an empty part loses that part
    (``dcp.broker.data-unmodified``, see ``ALSO_BREAKS``)."""

    def forward_request(self, identity: bytes, body: list[bytes], msg: Message) -> list[bytes]:
        frames = super().forward_request(identity, body, msg)
        while len(frames) > 4 and not frames[-1]:
            frames.pop()
        return frames


class ReaddressesReplyBroker(Broker):
    """Breaks ``dcp.reply.format`` (E-DCP-04: the reply keeps its client address on the second
    hop): routes the reply to the right client but rewrites its client-address part with the
    address of the worker it came from."""

    def _on_reply(self, identity: bytes, worker: Any, body: list[bytes], msg: Message, out: list[Action]) -> None:
        mine: list[Action] = []
        super()._on_reply(identity, worker, body, msg, mine)
        for a in mine:
            if isinstance(a, Send) and a.msg_type == "REPLY":
                frames = self.enc["REPLY"]({"client_address": identity, "metadata": list(msg["metadata"]),
                                            "data": list(msg["data"])})
                a = Send(a.socket, [a.frames[0], *frames], a.msg_type, a.meta)
            out.append(a)


class MisroutesReplyBroker(Broker):
    """Breaks ``dcp.broker.route-reply``: sends every reply to the peer whose request arrived
    last, not to the one its client address names."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.last_requester: bytes | None = None

    def _on_request(self, identity: bytes, worker: Any, body: list[bytes], msg: Message, now: int,
                    out: list[Action]) -> None:
        self.last_requester = identity
        super()._on_request(identity, worker, body, msg, now, out)

    def _send(self, identity: bytes, body: list[bytes], msg_type: str, meta: dict[str, Any] | None) -> Send:
        if msg_type == "REPLY" and self.last_requester is not None:
            identity = self.last_requester
        return super()._send(identity, body, msg_type, meta)


class PongPayloadBroker(Broker):
    """Breaks ``dcp.heartbeat.header-only``: its PONG carries an extra part (a timestamp)."""

    def _answer_ping(self, identity: bytes) -> list[Action]:
        return [self._send(identity, [*self._pong, b"t=0"], "PONG", None)]


class MisaddressedPongBroker(Broker):
    """Breaks ``dcp.broker.recipient-address``: sends the PONG for a ping to the worker that
    registered last, not to the one that pinged (a stale "current peer" variable)."""

    def _answer_ping(self, identity: bytes) -> list[Action]:
        newest = max(self.workers.values(), key=lambda w: w.registered_at, default=None)
        return [self._send(newest.identity if newest is not None else identity, self._pong, "PONG", None)]


# ---- worker ------------------------------------------------------------------------------


class DropsMetadataWorker(Worker):
    """Breaks ``dcp.worker.metadata-copied``: replies without the request's metadata."""

    def reply_metadata(self, metadata: list[bytes]) -> list[bytes]:
        return []


class NoPingWorker(Worker):
    """Breaks ``dcp.heartbeat.worker-ping``: never sends a ping."""

    def ping_deadline(self) -> int | None:
        return None


class NoReregisterWorker(Worker):
    """Breaks ``dcp.worker.reregister-on-reconnect``: ignores a RECONNECT."""

    def on_reconnect(self, now: int) -> list[Action]:
        return []


class NoRegisterWorker(Worker):
    """Breaks ``dcp.worker.register``: never registers on its own, neither on connect nor after
    losing the broker (it pings instead); only a RECONNECT makes it send a registration."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.told = False

    def _register(self, now: int) -> Send:
        if self.told:
            self.told = False
            return super()._register(now)
        self.confirmed = True  # nothing to re-send
        return self._to_broker(self.enc["PING"]({}), "PING", None, now)

    def on_reconnect(self, now: int) -> list[Action]:
        self.told = True
        return super().on_reconnect(now)


class SlowPingWorker(Worker):
    """Breaks ``dcp.heartbeat.worker-interval``: pings, but only every third interval."""

    def ping_deadline(self) -> int | None:
        return self.last_sent + 3 * self.heartbeat_ns


class PingPayloadWorker(Worker):
    """Breaks ``dcp.heartbeat.header-only``: its PING carries an extra part (a sequence number)."""

    def _to_broker(self, frames: list[bytes], msg_type: str, meta: dict[str, Any] | None, now: int) -> Send:
        if msg_type == "PING":
            frames = [*frames, b"1"]
        return super()._to_broker(frames, msg_type, meta, now)


class WrongReplyAddressWorker(Worker):
    """Breaks ``dcp.reply.format``: its reply carries its own service name as the client
    address instead of the address of the request."""

    def complete(self, job: Any, now: int) -> Send:
        if self.forward_to is None:  # replies only; partial work passed on is left alone
            job.client_address = self.service.encode("utf-8", "surrogateescape") or b"?"
        return super().complete(job, now)


class WrongHeaderWorker(Worker):
    """Breaks ``dcp.wire.header``: its messages start with a non-empty frame (it sends its
    routing identity, as if it were a ROUTER) instead of the empty address delimiter."""

    def _to_broker(self, frames: list[bytes], msg_type: str, meta: dict[str, Any] | None, now: int) -> Send:
        return super()._to_broker([b"w", *frames[1:]], msg_type, meta, now)


class CrashOnMalformedWorker(Worker):
    """Breaks ``dcp.wire.grammar`` (E-DCP-15: drop malformed input and keep running): raises on
    the first message that does not decode."""

    def malformed(self, socket: str, frames: list[bytes], err: DecodeError) -> list[Action]:
        raise RuntimeError(f"worker crashed on malformed input: {err}")


# ---- client ------------------------------------------------------------------------------


class DuplicateDeliveryClient(Client):
    """Breaks ``dcp.client.track-by-metadata`` (exactly-once delivery to the application): hands
    every duplicate reply (a retry answered twice) to the application again."""

    def on_duplicate(self, key: bytes, data: list[bytes], metadata: list[bytes], now: int) -> list[Action]:
        corr = key.decode("utf-8", "backslashreplace")
        return [Deliver("reply", {"id": corr, "service": None, "data": data, "metadata": metadata,
                                  "attempts": None, "sent_at": None, "latency_ns": None, "corr": corr})]


class PingingClient(Client):
    """Breaks ``dcp.heartbeat.client-no-heartbeat``: a pure client that sends a PING every
    ``ping_ms`` (config, default 250) from its start."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.ping_ns = int(float(self.config.get("ping_ms", 250)) * NS_PER_MS)
        self.next_ping: int | None = None

    def start(self, now: int) -> list[Action]:
        self.next_ping = now + self.ping_ns
        return super().start(now)

    def handle_timer(self, now: int) -> list[Action]:
        out: list[Action] = []
        if self.next_ping is not None and now >= self.next_ping:
            out.append(Send(CLIENT_SOCKET, self.enc["PING"]({}), "PING"))
            self.next_ping = now + self.ping_ns
        return out + super().handle_timer(now)

    def get_timer(self) -> int | None:
        times = [t for t in (super().get_timer(), self.next_ping) if t is not None]
        return min(times) if times else None


class NoRetryClient(Client):
    """Breaks ``dcp.client.retry``: sends each request once and never again (it gives up at the
    first timeout)."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.max_attempts = 1


class RetryNewMetadataClient(Client):
    """Breaks ``dcp.client.retry`` (E-DCP-16: a retry resends the same request with the same
    metadata): each retry carries a fresh id in its first metadata part."""

    def _send(self, p: Any, now: int) -> Send:
        send = super()._send(p, now)
        if p.attempts > 1:
            msg = self.codec.decode(send.frames)
            metadata = [p.key + b"/retry-%d" % p.attempts, *msg["metadata"][1:]]
            frames = self.enc["REQUEST"]({"service": msg["service"], "client_address": msg["client_address"],
                                          "metadata": metadata, "data": msg["data"]})
            send = Send(send.socket, frames, send.msg_type, send.meta)
        return send


class ForeignAddressClient(Client):
    """Breaks ``dcp.request.format``: a pure client that fills the client-address part with an
    address that is not its own (``somebody-else``), so the broker keeps it and the reply goes
    there. Leaving the part out is allowed (``dcp.request.client-address-optional``), and so is
    the client's own routing identity."""

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        out = super().command(request, now)
        for k, a in enumerate(out):
            if isinstance(a, Send) and a.msg_type == "REQUEST":
                p = next(q for q in self.pending.values() if q.frames == a.frames)
                msg = self.codec.decode(p.frames)
                p.frames = self.enc["REQUEST"]({"service": msg["service"], "client_address": b"somebody-else",
                                                "metadata": msg["metadata"], "data": msg["data"]})
                out[k] = Send(a.socket, list(p.frames), a.msg_type, a.meta)
        return out


class WrongVersionClient(Client):
    """Breaks ``dcp.wire.version``: sends ``DGBX`` followed by version 0 (E-DCP-10)."""

    def _send(self, p: Any, now: int) -> Send:
        send = super()._send(p, now)
        return Send(send.socket, [send.frames[0], b"DGBX\x00", *send.frames[2:]], send.msg_type, send.meta)


class CrashOnMalformedClient(Client):
    """Breaks ``dcp.wire.grammar`` (E-DCP-15: drop malformed input and keep running): raises on
    the first message that does not decode."""

    def malformed(self, socket: str, frames: list[bytes], err: DecodeError) -> list[Action]:
        raise RuntimeError(f"client crashed on malformed input: {err}")


# ---- registry ----------------------------------------------------------------------------

MUTANTS: dict[str, tuple[str, Callable[[NodeContext], Any], str]] = {
    "busy-worker": ("broker", BusyWorkerBroker, "dcp.broker.one-request-per-worker"),
    "no-pong": ("broker", NoPongBroker, "dcp.heartbeat.pong"),
    "no-reconnect": ("broker", NoReconnectBroker, "dcp.heartbeat.reconnect-unknown"),
    "never-expire": ("broker", NeverExpireBroker, "dcp.broker.service-queue"),
    "alters-metadata": ("broker", AltersMetadataBroker, "dcp.broker.metadata-unmodified"),
    "strips-metadata": ("broker", StripsMetadataBroker, "dcp.broker.metadata-unmodified"),
    "no-client-address": ("broker", NoClientAddressBroker, "dcp.broker.insert-client-address"),
    "wrong-header": ("broker", WrongHeaderBroker, "dcp.wire.header"),
    "wrong-version": ("broker", WrongVersionBroker, "dcp.wire.version"),
    "dagbox-type": ("broker", DagboxTypeBroker, "dcp.wire.message-type"),
    "crash-on-malformed": ("broker", CrashOnMalformedBroker, "dcp.wire.grammar"),
    "no-register-echo": ("broker", NoRegisterEchoBroker, "dcp.broker.register-confirm"),
    "loses-registration": ("broker", LosesRegistrationBroker, "dcp.broker.register-confirm"),
    "any-service": ("broker", AnyServiceBroker, "dcp.broker.route-by-service"),
    "no-queue": ("broker", NoQueueBroker, "dcp.broker.service-queue"),
    "replaces-client-address": ("broker", ReplacesClientAddressBroker, "dcp.broker.keep-client-address"),
    "drops-empty-data": ("broker", DropsEmptyDataBroker, "dcp.broker.data-unmodified"),
    "drops-trailing-empty": ("broker", DropsTrailingEmptyBroker, "dcp.request.format"),
    "readdresses-reply": ("broker", ReaddressesReplyBroker, "dcp.reply.format"),
    "misroutes-reply": ("broker", MisroutesReplyBroker, "dcp.broker.route-reply"),
    "pong-payload": ("broker", PongPayloadBroker, "dcp.heartbeat.header-only"),
    "misaddressed-pong": ("broker", MisaddressedPongBroker, "dcp.broker.recipient-address"),
    "drops-metadata": ("worker", DropsMetadataWorker, "dcp.worker.metadata-copied"),
    "no-ping": ("worker", NoPingWorker, "dcp.heartbeat.worker-ping"),
    "no-reregister": ("worker", NoReregisterWorker, "dcp.worker.reregister-on-reconnect"),
    "no-register": ("worker", NoRegisterWorker, "dcp.worker.register"),
    "slow-ping": ("worker", SlowPingWorker, "dcp.heartbeat.worker-interval"),
    "ping-payload": ("worker", PingPayloadWorker, "dcp.heartbeat.header-only"),
    "wrong-reply-address": ("worker", WrongReplyAddressWorker, "dcp.reply.format"),
    "worker-wrong-header": ("worker", WrongHeaderWorker, "dcp.wire.header"),
    "worker-crash-on-malformed": ("worker", CrashOnMalformedWorker, "dcp.wire.grammar"),
    "duplicate-delivery": ("client", DuplicateDeliveryClient, "dcp.client.track-by-metadata"),
    "pings": ("client", PingingClient, "dcp.heartbeat.client-no-heartbeat"),
    "no-retry": ("client", NoRetryClient, "dcp.client.retry"),
    "retry-new-metadata": ("client", RetryNewMetadataClient, "dcp.client.retry"),
    "foreign-client-address": ("client", ForeignAddressClient, "dcp.request.format"),
    "client-wrong-version": ("client", WrongVersionClient, "dcp.wire.version"),
    "client-crash-on-malformed": ("client", CrashOnMalformedClient, "dcp.wire.grammar"),
}

# Mutants that a suite may also fail on a second clause, and why. Everything else must fail
# on its registry clause alone.
ALSO_BREAKS: dict[str, dict[str, str]] = {
    "slow-ping": {
        "dcp.heartbeat.worker-ping": "a worker that pings later than agreed can miss a window in which any "
                                     "ping is due (seen over real sockets, where timing varies)",
    },
    "drops-trailing-empty": {
        "dcp.broker.data-unmodified": "a request whose data ends with an empty part loses that part",
    },
}

# Mutants that die (raise) on the input that breaks their clause. A conformance suite reports a
# crash of the implementation as its own robustness failure (harness.robustness, MUST),
# whichever step was waiting, so that is the verdict these get.
CRASHES: frozenset[str] = frozenset({"crash-on-malformed", "worker-crash-on-malformed", "client-crash-on-malformed"})
