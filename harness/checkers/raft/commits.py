"""Raft commitment, judged from the wire: the commit rule, leader completeness, and committed
entries never lost.

What is committed is learned from the wire, never from a peer's private state:

* a leader's AppendEntries with commit index c commits the entries up to c that it has sent
  during its term (the commit rule below judges whether c was justified);
* an InstallSnapshot covers committed entries up to its last included index;
* RequestEntries responses (status 1 and 2) and StateBroadcasts carry committed entries;
* a RequestUpdate response "true" with an index says the update's entry (its reqid) is
  committed there.

A commit index the commit rule judged unjustified (`CommitRule`: no majority held it, or only
by counting replicas of an earlier term) committed nothing: what only such an announcement shows
committed is kept apart (`Fact.unjustified` names the announcer), and the checks built on commitment
(leader-completeness, committed-durable) do not hold it against later leaders and holders. Any
other evidence of the same index (a justified announcement, a RequestUpdate "true", a RequestEntries
answer or StateBroadcast of another peer) replaces it, whichever comes first: a broken announcer
hides no lawful commit.

A leader whose sends nothing reports (an external peer beside the harness's own, live: no probe,
and no chaos proxy between it and a probed peer) is read from what the probed peers received of
it and what they answered it (`KnowledgeBase.request_received`): the same leadership, judged from
those receipts and acknowledgements, where they show enough (see `CommitRule`).
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import NOTE, RECV, SEND, Event, Verdict
from harness.checkers.raft.elections import RaftChecker
from harness.checkers.raft.logs import Ref, _skip
from harness.checkers.raft.wire import (
    PEER_RESPONSES, Listener, Tracker, entries_of, entry_id, only, show, unseen_sender,
)
from harness.protocols.codec import Message


class Leadership:
    """One peer leading one term, as its AppendEntries show it."""

    __slots__ = ("node", "term", "claims", "matches", "vote", "vote_at", "first_ref")

    # matches: the leader's receipts of acknowledgements, keyed by its socket (peer:<id>, or as
    # the proxy names it), or, for a leader seen only in receipts, the acknowledgements probed
    # followers sent it, keyed by the follower's name: one key per follower either way

    def __init__(self, node: str, term: int, ref: Ref) -> None:
        self.node = node
        self.term = term
        self.claims: dict[int, tuple[int, int | None, bytes | None]] = {}  # index -> (term, crc, reqid)
        self.matches: dict[str, int] = {}  # follower connection -> highest index it acknowledged
        self.vote: Message | None = None  # its RequestVote of this term: last log index and term
        self.vote_at: int | None = None  # when it sent it (its candidacy)
        self.first_ref = ref

    def claim_append(self, ev: Event, msg: Message) -> None:
        prev = msg["prev_log_index"]
        if prev > 0 and prev not in self.claims:
            self.claims[prev] = (msg["prev_log_term"], None, None)
        first, raws = entries_of(ev, msg, _skip(ev))
        for k, raw in enumerate(raws):
            t, crc = entry_id(raw)
            self.claims[first + k] = (t, crc, raw[:12])


class KnowledgeBase(Listener):
    """What the wire says about leaderships and commitment, kept once per run for every checker
    that needs it (`uses`): each leadership (its AppendEntries, its RequestVote, its followers'
    acknowledgements) and each committed index (a `Fact`, as first learned). Checkers subscribe
    to what happens: ``appended(ev, msg, lead)``, ``snapshot_sent(ev, msg, lead)``,
    ``acknowledged(lead)`` (a follower acknowledged entries), ``claimed(i, term, crc, reqid, ref,
    lead)`` (something is shown at index i: an AppendEntries entry of ``lead``, or with ``lead``
    None a committed entry), ``learned(i, term, crc, reqid, commit_term, ref)`` (i is committed),
    ``acked(ev, request, msg)`` (a RequestUpdate answered with its index) and ``unseen(c)`` (a
    leader whose sends nothing reports announced commit index ``c``, in a run whose receipts are
    no proof of what was sent; see `request_received`).

    ``receipts``: whether what a probed peer received is what its sender sent (False when a
    message rule may damage messages: `harness.checkers.external.corrupts`)."""

    HOOKS = ("appended", "snapshot_sent", "acknowledged", "claimed", "learned", "acked", "unseen")

    def __init__(self, tracker: Tracker) -> None:
        self.tracker = tracker  # whose sends the probes report (`unseen_sender`)
        self.leaderships: dict[tuple[str, int], Leadership] = {}
        self.votes: dict[tuple[str, int], tuple[Message, int]] = {}  # (candidate, term) -> its RequestVote, when
        self.committed: dict[int, Fact] = {}
        self.learned_upto: dict[tuple[str, int], int] = {}  # leadership -> highest commit index learned from it
        self.probed: set[str] = set()  # peers whose own probe reported a peer message they sent
        self.receipts = True
        self.hooks: dict[str, list[Any]] = {h: [] for h in self.HOOKS}
        # (leader, term, commit index) commit-rule failed -> the index up to which it was lawful
        self.doubted: dict[tuple[str, int, int], int] = {}
        self.unjustified: dict[int, tuple[str, int | None, int | None]] = {}  # index -> announcer, term, CRC
        self.doubters: set[str] = set()  # leaders with a commit index commit-rule failed
        self.tainted: dict[str, set[int]] = {}  # such a leader -> indexes only it showed committed (so far)
        self.aside: dict[int, str] = {}  # index -> the leader whose unjustified commit alone showed it
        self.ack_at = 0  # when the acknowledgement being told (`acknowledged`) was seen
        self.judge: CommitBound | None = None  # the run's commit rule (its ``justified`` bound)

    def taint(self, i: int, by: str, t: int | None, crc: int | None) -> None:
        """Index ``i`` shown committed by ``by``'s unjustified commit: the entry is kept even once
        lawful evidence replaces it (state-machine-safety names the cause), until ``by`` holds it
        on a majority of its term after all (`vindicate`)."""
        if t is not None and i not in self.unjustified:
            self.unjustified[i] = (by, t, crc)
        self.tainted.setdefault(by, set()).add(i)
        self.aside.setdefault(i, by)

    def vindicate(self, lead: Leadership, n: int, at: int) -> None:
        """``lead`` holds its entry ``n`` (of its term) on a majority by ``at``: what it announced
        without a majority up to ``n`` is committed now (Raft 5.4.2), and binds later leaders."""
        mine = self.tainted.get(lead.node)
        if not mine:
            return
        for i in [i for i in mine if i <= n]:
            f = self.committed.get(i)
            claim = lead.claims.get(i)
            if f is not None and f.unjustified == lead.node and claim is not None and not f.differs(*claim):
                f.unjustified, f.at, f.commit_term = None, at, lead.term
                self.unjustified.pop(i, None)
                self.aside.pop(i, None)
            mine.discard(i)

    def doubt(self, lead: Leadership, c: int, lawful: int) -> None:
        """The commit rule judged ``lead``'s commit index ``c`` unjustified beyond ``lawful``:
        what it commits beyond is learned as shown committed by that announcement only (see
        `Fact.unjustified`)."""
        self.doubted[(lead.node, lead.term, c)] = lawful
        self.doubters.add(lead.node)

    @staticmethod
    def uses(tracker: Tracker) -> "KnowledgeBase":
        """The run's knowledge base on this tracker (made and fed on first use)."""
        kb = tracker.shared.get("knowledge")
        if kb is None:
            kb = tracker.shared["knowledge"] = KnowledgeBase(tracker)
            tracker.add(kb)
        return kb

    def subscribe(self, checker: Any) -> None:
        for h in self.HOOKS:
            fn = getattr(checker, "on_" + h, None)
            if fn is not None:
                self.hooks[h].append(fn)

    def leadership(self, node: str, ev: Event, msg: Message) -> Leadership:
        key = (node, msg["term"])
        lead = self.leaderships.get(key)
        if lead is None:
            lead = self.leaderships[key] = Leadership(node, msg["term"], (ev, msg))
            vote = self.votes.get(key)
            if vote is not None:
                lead.vote, lead.vote_at = vote
        return lead

    # ---- the wire --------------------------------------------------------------------------
    @only("RequestVote", "AppendEntries", "InstallSnapshot")
    def request_sent(self, ev: Event, msg: Message) -> None:
        name = msg.name
        if not ev.via:
            self.probed.add(ev.node)
        if name == "RequestVote":
            self.votes.setdefault((ev.node, msg["term"]), (msg, ev.time_ns))
        else:
            self.lead_request(ev.node, ev, msg)

    def lead_request(self, node: str, ev: Event, msg: Message) -> None:
        """An AppendEntries or InstallSnapshot of ``node``'s leadership, as sent or received."""
        lead = self.leadership(node, ev, msg)
        if msg.name == "AppendEntries":
            lead.claim_append(ev, msg)
            for fn in self.hooks["appended"]:
                fn(ev, msg, lead)
            self.append_claims(ev, msg, lead)
        else:
            for fn in self.hooks["snapshot_sent"]:
                fn(ev, msg, lead)

    @only("AppendEntries", "InstallSnapshot")
    def request_received(self, ev: Event, msg: Message) -> None:
        """A leader no probe or proxy reports the sends of (an external peer beside the harness's
        own, live: what it sends them shows only as their receipts, `unseen_sender`) is read from
        those receipts as from sends: its claims, the commit index it announced (judged by
        `CommitRule` with the acknowledgements its probed followers sent it, `response_sent`),
        what that commits. The time of a receipt is later than the send: nothing here is timed
        from it but what only gets more lenient the later it is. In a run whose receipts are no
        proof of what was sent (a corrupting rule), what it announced as committed only raises
        the bound (``unseen``): a later leader announcing it again is not to be blamed for it."""
        sender = unseen_sender(self.tracker, ev, msg)
        if sender is None:
            return  # its send is reported (by its probe, or by the proxy that handed this on), and read there
        if self.receipts:
            self.lead_request(sender, ev, msg)
            return
        c = msg["commit_index"] if msg.name == "AppendEntries" else msg["last_included_index"]
        for fn in self.hooks["unseen"]:
            fn(c)

    def append_claims(self, ev: Event, msg: Message, lead: Leadership) -> None:
        first, raws = entries_of(ev, msg, _skip(ev))
        ref = (ev, msg)
        claimed = self.hooks["claimed"]
        for k, raw in enumerate(raws):  # what it sends now, judged against earlier commits
            t, crc = entry_id(raw)
            for fn in claimed:
                fn(first + k, t, crc, raw[:12], ref, lead)
        c = msg["commit_index"]
        key = (lead.node, lead.term)
        done = self.learned_upto.get(key, 0)
        if c > done:
            lawful = self.doubted.get((lead.node, lead.term, c), c)  # judged just before (`appended`)
            for i in range(done + 1, c + 1):
                claim = lead.claims.get(i)
                if claim is not None and claim[1] is not None:
                    self.learn(i, claim[0], claim[1], claim[2], lead.term, ref, lead.node,
                               lead.node if i > lawful else None)
            self.learned_upto[key] = c

    def response_received(self, ev: Event, request: Message, msg: Message) -> None:
        name = request.name
        if name in ("AppendEntries", "InstallSnapshot"):
            self.peer_answer(ev, request, msg)
        else:
            self.client_response(ev, request, msg)

    @only("RequestEntriesResponse", "RequestUpdateResponse", *PEER_RESPONSES)
    def response_sent(self, ev: Event, request: Message, msg: Message) -> None:
        if request.name not in ("AppendEntries", "InstallSnapshot", "RequestVote"):
            self.client_response(ev, request, msg)
            return
        if ev.via:
            return
        self.probed.add(ev.node)
        leader = str(request["peer_id"])
        if request.name != "RequestVote" and leader not in self.tracker.probed:
            # an unseen leader's follower: its answer is the only sight of the acknowledgement (the
            # leader's receipt of it is reported by no probe, and by no proxy: the follower is probed)
            lead = self.leaderships.get((leader, request["term"]))
            if lead is not None:
                self.acknowledge(lead, ev.node, request, msg, ev.time_ns)

    def peer_answer(self, ev: Event, request: Message, msg: Message) -> None:
        lead = self.leaderships.get((ev.node, request["term"]))
        if lead is not None:
            self.acknowledge(lead, ev.socket, request, msg, ev.time_ns)

    def acknowledge(self, lead: Leadership, follower: str, request: Message, msg: Message, at: int) -> None:
        """A follower's answer to the leader's request, as the leader received it or as the
        follower sent it (``follower``: the key it has in ``lead.matches``)."""
        if msg["term"] != request["term"]:
            return
        if request.name == "AppendEntries":
            if not msg["success"]:
                return
            acked = request["prev_log_index"] + len(request["entries"])
        else:
            nxt = msg.get("next_offset")
            done = nxt >= request["snapshot_size"] if nxt is not None else \
                request["snapshot_offset"] + len(request["chunk"]) >= request["snapshot_size"]
            if not done:
                return
            acked = request["last_included_index"]
        lead.matches[follower] = max(lead.matches.get(follower, 0), acked)
        self.ack_at = at
        for fn in self.hooks["acknowledged"]:
            fn(lead)

    def client_response(self, ev: Event, request: Message, msg: Message) -> None:
        if msg.name == "RequestEntriesResponse":
            self.entries(ev, msg, None)
        elif msg.name == "RequestUpdateResponse" and msg["success"] and msg.get("log_index") is not None:
            for fn in self.hooks["acked"]:
                fn(ev, request, msg)
            self.learn(msg["log_index"], None, None, msg["reqid"], None, (ev, msg), source(ev))

    def broadcast(self, ev: Event, msg: Message) -> None:
        self.entries(ev, msg, msg["term"])

    def entries(self, ev: Event, msg: Message, term: int | None) -> None:
        first, raws = entries_of(ev, msg, _skip(ev))
        src = source(ev)
        for k, raw in enumerate(raws):
            t, crc = entry_id(raw)
            self.learn(first + k, t, crc, raw[:12], term, (ev, msg), src)

    def beyond(self, src: str) -> str | None:
        """Who shows an index committed beyond any commit index on the wire, when the commit rule
        has failed it before (a leader that commits without a majority): ``src``, or for a receipt
        (``src`` "?") the one such leader no probe reports (a probed sender's send came first, and
        was named); None when that is not it, or not known."""
        if src != "?":
            return src if src in self.doubters else None
        unprobed = [d for d in self.doubters if d not in self.probed]
        return unprobed[0] if len(unprobed) == 1 else None

    def learn(self, i: int, t: int | None, crc: int | None, reqid: bytes | None, term: int | None,
              ref: Ref, src: str, by: str | None = None) -> None:
        """Index ``i`` shown committed by peer ``src`` ("?": a receipt, whose sender the event does
        not name); ``by``: by an announcement of this peer that the commit rule judged
        unjustified. What only repeats such an announcement (served or acknowledged by the
        announcer itself, before or after it, or received from an unnamed sender with the same
        entry) is no lawful evidence either; anything else is, and outranks it."""
        old = self.committed.get(i)
        if old is not None and by is None and old.unjustified is not None and src in (old.unjustified, "?") \
                and not old.differs(t, crc, reqid):
            by = old.unjustified  # the announcer (or an unnamed sender) repeating its entry
        elif by is None and self.judge is not None and i > self.judge.justified and old is None:
            by = self.beyond(src)
        if by is not None:
            self.taint(i, by, t, crc)
        if old is None or (old.unjustified is not None and by is None):  # lawful evidence outranks
            fact = self.committed[i] = Fact(t, crc, reqid, ref[0].time_ns, term, ref, by, src)
            if old is not None and not old.differs(t, crc, reqid):  # the same entry: keep what is known of it
                fact.term, fact.crc, fact.reqid = fact.term or old.term, fact.crc or old.crc, fact.reqid or old.reqid
        else:
            if old.term is None and t is not None:  # an index known by reqid only gets its content
                old.term, old.crc, old.reqid = t, crc, old.reqid or reqid
            if by is not None and old.unjustified is None and not old.differs(t, crc, reqid) \
                    and old.shown_by <= {by, "?"}:
                old.unjustified = by  # only the announcer had shown it, before it announced it (its acks)
                self.taint(i, by, old.term, old.crc)
            old.shown_by.add(src)
        for fn in self.hooks["learned"]:
            fn(i, t, crc, reqid, term, ref)
        for fn in self.hooks["claimed"]:
            fn(i, t, crc, reqid, ref, None)


