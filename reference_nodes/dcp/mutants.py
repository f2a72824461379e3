"""Deliberately broken DCP nodes: each breaks one clause and is otherwise the reference node.

The conformance suites and checkers are tested against these: a suite that passes a mutant
has a hole. Each class overrides the least it can; its docstring names the clause it breaks.

``MUTANTS`` maps a mutant's name to ``(role, factory, clause id)``; every factory is a
``NodeFactory`` (``factory(ctx)`` gives a node).
"""

from __future__ import annotations

from typing import Any, Callable

from harness.node import Action, Deliver, NS_PER_MS, NodeContext, Send
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
    """Never forgets a silent worker. No clause covers expiry itself (E-DCP-09); the wire shows
    it as a PONG, where a RECONNECT is due, to a worker that comes back after more than
    ``liveness`` silent intervals (E-DCP-08 names "a worker that the broker has forgotten ...
    expiry" as a case of ``dcp.heartbeat.reconnect-unknown``), and as requests given to dead
    workers. No ``worker-expired`` Note ever appears."""

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
    ``ping_ms`` (config, default 1000) from its start."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.ping_ns = int(float(self.config.get("ping_ms", 1000)) * NS_PER_MS)
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

    def earliest(self) -> int | None:
        times = [t for t in (super().earliest(), self.next_ping) if t is not None]
        return min(times) if times else None


# ---- registry ----------------------------------------------------------------------------

MUTANTS: dict[str, tuple[str, Callable[[NodeContext], Any], str]] = {
    "busy-worker": ("broker", BusyWorkerBroker, "dcp.broker.one-request-per-worker"),
    "no-pong": ("broker", NoPongBroker, "dcp.heartbeat.pong"),
    "no-reconnect": ("broker", NoReconnectBroker, "dcp.heartbeat.reconnect-unknown"),
    "never-expire": ("broker", NeverExpireBroker, "dcp.heartbeat.reconnect-unknown"),
    "alters-metadata": ("broker", AltersMetadataBroker, "dcp.broker.metadata-unmodified"),
    "strips-metadata": ("broker", StripsMetadataBroker, "dcp.broker.metadata-unmodified"),
    "no-client-address": ("broker", NoClientAddressBroker, "dcp.broker.insert-client-address"),
    "wrong-header": ("broker", WrongHeaderBroker, "dcp.wire.header"),
    "wrong-version": ("broker", WrongVersionBroker, "dcp.wire.version"),
    "dagbox-type": ("broker", DagboxTypeBroker, "dcp.wire.message-type"),
    "crash-on-malformed": ("broker", CrashOnMalformedBroker, "dcp.wire.grammar"),
    "drops-metadata": ("worker", DropsMetadataWorker, "dcp.worker.metadata-copied"),
    "no-ping": ("worker", NoPingWorker, "dcp.heartbeat.worker-ping"),
    "no-reregister": ("worker", NoReregisterWorker, "dcp.worker.reregister-on-reconnect"),
    "duplicate-delivery": ("client", DuplicateDeliveryClient, "dcp.client.track-by-metadata"),
    "pings": ("client", PingingClient, "dcp.heartbeat.client-no-heartbeat"),
}
