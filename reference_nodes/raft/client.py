"""Raft over ZeroMQ reference client: a key-value application over the cluster's log.

One DEALER (``dealer``), connected at first to every known peer; with ``subscribe`` also a SUB
(``sub``) for the leader's StateBroadcast. The application asks with ``command``::

    {"op": "put", "key": "k1", "value": "v", "id": "c-1"}
    {"op": "get", "key": "k1"}
    {"op": "cas", "key": "k1", "expected": "v", "value": "w"}
    {"op": "delete", "key": "k1"}

Every operation, reads included, is a log entry (RequestUpdate whose data is the operation in
the key-value encoding of `reference_nodes.raft.state_machine`): its effect takes place at its
log index, which lies between its invocation and its completion, so the history the client
reports is linearizable exactly when the cluster is. The result (a get's value, a cas's
success) comes from replaying the committed log up to that index on the client's replica
(`reference_nodes.raft.client_reader`). Operations run one at a time, in command order.

Finding the leader (the document's Client section, E-RAFT-13/14/15): RequestConfig to the
peers until one names a leader, then the DEALER is connected to the leader only. A negative
response naming a known leader (scenario 1) reconnects to it and sends the request again at
once; a timeout after ``response_ttl_ms`` (SERVER_RESPONSE_TTL, 500) or a negative response
without a leader (scenario 2) reconnects to every peer, waits ``election_grace_ms``
(SERVER_ELECTION_GRACE_MS, 300) and sends again, one peer at a time (DEALER round-robin). An
"accepted" RequestUpdate response restarts the timeout. Every attempt carries the same reqid,
so the update is applied at most once (E-RAFT-16). An operation whose entry shows up in the
committed log the client reads (a StateBroadcast, RequestEntries) is complete even if the
"committed" response was lost.

Notes: ``op-start`` (``id``, ``reqid``) as an operation's first RequestUpdate goes out, and
``op-committed`` (``id``, ``index``) when the client first learns its entry is committed (the
leader's answer, or the entry in the log it reads), before it has read the result back.

Each operation ends in one ``Deliver("op", {...})`` with ``id``, ``op``, ``key``, ``value``,
``expected``, ``output`` (get: the value or None; cas: True/False; put, delete: None),
``status`` (``ok``: completed with that output; ``fail``: definitely not applied; ``info``:
unknown, e.g. it timed out after ``op_timeout_ms``, default 10 s, or its reqid expired),
``invoke_ns`` and ``complete_ns`` (node clock), ``index`` (its log index when known), ``reqid``
(hex), ``attempts`` and ``reason``. That is a complete linearizability history.

Config: ``peers`` ([[id, url], ...]), ``cluster``, ``dialect``, ``response_ttl_ms``,
``election_grace_ms``, ``op_timeout_ms``, ``max_queue`` (1000; beyond it an operation fails at
once), ``subscribe`` (false), ``epoch_s``; standalone, ``updates`` and ``key`` (puts it makes by
itself at start, see ``start``).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from harness.node import Action, Connect, Deliver, Disconnect, Discard, NodeContext, Note, Send, SocketSpec, SocketType
from harness.protocols import DecodeError
from harness.protocols.raft import NULL, Entry
from reference_nodes.raft.client_reader import COMPACTED, SUB, UNKNOWN, LogReader
from reference_nodes.raft.common import (
    DEFAULT_ELECTION_GRACE_MS, DEFAULT_RESPONSE_TTL_MS, RaftNode, peer_list, positive_int,
)
from reference_nodes.raft.state_machine import OPS, encode_op

DEALER = "dealer"
COMMITTED = "op-committed"  # the note of an operation whose entry is committed (see `committed`)
DEFAULT_OP_TIMEOUT_MS = 10_000


class Op:
    __slots__ = ("id", "op", "key", "value", "expected", "invoke", "reqid", "data", "attempts", "index",
                 "deadline", "give_up")

    def __init__(self, request: dict[str, Any], invoke: int) -> None:
        self.id = request.get("id")
        self.op = request["op"]
        self.key = request["key"]
        self.value = request.get("value")
        self.expected = request.get("expected")
        self.invoke = invoke
        self.reqid = b""
        self.data = encode_op(self.op, self.key, self.value, self.expected)
        self.attempts = 0
        self.index: int | None = None  # acknowledged log index
        self.deadline: int | None = None  # response timeout of the attempt in flight
        self.give_up = 0


def committed(o: Op) -> Note:
    """The cluster's part of an operation is done: its entry is committed at ``index`` (the leader
    said so, or the client found the entry in the committed log). What remains, reading the result
    back, is the client's own work (`harness.checkers.raft.liveness` times the cluster by this)."""
    return Note(COMMITTED, {"id": o.id, "index": o.index})


