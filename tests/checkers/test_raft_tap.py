"""The StateBroadcasts of external Raft peers, as the tap hears them (reference_nodes.raft.tap):
each is judged by ``broadcast-state`` as the peer's send on its PUB. Before the tap, nothing
subscribed to an external peer's PUB and the check judged none ("0 StateBroadcast(s)"), so
``apply-uncommitted`` and ``broadcast-unapplied`` passed live as the external peers."""

from __future__ import annotations

from harness.checkers.base import RECV, TAP, VIA_PROXY, Event
from harness.checkers.raft import BroadcastState
from harness.checkers.raft.elections import as_published
from harness.packages.raft import raft_senders, tap
from harness.protocols import codec
from reference_nodes.raft.tap import Tap

RAFT = codec("raft")
MS = 1_000_000


def heard(t_ms: float, peer: str, last_applied: int) -> Event:
    frames = RAFT.encode("StateBroadcast", {"cluster": b"", "term": 2, "last_applied": last_applied, "entries": []})
    return Event(int(t_ms * MS), "harness-tap", TAP, RECV, peer, frames, codec=RAFT)


def test_a_tapped_broadcast_is_the_peers_publication_seen_from_outside() -> None:
    ev = as_published(heard(5, "peers.1", 0))
    assert (ev.node, ev.role, ev.kind, ev.socket, ev.via) == ("peers.1", "peer", "send", "pub", VIA_PROXY)


def test_broadcast_state_judges_what_the_tap_heard() -> None:
    check = BroadcastState(peers=3)
    check.on_event(heard(5, "peers.1", 0))  # a heartbeat: nothing applied yet
    [ok] = check.finish(10 * MS)
    assert ok.ok and ok.detail.startswith("1 StateBroadcast(s)"), ok.detail
    check.on_event(heard(6, "peers.2", 4))  # nothing on the wire justifies index 4
    [bad] = check.finish(10 * MS)
    assert not bad.ok and bad.clause == "raft.broadcast.last-applied"
    assert "peers.2 broadcast LAST APPLIED INDEX 4 in term 2, beyond the highest commit index 0" in bad.detail


def test_the_tap_listens_to_the_external_peers_that_publish() -> None:
    configs = {"peers.0": ("peer", {"broadcast": "tcp://127.0.0.1:4001"}),
               "peers.1": ("peer", {"broadcast": "tcp://127.0.0.1:4002"}),
               "peers.2": ("peer", {}),  # its broadcasts switched off
               "clients.0": ("client", {})}
    role, factory, cfg = tap(configs, frozenset({"peers.0", "peers.2"}))  # type: ignore[misc]
    assert (role, factory, cfg) == (TAP, Tap, {"targets": {"peers.0": "tcp://127.0.0.1:4001"}})
    assert tap(configs, frozenset({"peers.2"})) is None
    assert raft_senders(TAP, "peers.0", []) == "peers.0"  # wire-conformance names the peer it heard
