"""The simulator's transport: messages on virtual sockets, pipes, the seeded wire (rules,
latency, FIFO per connection, one event per copy in flight) and connections (connect, retry,
handshake, teardown, disconnect, unbind).

`Transport` is the part of `harness.sim.runtime.Simulation` that moves bytes; the simulation
class adds nodes, time and faults on top. Kept apart so each module stays readable; the split
costs nothing at run time (methods are found once per call site through the type's cache).

Lifecycle of a message: ``Send`` -> socket picks pipes -> each pipe checks its high-water mark,
then queues (connecter not connected) or puts the message on the wire (rules, latency, FIFO)
-> arrival: lost if its connection died or a partition cuts the link, waits if the node is
paused, else the socket decides what the node sees and the node handles it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import simpy
from simpy.events import NORMAL, Event

from fault_injection.damage import TypedMalformed, damage
from fault_injection.rules import PASS, RuleSet
from harness.node import NS_PER_MS, Node, Send
from harness.sim.errors import SimulationError
from harness.sim.events import Call, SimStats
from harness.sim.network import Network
from harness.sim.slots import MSG as _MSG, NodeSlot
from harness.sim.sockets import (
    ABSORBED,
    Message,
    Pipe,
    Session,
    UNSUBSCRIBE,
    SimSocket,
    compatible,
    pipe_capacity,
)
from harness.trace import CONNECT, DISCONNECT, DROP, FAULT, RECV, SEND, TraceWriter, meta_columns

RECONNECT_IVL_NS = 100 * NS_PER_MS  # libzmq's default ZMQ_RECONNECT_IVL

_BYTES = frozenset({bytes})


class Transport:
    """Messages, pipes, the wire and connections (see the module docstring)."""

    # Set by Simulation.__init__ (declared here for the type checker and the reader).
    seed: int
    stats: SimStats
    trace: TraceWriter | None
    _env: simpy.Environment
    _queue: list[tuple[int, int, int, Event]]
    _eid: Any
    _net: Network
    _rules: RuleSet | None
    _fields_of: Callable[[list[bytes]], Any] | None
    _malformed: TypedMalformed | None
    _emit_message: Callable[..., None] | None
    _pack: bool
    _packb: Callable[[list[bytes]], bytes]
    _bound: dict[str, SimSocket]
    _next_msg_id: int

    def _after(self, delay: int, fn: Callable[[Call], None], payload: Any) -> None:
        env = self._env
        heapq.heappush(self._queue, (env._now + delay, NORMAL, next(self._eid), Call(env, fn, payload)))

    # Provided by Simulation: a node that misbehaved, and what a delivered message does.
    def _fail(self, slot: NodeSlot, where: str, exc: BaseException) -> None:
        raise NotImplementedError

    def _done(self, slot: NodeSlot, node: Node, actions: Any) -> None:
        raise NotImplementedError

    def _local(self, sock: SimSocket, frames: list[bytes], peer: str, msg_type: str, detail: str) -> None:
        raise NotImplementedError

    @property
    def now_ns(self) -> int:
        return self._env.now  # type: ignore[return-value]

    def _socket(self, slot: NodeSlot, name: str) -> SimSocket:
        sock = slot.sockets.get(name)
        if sock is None:
            raise SimulationError(f"node {slot.name} has no socket {name!r}; it declared: "
                                  f"{', '.join(slot.sockets) or 'none'}")
        return sock

    # ==== messages =============================================================================
    def _new_message(self, slot: NodeSlot, wire: list[bytes], msg_type: str,
                     meta: dict[str, Any] | None) -> Message:
        _check_frames(slot, wire)
        size = len(b"".join(wire))
        msg_id = self._next_msg_id
        self._next_msg_id = msg_id + 1
        if meta:
            topic, seq, term, index, corr = meta_columns(meta)
            return Message(msg_id, wire, msg_type, topic, seq, term, index, corr, size, slot.name)
        return Message(msg_id, wire, msg_type, None, None, None, None, None, size, slot.name)

    def _send(self, slot: NodeSlot, action: Send) -> None:
        # The hot path: keep it flat (the steps mirror _new_message and _write).
        sock = slot.sockets.get(action.socket)
        if sock is None:
            sock = self._socket(slot, action.socket)
        frames = action.frames
        if not frames:
            raise SimulationError(f"node {slot.name}: empty message on socket {sock.name!r}")
        wire, targets, cause = sock.outgoing(frames)
        if not _BYTES.issuperset(map(type, wire)):  # one C-speed pass; the error names the frame
            _check_frames(slot, wire)
        size = len(b"".join(wire))  # a quarter of sum(map(len, wire)) for the usual handful of frames
        if not wire:
            raise SimulationError(f"node {slot.name}: ROUTER message on {sock.name!r} has no frames "
                                  "after the routing id")
        msg_id = self._next_msg_id
        self._next_msg_id = msg_id + 1
        meta = action.meta
        if meta:
            topic, seq, term, index, corr = meta_columns(meta)
            msg = Message(msg_id, wire, action.msg_type, topic, seq, term, index, corr, size, slot.name)
        else:
            msg = Message(msg_id, wire, action.msg_type, None, None, None, None, None, size, slot.name)
        self.stats.sent += 1
        emit = self._emit_message
        if emit is not None:
            packed = None
            if self._pack:
                packed = self._packb(frames)
                if not sock.is_router:
                    msg.packed = packed
            if len(targets) == 1:
                pipe = targets[0]
                peer = pipe.peer_name if pipe.session is not None else pipe.endpoint  # Pipe.label()
            else:
                peer = None
            emit(slot.name, SEND, self._env._now, sock.name, peer, None, None, packed, msg.row)  # type: ignore[arg-type]
        if cause is not None:
            self._drop(slot.name, sock.name, msg, None, cause)
            return
        for pipe in targets:
            cap = pipe.cap
            if cap and pipe.pending >= cap:
                self._drop(slot.name, sock.name, msg, pipe.label(), "hwm")
                continue
            pipe.pending += 1
            if pipe.session is not None:
                self._wire(pipe, msg)
            else:
                pipe.queue.append(msg)

    def _control(self, sock: SimSocket, pipes: list[Pipe], frames: list[bytes], msg_type: str) -> None:
        """A socket-internal message (subscription, welcome): traced like a send."""
        slot = sock.slot
        msg = self._new_message(slot, frames, msg_type, None)
        self.stats.control += 1
        if self._emit_message is not None:
            if self._pack:
                msg.packed = self._packb(frames)
            self._emit_message(slot.name, SEND, self.now_ns, sock.name, pipes[0].label() if len(pipes) == 1 else None,
                               None, "socket-internal", msg.packed, msg.row)
        for pipe in pipes:
            self._write(pipe, msg)


    # ==== pipes and the wire ===================================================================
    def _write(self, pipe: Pipe, msg: Message) -> None:
        """Put a message into a pipe: dropped at the high-water mark, else queued or sent."""
        cap = pipe.cap
        if cap and pipe.pending >= cap:
            self._drop(pipe.slot.name, pipe.socket.name, msg, pipe.label(), "hwm")
            return
        pipe.pending += 1
        if pipe.session is not None:
            self._wire(pipe, msg)
        else:
            pipe.queue.append(msg)

    def _wire(self, pipe: Pipe, msg: Message) -> None:
        """Send over an established connection: rules, latency, FIFO, one event per copy."""
        env = self._env
        now: int = env._now  # type: ignore[assignment]  # simpy's SimTime; ours is always int
        link = pipe.link
        assert link is not None and pipe.session is not None
        fault = None
        extra = 0
        copies = 0
        if self._rules is not None:
            fields = None
            if self._rules.needs_fields and self._fields_of is not None:
                fields_of = self._fields_of
                fields = lambda: fields_of(msg.frames)  # noqa: E731 - decoded only if a rule asks
            verdict = self._rules.decide(link.src, link.dst, msg.msg_type, pipe.socket.name,
                                         pipe.direction, link.rule_rng, pipe.endpoint, fields)
            if verdict is not PASS:
                fault = verdict.label
                effect = verdict.effect
                if effect == "drop":
                    pipe.pending -= 1
                    self._drop(link.src, pipe.socket.name, msg, link.dst, fault)
                    return
                if effect == "delay":
                    extra = verdict.delay_ns
                    self._fault_msg_row(pipe, msg, fault, f"+{extra}ns")
                elif effect == "duplicate":
                    copies = verdict.copies
                    self._fault_msg_row(pipe, msg, fault, f"{copies} extra")
                elif effect == "reorder":
                    self._fault_msg_row(pipe, msg, fault, f"held up to {verdict.hold_ns}ns"
                                        + (" or behind the next" if verdict.behind_next else ""))
                    self._hold(pipe, msg, fault, verdict.hold_ns, verdict.behind_next, now)
                    return
                elif effect == "corrupt":
                    msg, fault = self._corrupt(pipe, msg, fault, verdict.how, link.rule_rng)
        at = now + link.sample(link.rng) + extra
        if at < pipe.last:
            at = pipe.last  # FIFO per connection, like TCP
        pipe.last = at
        pipe.inflight += 1
        self.stats.wire += 1
        payload = (msg, pipe, pipe.peer, pipe.session, fault)
        queue, eid, push = self._queue, self._eid, heapq.heappush
        push(queue, (at, NORMAL, next(eid), Call(env, self._arrive, payload)))
        if copies:
            for _ in range(copies):
                pipe.pending += 1
                pipe.inflight += 1
                self.stats.wire += 1
                push(queue, (at, NORMAL, next(eid), Call(env, self._arrive, payload)))
        if pipe.held:
            for entry in pipe.held:  # reordered messages arrive right behind this one
                entry[1] = True
                push(queue, (at, NORMAL, next(eid), Call(env, self._arrive, entry[0])))
            pipe.held = None

    def _corrupt(self, pipe: Pipe, msg: Message, fault: str, how: tuple[str, ...], rng: Any
                 ) -> tuple[Message, str | None]:
        """The message this pipe carries instead of ``msg``: a damaged copy (the original stays
        as sent, for the other pipes and the trace's send row), and the fault label."""
        if msg.msg_type.startswith("zmq."):
            self._fault_msg_row(pipe, msg, fault, "left intact: socket-internal, read by the socket, not the node")
            return msg, None
        typed = self._malformed
        done = damage(msg.frames, rng, how, None if typed is None else lambda f: typed(f, msg.msg_type))
        if done is None:
            self._fault_msg_row(pipe, msg, fault, "left intact: no damage tried left it malformed")
            return msg, None
        frames, what = done
        self._fault_msg_row(pipe, msg, fault, what)
        damaged = Message(msg.msg_id, frames, msg.msg_type, msg.topic, msg.seq, msg.term, msg.index, msg.corr,
                          len(b"".join(frames)), msg.src)
        return damaged, fault

    def _hold(self, pipe: Pipe, msg: Message, fault: str, hold_ns: int, behind_next: bool, now: int) -> None:
        link = pipe.link
        assert link is not None
        pipe.inflight += 1
        self.stats.wire += 1
        entry: list[Any] = [(msg, pipe, pipe.peer, pipe.session, fault), False]
        if behind_next:
            if pipe.held is None:
                pipe.held = []
            pipe.held.append(entry)
        # The latest release; it does not move pipe.last, so later messages overtake it.
        self._after(link.sample(link.rng) + hold_ns, self._release_ev, entry)

    def _release_ev(self, ev: Call) -> None:
        self.stats.events += 1
        entry = ev.payload
        if entry[1]:
            return  # already released behind a later message
        entry[1] = True
        pipe: Pipe = entry[0][1]
        if pipe.held and entry in pipe.held:
            pipe.held.remove(entry)
        self._after(0, self._arrive, entry[0])

    def _arrive(self, ev: Call) -> None:
        self.stats.events += 1
        msg, src, dst, session, fault = ev.payload
        if not session.alive:
            # The connection died while the message was in flight (counters already settled).
            self._drop(dst.slot.name, dst.socket.name, msg, src.slot.name, session.cause)
            return
        src.inflight -= 1
        if self._net.partitioned and self._net.is_cut(src.slot.name, dst.slot.name):
            src.pending -= 1
            self._drop(dst.slot.name, dst.socket.name, msg, src.slot.name, "partition")
            return
        slot = dst.slot
        if slot.paused or slot.backlog:
            slot.backlog.append((_MSG, dst, src, msg, fault))
            return
        self._consume(slot, dst, src, msg, fault)

    def _consume(self, slot: NodeSlot, dst: Pipe, src: Pipe, msg: Message, fault: str | None) -> None:
        """The receiving socket takes the message; the node handles what it gets to see."""
        src.pending -= 1
        sock = dst.socket
        out = sock.incoming(dst, msg)
        emit = self._emit_message
        now: int = self._env._now  # type: ignore[assignment]
        if out.__class__ is str:
            if out == ABSORBED:
                if emit is not None:
                    emit(slot.name, RECV, now, sock.name, src.slot.name, fault, "absorbed by the socket", None,
                         msg.row)
            else:
                self._drop(slot.name, sock.name, msg, src.slot.name, out)
            return
        self.stats.delivered += 1
        if emit is not None:
            packed = None
            if self._pack:
                if sock.is_router:
                    packed = self._packb(out)  # type: ignore[arg-type]
                else:
                    packed = msg.packed
                    if packed is None:
                        packed = msg.packed = self._packb(msg.frames)
            emit(slot.name, RECV, now, sock.name, src.slot.name, fault, None, packed, msg.row)
        node = slot.node
        try:
            actions = node.receive(sock.name, out, slot.node_time(now) if slot.skewed else now)  # type: ignore[union-attr, arg-type]
        except Exception as exc:
            self._fail(slot, "receive", exc)
            return
        self._done(slot, node, actions)  # type: ignore[arg-type]

    def _drop(self, node: str, socket: str | None, msg: Message, peer: str | None, cause: str) -> None:
        dropped = self.stats.dropped
        dropped[cause] = dropped.get(cause, 0) + 1
        if self._emit_message is not None:
            self._emit_message(node, DROP, self.now_ns, socket, peer, cause, None, None, msg.row)

    # ==== connections ==========================================================================
    def _bind(self, sock: SimSocket, endpoint: str) -> None:
        owner = self._bound.get(endpoint)
        if owner is not None:
            raise SimulationError(
                f"node {sock.slot.name}: cannot bind socket {sock.name!r} to {endpoint!r}: it is "
                f"already bound by node {owner.slot.name}, socket {owner.name!r}")
        self._bound[endpoint] = sock
        sock.bound.append(endpoint)

    def _connect(self, sock: SimSocket, endpoint: str) -> None:
        pipe = Pipe(sock, endpoint, is_connecter=True)
        for frames, msg_type in sock.attach(pipe):
            self._control(sock, [pipe], frames, msg_type)
        self._attempt(pipe)

    def _attempt(self, pipe: Pipe) -> None:
        """Try to connect now; on failure retry after the reconnect interval."""
        if pipe.closed or pipe.session is not None or pipe.connecting:
            return
        binder = self._bound.get(pipe.endpoint)
        me = pipe.slot.name
        if binder is None or self._net.blocked(me, binder.slot.name):
            self._retry(pipe)
            return
        if not compatible(pipe.socket.kind, binder.kind):
            if not pipe.incompat_reported:
                pipe.incompat_reported = True
                if self.trace is not None:
                    self.trace.fault(me, self.now_ns, "incompatible-sockets",
                                     f"{pipe.socket.kind.value} cannot talk to {binder.kind.value} at {pipe.endpoint}",
                                     socket=pipe.socket.name, peer=binder.slot.name)
            self._retry(pipe)
            return
        # TCP and ZMTP handshakes: one round trip.
        there = self._net.link(me, binder.slot.name)
        back = self._net.link(binder.slot.name, me)
        pipe.connecting = True
        self._after(there.sample(there.rng) + back.sample(back.rng), self._establish_ev, (pipe, binder))

    def _retry(self, pipe: Pipe) -> None:
        pipe.connecting = True
        self._after(RECONNECT_IVL_NS, self._retry_ev, pipe)

    def _retry_ev(self, ev: Call) -> None:
        self.stats.events += 1
        pipe: Pipe = ev.payload
        pipe.connecting = False
        self._attempt(pipe)

    def _establish_ev(self, ev: Call) -> None:
        self.stats.events += 1
        pipe: Pipe
        binder: SimSocket
        pipe, binder = ev.payload
        pipe.connecting = False
        if pipe.closed or pipe.session is not None:
            return
        if (self._bound.get(pipe.endpoint) is not binder or binder.closed
                or self._net.blocked(pipe.slot.name, binder.slot.name)):
            self._retry(pipe)
            return
        self._establish(pipe, binder)

    def _establish(self, cpipe: Pipe, binder: SimSocket) -> None:
        csock = cpipe.socket
        bpipe = Pipe(binder, cpipe.endpoint, is_connecter=False)
        session = Session(cpipe, bpipe)
        cname, bname = csock.slot.name, binder.slot.name
        for me, peer, peer_sock, peer_name in ((cpipe, bpipe, binder, bname), (bpipe, cpipe, csock, cname)):
            me.session = session
            me.peer = peer
            me.peer_name = peer_name
            me.link = self._net.link(me.slot.name, peer_name)
            me.cap = pipe_capacity(me.socket.spec, peer_sock.spec)
        problems = [csock.identify(cpipe, binder.spec.identity), binder.identify(bpipe, csock.spec.identity)]
        trace = self.trace
        if trace is not None:
            now = self.now_ns
            trace.connection(cname, CONNECT, now, csock.name, bname, cpipe.endpoint)
            for problem, node, peer_name in ((problems[0], cname, bname), (problems[1], bname, cname)):
                if problem:
                    trace.fault(node, now, problem, "routing id already in use: the peer is not routable",
                                peer=peer_name)
        for frames, msg_type in binder.attach(bpipe):
            self._control(binder, [bpipe], frames, msg_type)
        queue = cpipe.queue
        while queue and cpipe.session is session:
            self._wire(cpipe, queue.popleft())
        if cpipe.ever_connected:
            for frames, msg_type in csock.hiccup(cpipe):
                self._control(csock, [cpipe], frames, msg_type)
        cpipe.ever_connected = True

    def _teardown(self, session: Session, cause: str) -> None:
        """The connection dies: what is on the wire is lost; the binder's pipe is destroyed; the
        connecter's pipe keeps its queue and reconnects (unless it is closed)."""
        if not session.alive:
            return
        session.alive = False
        session.cause = cause
        cpipe, bpipe = session.connecter, session.binder
        for pipe in (cpipe, bpipe):
            pipe.pending -= pipe.inflight
            pipe.inflight = 0
            pipe.session = None
            pipe.peer = None
            pipe.held = None  # their release events see the dead session and trace the loss
            pipe.last = 0
        if self.trace is not None:
            self.trace.connection(cpipe.slot.name, DISCONNECT, self.now_ns, cpipe.socket.name, bpipe.slot.name,
                                  cpipe.endpoint, cause)
        cpipe.cap = cpipe.socket.hwm
        if not cpipe.closed:
            self._retry(cpipe)
        if bpipe.socket.is_router and self._linger(bpipe):
            return
        self._destroy(bpipe)

    def _linger(self, pipe: Pipe) -> bool:
        """A ROUTER's pipe whose paused node has not read all it holds stays, with its routing
        id, until that is read (libzmq waits for the reader to reach the pipe's end): a peer
        that reconnects with the id meanwhile is ignored, unless the socket hands over."""
        held = sum(1 for item in pipe.slot.backlog if item[0] is _MSG and item[1] is pipe)
        pipe.lingering = held
        return held > 0

    def _unread(self, pipe: Pipe) -> None:
        """One held message of a lingering pipe was read; the last one ends the pipe."""
        pipe.lingering -= 1
        if not pipe.lingering:
            self._destroy(pipe)

    def _destroy(self, pipe: Pipe) -> None:
        pipe.closed = True
        sock = pipe.socket
        notes = sock.detach(pipe)
        if notes and not sock.closed:
            for frames in notes:
                self._local(sock, frames, pipe.peer_name, UNSUBSCRIBE, "peer went away")

    def _close_pipe(self, pipe: Pipe, cause: str) -> None:
        """Close a connecter pipe: its connection ends and its queue is lost."""
        pipe.closed = True
        if pipe.session is not None:
            self._teardown(pipe.session, cause)
        while pipe.queue:
            msg = pipe.queue.popleft()
            pipe.pending -= 1
            self._drop(pipe.slot.name, pipe.socket.name, msg, pipe.endpoint, cause)
        self._destroy(pipe)

    def _close_socket(self, sock: SimSocket, cause: str) -> None:
        sock.closed = True
        for endpoint in sock.bound:
            if self._bound.get(endpoint) is sock:
                del self._bound[endpoint]
        sock.bound = []
        for pipe in list(sock.pipes):
            if pipe.is_connecter:
                self._close_pipe(pipe, cause)
            elif pipe.session is not None:
                self._teardown(pipe.session, cause)

    def _disconnect(self, sock: SimSocket, endpoint: str) -> None:
        """Disconnect from a connected endpoint, or unbind a bound one (closing what it accepted)."""
        pipes = [p for p in sock.pipes if p.is_connecter and p.endpoint == endpoint]
        if pipes:
            for pipe in pipes:
                self._close_pipe(pipe, "disconnect")
            return
        if endpoint in sock.bound:
            sock.bound.remove(endpoint)
            if self._bound.get(endpoint) is sock:
                del self._bound[endpoint]
            for pipe in [p for p in sock.pipes if not p.is_connecter and p.endpoint == endpoint]:
                if pipe.session is not None:
                    self._teardown(pipe.session, "unbind")
            return
        if self.trace is not None:
            self.trace.socket_note(sock.slot.name, self.now_ns, sock.name, "disconnect-unknown-endpoint", endpoint)

    def _fault_msg_row(self, pipe: Pipe, msg: Message, fault: str, detail: str) -> None:
        if self._emit_message is not None:
            self._emit_message(pipe.slot.name, FAULT, self.now_ns, pipe.socket.name, pipe.peer_name, fault, detail,
                               None, msg.row)


def _check_frames(slot: NodeSlot, frames: list[Any]) -> None:
    for f in frames:
        if f.__class__ is not bytes:
            raise SimulationError(f"node {slot.name}: message frames must be bytes, got "
                                  f"{type(f).__name__} ({f!r:.40})")