def source(ev: Event) -> str:
    """Who shows what an event carries: the sender of a send; "?" for a receipt (unnamed)."""
    return ev.node if ev.kind == SEND else "?"


class KnowledgeChecker(RaftChecker):
    """A checker that reads the run's `KnowledgeBase` (shared with the checkers it joins).
    ``receipts``: False when what a peer receives is no proof of what was sent (see
    `KnowledgeBase`); any checker of the run saying so says it for the shared knowledge base."""

    def __init__(self, peers: int = 0, **params: Any) -> None:
        super().__init__(**params)
        self.peers = peers
        self.use(self.tracker)

    def use(self, tracker: Tracker) -> None:
        self.kb = KnowledgeBase.uses(tracker)
        self.kb.subscribe(self)
        self.kb.receipts = self.kb.receipts and self.receipts

    def join(self, owner: RaftChecker) -> None:
        super().join(owner)
        self.use(owner.tracker)


UNSEEN = 1 << 62  # the index an unreported acknowledgement may reach: any
COMMIT_CLAUSES = ("raft.algorithm.commit-majority", "raft.algorithm.commit-current-term", "raft.entries.committed-only")
ENTRIES_CLAUSE = COMMIT_CLAUSES[2]
# Problems kept per clause: a broken leader's answers to clients (its consequence) must not crowd
# out its commits without a majority (the cause) in the evidence.
PROBLEMS_KEPT = 50


