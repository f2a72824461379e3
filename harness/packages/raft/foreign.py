"""Writes of clients the run does not observe, for the linearizability check.

A client that runs as an external process (a ``command`` group) has no command channel and no
probe: its operations are not in the history the reference clients' events give. When it
writes keys the reference clients read, a read of its value "cannot be explained" — a false
alarm against a correct cluster. Its writes do cross the wire, as RequestUpdates the peers
receive and as log entries (AppendEntries, RequestEntries responses, StateBroadcasts), each
entry carrying the update's reqid. Every key-value write (put, cas, delete) whose reqid no
reference client sent becomes an operation of unknown outcome, invoked when the wire first
showed it on the peers' side (a RequestUpdate received, an AppendEntries: the leader had it
before it was committed, so that is not after its effect), or at the run's start when only a
committed copy (a read-back, a broadcast) showed it. It may then take effect anywhere after its
invocation, or never: the check stays sound and goes on judging those keys.

Watched only in runs that have external clients (``for_scenario``), so other runs pay nothing.
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import RECV, SEND, Event
from harness.checkers.external import external_nodes
from harness.checkers.raft.wire import Listener, Tracker, entries_of
from harness.packages.raft.history import invoke
from harness.protocols.codec import Message
from harness.protocols.raft_kv import ENTRY_HEADER, STATE_ENTRY, decode_op

WRITES = ("put", "cas", "delete")
FOREIGN = "foreign"  # the history's process name of an unobserved client's write: foreign:<reqid hex>


class ForeignWrites(Listener):
    """Feed it every SEND/RECV event of the run (`on_event`); `operations()` at the end. A
    `Tracker` of its own pairs the clients' RequestEntries with their responses."""

    def __init__(self) -> None:
        self.own: set[bytes] = set()  # reqids of RequestUpdates the reference clients sent
        self.seen: dict[bytes, tuple[int, dict[str, Any]]] = {}  # reqid -> (invocation, operation)
        self.tracker = Tracker()
        self.tracker.add(self)

    @staticmethod
    def for_scenario(scenario: Any) -> "ForeignWrites | None":
        """One when a client group of the scenario runs an external command, else None."""
        return ForeignWrites() if external_nodes(scenario, "client") else None

    def on_event(self, ev: Event) -> None:
        if ev.kind in (SEND, RECV) and ev.role in ("client", "peer"):
            self.tracker.feed(ev)

    def request_sent(self, ev: Event, msg: Message) -> None:
        if ev.role == "client" and msg.name == "RequestUpdate":
            if not ev.via:  # (an external client's, as the chaos proxy saw it, is no reference client's)
                self.own.add(msg["reqid"])
        elif ev.role == "peer" and msg.name == "AppendEntries":
            self._entries(ev, msg, 0, ev.time_ns)

    def request_received(self, ev: Event, msg: Message) -> None:
        if ev.role != "peer":
            return
        if msg.name == "RequestUpdate":
            self._write(msg["reqid"], msg["data"], ev.time_ns)
        elif msg.name == "AppendEntries":
            self._entries(ev, msg, 1, ev.time_ns)

    def response_received(self, ev: Event, request: Message, msg: Message) -> None:
        if ev.role == "client" and msg.name == "RequestEntriesResponse":
            self._entries(ev, msg, 0, 0)

    def broadcast(self, ev: Event, msg: Message) -> None:
        if ev.role == "client" and ev.kind == RECV:
            self._entries(ev, msg, 0, 0)

    def _entries(self, ev: Event, msg: Any, skip: int, at: int) -> None:
        for raw in entries_of(ev, msg, skip)[1]:
            if len(raw) > ENTRY_HEADER and raw[12] == STATE_ENTRY:
                self._write(bytes(raw[:12]), raw[ENTRY_HEADER:], at)

    def _write(self, reqid: bytes, data: bytes, at: int) -> None:
        known = self.seen.get(reqid)
        if known is not None and known[0] <= at:
            return
        body = decode_op(bytes(data))
        if body is not None and body["op"] in WRITES:
            self.seen[reqid] = (at, body)

    def operations(self) -> list[dict[str, Any]]:
        """The unobserved clients' writes as invocations without a completion, in reqid order."""
        return [invoke(f"{FOREIGN}:{r.hex()}", r.hex(), body, at)
                for r, (at, body) in sorted(self.seen.items()) if r not in self.own]
