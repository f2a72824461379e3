"""A client's reading after a RequestEntries answer "not the leader" (status 0), a SHOULD of the
document: opt-in (a scenario that names the check says its client follows the redirect)."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CRASH, RECV, RESTART, SEND, Event, Verdict
from harness.checkers.raft.elections import RaftChecker
from harness.checkers.raft.wire import ROUTER, show
from harness.protocols.codec import Message
from harness.protocols.raft import RE_NOT_LEADER

LEADER_NAMING = ("RequestConfigResponse", "RequestUpdateResponse", "RequestLogInfoResponse",
                 "RequestEntriesResponse")


class FollowsEntriesRedirect(RaftChecker):
    """``raft.entries.not-leader`` (SHOULD, E-RAFT-17) by way of ``raft.client.broken-leader``:
    a client told by peer P "not the leader, L is" (RequestEntries status 0) reads next from L,
    so the first RequestEntries it sends after that answer must not reach P.

    Judged only where the run makes it certain: L is one of the run's peers and not P; the
    request is sent within ``within_ms`` of the answer (a client may later give L up as broken
    and search every peer), before any other answer naming a leader and before the client
    crashes; and its frames differ from every RequestEntries the client sent before (so a
    receipt at P is this request, or a copy of it, and no earlier one still on its way)."""

    name = "follows-entries-redirect"
    clause = "raft.entries.not-leader"
    level = "SHOULD"
    kinds = frozenset({SEND, RECV, CRASH, RESTART})

    def __init__(self, peers: frozenset[str] = frozenset(), within_ms: float = 50.0, **params: Any) -> None:
        super().__init__(**params)
        self.peers = peers
        self.within_ns = int(within_ms * 1e6)
        self.answered_by: dict[tuple[bytes, ...], str] = {}  # status-0 answer frames -> the peer that sent it
        self.sent_before: dict[str, set[tuple[bytes, ...]]] = {}  # client -> RequestEntries frames it sent
        self.redirect: dict[str, tuple[str, str, int, Event]] = {}  # client -> (P, L, when, answer event)
        self.watch: dict[tuple[bytes, ...], tuple[str, str, Event, Event]] = {}  # request frames -> (P, L, answer, send)
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []
        self.judged = 0

    def response_sent(self, ev: Event, request: Message, msg: Message) -> None:
        if msg.name == "RequestEntriesResponse" and msg["status"] == RE_NOT_LEADER and ev.frames:
            self.answered_by[tuple(ev.frames[1:])] = ev.node

    def response_received(self, ev: Event, request: Message, msg: Message) -> None:
        if msg.name not in LEADER_NAMING:
            return
        self.redirect.pop(ev.node, None)  # any newer word on the leader ends what an older one asked
        if msg.name != "RequestEntriesResponse" or msg["status"] != RE_NOT_LEADER:
            return
        p = self.answered_by.get(tuple(ev.frames or ()))
        leader = msg["leader_id"]
        if p is not None and isinstance(leader, str) and leader in self.peers and leader != p:
            self.redirect[ev.node] = (p, leader, ev.time_ns, ev)

    def request_sent(self, ev: Event, msg: Message) -> None:
        if msg.name != "RequestEntries" or ev.socket == ROUTER:
            return
        key = tuple(ev.frames or ())
        before = self.sent_before.setdefault(ev.node, set())
        r = self.redirect.pop(ev.node, None)
        if r is not None and ev.time_ns - r[2] <= self.within_ns and key not in before:
            self.watch[key] = (r[0], r[1], r[3], ev)
            self.judged += 1
        before.add(key)

    def request_received(self, ev: Event, msg: Message) -> None:
        if msg.name != "RequestEntries" or not ev.frames:
            return
        w = self.watch.get(tuple(ev.frames[1:]))
        if w is not None and ev.node == w[0] and len(self.problems) < 50:
            p, leader, answer, send = w
            self.problems.append((f"{send.node} was told by {p} that {leader} leads, and its next RequestEntries "
                                  f"went to {p} again", [show(answer), show(send), show(ev, msg)]))
            del self.watch[tuple(ev.frames[1:])]

    def on_other(self, ev: Event) -> None:
        self.redirect.pop(ev.node, None)  # a client that crashed starts afresh

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict(self.problems, f"{self.judged} RequestEntries sent right after a redirect to another peer, "
                                           "none reaching the peer that redirected")