class CommitBound(KnowledgeChecker):
    """A `KnowledgeChecker` that follows ``justified``: the highest commit index the wire has
    justified so far, by any leader (an entry of the leader's term acknowledged by a majority,
    or a commit index a leader announced). Nothing a peer applied or serves as committed may lie
    beyond it. Subclasses raise it with ``raise_bound`` for what leaders announce."""

    def __init__(self, peers: int = 0, **params: Any) -> None:
        super().__init__(peers, **params)
        self.justified = 0

    def majority_index(self, lead: Leadership, unseen: int = 0) -> int | None:
        """The highest index the leader and its acknowledging followers hold on a majority;
        ``unseen`` more followers, whose acknowledgements the run may not have reported, taken
        to hold everything (`UNSEEN`)."""
        majority = self.peers // 2 + 1
        if majority < 2:
            return None
        acked = sorted([*lead.matches.values(), *[UNSEEN] * unseen], reverse=True)
        return acked[majority - 2] if len(acked) >= majority - 1 else None

    def unseen_followers(self, ev: Event, lead: Leadership) -> int:
        """How many of the leader's followers may have acknowledged what the run has not
        reported by ``ev``. Zero for a send (its probe's, or the proxy's: the acknowledgements
        it followed came before it, from the leader's probe, the proxy, or the probed
        followers, `KnowledgeBase.response_sent`). For a leader seen only in a receipt, every
        peer but the probed ones: an external follower's acknowledgement may be seen by the
        proxy, whose reports reach the checks later than the probes' (harness/live_observe.py),
        or by nothing (``observe: false``)."""
        if ev.kind == SEND:
            return 0
        return max(0, self.peers - 1 - len(self.kb.probed - {lead.node}))

    def on_acknowledged(self, lead: Leadership) -> None:
        """An entry of the leader's term on a majority is committed, announced or not (a leader
        may step down before it says so; its commit index lives on in its next leadership)."""
        n = self.majority_index(lead)
        if n is not None and n > self.justified and lead.claims.get(n, (None,))[0] == lead.term:
            self.justified = n

    def raise_bound(self, c: int) -> None:
        self.justified = max(self.justified, c)

    on_unseen = raise_bound  # a commit index an unseen leader announced (KnowledgeBase.request_received)


