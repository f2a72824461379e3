"""Raft liveness after faults: a working leader and completed requests within a bound."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import COMMAND, CRASH, DELIVER, NOTE, RECV, SEND, Event, Verdict
from harness.checkers.raft.elections import RaftChecker
from harness.checkers.raft.wire import only, show
from harness.protocols.codec import Message


START, COMMITTED = "op-start", "op-committed"  # client notes (reference_nodes.raft.client)


def _given_up(op: dict[str, Any]) -> bool:
    """The client gave the operation up itself (its ``op_timeout``, counted from the command, so an
    operation that waited in the client's queue may be given up soon after it was sent)."""
    return op.get("status") == "info" and op.get("reason") == "timed out" and not op.get("applied")


def _completed(op: dict[str, Any]) -> bool:
    """The cluster did its part: the operation is ``ok``, or ``info`` only because the client could
    not read its result back (its entry was compacted into a snapshot first: ``applied``; when a
    peer compacts its log is the peer's choice)."""
    return op.get("status") == "ok" or bool(op.get("applied"))  # (only an "info" says applied)


class LiveAfterHeal(RaftChecker):
    """Once the last fault has healed (``heal_ns``: the end of the last partition, pause or slow
    link, the last restart, the last clock change; 0 without faults), within ``within`` (default
    5 s): some leader's AppendEntries is acknowledged by a follower, or a client operation
    commits (either shows a working leader; the second also when the peers are not probed), and
    every client operation invoked after the heal is committed within ``within`` of its start.

    What is timed is the cluster's part, not the client's: an operation is done when its client
    notes it committed (``op-committed``: the leader's answer, or its entry found in the log) or,
    for a client that does not note it, when it completes (status ``ok``, or ``info`` that says
    the cluster applied it: `_completed`). Reading the result back is the client's own work: the
    harness's client reads a log that a peer may compact as fast as it likes, into snapshots as
    large and in chunks as small as it likes, and a slow read-back is no sign of an unavailable
    cluster. It starts when the client sends it (``op-start``) for a client that notes that (a
    client runs one operation at a time; one queued behind another is judged with that one),
    else at the command. Reads AppendEntries and their responses at the leaders, the clients'
    commands, notes and ``op`` deliveries. Operations invoked too close to the end of the run to
    be judged are skipped, and so are those of a client that crashed before they were done (its
    memory, and the application waiting for them, are gone: counted apart), and those their client
    gave up on before the bound (its ``op_timeout`` runs from the command, so one that waited in
    its queue may be given up soon after it was sent: whether the cluster would have made the bound
    is unknown; counted apart). Message rules (loss,
    reordering) are not faults that heal: liveness must hold under them."""

    name = "live-after-heal"
    clause = "raft.algorithm.availability"
    kinds = frozenset({SEND, RECV, COMMAND, NOTE, DELIVER, CRASH})

    def __init__(self, heal_ns: int = 0, within_ms: int = 5000, **params: Any) -> None:
        super().__init__(**params)
        self.heal_ns = heal_ns
        self.within_ns = within_ms * 1_000_000
        self.leader_at: int | None = None  # first acknowledged AppendEntries after the heal
        self.leader_ref: dict[str, Any] | None = None
        self.invoked: dict[tuple[str, Any], Event] = {}
        self.started: dict[tuple[str, Any], Event] = {}
        self.committed: dict[tuple[str, Any], Event] = {}
        self.done: dict[tuple[str, Any], Event] = {}
        self.crashes: dict[str, list[int]] = {}  # node -> when it crashed

    @only("AppendEntriesResponse")
    def response_received(self, ev: Event, request: Message, msg: Message) -> None:
        if self.leader_at is None and request.name == "AppendEntries" and ev.time_ns >= self.heal_ns \
                and msg["success"] and msg["term"] == request["term"]:
            self.leader_at = ev.time_ns
            self.leader_ref = show(ev, msg)

    def on_other(self, ev: Event) -> None:
        data = ev.data or {}
        if ev.kind == CRASH:
            self.crashes.setdefault(ev.node, []).append(ev.time_ns)
        elif ev.kind == COMMAND and "id" in data:
            self.invoked.setdefault((ev.node, data["id"]), ev)
        elif ev.kind == NOTE and ev.msg_type in (START, COMMITTED):
            (self.started if ev.msg_type == START else self.committed).setdefault((ev.node, data.get("id")), ev)
            if ev.msg_type == COMMITTED:
                self.working(ev)
        elif ev.kind == DELIVER and ev.msg_type == "op":
            self.done.setdefault((ev.node, data.get("id")), ev)
            if _completed(data):
                self.working(ev)

    def working(self, ev: Event) -> None:
        if self.leader_at is None and ev.time_ns >= self.heal_ns:
            self.leader_at = ev.time_ns  # a committed update: some leader works (peers unseen)
            self.leader_ref = show(ev)

    def finished(self, key: tuple[str, Any]) -> Event | None:
        """When the cluster's part of the operation was done, if it was."""
        done = self.done.get(key)
        committed = self.committed.get(key)
        if done is not None and _completed(done.data or {}) and (committed is None or done.time_ns < committed.time_ns):
            return done
        return committed

    def finish(self, end_ns: int) -> list[Verdict]:
        deadline = self.heal_ns + self.within_ns
        if deadline > end_ns:
            return [self.ok(f"not judged: the run ends {((deadline - end_ns) / 1e9):.1f} s before the bound after "
                            f"the last heal at {self.heal_ns / 1e9:.1f} s")]
        problems: list[tuple[str, list[dict[str, Any]]]] = []
        no_leader = self.leader_at is None or self.leader_at > deadline  # the first problem (added at the end)
        judged = queued = abandoned = given_up = 0
        waited: list[dict[str, Any]] = []  # operations given up: evidence of a missing leader
        noting = {node for node, _ in (*self.started, *self.committed)}  # clients that say when they send
        for key, inv in self.invoked.items():
            start = self.started.get(key)
            if start is None and key[0] in noting:
                queued += inv.time_ns >= self.heal_ns  # never sent: it waited behind another one, judged
                continue
            begin = inv if start is None else start
            if begin.time_ns < self.heal_ns:
                if start is None:
                    continue  # invoked before the heal, by a client that does not say when it sent it
                end = self.finished(key) or self.done.get(key)
                if end is not None and end.time_ns < self.heal_ns:
                    continue  # over before the heal
            due = max(begin.time_ns, self.heal_ns) + self.within_ns
            if due > end_ns:
                continue
            done = self.finished(key)
            if any(begin.time_ns <= c and (done is None or c < done.time_ns) for c in self.crashes.get(key[0], ())):
                abandoned += 1  # its client crashed with it pending
                continue
            delivered = self.done.get(key)
            if done is None and delivered is not None and delivered.time_ns < due and _given_up(delivered.data or {}):
                given_up += 1  # its client stopped waiting before the bound: whether it would have made it is unknown
                if len(waited) < 3:
                    waited += [show(begin), show(delivered)]
                continue
            judged += 1
            if done is None or done.time_ns > due:
                how = "not committed" if done is None else "committed" if done.kind == NOTE else \
                    str((done.data or {}).get("status"))
                how += "" if done is None else f" after {(done.time_ns - begin.time_ns) / 1e9:.3f} s"
                if done is None and delivered is not None:
                    how += f" (ended {(delivered.data or {}).get('status')})"
                if len(problems) + no_leader < 50:
                    at = "invoked" if start is None else "sent"
                    if begin.time_ns < self.heal_ns:
                        at = "pending at the heal, sent"
                    problems.append((f"operation {key[1]} of {key[0]} {at} at {begin.time_ns / 1e9:.3f} s: {how}",
                                     [show(begin)] + ([show(done)] if done is not None else [])))
        if no_leader:  # its evidence, if no leader showed at all: the operations their clients gave up waiting for
            text = f"no follower acknowledged a leader within {self.within_ns / 1e9:g} s of the last heal " \
                   f"at {self.heal_ns / 1e9:.3f} s"
            if self.leader_ref is None and waited:
                text += " (operations their clients gave up waiting for are the evidence)"
            problems.insert(0, (text, [self.leader_ref] if self.leader_ref else waited))
        unsent = f" ({queued} never sent before the run ended)" if queued else ""
        unsent += f" ({abandoned} pending when their client crashed: not owed)" if abandoned else ""
        unsent += f" ({given_up} given up by their client before the bound: not judged)" if given_up else ""
        return self.verdict(problems, f"leader within {((self.leader_at or 0) - self.heal_ns) / 1e9:.3f} s of the "
                                      f"last heal; {judged} later operation(s) committed within "
                                      f"{self.within_ns / 1e9:g} s{unsent}")
