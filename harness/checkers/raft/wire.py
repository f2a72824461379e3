"""Reading Raft traffic from the probes' events: decoding, and pairing responses with requests.

Raft responses carry no type byte: a response is recognised by the request it answers. A
`Tracker` follows one run's SEND and RECV events and calls its listener with decoded
messages, each response together with its request:

* on a ``router`` socket (a peer's ROUTER; frame 0 is the routing id): ``request_received`` and
  ``response_sent``, paired by (node, routing id, first frame);
* on any other socket that sends requests (a peer's DEALERs ``peer:<id>``, a client's
  ``dealer``): ``request_sent`` and ``response_received``, paired by (node, socket, first frame);
* ``pub`` SENDs and ``sub`` RECVs: ``broadcast`` (StateBroadcast).

The first frame is the peer RPC message id or the client RPC's reqid/request id, so retries
and pipelined responses pair with their request. Decoded messages are cached on the event,
which every checker of the run shares, so each message is decoded once.
"""

from __future__ import annotations

import zlib
from typing import Any, Callable, TypeVar

from harness.checkers.base import RECV, SEND, Event
from harness.protocols.codec import Message

ROUTER, PUB, SUB = "router", "pub", "sub"
PEER_RPCS = frozenset({"RequestVote", "AppendEntries", "InstallSnapshot"})
AE_HEADER = 8  # frames of an AppendEntries before its entries
RE_HEADER = 4  # frames of a status 1/2 RequestEntries response before its entries
SB_HEADER = 3  # frames of a StateBroadcast before its entries


def decode(ev: Event, skip: int = 0, as_: str | None = None, channel: str | None = None) -> Message | None:
    """The event's frames (after ``skip``) decoded, or None; cached on the event (shared with
    every checker, wire-conformance too)."""
    return ev.decoded(skip, as_, channel)


def entry_term(raw: bytes) -> int:
    return int.from_bytes(raw[13:20], "little")


def entry_id(raw: bytes) -> tuple[int, int]:
    """What identifies an entry's content: (term, CRC-32 of its frame)."""
    return entry_term(raw), zlib.crc32(raw)


def entries_of(ev: Event, msg: Message, skip: int = 0) -> tuple[int, list[bytes]]:
    """(index of the first entry, entry frames) of an AppendEntries, a status 1/2
    RequestEntries response or a StateBroadcast; (0, []) for other messages."""
    frames = ev.frames or []
    name = msg.name
    if name == "AppendEntries":
        return msg["prev_log_index"] + 1, frames[skip + AE_HEADER:]
    if name == "RequestEntriesResponse" and msg["status"] in (1, 2):
        raws = frames[skip + RE_HEADER:]
        return msg["last_index"] - len(raws) + 1, raws
    if name == "StateBroadcast":
        raws = frames[skip + SB_HEADER:]
        return msg["last_applied"] - len(raws) + 1, raws
    return 0, []


F = TypeVar("F", bound=Callable[..., None])


def only(*names: str) -> Callable[[F], F]:
    """Marks a `Listener` callback that does something for messages of these names only (a
    response callback: the response's name, e.g. ``AppendEntriesResponse``): the tracker then
    does not call it for the others. The callback still tests the name itself, so a direct call
    behaves the same; the mark only spares a run the calls (most callbacks want one or two of
    the protocol's messages, and a run's tracker calls a dozen checkers per message)."""

    def mark(fn: F) -> F:
        setattr(fn, "only", frozenset(names))
        return fn

    return mark


PEER_RESPONSES = tuple(name + "Response" for name in sorted(PEER_RPCS))


class Listener:
    """What a `Tracker` calls; checkers override what they need (marked with `only` when they
    want some messages only)."""

    def request_sent(self, ev: Event, msg: Message) -> None: ...

    def request_received(self, ev: Event, msg: Message) -> None: ...

    def response_sent(self, ev: Event, request: Message, msg: Message) -> None: ...

    def response_received(self, ev: Event, request: Message, msg: Message) -> None: ...

    def broadcast(self, ev: Event, msg: Message) -> None: ...


LISTENER_METHODS = ("request_sent", "request_received", "response_sent", "response_received", "broadcast")


