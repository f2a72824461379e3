"""Raft logs, judged from the entries that cross the wire: log matching, leader append-only,
state machine safety.

An entry is identified by its index and its content: (term, CRC-32 of the entry frame).
Entries with their indexes appear in AppendEntries (prev_log_index + 1 onwards, after the
prev_log_term), RequestEntries responses of status 1 and 2 (ending at frame 4's index) and
StateBroadcast (ending at its LAST APPLIED INDEX). Evidence is kept as (event, message) and
rendered only for a violation.
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import NOTE, RECV, SEND, Event, Verdict
from harness.checkers.raft.elections import RaftChecker
from harness.checkers.raft.wire import PEER_RPCS, entries_of, entry_id, entry_term, only, show
from harness.protocols.codec import Message

Ref = tuple[Event, Message | None]


def _skip(ev: Event) -> int:
    """Frames in front of the message: a ROUTER's routing id (what it sends or receives)."""
    return 1 if ev.socket == "router" else 0


class LogMatching(RaftChecker):
    """Log Matching: two logs holding an entry with the same index and term are identical up to
    that index. Checked on every run of consecutive entries seen on the wire (AppendEntries sent
    by peers, RequestEntries responses and StateBroadcasts sent or received): one (index, term)
    always has the same content and the same predecessor term, and terms never decrease along a
    log (nor exceed the term of the leader sending them).

    And the consistency check that keeps it so (Figure 2, AppendEntries receiver, 2): a follower
    that answers an AppendEntries with success must hold an entry at prev_log_index of
    prev_log_term. Judged only where the run makes it certain the follower never held one: it
    never received an AppendEntries carrying an entry (index, term) = (prev_log_index,
    prev_log_term), never received an InstallSnapshot reaching that index (a compacted prefix
    is committed, so it matches), and never asked for votes or led in that term (a leader's own
    entries need not cross the wire before it fails).

    A leader whose sends nothing reports (an external peer beside the harness's own, live) is
    read from the AppendEntries its probed followers received, unless ``receipts`` is False (a
    message rule may damage what they receive): none of these judgements depends on order."""

    name = "log-matching"
    clause = "raft.safety.log-matching"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.content: dict[tuple[int, int], tuple[int, Ref]] = {}
        self.pred: dict[tuple[int, int], tuple[int, Ref]] = {}
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []
        self.held: set[tuple[str, int, int]] = set()  # (node, index, term) a peer received in an AppendEntries
        self.snapshot_upto: dict[str, int] = {}  # node -> highest last_included_index it was sent
        self.own_terms: set[tuple[str, int]] = set()  # (node, term) it stood for or led
        self.answers_judged = 0

    def problem(self, text: str, *refs: Ref) -> None:
        if len(self.problems) < 50:
            self.problems.append((text, [show(e, m) for e, m in refs]))

    @only("AppendEntries", "InstallSnapshot")
    def request_received(self, ev: Event, msg: Message) -> None:
        if msg.name == "AppendEntries":
            first, raws = entries_of(ev, msg, 1)
            node = ev.node
            for k, raw in enumerate(raws):
                self.held.add((node, first + k, entry_term(raw)))
            if self.receipt_sender(ev, msg) is not None:
                self.run(ev, msg, msg["prev_log_term"] if msg["prev_log_index"] > 0 else None, msg["term"])
        elif msg.name == "InstallSnapshot":
            if msg["last_included_index"] > self.snapshot_upto.get(ev.node, 0):
                self.snapshot_upto[ev.node] = msg["last_included_index"]

    def consistent(self, ev: Event, request: Message, msg: Message) -> None:
        """A follower's answer to an AppendEntries (see the class docstring)."""
        p = request["prev_log_index"]
        if not msg["success"] or p <= 0:
            return
        node, t = ev.node, request["prev_log_term"]
        self.answers_judged += 1
        if ((node, p, t) in self.held or p <= self.snapshot_upto.get(node, 0) or (node, t) in self.own_terms):
            return
        if len(self.problems) < 50:
            answered = {"leader": str(request["peer_id"]), "term": request["term"],
                        "prev_log_index": p, "prev_log_term": t}
            self.problems.append((f"{node} answered success to an AppendEntries whose previous entry ({p}, term {t}) "
                                  "it never received", [show(ev, msg, answers=answered)]))

    def run(self, ev: Event, msg: Message, prev_term: int | None, ceiling: int | None = None) -> None:
        first, raws = entries_of(ev, msg, _skip(ev))
        if not raws:
            return
        ref = (ev, msg)
        content, pred = self.content, self.pred
        before = prev_term
        for k, raw in enumerate(raws):
            i = first + k
            t, crc = entry_id(raw)
            seen = content.get((i, t))
            if seen is None:
                content[(i, t)] = (crc, ref)
            elif seen[0] != crc:
                self.problem(f"two different entries at index {i} in term {t}", seen[1], ref)
            if before is not None:
                if t < before:
                    self.problem(f"entry {i} has term {t} after an entry of term {before}", ref)
                p = pred.get((i, t))
                if p is None:
                    pred[(i, t)] = (before, ref)
                elif p[0] != before:
                    self.problem(f"entry {i} (term {t}) follows an entry of term {p[0]} in one log and of "
                                 f"term {before} in another", p[1], ref)
            if ceiling is not None and t > ceiling:
                self.problem(f"a leader of term {ceiling} sent entry {i} of the later term {t}", ref)
            before = t

    @only(*PEER_RPCS)
    def request_sent(self, ev: Event, msg: Message) -> None:
        if msg.name in PEER_RPCS:
            self.own_terms.add((ev.node, msg["term"]))  # a candidate's or a leader's term
        if msg.name == "AppendEntries":
            self.run(ev, msg, msg["prev_log_term"] if msg["prev_log_index"] > 0 else None, msg["term"])

    @only("RequestEntriesResponse", "AppendEntriesResponse")
    def response_sent(self, ev: Event, request: Message, msg: Message) -> None:
        if msg.name == "RequestEntriesResponse":
            self.run(ev, msg, None)
        elif msg.name == "AppendEntriesResponse":
            self.consistent(ev, request, msg)

    @only("RequestEntriesResponse")
    def response_received(self, ev: Event, request: Message, msg: Message) -> None:
        if msg.name == "RequestEntriesResponse":
            self.run(ev, msg, None)

    def broadcast(self, ev: Event, msg: Message) -> None:
        self.run(ev, msg, None)

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict(self.problems, f"{len(self.content)} (index, term) pair(s) seen, each with one content "
                                           f"and one predecessor; {self.answers_judged} accepted AppendEntries judged against "
                                           "what the follower had received")


