"""A client's reading after RequestEntries answers: after "not the leader" (status 0) and after
"more to come" (status 2, 3). Both are SHOULDs of the document: opt-in (a scenario that names the
check says its client follows the redirect, or follows up)."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CRASH, RECV, RESTART, SEND, Event, Verdict
from harness.checkers.raft.elections import RaftChecker
from harness.checkers.raft.wire import ROUTER, show
from harness.protocols.codec import Message
from harness.protocols.raft import RE_MORE, RE_NOT_LEADER, RE_SNAPSHOT

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


FOLLOW_UP_STATUSES = (RE_MORE, RE_SNAPSHOT)


class EntriesFollowUp(RaftChecker):
    """``raft.entries.follow-up`` (SHOULD): "The client upon receiving a response with status=2
    or 3 should send a follow up request message ... retaining unique request id frame value of
    the previous request." Opt-in: a scenario that names the check says its clients follow up.

    Judged where the run makes it certain that a request answers the response: the first
    RequestEntries a client sends in the step in which it took in a status 2 or 3 response (its
    reaction to it, at the same instant of the simulator's clock; over real sockets a step's
    events carry the times they happened, so nothing is judged there) must carry that
    response's request id. Only a response of the client's current RPC is judged: the id of
    the last RequestEntries it sent, unless that one was a stop (count 0). A late response of
    an RPC the client has stopped or left for a newer one owes nothing. A follow-up with count
    0 (a stop) keeps the id as well; a new RPC the client starts after it is not judged, nor a
    client that sends nothing, nor what it sends later (it may have given the RPC up). The
    previous LOG INDEX of the follow-up is not compared: the dialects differ on it (a 0.7
    follow-up repeats the first one). Not judged for a client run as an external process: the
    chaos proxy does not show which of its sends reacted to which response."""

    name = "entries-follow-up"
    clause = "raft.entries.follow-up"
    level = "SHOULD"
    kinds = frozenset({SEND, RECV, CRASH, RESTART})

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.answer: dict[str, tuple[int, bytes, Event, Message]] = {}  # client -> (when, id, response) to react to
        self.current: dict[str, bytes] = {}  # client -> id of its RPC in progress (its last RequestEntries, not a stop)
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []
        self.judged = 0

    def response_received(self, ev: Event, request: Message, msg: Message) -> None:
        if msg.name != "RequestEntriesResponse" or ev.via or not ev.frames:
            return
        if msg["status"] in FOLLOW_UP_STATUSES and self.current.get(ev.node) == ev.frames[0]:
            self.answer[ev.node] = (ev.time_ns, ev.frames[0], ev, msg)
        else:
            self.answer.pop(ev.node, None)

    def request_sent(self, ev: Event, msg: Message) -> None:
        if msg.name != "RequestEntries" or ev.socket == ROUTER or ev.via or not ev.frames:
            return
        answer = self.answer.pop(ev.node, None)
        if msg.get("count") == 0:
            self.current.pop(ev.node, None)
        else:
            self.current[ev.node] = ev.frames[0]
        if answer is None or answer[0] != ev.time_ns:
            return  # not the reaction to a status 2 or 3 response
        self.judged += 1
        _, rid, response, rmsg = answer
        if ev.frames[0] != rid and len(self.problems) < 50:
            self.problems.append((f"{ev.node} answered a RequestEntries response with status {rmsg['status']} "
                                  f"(request id {rid.hex()}) with a RequestEntries of another request id "
                                  f"({ev.frames[0].hex()}): a new RPC, not its follow-up",
                                  [show(response, rmsg), show(ev, msg)]))

    def on_other(self, ev: Event) -> None:
        self.answer.pop(ev.node, None)  # a client that crashed starts afresh
        self.current.pop(ev.node, None)

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict(self.problems, f"{self.judged} RequestEntries sent in reaction to a response with status "
                                           "2 or 3, each a follow-up keeping its request id")
