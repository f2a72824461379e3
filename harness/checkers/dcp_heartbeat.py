"""DCP heartbeating, checked from what the broker receives and sends back (specs/dcp.txt,
"Heartbeating", with docs/errata.md E-DCP-02, -07, -08).

The rules hold for every correct implementation in every run, whatever the faults: they judge
what a node sent in answer to what it received, never what the network did with it.
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CRASH, RECV, RESTART, SEND, Checker, Event, Verdict
from harness.protocols import DecodeError

ANSWERS = ("PONG", "RECONNECT")
# A PING is unanswered once this many later PINGs of the same peer reached the broker with no
# answer in between: generous for a broker that answers on its own heartbeat tick, not at once.
LATER_PINGS = 2


class HeartbeatAnswers(Checker):
    """The broker answers every PING: before two more PINGs of the same peer reach it, it has
    sent that peer a PONG, or a RECONNECT (``dcp.heartbeat.pong``); it PONGs only a peer that
    REGISTERed with it since it last started, and a RECONNECT is the answer to any other
    (``dcp.heartbeat.reconnect-unknown``); a registration it PONGs was confirmed with the same
    REGISTER message first (``dcp.broker.register-confirm``). Clients never send a PING
    (``dcp.heartbeat.client-no-heartbeat``). A broker that crashes owes nothing for the PINGs of
    its earlier life; a PING still unanswered when the run ends is not judged."""

    name = "heartbeat-answers"
    clause = "dcp.heartbeat.pong"
    kinds = frozenset({SEND, RECV, CRASH, RESTART})

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.registered: dict[str, set[bytes]] = {}  # broker -> peers that REGISTERed in this life
        self.confirmed: dict[str, set[bytes]] = {}  # broker -> peers it sent a REGISTER back
        self.pending: dict[tuple[str, bytes], list[Event]] = {}  # (broker, peer) -> its PINGs since an answer
        self.bad: list[tuple[Event, str, str]] = []
        self.pings = 0

    def on_event(self, ev: Event) -> None:
        if ev.kind in (CRASH, RESTART):
            if ev.role == "broker":
                self.registered.pop(ev.node, None)
                self.confirmed.pop(ev.node, None)
                self.pending = {k: v for k, v in self.pending.items() if k[0] != ev.node}
            return
        if ev.role == "client" and ev.kind == SEND and ev.msg_type == "PING":
            self.bad.append((ev, f"client {ev.node} sent a PING", "dcp.heartbeat.client-no-heartbeat"))
            return
        if ev.role != "broker" or not ev.frames:
            return
        peer, key, kind = ev.frames[0], (ev.node, ev.frames[0]), message_type(ev)
        if ev.kind == RECV and kind == "REGISTER":
            self.registered.setdefault(ev.node, set()).add(peer)
        elif ev.kind == RECV and kind == "PING":
            self.pings += 1
            waiting = self.pending.setdefault(key, [])
            waiting.append(ev)
            if len(waiting) > LATER_PINGS:
                first = waiting[0]
                self.bad.append((first, f"{ev.node} did not answer the PING of {peer!r} received at "
                                 f"{first.time_ns / 1e6:.1f} ms before {LATER_PINGS} more came", self.clause))
                waiting.clear()
        elif ev.kind == SEND and kind == "REGISTER":
            self.confirmed.setdefault(ev.node, set()).add(peer)
        elif ev.kind == SEND and kind in ANSWERS:
            self.pending.pop(key, None)
            if kind == "PONG":
                self._judge_pong(ev, peer)

    def _judge_pong(self, ev: Event, peer: bytes) -> None:
        if peer not in self.registered.get(ev.node, set()):
            self.bad.append((ev, f"{ev.node} sent PONG to {peer!r}, which had not REGISTERed with it since it "
                                 "started (a RECONNECT is the answer)", "dcp.heartbeat.reconnect-unknown"))
        elif peer not in self.confirmed.get(ev.node, set()):
            self.bad.append((ev, f"{ev.node} sent PONG to {peer!r}, whose registration it never confirmed with "
                                 "a REGISTER", "dcp.broker.register-confirm"))
            self.confirmed.setdefault(ev.node, set()).add(peer)  # one failure per registration

    def finish(self, end_ns: int) -> list[Verdict]:
        if not self.bad:
            return [self.ok(f"{self.pings} PING(s) received by the broker, each answered in time; "
                            "PONGs only to confirmed registrations; no client PING")]
        return [self.first_problem(self.bad, "heartbeat problem(s)")]


def message_type(ev: Event) -> str:
    """The DCP message type of a broker's send or receive (a receive comes undecoded: frame 0 is
    the peer's identity on the ROUTER), or "" when it does not decode."""
    if ev.msg_type or ev.codec is None or not ev.frames:
        return ev.msg_type
    try:
        return ev.codec.decode(ev.frames[1:]).name
    except DecodeError:
        return ""