class CommitRule(CommitBound):
    """A leader advances its commit index only over an entry of its own term stored on a
    majority (Raft 5.3, 5.4.2). Reads each leader's AppendEntries (what it claims at each index,
    the commit index it sends) and the responses it receives, each paired with its request by
    message id (a success acknowledges prev_log_index + the entries sent). A commit index is
    justified when it is at most one justified before (by any leader), or when the leader's
    entry at some N >= it has the leader's term and the leader and its acknowledging followers
    holding N are a majority (whenever that came to be: a leader may commit and step down
    before it announces the index, and announce it in a later term). An InstallSnapshot's last
    included index counts as a commit index (a snapshot holds committed entries only).

    A leader whose sends nothing reports (an external peer beside the harness's own peers, live)
    is judged the same way from what the probed peers received of it and the acknowledgements
    they sent it, when the run shows enough: each peer that is not probed (another external
    peer, whose answers only the proxy may see, and later than the probes' reports) is taken to
    have acknowledged everything, and an announcement that a majority holds only with such a
    peer, or only with an entry no receipt showed, is not judged (the verdict counts them).

    A peer answers RequestEntries with committed entries only (E-RAFT-19,
    ``raft.entries.committed-only``): the last entry of a RequestEntries response (status 1 or
    2) a peer sends must be at most the highest commit index justified by then. Not judged in a
    cluster of one, whose leader commits with no acknowledgement on the wire."""

    name = "commit-rule"
    clause = "raft.algorithm.commit-majority"

    def use(self, tracker: Tracker) -> None:
        super().use(tracker)
        self.kb.judge = self  # what it judges unjustified, the knowledge base keeps apart (`KnowledgeBase.doubt`)

    def __init__(self, peers: int = 0, **params: Any) -> None:
        super().__init__(peers, **params)
        self.judged: dict[tuple[str, int], int] = {}  # leadership -> highest commit index it sent
        self.problems: dict[str, list[tuple[str, list[dict[str, Any]]]]] = {}
        self.checked = 0
        self.from_receipts = 0  # of them, announced by a leader seen only in its followers' receipts
        self.unjudged = 0  # such announcements a majority of seen acknowledgements could not settle
        self.answers_seen: set[tuple[bytes, ...]] = set()  # RequestEntries answers seen sent, by their frames

    def count(self, key: tuple[str, int], c: int, received: bool) -> None:
        self.checked += 1
        self.from_receipts += received
        self.judged[key] = c

    def judge(self, ev: Event, msg: Message, lead: Leadership, c: int) -> None:
        key = (lead.node, lead.term)
        before = self.judged.get(key, 0)
        if c <= before:
            return
        received = ev.kind == RECV  # a leader seen only in its followers' receipts
        if c <= self.justified:
            self.count(key, c, received)
            return
        majority = self.peers // 2 + 1
        n, term_n, justified = self.held(lead, c, 0)
        unseen = self.unseen_followers(ev, lead) if not justified else 0
        if unseen:
            n, term_n, justified = self.held(lead, c, unseen)
        self.raise_bound(c)  # judged once; later leaders build on it
        if received and n is not None and n >= c and (unseen and justified or term_n is None):
            self.unjudged += 1  # a majority needs acknowledgements the run may not show, or an entry it did not
            self.judged[key] = c
            return
        self.count(key, c, received)
        if not justified:  # what it commits beyond a majority is no commitment to hold later leaders to
            self.kb.doubt(lead, c, n if n is not None and term_n == lead.term else 0)
        old_term = n is not None and n >= c
        clause = "raft.algorithm.commit-current-term" if old_term else "raft.algorithm.commit-majority"
        if justified or len(self.problems.get(clause, ())) >= PROBLEMS_KEPT:
            return
        ref = show(ev, msg, acknowledged=dict(lead.matches), majority=majority)
        if received:
            ref["seen_as"] = f"received by {ev.node} (the leader's sends are reported by nothing)"
        what = (f"committed {c} by counting replicas of entry {n} of the earlier term {term_n}" if old_term else
                f"sent commit index {c}, held by no majority (acknowledged: "
                f"{sorted(lead.matches.values(), reverse=True)}, majority {majority})")
        self.problems.setdefault(clause, []).append((f"{lead.node}, leader of term {lead.term}, {what}", [ref]))

    def held(self, lead: Leadership, c: int, unseen: int) -> tuple[int | None, int | None, bool]:
        """The leader's majority index (with ``unseen`` followers taken to hold everything), its
        term as the leader showed it, and whether that justifies commit index ``c``."""
        n = self.majority_index(lead, unseen)
        term_n = lead.claims.get(n, (None,))[0] if n is not None else None
        return n, term_n, n is not None and n >= c and (term_n == lead.term or n == UNSEEN)

    def on_acknowledged(self, lead: Leadership) -> None:
        super().on_acknowledged(lead)
        if self.kb.tainted.get(lead.node):  # a leader that committed without a majority may get one later
            n = self.majority_index(lead)
            if n is not None and lead.claims.get(n, (None,))[0] == lead.term:
                self.kb.vindicate(lead, n, self.kb.ack_at)

    def on_appended(self, ev: Event, msg: Message, lead: Leadership) -> None:
        self.judge(ev, msg, lead, msg["commit_index"])

    def on_snapshot_sent(self, ev: Event, msg: Message, lead: Leadership) -> None:
        self.judge(ev, msg, lead, msg["last_included_index"])

    @only("RequestEntriesResponse")
    def response_sent(self, ev: Event, request: Message, msg: Message) -> None:
        if msg.name != "RequestEntriesResponse" or msg["status"] not in (1, 2) or self.peers < 2:
            return
        skip = _skip(ev)
        self.answers_seen.add(tuple(ev.frames[skip:]) if ev.frames else ())
        first, raws = entries_of(ev, msg, skip)
        self._committed_only(ev, msg, first + len(raws) - 1 if raws else 0, f"{ev.node} answered RequestEntries")

    @only("RequestEntriesResponse")
    def response_received(self, ev: Event, request: Message, msg: Message) -> None:
        """A client's receipt of an answer no peer was seen sending (an external peer's, whose
        link to the client nothing observes): judged as received, against the bound by then
        (higher than when it was sent, so never stricter)."""
        if (msg.name != "RequestEntriesResponse" or ev.role != "client" or ev.via or not self.receipts
                or msg["status"] not in (1, 2) or self.peers < 2 or tuple(ev.frames or ()) in self.answers_seen):
            return
        first, raws = entries_of(ev, msg)
        self._committed_only(ev, msg, first + len(raws) - 1 if raws else 0,
                             f"a peer whose sends nothing reports answered {ev.node}'s RequestEntries (as {ev.node} "
                             "received it)")

    def _committed_only(self, ev: Event, msg: Message, last: int, who: str) -> None:
        if not last or last <= self.justified or len(self.problems.get(ENTRIES_CLAUSE, ())) >= PROBLEMS_KEPT:
            return
        self.problems.setdefault(ENTRIES_CLAUSE, []).append((
            f"{who} with entries up to {last}, beyond the highest commit index {self.justified} any leader had "
            f"reached", [show(ev, msg, committed=self.justified)]))

    def finish(self, end_ns: int) -> list[Verdict]:
        if not self.problems:
            seen = f" ({self.from_receipts} seen only as their followers' receipts)" if self.from_receipts else ""
            unjudged = (f"; {self.unjudged} announcement(s) of such leaders not judged: a majority needs peers "
                        f"whose acknowledgements the run does not show") if self.unjudged else ""
            return [self.ok(f"{self.checked} commit index advance(s){seen}, each over a majority of the leader's "
                            f"term{unjudged}")]
        out = []
        for clause in sorted(self.problems, key=COMMIT_CLAUSES.index):  # a bad commit first, what it lets through after
            out += self.verdict(self.problems[clause], "", clause)
        return out


