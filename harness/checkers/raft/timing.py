"""Raft timing judged from a leader's own sends: it keeps every follower hearing from it.

E-RAFT-12 (the Raft paper, section 5.2): while it is leader, a peer sends every follower an
AppendEntries at least once per ELECTION_TIMEOUT_MIN / 2. E-RAFT-11: an unanswered AppendEntries
or InstallSnapshot is repeated within ELECTION_TIMEOUT_MIN / 2. Both bound the same thing as
seen on the wire: the time between two consecutive AppendEntries or InstallSnapshot requests a
leader sends one follower (whatever became of them in the network), and between its election
and the first. What the network does is never counted; what stops the leader is: time it is
paused does not count, a crash ends its leadership, and its bound is on its own clock.
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import (
    CRASH, NOTE, PAUSE, RESTART, RESUME, SEND, STALL, VIA_PROXY, Absences, Event, Pauses, Verdict,
)
from harness.checkers.raft.elections import RaftChecker
from harness.checkers.raft.wire import ROUTER, only, show
from harness.protocols.codec import Message

LEADER_RPCS = ("AppendEntries", "InstallSnapshot")
NS_PER_MS = 1_000_000
RECONNECT_MS = 500  # after a follower came back or a partition healed: the leader's link is made anew
Ref = tuple[Event, "Message | None"]  # evidence, shown only when it is reported


class Lead:
    """One peer leading one term: when it began, and its last request to each follower."""

    __slots__ = ("term", "since", "since_ref", "last", "noted")

    def __init__(self, term: int, since: int, ref: Ref, noted: bool) -> None:
        self.term = term
        self.since = since
        self.since_ref = ref
        self.last: dict[str, tuple[int, Ref]] = {}  # follower socket -> (sent at, the request)
        self.noted = noted  # its role note said it leads (it will say when it stops)


class LeaderHeartbeat(RaftChecker):
    """A leader that is not paused sends each follower an AppendEntries or InstallSnapshot at
    least once per ELECTION_TIMEOUT_MIN / 2 of its own clock, from its election on (E-RAFT-12,
    ``raft.algorithm.leader-heartbeat``): a gap between two of its requests to one follower, or
    between its election and the first, longer than that fails; when the gap ends in a repeat
    of the request before it, the repeat came late (E-RAFT-11, ``raft.rpc.timeout-bound``).

    Reads the AppendEntries and InstallSnapshot a peer sends (frame 5, its term; the DEALER
    socket, the follower), the peers' ``role`` notes, and their crashes, restarts, pauses and
    resumes. A leadership begins at the ``role`` note saying ``leader`` (or, for a peer without
    notes, its first AppendEntries of the term) and ends at its next ``role`` note or crash;
    without notes it is judged only up to its last AppendEntries or InstallSnapshot, so a peer
    that gave leadership up on its own (an implementation may) is never asked for more. Time the
    leader is paused is taken off a gap. ``election_min`` maps each peer to its
    ELECTION_TIMEOUT_MIN in ms (default 200); for a peer that clock faults may strike, the bound is
    divided by its slowest clock rate (``slowest``, 1 + the most negative drift) and a gap across
    one of its clock changes (``clock_changes``, in ns) is not judged. ``tolerance`` (default 90 ms) is
    slack for a live run's scheduling (the simulator keeps timers exactly).

    External peers (``external``: run as processes, their traffic with each other observed by
    the chaos proxy) are judged from their requests as the proxy read them. A read bounds a send
    from above only, so their bound gets ``external_slack`` more (default half the bound: correct
    external peers showed gaps of up to 196 ms as the proxy read them, against 100 ms + the 90 ms
    tolerance; a leader that stops heartbeating still fails, a retry after a whole
    ELECTION_TIMEOUT_MIN no longer does, which the conformance case ``append-retry-bound``
    judges). A message waits unread while the leader has no connection to the follower: a gap is
    not judged when it overlaps a time the follower was down or paused (and ``RECONNECT_MS`` after
    it came back) or a partition of the file (``partitions``, spans in ns, with the same margin
    after each). Without notes, an external leader is judged between its requests only."""

    name = "leader-heartbeat"
    clause = "raft.algorithm.leader-heartbeat"
    kinds = frozenset({SEND, NOTE, CRASH, RESTART, PAUSE, RESUME, STALL})

    def __init__(self, election_min: dict[str, int] | None = None, default_min_ms: int = 200,
                 tolerance_ms: int = 90, slowest: dict[str, float] | None = None,
                 clock_changes: dict[str, tuple[int, ...]] | None = None, external: frozenset[str] = frozenset(),
                 external_slack_ms: int | None = None, partitions: tuple[tuple[int, int], ...] = (),
                 **params: Any) -> None:
        super().__init__(**params)
        self.external = frozenset(external)
        self.external_slack = None if external_slack_ms is None else int(external_slack_ms) * NS_PER_MS
        self.blind = [(lo, hi + RECONNECT_MS * NS_PER_MS) for lo, hi in partitions]  # (with the margin)
        self.away = Absences()  # of every peer, read for the followers of external leaders
        self.mins = {n: int(ms) * NS_PER_MS for n, ms in (election_min or {}).items()}
        self.default_min = int(default_min_ms) * NS_PER_MS
        self.tolerance = int(tolerance_ms) * NS_PER_MS
        self.slowest = dict(slowest or {})
        self.clock_changes = {n: tuple(sorted(ts)) for n, ts in (clock_changes or {}).items()}
        self.leads: dict[str, Lead] = {}
        self.pauses = Pauses()
        self.problems: list[tuple[str, list[dict[str, Any]], str]] = []
        self.gaps = 0
        self.longest = 0.0  # the longest gap judged, as a share of its bound

    # ---- what the leader did -------------------------------------------------------------------
    @only(*LEADER_RPCS)
    def request_sent(self, ev: Event, msg: Message) -> None:
        if msg.name not in LEADER_RPCS or ev.socket == ROUTER or (ev.via == VIA_PROXY and ev.node not in self.external):
            return  # (an external peer not judged: see the class docstring)
        lead = self.leads.get(ev.node)
        if lead is None or lead.term != msg["term"]:
            if lead is not None and lead.term > msg["term"]:
                return  # an older term's request (term-update judges that)
            self.end(ev.node, None)
            lead = self.leads[ev.node] = Lead(msg["term"], ev.time_ns, (ev, msg), noted=False)
        since, ref = lead.last.get(ev.socket, (lead.since, lead.since_ref))
        if not ev.via or not self.unseen(str((ev.data or {}).get("peer", "")), since, ev.time_ns):
            self.judge(ev.node, lead, ev.socket, since, ev.time_ns, [ref, (ev, msg)])
        lead.last[ev.socket] = (ev.time_ns, (ev, msg))

    def unseen(self, follower: str, since: int, now: int) -> bool:
        """Whether an external leader's requests to ``follower`` may have waited unread in
        ``[since, now]``: the follower was away, or a partition held, then or just before."""
        margin = RECONNECT_MS * NS_PER_MS
        return (any(lo < now and hi > since for lo, hi in self.blind)
                or self.away.near(follower, since, now, after=margin))

    def on_other(self, ev: Event) -> None:
        kind, node = ev.kind, ev.node
        if kind in (PAUSE, RESUME, STALL, CRASH, RESTART):
            self.pauses.on_event(ev)
            if self.external:
                self.away.on_event(ev)
            if kind in (CRASH, RESTART):
                self.end(node, ev.time_ns)  # a crash ends a leadership
        elif kind == NOTE and ev.msg_type == "role" and ev.data:
            term = ev.data.get("term")
            if ev.data.get("role") == "leader" and isinstance(term, int):
                lead = self.leads.get(node)
                if lead is None or lead.term != term:
                    self.end(node, ev.time_ns)
                    self.leads[node] = Lead(term, ev.time_ns, (ev, None), noted=True)
                else:
                    lead.noted = True
            else:
                self.end(node, ev.time_ns)

    def end(self, node: str, at: int | None) -> None:
        """The leadership of ``node`` is over at ``at`` (None: when is unknown, so the time since
        each follower's last request is not judged)."""
        lead = self.leads.pop(node, None)
        if lead is None or at is None or not lead.noted:
            return
        for sock, (since, ref) in lead.last.items():
            self.judge(node, lead, sock, since, at, [ref], ended=True)

    # ---- judging one gap -----------------------------------------------------------------------
    def bound(self, node: str) -> int:
        return int(self.mins.get(node, self.default_min) / 2 / self.slowest.get(node, 1.0))

    def slack(self, node: str) -> int:
        """What an external leader's bound gets more (see the class docstring)."""
        if node not in self.external:
            return 0
        return self.bound(node) // 2 if self.external_slack is None else self.external_slack

    def judge(self, node: str, lead: Lead, sock: str, since: int, now: int, refs: list[Ref],
              ended: bool = False) -> None:
        if any(since < t <= now for t in self.clock_changes.get(node, ())):
            return  # its clock jumped in between: how long it waited by its own clock is unknown
        gap = now - since - self.pauses.between(node, since, now)
        bound = self.bound(node)
        self.gaps += 1
        self.longest = max(self.longest, gap / bound)
        if gap <= bound + self.tolerance + self.slack(node) or len(self.problems) >= 50:
            return
        self.report(node, lead, sock, gap, bound, refs, ended)

    def report(self, node: str, lead: Lead, sock: str, gap: int, bound: int, refs: list[Ref], ended: bool) -> None:
        """Record a gap longer than its bound."""
        follower = sock.split(":", 1)[-1]
        what = "until its leadership ended" if ended else "before the next"
        retry = not ended and len(refs) > 1 and refs[0][1] is not None and refs[0][0].frames == refs[1][0].frames
        self.problems.append((f"{node}, leader of term {lead.term}, sent {follower} no AppendEntries or "
                              f"InstallSnapshot for {gap / 1e6:.1f} ms {what} (bound ELECTION_TIMEOUT_MIN / 2 = "
                              f"{bound / 1e6:.1f} ms{' on its clock' if node in self.slowest else ''}"
                              + (f", + {self.slack(node) / 1e6:g} ms: seen by the proxy" if self.slack(node) else "")
                              + ")"
                              + (": the repeat of an unanswered request came late" if retry else ""),
                              [show(*r) for r in refs], "raft.rpc.timeout-bound" if retry else self.clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        for node in list(self.leads):
            self.end(node, end_ns)
        ok = f"{self.gaps} gap(s) between a leader's requests to a follower, the longest " \
             f"{self.longest:.0%} of its bound"
        if self.external:
            ok += (f"; external peers judged from their requests as the chaos proxy read them, with more slack "
                   f"(half the bound by default), not across a follower's absence or a partition: "
                   f"{', '.join(sorted(self.external))}")
        return self.verdict_of(self.problems, ok)
