"""What a peer publishes on its StateBroadcast PUB socket, judged from its own sends.

The document's BroadcastStateMachine is optional (E-RAFT-27): a peer that has none publishes
nothing, and no check here fails it for that unless the scenario names a check that says the
implementation has one (`BroadcastHeartbeat`, level SHOULD). What a peer that does publish
publishes is judged by `BroadcastState` (MUST, a default check) and `BroadcastEntries`
(SHOULD, named by a scenario). The probes report every send, PUB included, whether or not a
subscriber is connected.
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CRASH, RESTART, SEND, VIA_PROXY, Event, Verdict
from harness.checkers.raft.commits import CommitBound, Leadership
from harness.checkers.raft.elections import RaftChecker
from harness.checkers.raft.timing import LEADER_RPCS, NS_PER_MS, Lead, LeaderHeartbeat, Ref
from harness.checkers.raft.wire import PUB, entries_of, entry_id, show
from harness.node import SocketSpec, SocketType
from harness.protocols.codec import Message


def published(ev: Event) -> bool:
    """A StateBroadcast the node itself sent on its PUB (not one a client received)."""
    return ev.kind == SEND and ev.socket == PUB


class BroadcastState(CommitBound):
    """A StateBroadcast shows applied entries only, each at its index (E-RAFT-22,
    ``raft.broadcast.last-applied``): its LAST APPLIED INDEX is at most the highest commit index
    the wire has justified by then (a majority acknowledged an entry of the leader's term at or
    beyond it, or a leader announced it: see `CommitBound`), since nothing is applied before it
    is committed; and its entries, the last at LAST APPLIED INDEX, are the entries the
    broadcaster's own AppendEntries of that term showed at those indexes (a leader never
    changes its log within its term). Reads the StateBroadcasts a peer sends on its PUB, its
    AppendEntries and InstallSnapshots and the answers to them. Not judged in a cluster of one,
    whose leader commits with no acknowledgement on the wire. Sound for every peer: a peer
    without a BroadcastStateMachine sends no StateBroadcast, and is not judged."""

    name = "broadcast-state"
    clause = "raft.broadcast.last-applied"

    def __init__(self, peers: int = 0, **params: Any) -> None:
        super().__init__(peers, **params)
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []
        self.judged = 0

    def on_appended(self, ev: Event, msg: Message, lead: Leadership) -> None:
        self.raise_bound(msg["commit_index"])

    def on_snapshot_sent(self, ev: Event, msg: Message, lead: Leadership) -> None:
        self.raise_bound(msg["last_included_index"])

    def broadcast(self, ev: Event, msg: Message) -> None:
        if not published(ev) or self.peers < 2 or len(self.problems) >= 50:
            return
        self.judged += 1
        last = msg["last_applied"]
        if last > self.justified:
            self.problems.append((f"{ev.node} broadcast LAST APPLIED INDEX {last} in term {msg['term']}, beyond the "
                                  f"highest commit index {self.justified} the wire had justified: it cannot have "
                                  f"applied it", [show(ev, msg, committed=self.justified)]))
            return
        lead = self.kb.leaderships.get((ev.node, msg["term"]))
        if lead is None:
            return
        first, raws = entries_of(ev, msg)
        for k, raw in enumerate(raws):
            claim = lead.claims.get(first + k)
            if claim is None:
                continue
            term, crc = entry_id(raw)
            if term != claim[0] or (claim[1] is not None and crc != claim[1]):
                self.problems.append((f"{ev.node} broadcast at index {first + k} (LAST APPLIED INDEX {last}, "
                                      f"{len(raws)} entries) an entry (term {term}, CRC-32 {crc:08x}) other than the "
                                      f"one its AppendEntries of term {lead.term} showed there (term {claim[0]}"
                                      + (f", CRC-32 {claim[1]:08x})" if claim[1] is not None else ")"),
                                      [show(ev, msg, index=first + k), show(*lead.first_ref)]))
                return

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict(self.problems, f"{self.judged} StateBroadcast(s), each within what was committed "
                                           f"and matching the broadcaster's log")


class BroadcastEntries(RaftChecker):
    """A leader that publishes StateBroadcasts publishes the entries it applies, with them
    (E-RAFT-27 point 2, ``raft.broadcast.on-apply``, a SHOULD): from its first StateBroadcast
    of a term on, every index a later one names as LAST APPLIED INDEX was carried as an entry
    by one of its StateBroadcasts of the term. An empty StateBroadcast announcing an index its
    broadcasts never carried fails (the literal "empty ... or immediately" reading), and so does
    one whose first entry lies beyond the last index carried (applied entries left out). A
    crash or restart starts the count again. Reads the StateBroadcasts a peer sends on its PUB;
    ones the chaos proxy saw are not judged (it sees only what a subscriber got)."""

    name = "broadcast-entries"
    clause = "raft.broadcast.on-apply"
    level = "SHOULD"
    kinds = frozenset({SEND, CRASH, RESTART})

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.covered: dict[str, tuple[int, int]] = {}  # node -> (term, highest index its broadcasts carried)
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []
        self.judged = 0

    def broadcast(self, ev: Event, msg: Message) -> None:
        if not published(ev) or ev.via == VIA_PROXY:
            return
        term, last = msg["term"], msg["last_applied"]
        first, raws = entries_of(ev, msg)
        seen = self.covered.get(ev.node)
        if seen is None or seen[0] != term:
            self.covered[ev.node] = (term, last)  # its first of the term: whatever it applied before
            return
        self.judged += 1
        covered = seen[1]
        if len(self.problems) < 50:
            if not raws and last > covered:
                self.problems.append((f"{ev.node} announced LAST APPLIED INDEX {last} in an empty StateBroadcast of "
                                      f"term {term}; its StateBroadcasts carried entries up to {covered} only",
                                      [show(ev, msg, carried=covered)]))
            elif raws and first > covered + 1:
                self.problems.append((f"{ev.node} broadcast entries {first}-{last} in term {term}; entries "
                                      f"{covered + 1}-{first - 1} were never broadcast",
                                      [show(ev, msg, carried=covered)]))
        self.covered[ev.node] = (term, max(covered, last))

    def on_other(self, ev: Event) -> None:
        self.covered.pop(ev.node, None)

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict(self.problems, f"{self.judged} StateBroadcast(s) after a leader's first, every "
                                           f"applied index carried as an entry")


class BroadcastHeartbeat(LeaderHeartbeat):
    """A leader with a BroadcastStateMachine publishes a StateBroadcast at least once per
    CLIENT_HEARTBEAT_INTERVAL of its own clock, from its election on (E-RAFT-22,
    ``raft.broadcast.heartbeat``, a SHOULD; a broadcast with entries restarts the interval). A
    scenario that names this check says its peers have a BroadcastStateMachine (the document
    makes it optional, E-RAFT-27): a leadership that ends, longer than the bound, without a
    single StateBroadcast fails ``raft.broadcast.pub-socket``.

    Judged: the peers that declare a PUB socket (a reference peer with ``broadcast: false``
    declares none). The leaderships, pauses, crashes and clock faults are followed as in
    `LeaderHeartbeat` (``role`` notes; the first AppendEntries of a term for a peer without
    them); ``interval`` maps each peer to its CLIENT_HEARTBEAT_INTERVAL in ms (default 500, the
    document's preferred value, E-RAFT-27 point 3), ``tolerance`` (default 90 ms) is slack for a
    live run's scheduling. External peers seen by the chaos proxy are not judged."""

    name = "broadcast-heartbeat"
    clause = "raft.broadcast.heartbeat"
    level = "SHOULD"

    def __init__(self, interval: dict[str, int] | None = None, default_interval_ms: int = 500,
                 **params: Any) -> None:
        super().__init__(**params)
        self.intervals = {n: int(ms) * NS_PER_MS for n, ms in (interval or {}).items()}
        self.default_interval = int(default_interval_ms) * NS_PER_MS
        self.publishers: set[str] = set()

    def on_sockets(self, node: str, sockets: list[SocketSpec]) -> None:
        if any(s.type == SocketType.PUB for s in sockets):
            self.publishers.add(node)

    def bound(self, node: str) -> int:
        return int(self.intervals.get(node, self.default_interval) / self.slowest.get(node, 1.0))

    def request_sent(self, ev: Event, msg: Message) -> None:
        """An AppendEntries or InstallSnapshot of a new term begins a leadership (for a peer
        without ``role`` notes); the gaps judged are between broadcasts."""
        if msg.name not in LEADER_RPCS or ev.via == VIA_PROXY or ev.node not in self.publishers:
            return
        lead = self.leads.get(ev.node)
        if lead is None or lead.term < msg["term"]:
            self.end(ev.node, None)
            self.leads[ev.node] = Lead(msg["term"], ev.time_ns, (ev, msg), noted=False)

    def broadcast(self, ev: Event, msg: Message) -> None:
        if not published(ev) or ev.via == VIA_PROXY or ev.node not in self.publishers:
            return
        lead = self.leads.get(ev.node)
        if lead is None or lead.term != msg["term"]:
            if lead is not None and lead.term > msg["term"]:
                return
            self.end(ev.node, None)
            lead = self.leads[ev.node] = Lead(msg["term"], ev.time_ns, (ev, msg), noted=False)
        since, ref = lead.last.get(PUB, (lead.since, lead.since_ref))
        self.judge(ev.node, lead, PUB, since, ev.time_ns, [ref, (ev, msg)])
        lead.last[PUB] = (ev.time_ns, (ev, msg))

    def end(self, node: str, at: int | None) -> None:
        lead = self.leads.pop(node, None)
        if lead is None or at is None or not lead.noted or node not in self.publishers:
            return
        since, ref = lead.last.get(PUB, (lead.since, lead.since_ref))
        self.judge(node, lead, PUB, since, at, [ref], ended=True)

    def report(self, node: str, lead: Lead, sock: str, gap: int, bound: int, refs: list[Ref], ended: bool) -> None:
        clock = " on its clock" if node in self.slowest else ""
        if ended and PUB not in lead.last:
            self.problems.append((f"{node}, leader of term {lead.term} for {gap / 1e6:.1f} ms, published no "
                                  f"StateBroadcast at all (bound CLIENT_HEARTBEAT_INTERVAL = {bound / 1e6:.1f} ms"
                                  f"{clock})", [show(*r) for r in refs], "raft.broadcast.pub-socket"))
            return
        what = "until its leadership ended" if ended else "before the next"
        self.problems.append((f"{node}, leader of term {lead.term}, published no StateBroadcast for {gap / 1e6:.1f} ms "
                              f"{what} (bound CLIENT_HEARTBEAT_INTERVAL = {bound / 1e6:.1f} ms{clock})",
                              [show(*r) for r in refs], self.clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        for node in list(self.leads):
            self.end(node, end_ns)
        ok = f"{self.gaps} gap(s) between a leader's StateBroadcasts, the longest {self.longest:.0%} of its bound"
        return self.verdict_of(self.problems, ok)