class LeaderAppendOnly(RaftChecker):
    """Leader Append-Only: during its term a leader never overwrites or deletes an entry of its
    log. Reads each leader's AppendEntries: within one (leader, term), what it says about an
    index (the entry it sends there, or prev_log_term for prev_log_index) never changes. A leader
    whose sends nothing reports (an external peer beside the harness's own, live) is read from
    the AppendEntries its probed followers received, unless ``receipts`` is False (a message rule
    may damage what they receive); their order does not matter (within its term, a leader's log
    only grows)."""

    name = "leader-append-only"
    clause = "raft.safety.leader-append-only"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.claims: dict[tuple[str, int], dict[int, tuple[int, int | None, Ref]]] = {}
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []
        self.sent = 0

    def claim(self, book: dict[int, tuple[int, int | None, Ref]], i: int, t: int, crc: int | None, ref: Ref,
              node: str, term: int) -> None:
        old = book.get(i)
        if old is None or (old[1] is None and crc is not None and old[0] == t):
            book[i] = (t, crc, ref)
            return
        if old[0] != t or (crc is not None and old[1] is not None and old[1] != crc):
            if len(self.problems) < 50:
                self.problems.append((f"leader {node} of term {term} changed its entry {i} (term {old[0]} -> {t})",
                                      [show(*old[2]), show(*ref)]))
            book[i] = (t, crc, ref)

    @only("AppendEntries")
    def request_sent(self, ev: Event, msg: Message) -> None:
        if msg.name == "AppendEntries":
            self.append(ev.node, ev, msg)

    @only("AppendEntries")
    def request_received(self, ev: Event, msg: Message) -> None:
        sender = self.receipt_sender(ev, msg) if msg.name == "AppendEntries" else None
        if sender is not None:
            self.append(sender, ev, msg)

    def append(self, node: str, ev: Event, msg: Message) -> None:
        """An AppendEntries of ``node``, as sent or as received."""
        self.sent += 1
        term = msg["term"]
        book = self.claims.setdefault((node, term), {})
        ref = (ev, msg)
        prev = msg["prev_log_index"]
        if prev > 0:
            self.claim(book, prev, msg["prev_log_term"], None, ref, node, term)
        first, raws = entries_of(ev, msg, _skip(ev))
        for k, raw in enumerate(raws):
            t, crc = entry_id(raw)
            self.claim(book, first + k, t, crc, ref, node, term)

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict(self.problems, f"{self.sent} AppendEntries from {len(self.claims)} leadership(s), "
                                           "none changing an entry")