class Fact:
    """A committed index: its entry (term and CRC-32, or only the reqid when an acknowledgement
    is all that shows it), when the wire first showed it committed, and a term by which it was
    committed (the announcing leader's or broadcaster's term; None when unknown).
    ``unjustified``: the leader whose commit index, judged unjustified by the commit rule, is
    all that shows it committed (with what that leader served or acknowledged of it): then it
    was not, and nothing later is bound to hold it; None for an index lawfully shown committed."""

    __slots__ = ("term", "crc", "reqid", "at", "commit_term", "ref", "unjustified", "shown_by")

    def __init__(self, term: int | None, crc: int | None, reqid: bytes | None, at: int, commit_term: int | None,
                 ref: Ref, unjustified: str | None = None, src: str = "?") -> None:
        self.term, self.crc, self.reqid, self.at, self.commit_term, self.ref = term, crc, reqid, at, commit_term, ref
        self.unjustified = unjustified
        self.shown_by = {src}  # the peers whose sends showed it committed ("?": a receipt's unnamed sender)

    def binds(self, lead: Leadership) -> bool:
        """Whether a leadership must hold this entry: its term is later than the commit's, or its
        candidacy started after the commit was shown (then its term is later too, though the
        wire does not say by how much: a majority had stored the entry by then)."""
        if self.commit_term is not None and lead.term > self.commit_term:
            return True
        return lead.vote_at is not None and lead.vote_at > self.at

    def differs(self, t: int | None, crc: int | None, reqid: bytes | None) -> bool:
        """Whether an entry so described is not this one (parts unknown on either side are
        not compared)."""
        if t is not None and self.term is not None and t != self.term:
            return True
        if crc is not None and self.crc is not None and crc != self.crc:
            return True
        return reqid is not None and self.reqid is not None and reqid != self.reqid


