"""A passive listener on what external nodes publish (live runs with ``command:`` groups): one
SUB per node, connected straight to an endpoint the node binds (not through the chaos proxy),
subscribed to everything (``""``). It sends nothing; the probe reports each receipt, and a
protocol's checks judge it as that node's send (`ProtocolPackage.tap`). A PUB filters at the
sender and nothing else may subscribe, so without it what such a node publishes may never leave
its process, or never reach a probe.

Config: ``targets``: ``{node name: endpoint}``; the socket of each is named after its node.
"""

from __future__ import annotations

from typing import Any

from harness.node import Action, BaseNode, NodeContext, SocketSpec, SocketType

ROLE = "tap"  # harness.checkers.base.TAP: the checks read a receipt of this role as the node's send


class Tap(BaseNode):
    """A protocol's tap is this class with its ``protocol`` set."""

    role = ROLE

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.targets: dict[str, str] = dict(self.config.get("targets", {}))

    def sockets(self) -> list[SocketSpec]:
        return [SocketSpec(name, SocketType.SUB, connect=(endpoint,), subscribe=(b"",))
                for name, endpoint in self.targets.items()]

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        return []  # the probe reports the receipt to the checks; nothing to do

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        return []
