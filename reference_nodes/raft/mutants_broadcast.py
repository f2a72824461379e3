"""Deliberately broken BroadcastStateMachines (peers) and StateBroadcast subscribers (clients):
each breaks one clause of the document's StateBroadcast and RequestBroadcastStateUrl sections
and is otherwise the reference node. `reference_nodes.raft.mutants` lists them in ``MUTANTS``;
the conformance suites' broadcast cases (docs/conformance-raft.md) are proven against them.
"""

from __future__ import annotations

from typing import Any, Callable

from harness.node import Action, NodeContext
from harness.protocols import DecodeError
from reference_nodes.raft.client import Client
from reference_nodes.raft.peer import Peer


class SilentBroadcastPeer(Peer):
    """Breaks ``raft.broadcast.pub-socket``: binds its PUB at the broadcast URL but fans nothing
    out on it (no StateBroadcast ever reaches a subscriber)."""

    def broadcast(self, raws: list[bytes], now: int) -> list[Action]:
        super().broadcast(raws, now)  # keeps the heartbeat timer running
        return []


class NoBroadcastHeartbeatPeer(Peer):
    """Breaks ``raft.broadcast.heartbeat``: broadcasts applied entries, but never the empty
    StateBroadcast every CLIENT_HEARTBEAT_INTERVAL."""

    def broadcast(self, raws: list[bytes], now: int) -> list[Action]:
        out = super().broadcast(raws, now)
        return out if raws else []


class NoBroadcastOnApplyPeer(Peer):
    """Breaks ``raft.broadcast.on-apply``: when it applies entries it broadcasts at once, but an
    empty StateBroadcast naming the new LAST APPLIED INDEX, never the entries (the literal
    reading of "an empty StateBroadcast ... or immediately when ... applied", which E-RAFT-27
    decides against)."""

    def broadcast(self, raws: list[bytes], now: int) -> list[Action]:
        return super().broadcast([], now)


class StaleLastAppliedPeer(Peer):
    """Breaks ``raft.broadcast.last-applied``: once it has applied anything, every StateBroadcast
    names the index before the last applied one, so a broadcast's entries end one past its LAST
    APPLIED INDEX."""

    def broadcast(self, raws: list[bytes], now: int) -> list[Action]:
        lag = 1 if self.applied > 0 else 0
        self.applied -= lag
        try:
            return super().broadcast(raws, now)
        finally:
            self.applied += lag


class BroadcastUnappliedPeer(Peer):
    """Breaks ``raft.broadcast.last-applied``: its heartbeats name its log's last index as the
    LAST APPLIED INDEX, what it appended, not what it applied (the same while every entry
    commits at once; above it while a majority is missing)."""

    def broadcast(self, raws: list[bytes], now: int) -> list[Action]:
        if raws:
            return super().broadcast(raws, now)
        applied, self.applied = self.applied, self.log.last_index
        try:
            return super().broadcast(raws, now)
        finally:
            self.applied = applied


class UrlBeforeLeaderClient(Client):
    """Breaks ``raft.broadcast.url-after-leader``: subscribing, it asks the peer that answered
    its RequestConfig for the broadcast URL even when the answer names no leader."""

    def on_config_response(self, frames: list[bytes], now: int) -> list[Action]:
        out = super().on_config_response(frames, now)
        if self.subscribe and self.leader is None and self.url_rpc is None:
            self.leader = "?"  # ask_broadcast_url asks only once a leader is known
            out += self.ask_broadcast_url(now)
            self.leader = None
        return out


class IgnoresMissingUrlClient(Client):
    """Breaks ``raft.broadcast.config-on-missing-url``: an answer without the URL makes it ask
    for the URL again after a grace period, never for the configuration."""

    def on_url_response(self, frames: list[bytes], now: int) -> list[Action]:
        try:
            msg = self.d.dec["RequestBroadcastStateUrlResponse"](frames)
        except DecodeError:
            return super().on_url_response(frames, now)
        if msg.get("url") is not None:
            return super().on_url_response(frames, now)
        self.url_rpc = None
        self.url_deadline = now + self.election_grace
        return []


BROADCAST_MUTANTS: dict[str, tuple[str, Callable[[NodeContext], Any], str]] = {
    "silent-broadcast": ("peer", SilentBroadcastPeer, "raft.broadcast.pub-socket"),
    "no-broadcast-heartbeat": ("peer", NoBroadcastHeartbeatPeer, "raft.broadcast.heartbeat"),
    "no-broadcast-on-apply": ("peer", NoBroadcastOnApplyPeer, "raft.broadcast.on-apply"),
    "stale-last-applied": ("peer", StaleLastAppliedPeer, "raft.broadcast.last-applied"),
    "broadcast-unapplied": ("peer", BroadcastUnappliedPeer, "raft.broadcast.last-applied"),
    "url-before-leader": ("client", UrlBeforeLeaderClient, "raft.broadcast.url-after-leader"),
    "ignores-missing-url": ("client", IgnoresMissingUrlClient, "raft.broadcast.config-on-missing-url"),
}

# Clauses a mutant of `reference_nodes.raft.mutants` also breaks through the broadcast cases
# (its ALSO_BREAKS), with why.
BROADCAST_ALSO_BREAKS: dict[str, dict[str, str]] = {
    "apply-uncommitted": {"raft.broadcast.last-applied": "its StateBroadcast shows what it applied before a majority "
                                                         "held it: a LAST APPLIED INDEX above anything committed, "
                                                         "which on the wire is the same as a broadcast of entries it "
                                                         "did not apply (broadcast-uncommitted)"},
}
