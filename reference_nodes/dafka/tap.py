"""A passive listener on the XPUB of every external Dafka node of a live run (`command:` groups):
one SUB per node, connected straight to the endpoint the node binds (not through the chaos proxy)
and subscribed to everything (``""``).

Why: a Dafka XPUB filters at the sender, so a message on a topic no node subscribes to never
leaves the process; an external producer that publishes without a topic frame
(``no-topic-frame``), or a store that ACKs on the topic name instead of the partition
(``ack-by-topic``), showed nothing on the wire the checks saw. Subscribed to everything, the
tap receives every command the node publishes, exactly as it sent it, and the checks
(``topic-frames``) judge it as the node's send. It sends nothing: a subscription to ``""``
names no command id, so no node has anything to answer (a store greets ``L`` + an address, a
consumer re-sends GET-HEADS on ``G``).

Config: ``targets``: ``{node name: XPUB endpoint}``; the socket of each is named after its node.
"""

from __future__ import annotations

from typing import Any

from reference_nodes.dafka.common import PROTOCOL
from reference_nodes.tap import ROLE, Tap as _Tap


class Tap(_Tap):
    protocol = PROTOCOL


def tap_of(configs: dict[str, tuple[str, dict[str, Any]]], external: frozenset[str]) -> dict[str, Any] | None:
    """The tap's config for a run's external producers, stores and consumers (None: none)."""
    targets = {n: cfg["bind"] for n, (role, cfg) in configs.items()
               if n in external and role in ("producer", "store", "consumer") and cfg.get("bind")}
    return {"targets": targets} if targets else None


__all__ = ["ROLE", "Tap", "tap_of"]