def set_aside(aside: dict[int, str], whom: str) -> str:
    """What a verdict says of the indexes only an unjustified announcement showed committed
    (`KnowledgeBase.aside`)."""
    by: dict[str, int] = {}
    for node in aside.values():
        by[node] = by.get(node, 0) + 1
    return "".join(f"; {n} index(es) announced committed without a majority by {node} (see commit-rule) not held "
                   f"against {whom}" for node, n in sorted(by.items()))


class LeaderCompleteness(KnowledgeChecker):
    """Leader Completeness: an entry committed in a term is in the log of every leader of a
    later term. Committed entries (see the module) are compared with the RequestVote each later
    leader sent for its term (its last log index must reach the entry, its last log term be at
    least the entry's) and with what the leader's AppendEntries say is at that index. A leader
    is "later" when its term exceeds the one the commit was shown in, or its candidacy started
    after the commit was shown. An index shown committed only by a commit index the commit rule
    judged unjustified (`Fact.unjustified`) was not committed: no later leader must hold it."""

    name = "leader-completeness"
    clause = "raft.safety.leader-completeness"

    def finish(self, end_ns: int) -> list[Verdict]:
        problems: list[tuple[str, list[dict[str, Any]]]] = []
        facts = sorted(self.kb.committed.items())
        for lead in self.kb.leaderships.values():
            vote = lead.vote
            for i, f in facts:
                if len(problems) >= 50 or f.unjustified is not None or not f.binds(lead):
                    continue
                if vote is not None and (vote["last_log_index"] < i or (f.term is not None
                                                                         and vote["last_log_term"] < f.term)):
                    problems.append((f"{lead.node} became leader of term {lead.term} with last log entry "
                                     f"{vote['last_log_index']} (term {vote['last_log_term']}), without committed "
                                     f"entry {i} (term {f.term})", [show(*f.ref), show(*lead.first_ref)]))
                    break
                claim = lead.claims.get(i)
                if claim is not None and f.differs(*claim):
                    problems.append((f"{lead.node}, leader of term {lead.term}, has term {claim[0]} at index {i} "
                                     f"where an entry of term {f.term} was committed", [show(*f.ref),
                                                                                         show(*lead.first_ref)]))
        return self.verdict(problems, f"{len(facts)} committed index(es) in the logs of every later leader "
                                      f"({len(self.kb.leaderships)} leadership(s)){set_aside(self.kb.aside, 'later leaders')}")


