"""Raft elections and terms, judged from the wire: election safety, one vote per term, and
the adoption of higher terms."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import NOTE, RECV, SEND, TAP, VIA_PROXY, Checker, Event, Verdict
from harness.checkers.raft.wire import PEER_RESPONSES, PEER_RPCS, PUB, Listener, Tracker, only, show, unseen_sender
from harness.protocols.codec import Message


class RaftChecker(Checker, Listener):
    """A checker fed by a `Tracker` (SEND and RECV events) and, if it asks (``kinds``), by
    other events (``on_other``).

    Checkers of one run may share a tracker: ``join(owner)`` hands this checker's events to
    ``owner``, which classifies each SEND and RECV once and calls only the checkers that want
    it; the joined checker then asks the observer for nothing itself."""

    kinds = frozenset({SEND, RECV})

    def __init__(self, receipts: bool = True, **params: Any) -> None:
        """``receipts``: whether what a probed peer received is proof of what was sent (False
        when a message rule may damage messages: `harness.checkers.external.corrupts`)."""
        super().__init__(**params)
        self.receipts = receipts
        self.tracker = Tracker()
        self.tracker.add(self)
        self.members: list[RaftChecker] = [self]
        self._others: dict[str, list[Any]] = {}  # event kind -> the on_other of the members that want it

    def join(self, owner: "RaftChecker") -> None:
        owner.tracker.add(self)
        owner.members.append(self)
        owner.kinds = owner.kinds | type(self).kinds
        owner._others.clear()
        self.kinds = frozenset()

    def on_event(self, ev: Event) -> None:
        kind = ev.kind
        if kind == SEND or kind == RECV:
            self.tracker.feed(as_published(ev) if ev.role == TAP else ev)
            return
        fns = self._others.get(kind)
        if fns is None:  # in the order they joined; a member that does not override on_other has nothing to do
            fns = self._others[kind] = [m.on_other for m in self.members
                                        if kind in type(m).kinds and type(m).on_other is not RaftChecker.on_other]
        for fn in fns:
            fn(ev)

    def on_other(self, ev: Event) -> None:
        pass

    def receipt_sender(self, ev: Event, msg: Message) -> str | None:
        """The sender of a peer request whose receipt is the only sight of its send
        (`unseen_sender`), in a run whose receipts are proof of what was sent; else None."""
        return unseen_sender(self.tracker, ev, msg) if self.receipts else None

    def verdict(self, problems: list[tuple[str, list[dict[str, Any]]]], ok: str,
                clause: str | None = None) -> list[Verdict]:
        if not problems:
            return [self.ok(ok)]
        detail = f"{len(problems)} violation(s): " + "; ".join(p for p, _ in problems[:3])
        return [self.fail(detail, [e for _, evs in problems[:5] for e in evs], clause)]

    def verdict_of(self, problems: list[tuple[str, list[dict[str, Any]], str]], ok: str) -> list[Verdict]:
        """`verdict` of problems that each name their clause; the verdict names the first's."""
        return self.verdict([(p, evs) for p, evs, _ in problems], ok, problems[0][2] if problems else None)


def as_published(ev: Event) -> Event:
    """The tap's receipt of an external peer's StateBroadcast (its socket is named after the peer:
    reference_nodes.raft.tap) as that peer's send on its PUB, seen from outside: its time bounds
    the send from above only, as the chaos proxy's does (``via``)."""
    return Event(ev.time_ns, ev.socket, "peer", SEND, PUB, ev.frames, ev.msg_type, None, ev.codec, via=VIA_PROXY)


LINK_PREFIX = "peer:"  # a probed (reference) peer's DEALER to the peer of id ID is "peer:ID"