class StateMachineSafety(RaftChecker):
    """State Machine Safety: no two peers apply different entries at one index. Reads the peers'
    ``apply`` notes (index, term and CRC-32 of each applied entry) and the entries the wire shows
    as committed (RequestEntries responses, StateBroadcasts). Two different entries at an index
    fail even when one of them was never committed (E-RAFT-33: a peer applies committed entries
    only); when one is the entry a leader announced committed without a majority (the commit rule
    failed it: the run's `KnowledgeBase.unjustified`), the detail names that leader as the cause."""

    name = "state-machine-safety"
    clause = "raft.safety.state-machine-safety"
    kinds = frozenset({SEND, RECV, NOTE})

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.applied: dict[int, tuple[int, int, Ref]] = {}
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []
        self.use(self.tracker)

    def use(self, tracker: Any) -> None:
        from harness.checkers.raft.commits import KnowledgeBase  # commits imports this module
        self.kb = KnowledgeBase.uses(tracker)
        self.kb.receipts = self.kb.receipts and self.receipts

    def join(self, owner: RaftChecker) -> None:
        super().join(owner)
        self.use(owner.tracker)

    def one(self, i: int, t: int, crc: int, ref: Ref) -> None:
        seen = self.applied.get(i)
        if seen is None:
            self.applied[i] = (t, crc, ref)
        elif (seen[0], seen[1]) != (t, crc) and len(self.problems) < 50:
            self.problems.append((f"index {i} holds an entry of term {seen[0]} on {seen[2][0].node} and one of "
                                  f"term {t} on {ref[0].node}{self.cause(i, seen, (t, crc, ref))}",
                                  [show(*seen[2]), show(*ref)]))

    def cause(self, i: int, *sides: tuple[int, int, Ref]) -> str:
        """Which side holds the entry a leader announced committed without a majority (the
        commit rule failed it), if one does: that leader's commit is the cause."""
        u = self.kb.unjustified.get(i)
        if u is None:
            return ""
        for k, (t, crc, ref) in enumerate(sides):
            if (t, crc) == (u[1], u[2]):
                other = sides[1 - k][2][0].node
                held = "its own entry" if ref[0].node == u[0] else f"the entry {ref[0].node} applied"
                return (f" (caused by {u[0]}: it announced {held} committed without a majority, see commit-rule; "
                        f"never committed, so {other} is not at fault)")
        return ""

    def on_other(self, ev: Event) -> None:
        if ev.kind != NOTE or ev.msg_type != "apply" or not ev.data:
            return
        first, terms, crcs = ev.data.get("first"), ev.data.get("terms") or [], ev.data.get("crcs") or []
        if isinstance(first, int):
            for k, (t, crc) in enumerate(zip(terms, crcs)):
                self.one(first + k, t, crc, (ev, None))

    def committed(self, ev: Event, msg: Message) -> None:
        first, raws = entries_of(ev, msg, _skip(ev))
        for k, raw in enumerate(raws):
            t, crc = entry_id(raw)
            self.one(first + k, t, crc, (ev, msg))

    @only("RequestEntriesResponse")
    def response_sent(self, ev: Event, request: Message, msg: Message) -> None:
        if msg.name == "RequestEntriesResponse":
            self.committed(ev, msg)

    @only("RequestEntriesResponse")
    def response_received(self, ev: Event, request: Message, msg: Message) -> None:
        if msg.name == "RequestEntriesResponse":
            self.committed(ev, msg)

    def broadcast(self, ev: Event, msg: Message) -> None:
        self.committed(ev, msg)

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict(self.problems, f"{len(self.applied)} index(es) applied, one entry each")
