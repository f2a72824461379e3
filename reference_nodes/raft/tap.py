"""A passive listener on the StateBroadcast PUB of every external Raft peer of a live run
(`reference_nodes.tap`): one SUB per peer, connected straight to its ``{broadcast}`` endpoint and
subscribed to everything. The harness's clients subscribe to a leader's broadcasts only when a
file asks, and the chaos proxy is not on that link, so without it no StateBroadcast of an
external peer reached the checks (``broadcast-state`` judged none)."""

from __future__ import annotations

from typing import Any

from reference_nodes.raft.common import PROTOCOL
from reference_nodes.tap import ROLE, Tap as _Tap


class Tap(_Tap):
    protocol = PROTOCOL


def tap_of(configs: dict[str, tuple[str, dict[str, Any]]], external: frozenset[str]) -> dict[str, Any] | None:
    """The tap's config for a run's external peers that publish StateBroadcasts (None: none)."""
    targets = {n: cfg["broadcast"] for n, (role, cfg) in configs.items()
               if n in external and role == "peer" and cfg.get("broadcast")}
    return {"targets": targets} if targets else None


__all__ = ["ROLE", "Tap", "tap_of"]