class ElectionSafety(RaftChecker):
    """At most one leader per term (Raft's Election Safety). Reads every AppendEntries and
    InstallSnapshot a peer sends (only a leader sends them; frame 4 names it, frame 5 its term)
    and the peers' ``role`` notes saying ``leader``. Two different peers leading one term fail.
    A leader whose sends nothing reports (an external peer beside the harness's own, live) is
    read from the AppendEntries and InstallSnapshots its probed followers received (frame 4
    names it), unless ``receipts`` is False (a message rule may damage what they receive)."""

    name = "election-safety"
    clause = "raft.safety.election-safety"
    kinds = frozenset({SEND, RECV, NOTE})

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.leaders: dict[int, tuple[str, tuple[Event, Message | None]]] = {}  # term -> (node, evidence)
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []

    def claim(self, term: int, node: str, ev: Event, msg: Message | None) -> None:
        first = self.leaders.setdefault(term, (node, (ev, msg)))
        if first[0] != node and len(self.problems) < 50:
            self.problems.append((f"term {term} has two leaders, {first[0]} and {node}",
                                  [show(*first[1]), show(ev, msg)]))

    @only("AppendEntries", "InstallSnapshot")
    def request_sent(self, ev: Event, msg: Message) -> None:
        if msg.name in ("AppendEntries", "InstallSnapshot"):
            self.claim(msg["term"], ev.node, ev, msg)

    @only("AppendEntries", "InstallSnapshot")
    def request_received(self, ev: Event, msg: Message) -> None:
        sender = self.receipt_sender(ev, msg)
        if sender is not None:
            self.claim(msg["term"], sender, ev, msg)

    def on_other(self, ev: Event) -> None:
        if ev.kind == NOTE and ev.msg_type == "role" and ev.data and ev.data.get("role") == "leader":
            term = ev.data.get("term")
            if isinstance(term, int):
                self.claim(term, ev.node, ev, None)

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict(self.problems, f"{len(self.leaders)} term(s) with a leader, one leader each")


class VoteOnce(RaftChecker):
    """A peer grants at most one candidate its vote in a term, across its restarts (Raft 5.2;
    the vote must be durable). Reads the RequestVote requests a peer receives (frame 4: the
    candidate) and its responses (frame 2: its term, frame 3: granted), and the RequestVotes a
    peer sends: a candidate has voted for itself in its term. A peer whose sends nothing reports
    (an external peer beside the harness's own, live) is read from what the probed peers
    received of it: the votes it granted a probed candidate (on the candidate's DEALER to it,
    ``peer:<id>``) and its own RequestVotes; unless ``receipts`` is False (a message rule may
    damage what they receive). None of this depends on when a message arrived."""

    name = "vote-once"
    clause = "raft.algorithm.vote-once"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.votes: dict[tuple[str, int], tuple[str, tuple[Event, Message]]] = {}  # (voter, term) -> candidate
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []
        self.granted = 0
        self.reported: set[tuple[str, int, str]] = set()

    def vote(self, ev: Event, msg: Message, term: int, cand: str, voter: str | None = None) -> None:
        """``voter`` (default: the event's node) voted for ``cand`` in ``term``."""
        voter = voter or ev.node
        self.granted += 1
        first = self.votes.get((voter, term))
        if first is None:
            self.votes[(voter, term)] = (cand, (ev, msg))
        elif first[0] != cand and (voter, term, cand) not in self.reported and len(self.problems) < 50:
            self.reported.add((voter, term, cand))
            self.problems.append((f"{voter} voted for {first[0]} and for {cand} in term {term}",
                                  [show(*first[1]), show(ev, msg, candidate=cand)]))

    @only("RequestVoteResponse")
    def response_sent(self, ev: Event, request: Message, msg: Message) -> None:
        if request.name == "RequestVote" and msg["vote_granted"]:
            self.vote(ev, msg, msg["term"], request["peer_id"])

    @only("RequestVoteResponse")
    def response_received(self, ev: Event, request: Message, msg: Message) -> None:
        if (not self.receipts or ev.via or request.name != "RequestVote" or not msg["vote_granted"]
                or not ev.socket.startswith(LINK_PREFIX)):
            return
        voter = ev.socket[len(LINK_PREFIX):]
        if voter not in self.tracker.probed:  # a probed voter's answer is read from its send
            self.vote(ev, msg, msg["term"], str(request["peer_id"]), voter)

    @only("RequestVote")
    def request_sent(self, ev: Event, msg: Message) -> None:
        if msg.name == "RequestVote":  # a candidate's own vote (retries count again)
            self.vote(ev, msg, msg["term"], msg["peer_id"])

    @only("RequestVote")
    def request_received(self, ev: Event, msg: Message) -> None:
        sender = self.receipt_sender(ev, msg) if msg.name == "RequestVote" else None
        if sender is not None:  # an unseen candidate's own vote
            self.vote(ev, msg, msg["term"], sender, sender)

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict(self.problems, f"{self.granted} vote(s) granted, never two candidates in one term")