class CommittedDurable(KnowledgeChecker):
    """Committed entries are never lost, also across crashes: once the wire shows an entry
    committed (see the module), nothing shown later at its index differs from it: not an entry
    in the AppendEntries of a leader bound to hold it (see `Fact.binds`), a RequestEntries or
    StateBroadcast entry, a RequestUpdate acknowledged there for another reqid, nor an entry a
    peer notes as applied. An index shown committed only by a commit index the commit rule judged
    unjustified (`Fact.unjustified`) binds nothing until other evidence shows it committed."""

    name = "committed-durable"
    clause = "raft.algorithm.persist-before-reply"
    kinds = frozenset({SEND, RECV, NOTE})

    def __init__(self, peers: int = 0, **params: Any) -> None:
        super().__init__(peers, **params)
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []

    def on_claimed(self, i: int, t: int | None, crc: int | None, reqid: bytes | None, ref: Ref,
                   lead: Leadership | None) -> None:
        f = self.kb.committed.get(i)
        if f is None or f.unjustified is not None or f.at >= ref[0].time_ns or len(self.problems) >= 50:
            return
        if lead is not None and not f.binds(lead):
            return  # a deposed leader that does not know yet
        if f.differs(t, crc, reqid):
            self.problems.append((f"index {i}, committed by {f.at / 1e6:.1f} ms, holds another entry at "
                                  f"{ref[0].time_ns / 1e6:.1f} ms on {ref[0].node}", [show(*f.ref), show(*ref)]))

    def on_other(self, ev: Event) -> None:
        if ev.kind != NOTE or ev.msg_type != "apply" or not ev.data:
            return
        first = ev.data.get("first")
        if isinstance(first, int):
            for k, (t, crc) in enumerate(zip(ev.data.get("terms") or [], ev.data.get("crcs") or [])):
                self.on_claimed(first + k, t, crc, None, (ev, None), None)

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict(self.problems, f"{len(self.kb.committed)} committed index(es), none replaced later"
                                           f"{set_aside(self.kb.aside, 'later holders')}")
