"""Dafka reference tower: the discovery rendezvous (E-DAFKA-13, INTEROP.md; zeromq/dafka's
``dafka_tower``).

Two sockets:

- ``xsub``: XSUB bound at ``bind_sub`` (default ``tcp://127.0.0.1:5556``); the nodes' PUB
  sockets (``tower_pub``) connect here. It subscribes to ``B`` itself, so beacons flow even
  before any node subscribed, and forwards the nodes' subscriptions upstream.
- ``xpub``: XPUB bound at ``bind_pub`` (default ``tcp://127.0.0.1:5557``); the nodes' SUB
  sockets (``tower_sub``) connect here. Every new subscriber first gets the welcome message
  ``W`` (TOWER-WELCOME, ``SocketSpec.welcome``): the node learns that a tower is there.

A BEACON ``["B", sender, host, port]`` from a node goes out on ``xpub`` to every node as
TOWER-BEACON ``["B", sender, "tcp://host:port"]`` (the first beacon of a sender is noted,
``node-seen``). A subscription or unsubscription the XPUB reports is forwarded to ``xsub``
(towards the nodes' PUBs), except those of ``W``, which only the tower itself sends (as
zeromq/dafka does). A beacon that does not decode, or that cannot be forwarded (its host
cannot be part of a ``tcp://`` endpoint), is discarded with its clause.

Config: ``bind_sub``, ``bind_pub`` (an endpoint or a list of them), ``dialect`` (beacons are
the same in both). Commands: ``{"op": "status"}`` -> ``Deliver("tower-status", {"nodes": ...})``.
"""

from __future__ import annotations

from typing import Any

from harness.node import Action, BaseNode, Deliver, Discard, NodeContext, Note, Send, SocketSpec, SocketType
from harness.protocols import DecodeError, EncodeError
from harness.protocols.dafka import BEACON_ID, TO_TOWER, WELCOME_ID
from reference_nodes import config
from reference_nodes.dafka.common import DEFAULT_TOWER, DIALECTS, PROTOCOL, UNEXPECTED_CLAUSE, endpoints

XSUB = "xsub"
XPUB = "xpub"


class Tower(BaseNode):
    protocol = PROTOCOL
    role = "tower"

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.dialect, self.codec = config.dialect_codec(PROTOCOL, self.config, DIALECTS)
        self.bind_sub = endpoints(self.config.get("bind_sub", DEFAULT_TOWER[0]), "bind_sub")
        self.bind_pub = endpoints(self.config.get("bind_pub", DEFAULT_TOWER[1]), "bind_pub")
        self.nodes: dict[str, str] = {}  # sender -> endpoint, first seen first
        self.forwarded = 0

    def sockets(self) -> list[SocketSpec]:
        return [
            SocketSpec(XSUB, SocketType.XSUB, bind=self.bind_sub, subscribe=(BEACON_ID,)),
            SocketSpec(XPUB, SocketType.XPUB, bind=self.bind_pub, welcome=WELCOME_ID),
        ]

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        if socket == XSUB:
            return self.on_beacon(frames)
        if socket == XPUB:
            return self.on_subscription(frames)
        return [Discard(socket, list(frames), f"nothing is expected on socket {socket!r}", UNEXPECTED_CLAUSE)]

    def on_beacon(self, frames: list[bytes]) -> list[Action]:
        try:
            msg = self.codec.decode(frames, channel=TO_TOWER)
        except DecodeError as e:
            return [Discard(XSUB, list(frames), str(e), e.clause)]
        sender = msg["sender"]
        endpoint = f"tcp://{msg['host']}:{msg['port']}"
        try:
            out_frames = self.codec.encode("TOWER-BEACON", {"sender": sender, "endpoint": endpoint})
        except EncodeError as e:
            return [Discard(XSUB, list(frames), str(e), "dafka.interconnect.address-beacon")]
        out: list[Action] = []
        if self.nodes.get(sender) != endpoint:
            out.append(Note("node-seen", {"peer": sender, "endpoint": endpoint}))
            self.nodes[sender] = endpoint
        self.forwarded += 1
        out.append(Send(XPUB, out_frames, "TOWER-BEACON", {"topic": None, "seq": None}))
        return out

    def on_subscription(self, frames: list[bytes]) -> list[Action]:
        if len(frames) != 1 or not frames[0] or frames[0][0] > 1:
            return [Discard(XPUB, list(frames), "XPUB: not a subscription notification", UNEXPECTED_CLAUSE)]
        note = frames[0]
        if note[1:2] == WELCOME_ID:
            return []  # welcome subscriptions stay here: only the tower sends W
        kind = "SUBSCRIBE" if note[0] == 1 else "UNSUBSCRIBE"
        return [Send(XSUB, [note], kind, {"topic": None, "seq": None})]

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        op = request.get("op")
        if op == "status":
            return [Deliver("tower-status", {"nodes": dict(self.nodes), "forwarded": self.forwarded})]
        raise ValueError(f"dafka tower: unknown command {op!r} (known: 'status')")