class TermUpdate(RaftChecker):
    """A peer that has taken in a higher term adopts it (Raft: a request or response with term
    T > currentTerm sets currentTerm = T). A peer that answers a request has read it, so its
    answer carries at least the request's term, and every peer request and response it sends
    afterwards too. Reads the term frame of the RequestVote, AppendEntries and InstallSnapshot
    requests a peer answers and of every peer request and response it sends. Responses a peer
    receives are not counted: it may drop one unread (a superseded request's, E-RAFT-04), and
    not taking in a message is as safe as the network losing it. ``grace`` (default 0) allows
    an implementation that handles its input asynchronously that long to catch up.

    What the chaos proxy saw of an external peer (``via`` proxy) is judged only where the order
    is certain. The proxy sees a message when it leaves the peer, and ZeroMQ holds a message for
    a peer that is not connected (yet, or again) until it is, so a request handed over before a
    higher term was taken in may cross the wire long after the answer that took it in, on
    another connection (a RequestVote of term 1 to a peer that started late was read after its
    sender had answered term 8). Certain are: the order on one connection (a send is compared
    with the terms taken in on the same connection), and an answer's place after its request
    reached the peer, which was after the proxy handed it on (an answer is compared with the
    terms the peer had answered before that).

    A response byte for byte the same as the last one the peer sent that requester with the same
    message id is a replay from its debounce cache (E-RAFT-04 allows it; node-zmq-raft replays
    its last AppendEntries or InstallSnapshot reply whatever its term is now): it says what the
    peer knew when it first answered, so it is not judged again.

    A RequestVote of a higher term may be disregarded (E-RAFT-34: the Raft thesis's protection
    against disruptive servers, node-zmq-raft's ``preventSpiralElections``): an answer with the
    peer's own, lower term that grants no vote is not a violation, and the request's term is not
    counted as taken in. An AppendEntries or InstallSnapshot of a higher term, a leader's, is never
    disregarded, nor may a vote be granted in a term the answer does not carry."""

    name = "term-update"
    clause = "raft.algorithm.higher-term"

    def __init__(self, grace_ms: int = 0, **params: Any) -> None:
        super().__init__(**params)
        self.grace_ns = grace_ms * 1_000_000
        self.seen: dict[str, list[tuple[int, int, tuple[Event, Message]]]] = {}  # node -> rising (term, at, evidence)
        # sends the proxy saw: (node, connection) -> the highest term taken in there (term, at, evidence)
        self.seen_on: dict[tuple[str, str, bytes], tuple[int, int, tuple[Event, Message]]] = {}
        # requests the proxy handed to an external peer: (node, routing id, id frame) -> when
        self.handed: dict[tuple[str, bytes, bytes], int] = {}
        # the last responses each peer sent each requester: (node, routing id) -> message id -> its frames
        self.replied: dict[tuple[str, bytes], dict[bytes, tuple[bytes, ...]]] = {}
        self.replays = 0
        self.disregarded = 0  # vote requests of a higher term answered with the peer's own term, no vote
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []
        self.checked = 0

    def problem(self, text: str, evidence: list[dict[str, Any]]) -> None:
        if len(self.problems) < 50:
            self.problems.append((text, evidence))

    def sent(self, ev: Event, msg: Message, not_before: int | None) -> None:
        """``not_before``: when the peer sent it at the earliest, if anything says so."""
        self.checked += 1
        if ev.via == VIA_PROXY:
            taken = self.seen_on.get(_connection(ev))
            if taken is not None and taken[0] > msg["term"] and taken[1] + self.grace_ns <= ev.time_ns:
                self.problem(f"{ev.node} sent {msg.name} with term {msg['term']} after taking in term {taken[0]} "
                             "on the same connection", [show(*taken[2]), show(ev, msg)])
                return
        hist = self.seen.get(ev.node)
        if not hist or msg["term"] >= hist[-1][0] or not_before is None:
            return
        for term, at, (e, m) in reversed(hist):  # the highest term it had taken in, in time
            if at + self.grace_ns <= not_before and term > msg["term"]:
                self.problem(f"{ev.node} sent {msg.name} with term {msg['term']} after taking in term {term}",
                             [show(e, m), show(ev, msg)])
                return

    @only(*PEER_RPCS)
    def request_received(self, ev: Event, msg: Message) -> None:
        if ev.via == VIA_PROXY and ev.frames is not None and len(ev.frames) > 1 and msg.name in PEER_RPCS:
            self.handed[(ev.node, ev.frames[0], ev.frames[1])] = ev.time_ns

    @only(*PEER_RPCS)
    def request_sent(self, ev: Event, msg: Message) -> None:
        if msg.name in PEER_RPCS:
            self.sent(ev, msg, None if ev.via == VIA_PROXY else ev.time_ns)

    @only(*PEER_RESPONSES)
    def response_sent(self, ev: Event, request: Message, msg: Message) -> None:
        if request.name not in PEER_RPCS:
            return
        if self.replay(ev):
            return
        if ev.via == VIA_PROXY:
            frames = ev.frames or []
            self.sent(ev, msg, self.handed.pop((ev.node, frames[0], frames[1]), None) if len(frames) > 1 else None)
        else:
            self.sent(ev, msg, ev.time_ns)
        taken_in = request["term"]
        if msg["term"] < request["term"]:
            if request.name == "RequestVote" and not msg["vote_granted"]:
                # disregarded (E-RAFT-34): as safe as a vote request the network lost; it holds its own term
                self.disregarded += 1
                taken_in = msg["term"]
            else:
                self.problem(f"{ev.node} answered a {request.name} of term {request['term']} with term {msg['term']}",
                             [show(ev, msg, request_term=request["term"])])
        if ev.via == VIA_PROXY:
            key = _connection(ev)
            taken = self.seen_on.get(key)
            if taken is None or taken_in > taken[0]:
                self.seen_on[key] = (taken_in, ev.time_ns, (ev, msg))
        hist = self.seen.setdefault(ev.node, [])
        if not hist or taken_in > hist[-1][0]:
            hist.append((taken_in, ev.time_ns, (ev, msg)))  # proxy-seen: taken in by then at the latest

    def replay(self, ev: Event) -> bool:
        """Whether this response repeats the last one its peer sent the same requester (see the
        class docstring); books it as the last one otherwise."""
        frames = ev.frames or []
        if len(frames) < 2:
            return False
        last = self.replied.setdefault((ev.node, frames[0]), {})
        body = tuple(frames[1:])
        if last.get(frames[1]) == body:
            self.replays += 1
            return True
        last.pop(frames[1], None)
        last[frames[1]] = body
        if len(last) > REPLIES_KEPT:
            del last[next(iter(last))]
        return False

    def finish(self, end_ns: int) -> list[Verdict]:
        replays = f"; {self.replays} replayed response(s) not judged again" if self.replays else ""
        if self.disregarded:
            replays += f"; {self.disregarded} RequestVote(s) of a higher term disregarded (no vote, E-RAFT-34)"
        return self.verdict(self.problems, f"{self.checked} peer message(s) sent, none behind a term taken in"
                            + replays)


REPLIES_KEPT = 8  # responses per (peer, requester) a replay is looked up in: a cache keeps the latest


def _connection(ev: Event) -> tuple[str, str, bytes]:
    """The connection a send went out on: a ROUTER's is named by the peer's routing id."""
    return ev.node, ev.socket, (ev.frames or [b""])[0] if ev.socket == "router" else b""
