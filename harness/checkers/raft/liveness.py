"""Raft liveness after faults: a working leader and completed requests within a bound."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import COMMAND, DELIVER, NOTE, RECV, SEND, Event, Verdict
from harness.checkers.raft.elections import RaftChecker
from harness.checkers.raft.wire import only, show
from harness.protocols.codec import Message

OP_START = "op-start"  # a client's note as it sends an operation's first request (reference_nodes/raft/client.py)


def _completed(op: dict[str, Any]) -> bool:
    """The cluster did its part: the operation is ``ok``, or ``info`` only because the client could
    not read its result back (its entry was compacted into a snapshot first: ``applied``; when a
    peer compacts its log is the peer's choice)."""
    return op.get("status") == "ok" or bool(op.get("applied"))  # (only an "info" says applied)


class LiveAfterHeal(RaftChecker):
    """Once the last fault has healed (``heal_ns``: the end of the last partition, pause or slow
    link, the last restart, the last clock change; 0 without faults), within ``within`` (default
    5 s): some leader's AppendEntries is acknowledged by a follower, or a client operation
    completes (either shows a working leader; the second also when the peers are not probed), and
    every client operation the cluster has to answer after the heal completes within ``within``
    (status ``ok``, or ``info`` that says the cluster applied it: `_completed`), counted from when
    the client sent it to the cluster (its ``op-start`` note), or from the heal for one sent
    before it and still open. Reads AppendEntries and their responses at the leaders, the
    clients' commands, ``op-start`` notes and ``op`` deliveries. Operations due after the end of
    the run are skipped. Message rules (loss, reordering) are not faults that heal: liveness
    must hold under them.

    Not from the command: a client runs its operations one at a time, so one commanded while
    others wait in its queue is sent only when they are done; a cluster that commits an update
    100 ms after it arrives (lawful: a leader may send entries with its heartbeat, E-RAFT-12)
    serves a client 10 operations a second, and a workload of 13 a second per client queues up
    for as long as it runs, faults or not. An operation still in the queue at the end was never
    sent, and is not judged; the one it waits behind is. A client without ``op-start`` notes is
    judged from its commands."""

    name = "live-after-heal"
    clause = "raft.algorithm.availability"
    kinds = frozenset({SEND, RECV, COMMAND, DELIVER, NOTE})

    def __init__(self, heal_ns: int = 0, within_ms: int = 5000, **params: Any) -> None:
        super().__init__(**params)
        self.heal_ns = heal_ns
        self.within_ns = within_ms * 1_000_000
        self.leader_at: int | None = None  # first acknowledged AppendEntries after the heal
        self.leader_ref: dict[str, Any] | None = None
        self.invoked: dict[tuple[str, Any], Event] = {}  # commands after the heal
        self.sent: dict[tuple[str, Any], Event] = {}  # op-start notes
        self.done: dict[tuple[str, Any], Event] = {}

    @only("AppendEntriesResponse")
    def response_received(self, ev: Event, request: Message, msg: Message) -> None:
        if self.leader_at is None and request.name == "AppendEntries" and ev.time_ns >= self.heal_ns \
                and msg["success"] and msg["term"] == request["term"]:
            self.leader_at = ev.time_ns
            self.leader_ref = show(ev, msg)

    def on_other(self, ev: Event) -> None:
        data = ev.data or {}
        if ev.kind == COMMAND and ev.time_ns >= self.heal_ns and "id" in data:
            self.invoked.setdefault((ev.node, data["id"]), ev)
        elif ev.kind == NOTE and ev.msg_type == OP_START and "id" in data:
            self.sent.setdefault((ev.node, data["id"]), ev)
        elif ev.kind == DELIVER and ev.msg_type == "op":
            self.done.setdefault((ev.node, data.get("id")), ev)
            if self.leader_at is None and ev.time_ns >= self.heal_ns and data.get("status") == "ok":
                self.leader_at = ev.time_ns  # a committed update: some leader works (peers unseen)
                self.leader_ref = show(ev)

    def open_after_heal(self) -> dict[tuple[str, Any], tuple[int, Event]]:
        """The operations the cluster has to answer after the heal, each with the time it is
        judged from: when the client sent it (never before the heal). A command of a client that
        notes when it sends stands for nothing until then (it waited in the client's queue)."""
        noting = {node for node, _ in self.sent}
        out: dict[tuple[str, Any], tuple[int, Event]] = {}
        for key, start in self.sent.items():
            done = self.done.get(key)
            if done is None or done.time_ns >= self.heal_ns:
                out[key] = (max(start.time_ns, self.heal_ns), start)
        for key, inv in self.invoked.items():
            if key[0] not in noting:
                out.setdefault(key, (inv.time_ns, inv))
        return out

    @staticmethod
    def since_what(ev: Event, since: int) -> str:
        what = "sent" if ev.kind == NOTE else "invoked"
        return f"{what} at {ev.time_ns / 1e9:.3f} s" + (f" (open at the heal, {since / 1e9:.3f} s)"
                                                        if since > ev.time_ns else "")

    def finish(self, end_ns: int) -> list[Verdict]:
        deadline = self.heal_ns + self.within_ns
        if deadline > end_ns:
            return [self.ok(f"not judged: the run ends {((deadline - end_ns) / 1e9):.1f} s before the bound after "
                            f"the last heal at {self.heal_ns / 1e9:.1f} s")]
        problems: list[tuple[str, list[dict[str, Any]]]] = []
        if self.leader_at is None or self.leader_at > deadline:
            problems.append((f"no follower acknowledged a leader within {self.within_ns / 1e9:g} s of the last heal "
                             f"at {self.heal_ns / 1e9:.3f} s", [self.leader_ref] if self.leader_ref else []))
        judged = 0
        for key, (since, inv) in self.open_after_heal().items():
            due = since + self.within_ns
            if due > end_ns:
                continue
            judged += 1
            done = self.done.get(key)
            if done is None or done.time_ns > due or not _completed(done.data or {}):
                how = "not completed" if done is None else \
                    f"{(done.data or {}).get('status')} after {(done.time_ns - since) / 1e9:.3f} s"
                if len(problems) < 50:
                    problems.append((f"operation {key[1]} of {key[0]} {self.since_what(inv, since)}: {how}",
                                     [show(inv)] + ([show(done)] if done is not None else [])))
        return self.verdict(problems, f"leader within {((self.leader_at or 0) - self.heal_ns) / 1e9:.3f} s of the "
                                      f"last heal; {judged} operation(s) open after it completed within "
                                      f"{self.within_ns / 1e9:g} s")