class Tracker:
    """Pairs responses with requests and calls every listener that overrides the callback.
    One tracker may serve several checkers (`RaftChecker.join`): each event is then
    classified once, and only the checkers that want what it is are called."""

    def __init__(self) -> None:
        # callback -> (a listener's bound method, the message names it wants or None for all)
        self.subscribers: dict[str, list[tuple[Any, frozenset[str] | None]]] = {m: [] for m in LISTENER_METHODS}
        self._routes: dict[tuple[str, str], list[Any]] = {}  # (callback, message name) -> what to call
        self.received: dict[tuple[str, bytes, bytes], Message] = {}  # requests on a ROUTER
        self.sent: dict[tuple[str, str, bytes], Message] = {}  # requests from a DEALER
        self.shared: dict[str, Any] = {}  # state several listeners read (a knowledge base)
        self.probed: set[str] = set()  # nodes whose own probe reported a send (see `unseen_sender`)

    def add(self, listener: Listener) -> None:
        for m in LISTENER_METHODS:
            fn = getattr(type(listener), m)
            if fn is not getattr(Listener, m):
                self.subscribers[m].append((getattr(listener, m), getattr(fn, "only", None)))
        self._routes.clear()

    def _route(self, callback: str, name: str) -> list[Any]:
        """The subscribers of ``callback`` that want messages named ``name``, in the order they
        were added (a checker may read what a listener added before it learned)."""
        fns = self._routes[(callback, name)] = [fn for fn, names in self.subscribers[callback]
                                                if names is None or name in names]
        return fns

    def feed(self, ev: Event) -> None:
        what = self.classify(ev)
        if not what:
            return
        callback, msg = what[0], what[-1]
        fns = self._routes.get((callback, msg.name))
        if fns is None:
            fns = self._route(callback, msg.name)
        if len(what) == 2:
            for fn in fns:
                fn(ev, msg)
        else:
            request = what[1]
            for fn in fns:
                fn(ev, request, msg)

    def classify(self, ev: Event) -> tuple[Any, ...]:
        """(listener callback, its arguments after the event), or () for nothing."""
        frames = ev.frames
        if not frames:
            return ()
        sock = ev.socket
        if ev.kind == RECV:
            if sock == ROUTER:
                msg = decode(ev, 1, channel="request")
                if msg is not None and len(frames) > 1:
                    self.received[(ev.node, frames[0], frames[1])] = msg
                    return ("request_received", msg)
            elif sock == SUB:
                msg = decode(ev, channel="broadcast")
                if msg is not None:
                    return ("broadcast", msg)
            else:
                req = self.sent.get((ev.node, sock, frames[0]))
                if req is not None:
                    msg = decode(ev, as_=req.name + "Response")
                    if msg is not None:
                        return ("response_received", req, msg)
        elif ev.kind == SEND:
            if not ev.via:
                self.probed.add(ev.node)
            if sock == ROUTER:
                req = self.received.get((ev.node, frames[0], frames[1])) if len(frames) > 1 else None
                if req is not None:
                    msg = decode(ev, 1, as_=req.name + "Response")
                    if msg is not None:
                        return ("response_sent", req, msg)
            elif sock == PUB:
                msg = decode(ev, channel="broadcast")
                if msg is not None:
                    return ("broadcast", msg)
            else:
                msg = decode(ev, channel="request")
                if msg is not None:
                    self.sent[(ev.node, sock, frames[0])] = msg
                    return ("request_sent", msg)
        return ()


def unseen_sender(tracker: Tracker, ev: Event, msg: Message) -> str | None:
    """The peer that sent this peer request (RequestVote, AppendEntries, InstallSnapshot: frame 4
    names it) a probed peer received, when its receipt is the only sight of it: the sender runs no probe (an external peer beside the
    harness's own, live) and the chaos proxy did not hand it on (the proxy reports the send as
    well; see harness/live_observe.py). None otherwise, and for every other event. A probed
    sender's send is reported before any receipt of it (causality, one event loop), so a
    sender not in ``tracker.probed`` by then has no probe."""
    if ev.via or ev.kind != RECV or ev.socket != ROUTER:
        return None
    sender = str(msg["peer_id"])
    return None if sender in tracker.probed else sender


def show(ev: Event, msg: Message | None = None, **extra: Any) -> dict[str, Any]:
    """Evidence of one event: when, who, which socket, the message decoded (entries as their
    count, index and term), and extra facts the checker derived from it."""
    out: dict[str, Any] = {"time_ms": round(ev.time_ns / 1e6, 3), "node": ev.node, "kind": ev.kind}
    if ev.socket:
        out["socket"] = ev.socket
    if msg is not None and ev.codec is not None:
        out["message"] = msg.name
        fields = {k: v for k, v in msg.fields.items() if k != "entries" and k != "chunk"}
        out["fields"] = ev.codec.show(type(msg)(msg.name, fields))
        if msg.fields.get("entries"):  # a status 3 RequestEntries response has the field, empty
            out["entries"] = [{"term": e.term, "reqid": e.reqid.hex(), "size": len(e.data)} for e in msg["entries"][:8]]
    elif ev.data:
        out["data"] = {k: v for k, v in ev.data.items() if not isinstance(v, (list, dict)) or len(str(v)) < 200}
    out.update(extra)
    return out
