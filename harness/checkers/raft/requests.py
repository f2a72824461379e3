"""Request ids judged from the requester's sends: peer message ids (E-RAFT-04) and the reqids of
a client's updates (E-RAFT-09, E-RAFT-14, E-RAFT-16)."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CRASH, DELIVER, NOTE, RECV, RESTART, SEND, VIA_PROXY, Event, Verdict
from harness.checkers.raft.elections import RaftChecker
from harness.checkers.raft.wire import PEER_RESPONSES, PEER_RPCS, ROUTER, only, show
from harness.protocols.codec import Message

MAX_MESSAGE_ID = 0xFFFFFF
WRAP_SLACK = 1 << 10  # ids this close to the top, then this close to 0: the counter wrapped (E-RAFT-03)
OP_START = "op-start"  # a client's note as it starts an operation (harness.packages.raft.history)


class ClusterIdent(RaftChecker):
    """A peer answers no peer request of another cluster (E-RAFT-10, ``raft.peer.cluster-ident``):
    a RequestVote, AppendEntries or InstallSnapshot whose cluster ident (frame 3) is not the
    peer's own is ignored, without a reply, so that two clusters sharing endpoints stay apart.
    Reads the peer requests each peer receives on its ROUTER and the answers it sends; ``idents``
    maps each peer to its cluster ident as the scenario configures it (a peer not named there is
    not judged)."""

    name = "cluster-ident"
    clause = "raft.peer.cluster-ident"

    def __init__(self, idents: dict[str, bytes] | None = None, **params: Any) -> None:
        super().__init__(**params)
        self.idents = dict(idents or {})
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []
        self.answered = 0

    @only(*PEER_RESPONSES)
    def response_sent(self, ev: Event, request: Message, msg: Message) -> None:
        own = self.idents.get(ev.node)
        if request.name not in PEER_RPCS or own is None:
            return
        self.answered += 1
        if request["cluster"] != own and len(self.problems) < 50:
            self.problems.append((f"{ev.node} (cluster {own!r}) answered a {request.name} of cluster "
                                  f"{request['cluster']!r}", [show(ev, msg, request=request.name,
                                                                   cluster=request["cluster"].hex())]))

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict(self.problems, f"{self.answered} peer request(s) answered, each of the peer's own "
                                           f"cluster")


class MessageIds(RaftChecker):
    """A peer's requests on one DEALER (one destination, E-RAFT-04) carry ids that never go back
    (the 24-bit counter may wrap, E-RAFT-03), and a message sent again under the id of the one
    before is that message byte for byte (a retry); a different message takes a new id
    (``raft.wire.message-id``). Reads the RequestVote, AppendEntries and InstallSnapshot requests
    each peer sends on its DEALERs (frame 1, the id); a crash or restart of the peer starts its
    sockets, and their counters, afresh. An external peer seen by the chaos proxy is judged the
    same way: the proxy reads each connection in order, and the one before is on the same one."""

    name = "message-ids"
    clause = "raft.wire.message-id"
    kinds = frozenset({SEND, CRASH, RESTART})

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.last: dict[tuple[str, str], tuple[int, Event, Message]] = {}  # (node, socket) -> its last request
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []
        self.sent = 0

    def on_other(self, ev: Event) -> None:
        self.last = {k: v for k, v in self.last.items() if k[0] != ev.node}

    @only(*PEER_RPCS)
    def request_sent(self, ev: Event, msg: Message) -> None:
        if msg.name not in PEER_RPCS or ev.socket == ROUTER:
            return
        self.sent += 1
        key, mid = (ev.node, ev.socket), msg["message_id"]
        before = self.last.get(key)
        self.last[key] = (mid, ev, msg)
        if before is None or len(self.problems) >= 50:
            return
        last_id, last_ev, last_msg = before
        if mid == last_id and ev.frames != last_ev.frames:
            self.problems.append((f"{ev.node} sent a {msg.name} on {ev.socket} under message id {mid}, the id of "
                                  f"the different message before it", [show(last_ev, last_msg), show(ev, msg)]))
        elif mid < last_id and not (last_id > MAX_MESSAGE_ID - WRAP_SLACK and mid < WRAP_SLACK):
            self.problems.append((f"{ev.node} sent a {msg.name} on {ev.socket} under message id {mid}, after id "
                                  f"{last_id}", [show(last_ev, last_msg), show(ev, msg)]))

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict(self.problems, f"{self.sent} peer request(s) sent, each id new or the repeat of the "
                                           f"message before")


class UpdateReqids(RaftChecker):
    """A client's reqid names one update: two RequestUpdates with the same reqid carry the same
    data (``raft.reqid.unique``; any client, from the wire alone). And a client that says which
    operation it is running (the ``op-start`` note with the operation's ``id`` and ``reqid``, as
    the reference client does; it runs one at a time) sends every RequestUpdate of that operation,
    until the operation's ``op`` delivery, under that reqid: an update sent again after a timeout
    or a refusal is the last request message again (``raft.client.broken-leader-search``,
    E-RAFT-14, E-RAFT-16), never a new reqid that would let the cluster apply it twice. Reads
    the RequestUpdates clients send, their ``op-start`` notes and ``op`` deliveries; a crash or
    restart of a client ends its operation."""

    name = "update-reqids"
    clause = "raft.reqid.unique"
    kinds = frozenset({SEND, NOTE, DELIVER, CRASH, RESTART})

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.data: dict[bytes, tuple[bytes, Event, Message]] = {}  # reqid -> the data it was first sent with
        self.running: dict[str, tuple[Any, bytes, Event]] = {}  # client -> (op id, reqid, its note)
        self.bad: list[tuple[str, list[dict[str, Any]], str]] = []
        self.sent = 0

    def on_other(self, ev: Event) -> None:
        data = ev.data or {}
        if ev.kind in (CRASH, RESTART):
            self.running.pop(ev.node, None)
        elif ev.kind == NOTE and ev.msg_type == OP_START and isinstance(data.get("reqid"), str):
            try:
                self.running[ev.node] = (data.get("id"), bytes.fromhex(data["reqid"]), ev)
            except ValueError:
                self.running.pop(ev.node, None)  # not a reqid it tells: nothing to judge it by
        elif ev.kind == DELIVER and ev.msg_type == "op":
            run = self.running.get(ev.node)
            if run is not None and run[0] == data.get("id"):
                del self.running[ev.node]

    @only("RequestUpdate")
    def request_sent(self, ev: Event, msg: Message) -> None:
        if msg.name != "RequestUpdate" or ev.socket == ROUTER or len(self.bad) >= 50:
            return
        self.sent += 1
        reqid, data = msg["reqid"], bytes(msg["data"])
        first = self.data.setdefault(reqid, (data, ev, msg))
        if first[0] != data:
            self.bad.append((f"{ev.node} sent reqid {reqid.hex()} with other data than its first RequestUpdate",
                             [show(first[1], first[2]), show(ev, msg)], "raft.reqid.unique"))
        run = self.running.get(ev.node)
        if run is not None and run[1] != reqid:
            self.bad.append((f"{ev.node} sent a RequestUpdate under reqid {reqid.hex()} while its operation "
                             f"{run[0]} runs under reqid {run[1].hex()}", [show(run[2]), show(ev, msg)],
                             "raft.client.broken-leader-search"))

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict_of(self.bad, f"{self.sent} RequestUpdate(s) sent, each reqid with one data, each "
                                         f"operation under one reqid")


def rpc_key(ev: Event) -> tuple[str, bytes, bytes] | None:
    """(peer, client's routing id, request id) of a request a peer's ROUTER received or of its
    answer, or None when the event carries no such frames."""
    frames = ev.frames
    return (ev.node, frames[0], frames[1]) if frames and len(frames) > 1 else None


class EntriesStop(RaftChecker):
    """A RequestEntries follow-up with count 0 ends the RPC: the peer sends no further answer with
    entries to it (``raft.entries.stop-honoured``, E-RAFT-19; an answer without entries, or none,
    is allowed). Reads the RequestEntries a peer receives (routing id, request id, count) and the
    RequestEntries responses it sends: once it has received the stop, an answer with entries
    under that request id to that client fails, until the client sends that id again with
    another count. Not judged for an external peer seen by the chaos proxy (the proxy hands the
    stop on before the peer reads it, and reads answers the peer sent before that afterwards)."""

    name = "entries-stop"
    clause = "raft.entries.stop-honoured"
    kinds = frozenset({SEND, RECV, CRASH, RESTART})

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.stopped: dict[tuple[str, bytes, bytes], dict[str, Any]] = {}  # (peer, client, id) -> the stop
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []
        self.stops = 0

    def on_other(self, ev: Event) -> None:
        self.stopped = {k: v for k, v in self.stopped.items() if k[0] != ev.node}

    @only("RequestEntries")
    def request_received(self, ev: Event, msg: Message) -> None:
        key = rpc_key(ev)
        if msg.name != "RequestEntries" or key is None or ev.via == VIA_PROXY:
            return  # an external peer's receive is when the proxy handed it on: answers it sent before may follow
        if msg.get("count") == 0:
            self.stops += 1
            self.stopped[key] = show(ev, msg)
        else:
            self.stopped.pop(key, None)

    @only("RequestEntriesResponse")
    def response_sent(self, ev: Event, request: Message, msg: Message) -> None:
        if msg.name != "RequestEntriesResponse" or not msg.fields.get("entries") or len(self.problems) >= 50:
            return
        stop = self.stopped.get(rpc_key(ev))  # type: ignore[arg-type]
        if stop is not None:
            self.problems.append((f"{ev.node} went on answering a RequestEntries with entries after the client's "
                                  f"follow-up with count 0", [stop, show(ev, msg)]))

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict(self.problems, f"{self.stops} RequestEntries stop(s) received, none answered with "
                                           f"entries afterwards")


class EntriesFromPrev(RaftChecker):
    """The first answer a peer sends to a new RequestEntries RPC starts right after the request's
    previous LOG INDEX (``raft.wire.grammar``: frame 5 of the response is "the first log entry
    following previous LOG INDEX"), or is a snapshot chunk (status 3) when that index lies in the
    peer's snapshot (E-RAFT-29), or carries no entries. A peer that answered with later entries
    would leave the reader without what lies between (the mutant ``skips-snapshot``: the entries
    after its snapshot without the snapshot). Only an RPC's first answer is judged, where every
    dialect agrees on where it starts (a 0.7 follow-up repeats the first previous LOG INDEX).
    Not judged for an external peer seen by the chaos proxy (it reads a request when the proxy
    hands it on, and answers to an earlier one of the same id may follow)."""

    name = "entries-from-prev"
    clause = "raft.wire.grammar"
    kinds = frozenset({SEND, RECV, CRASH, RESTART})

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.waiting: dict[tuple[str, bytes, bytes], tuple[int, dict[str, Any]]] = {}  # RPC -> (prev, request)
        self.seen: set[tuple[str, bytes, bytes]] = set()  # RPCs begun, answered or not
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []
        self.judged = 0

    def on_other(self, ev: Event) -> None:
        self.waiting = {k: v for k, v in self.waiting.items() if k[0] != ev.node}
        self.seen = {k for k in self.seen if k[0] != ev.node}

    @only("RequestEntries")
    def request_received(self, ev: Event, msg: Message) -> None:
        key = rpc_key(ev)
        if msg.name != "RequestEntries" or key is None or ev.via == VIA_PROXY:
            return
        if key not in self.seen:  # a new RPC (a follow-up keeps the id)
            self.seen.add(key)
            self.waiting[key] = (msg["prev_log_index"], show(ev, msg))

    @only("RequestEntriesResponse")
    def response_sent(self, ev: Event, request: Message, msg: Message) -> None:
        first = self.waiting.pop(rpc_key(ev), None) if msg.name == "RequestEntriesResponse" else None  # type: ignore[arg-type]
        if first is None:
            return  # not an RPC's first answer, or one this check did not see begin
        prev, req = first
        entries = msg.fields.get("entries") or []
        if msg["status"] in (0, 3) or not entries:
            return
        self.judged += 1
        start = msg["last_index"] - len(entries) + 1
        if start != prev + 1 and len(self.problems) < 50:
            self.problems.append((f"{ev.node} answered a RequestEntries after LOG INDEX {prev} with entries from "
                                  f"{start}: what lies between was never sent (nor a snapshot holding it)",
                                  [req, show(ev, msg)]))

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict(self.problems, f"{self.judged} RequestEntries RPC(s) answered first with entries, each "
                                           "from the entry after the request's previous LOG INDEX")


class EntriesPipeline(RaftChecker):
    """At most REQUEST_ENTRIES_PIPELINES responses of one RequestEntries RPC are unconfirmed
    (``raft.entries.pipeline``, E-RAFT-19: each follow-up confirms one response). Reads the
    RequestEntries a peer receives (routing id, request id) and the responses it sends with
    entries or a snapshot chunk (status 1, 2, 3): per RPC, responses sent minus follow-ups
    received must stay within the peer's ``entries_pipeline`` (the scenario's, default 5; set it
    to what an implementation under test uses). An RPC ends with a response of status 1 or a
    count of 0 (the next request under its id starts a new one), and with the peer's crash or
    restart. An external peer seen by the chaos proxy is judged too: the proxy hands a follow-up
    on before the peer reads it and reads a response after the peer sent it, so what it sees is
    never more unconfirmed than the truth."""

    name = "entries-pipeline"
    clause = "raft.entries.pipeline"
    kinds = frozenset({SEND, RECV, CRASH, RESTART})

    def __init__(self, pipelines: dict[str, int] | None = None, default: int = 5, **params: Any) -> None:
        super().__init__(**params)
        self.pipelines = pipelines or {}
        self.default = default
        self.open: dict[tuple[str, bytes, bytes], int] = {}  # (peer, client, id) -> responses unconfirmed
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []
        self.most = 0

    def on_other(self, ev: Event) -> None:
        self.open = {k: v for k, v in self.open.items() if k[0] != ev.node}

    @only("RequestEntries")
    def request_received(self, ev: Event, msg: Message) -> None:
        key = rpc_key(ev)
        if msg.name != "RequestEntries" or key is None:
            return
        if msg.get("count") == 0:
            self.open.pop(key, None)
        elif key in self.open:
            self.open[key] = max(0, self.open[key] - 1)  # a follow-up confirms one response
        else:
            self.open[key] = 0

    @only("RequestEntriesResponse")
    def response_sent(self, ev: Event, request: Message, msg: Message) -> None:
        if msg.name != "RequestEntriesResponse" or msg["status"] not in (1, 2, 3):
            return
        key = rpc_key(ev)
        if key not in self.open:
            return  # an answer to an RPC this check did not see begin
        n = self.open[key] + 1
        self.most = max(self.most, n)
        bound = self.pipelines.get(ev.node, self.default)
        if n > bound and len(self.problems) < 50:
            self.problems.append((f"{ev.node} had {n} responses of one RequestEntries unconfirmed, more than its "
                                  f"pipeline of {bound}", [show(ev, msg)]))
        if msg["status"] == 1:
            del self.open[key]  # the last response: the RPC is over
        else:
            self.open[key] = n

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict(self.problems, f"at most {self.most} response(s) of one RequestEntries unconfirmed, "
                                           "within each peer's pipeline")