class Client(LogReader, RaftNode):
    role = "client"

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        cfg = self.config
        self.peers = dict(peer_list(cfg.get("peers", [["peer", "tcp://127.0.0.1:8047"]])))
        # How this client was told to reach each peer: kept over the URL a RequestConfig answer
        # announces for the same peer (the harness's chaos proxy stands at the configured one).
        self.configured = dict(self.peers)
        self.response_ttl = self.ms("response_ttl_ms", DEFAULT_RESPONSE_TTL_MS)
        self.election_grace = self.ms("election_grace_ms", DEFAULT_ELECTION_GRACE_MS)
        self.op_timeout = self.ms("op_timeout_ms", DEFAULT_OP_TIMEOUT_MS)
        self.max_queue = positive_int(cfg.get("max_queue", 1000), "max_queue")
        if self.response_ttl <= 0:
            raise ValueError("raft client config 'response_ttl_ms' must be positive")
        self.entry_type = Entry()
        # reqid: seconds (4 bytes, set per request), machine (3), process (2), counter (3, random start)
        self.machine = self.rng.randbytes(5)
        self.counter = self.rng.getrandbits(24)
        self.next_rid = self.rng.getrandbits(16) + 1  # 0.7's uint32 request ids
        self.my_reqids: set[bytes] = set()
        self.queue: deque[Op] = deque()
        self.current: Op | None = None
        self.leader: str | None = None
        self.connected: list[str] = []
        self.config_rpc: Any = None
        self.config_deadline: int | None = None
        self.url_rpc: Any = None
        self.grace_until: int | None = None  # scenario 2: wait before sending again
        self.now = 0  # the time of the input being handled (request ids, completions)
        self.init_reader()

    def sockets(self) -> list[SocketSpec]:
        out = [SocketSpec(DEALER, SocketType.DEALER, connect=tuple(self.peers.values()))]
        if self.subscribe:
            out.append(SocketSpec(SUB, SocketType.SUB))
        return out

    def start(self, now: int) -> list[Action]:
        self.now = now
        self.connected = list(self.peers.values())
        out = self.ask_config(now)
        # A standalone client (``zmq-harness node raft client --set updates=2 --set key=k ...``,
        # a conformance suite's client under test) has no application to command it: config
        # ``updates`` makes it put that many values (v1, v2, ...) on ``key`` at start.
        key = str(self.config.get("key", "k"))
        for k in range(int(self.config.get("updates", 0) or 0)):
            out += self.command({"op": "put", "key": key, "value": f"v{k + 1}", "id": f"update-{k + 1}"}, now)
        return out

    # ---- ids -------------------------------------------------------------------------------------
    def new_reqid(self, now: int) -> bytes:
        self.counter = (self.counter + 1) & 0xFFFFFF
        return self.epoch_seconds(now).to_bytes(4, "big") + self.machine + self.counter.to_bytes(3, "big")

    def new_id(self, rpc: str) -> tuple[Any, Any]:
        """A fresh id for a client RPC, and the key its responses are recognised by."""
        if self.d.rpc_id(rpc) == "reqid":
            rid = self.new_reqid(self.now)
            return rid, rid
        self.next_rid = self.next_rid % 0xFFFFFFFF + 1
        return self.next_rid, self.next_rid

    # ---- the application ---------------------------------------------------------------------------
    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        self.now = now
        op = request.get("op")
        if op not in OPS:
            raise ValueError(f"raft client: unknown command {op!r} (known: {', '.join(OPS)})")
        o = Op(request, now)
        if len(self.queue) >= self.max_queue:
            return [self.finish(o, now, "fail", reason="queue full")]
        o.give_up = now + self.op_timeout
        self.queue.append(o)
        return self.next_op(now)

    def next_op(self, now: int) -> list[Action]:
        if self.current is not None or not self.queue:
            return []
        o = self.current = self.queue.popleft()
        o.reqid = self.new_reqid(now)
        self.my_reqids.add(o.reqid)
        # the start of the operation's interval in the history (harness.packages.raft.history)
        return [Note("op-start", {"id": o.id, "reqid": o.reqid.hex()}), *self.send_update(now)]

    def send_update(self, now: int) -> list[Action]:
        o = self.current
        if o is None or o.index is not None:
            return []
        if self.grace_until is not None and now < self.grace_until:
            return []  # scenario 2: the grace period runs; the timer sends it
        o.attempts += 1
        o.deadline = now + self.response_ttl
        fields = {"reqid": o.reqid, "data": o.data}
        if not self.d.strict:
            fields["cluster"] = self.cluster
        return [Send(DEALER, self.d.enc["RequestUpdate"](fields), "RequestUpdate",
                     {"corr": o.reqid.hex(), "topic": o.key})]

    def finish(self, o: Op, now: int, status: str, output: Any = None, reason: str = "",
               applied: bool = False) -> Deliver:
        data = {
            "id": o.id, "op": o.op, "key": o.key, "value": o.value, "expected": o.expected, "output": output,
            "status": status, "invoke_ns": o.invoke, "complete_ns": now, "index": o.index,
            # corr: the application's id of the operation, which its command carried (the trace
            # pairs the two); the wire's request id is reqid (and the corr of RequestUpdate sends)
            "reqid": o.reqid.hex(), "attempts": o.attempts, "reason": reason, "corr": o.id,
        }
        if applied:  # "info" only because its result cannot be read: the cluster applied it
            data["applied"] = True
        return Deliver("op", data)

    def complete(self, status: str, now: int, output: Any = None, reason: str = "",
                 applied: bool = False) -> list[Action]:
        o, self.current = self.current, None
        self.my_reqids.discard(o.reqid)
        self.results.pop(o.reqid, None)
        return [self.finish(o, now, status, output, reason, applied)] + self.next_op(now)

    def on_applied(self) -> list[Action]:
        """The replica advanced: the current operation may be complete."""
        o = self.current
        if o is None:
            return []
        found = self.results.get(o.reqid)
        out: list[Action] = []
        if o.index is None and found is not None:
            o.index = found[0]  # its entry is in the committed log: done, whatever became of the answer
            out.append(committed(o))
        if o.index is None or self.applied < o.index:
            return out
        if found is None and o.index <= self.unread_upto:  # inside a snapshot it cannot read (E-RAFT-29)
            if o.op in ("put", "delete"):  # answered committed at that index (E-RAFT-15), and returns nothing
                return out + self.complete("ok", self.now)
            return out + self.complete("info", self.now, reason=f"acknowledged at index {o.index}, which the client "
                                       "read only as a snapshot in a format it does not read: result unknown")
        if found is None or found[0] != o.index:
            at = "nowhere" if found is None else f"at {found[0]}"
            return out + self.complete("info", self.now, reason=f"acknowledged at index {o.index}, but the log has "
                                       f"its entry {at}")
        if found[1] is UNKNOWN:
            return out + self.complete("info", self.now, reason="its result depends on state the client read only as "
                                       "a snapshot in a format it does not read: applied, result unknown", applied=True)
        if found[1] is COMPACTED:  # read from a snapshot: a put or delete returns nothing anyway
            if o.op in ("put", "delete"):
                return out + self.complete("ok", self.now)
            return out + self.complete("info", self.now, reason="its entry was compacted into a snapshot before "
                                       "the client read it: applied, result unknown", applied=True)
        return out + self.complete("ok", self.now, found[1])

    # ---- inputs --------------------------------------------------------------------------------------
    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        self.now = now
        if socket == SUB:
            return self.on_broadcast(frames, now)
        if not frames:
            return self.unexpected(socket, frames, "an empty message")
        o, r = self.current, self.read
        first = frames[0]
        if o is not None and first == o.reqid:
            return self.on_update_response(frames, now)
        if r is not None and self.d.id_key(first, "RequestEntries") == r.key:
            return self.on_entries_response(frames, now)
        if self.config_rpc is not None and self.d.id_key(first, "RequestConfig") == self.config_rpc:
            return self.on_config_response(frames, now)
        if self.url_rpc is not None and self.d.id_key(first, "RequestBroadcastStateUrl") == self.url_rpc:
            return self.on_url_response(frames, now)
        return [Discard(socket, list(frames), reason="a response to no RPC in flight (a late or repeated answer)")]

    def on_update_response(self, frames: list[bytes], now: int) -> list[Action]:
        o = self.current
        try:
            msg = self.d.dec["RequestUpdateResponse"](frames)
        except DecodeError as e:
            return self.malformed(DEALER, frames, e)
        if msg["success"]:
            index = msg.get("log_index")
            if index is None:  # accepted, not yet committed: restart the timeout (E-RAFT-14)
                o.deadline = now + self.response_ttl
                return []
            if o.index is None:
                o.index = index
                o.deadline = None
                return [committed(o), *(self.on_applied() or self.read_to(index, now))]
            return self.on_applied() or self.read_to(index, now)
        third = msg.get("leader_id")
        if third is None:  # expired (E-RAFT-15): it will not be applied by this leader; unknown in general
            return self.complete("info", now, reason="the reqid expired")
        return self.broken_leader(third, now)

    def on_config_response(self, frames: list[bytes], now: int) -> list[Action]:
        self.config_rpc = None
        try:
            msg = self.d.dec["RequestConfigResponse"](frames)
        except DecodeError as e:
            return self.malformed(DEALER, frames, e)
        peers = msg.get("peers")
        if peers:  # E-RAFT-13: keep the current list when the frame is absent
            self.peers = {p[0]: self.configured.get(p[0], p[1]) for p in peers}
        leader = msg["leader_id"]
        if leader is NULL or leader not in self.peers:  # transit state: ask again after the grace
            self.config_deadline = now + self.election_grace
            return []
        self.config_deadline = None
        return self.follow(leader, now)

    # ---- the leader ---------------------------------------------------------------------------------
    def ask_config(self, now: int) -> list[Action]:
        rid, key = self.new_id("RequestConfig")
        self.config_rpc = key
        self.config_deadline = now + self.response_ttl
        fields: dict[str, Any] = {self.d.rpc_id("RequestConfig"): rid}
        if not self.d.strict:
            fields["cluster"] = self.cluster
        return [Send(DEALER, self.d.enc["RequestConfig"](fields), "RequestConfig")]

    def connect_only(self, urls: list[str]) -> list[Action]:
        out: list[Action] = [Disconnect(DEALER, u) for u in self.connected if u not in urls]
        out += [Connect(DEALER, u) for u in urls if u not in self.connected]
        self.connected = list(urls)
        return out

    def follow(self, leader: str, now: int) -> list[Action]:
        """Scenario 1, or a RequestConfig naming the leader: talk to it alone, resend at once."""
        changed = leader != self.leader
        self.leader = leader
        self.grace_until = None
        out = self.connect_only([self.peers[leader]])
        out += self.resend(now)
        if changed and self.subscribe:
            out += self.ask_broadcast_url(now)
        return out

    def broken_leader(self, leader: Any, now: int) -> list[Action]:
        """A negative response: scenario 1 when it names a known leader, else scenario 2."""
        if isinstance(leader, str) and leader in self.peers:
            return self.follow(leader, now)
        return self.search(now)

    def search(self, now: int) -> list[Action]:
        """Scenario 2: connect to every peer, wait the grace period, then send again."""
        self.leader = None
        out = self.connect_only(list(self.peers.values()))
        self.grace_until = now + self.election_grace
        if self.current is not None:
            self.current.deadline = None
        return out

    def resend(self, now: int) -> list[Action]:
        out = self.send_update(now)
        if self.read is not None:  # the read restarts with the new peer
            self.read = None
        if self.read_target > self.applied:
            out += self.read_to(self.read_target, now)
        return out

    # ---- timers -------------------------------------------------------------------------------------
    def get_timer(self) -> int | None:
        times = [self.config_deadline, self.grace_until, self.reader_deadline()]
        o = self.current
        if o is not None:
            times += [o.deadline, o.give_up]
        elif self.queue:
            times.append(self.queue[0].give_up)
        return min((t for t in times if t is not None), default=None)

    def handle_timer(self, now: int) -> list[Action]:
        self.now = now
        out: list[Action] = []
        o = self.current
        if o is not None and o.give_up <= now:
            out += self.complete("info", now, reason="timed out")
        while self.current is None and self.queue and self.queue[0].give_up <= now:
            stale = self.queue.popleft()
            out.append(self.finish(stale, now, "fail", reason="timed out before it was sent"))
            out += self.next_op(now)
        if self.grace_until is not None and self.grace_until <= now:
            self.grace_until = None
            out += self.resend(now)
        o = self.current
        if o is not None and o.deadline is not None and o.deadline <= now:
            out += self.search(now)  # scenario 2: no answer within SERVER_RESPONSE_TTL
        if self.config_deadline is not None and self.config_deadline <= now:
            self.config_deadline = None
            out += self.ask_config(now)
        out += self.reader_timer(now)
        return out
