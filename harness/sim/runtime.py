"""The deterministic simulator: sans-IO nodes, virtual ZeroMQ sockets and a seeded network on
one simpy clock (virtual integer nanoseconds).

Determinism (DESIGN rule 3): every random draw comes from a generator derived from the seed
(per node incarnation, per link, per ROUTER socket); simultaneous events run in the order they
were scheduled (simpy breaks time ties by an insertion counter); all containers iterate in
insertion order. No wall clock, no hash-dependent order.

Speed: one simpy event per message copy in flight, carrying a plain tuple, with a bound-method
callback (no process per message); trace rows are positional ``emit`` calls.

Lifecycle of a message: ``Send`` -> socket picks pipes -> each pipe checks its high-water mark,
then queues (connecter not connected) or puts the message on the wire (rules, latency, FIFO)
-> arrival: lost if its connection died or a partition cuts the link, waits if the node is
paused, else the socket decides what the node sees and the node handles it.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack
import simpy
from simpy.events import NORMAL, Event

from fault_injection.rules import PASS, DistSpec, RuleSet
from harness.node import (
    NS_PER_MS,
    Action,
    Connect,
    Deliver,
    Discard,
    Disconnect,
    DurableStore,
    Node,
    NodeContext,
    NodeFactory,
    Note,
    Send,
    Subscribe,
    Unsubscribe,
)
from harness.sim.errors import NodeError, SimulationError
from harness.sim.network import LatencyModel, Network
from harness.sim.slots import NodeSlot
from harness.sim.sockets import (
    ABSORBED,
    SUBSCRIBE,
    UNSUBSCRIBE,
    Message,
    Pipe,
    Session,
    SimSocket,
    compatible,
    make_socket,
    pipe_capacity,
)
from harness.trace import (
    COMMAND,
    CRASH,
    DELIVER,
    DISCARD,
    DROP,
    FAULT,
    NOTE,
    PAUSE,
    RECV,
    RESTART,
    RESUME,
    SEND,
    TraceWriter,
    pack_data,
)

RECONNECT_IVL_NS = 100 * NS_PER_MS  # libzmq's default ZMQ_RECONNECT_IVL
# A node whose handle_timer never moves its deadline past now would hold virtual time still.
TIMER_SPIN_LIMIT = 10_000
NEMESIS = "nemesis"  # the node column of rows about the whole network (partitions, slow links)

ActionHook = Callable[[str, Action, int], None]

# Backlog tags (see NodeSlot.backlog).
_MSG, _TIMER, _CMD, _LOCAL = 0, 1, 2, 3


@dataclass
class SimStats:
    sent: int = 0  # Send actions carried out
    control: int = 0  # socket-internal messages (subscriptions, welcome)
    wire: int = 0  # message copies put on the network
    delivered: int = 0  # messages handed to a node's receive()
    dropped: dict[str, int] = field(default_factory=dict)  # by cause
    events: int = 0  # simulator events processed

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())


def _run_call(event: _Call) -> None:
    event.fn(event)


class _Call(Event):
    """A simpy event that runs one callback with a payload: the lean alternative to a process
    per message. It is born triggered (``_ok``) and scheduled by ``Simulation._after``.
    ``Simulation.run`` calls ``fn`` straight away; under simpy's own ``step`` the class-level
    ``callbacks`` do the same."""

    # Class-level: every _Call succeeds with no value and has the same one callback, so an
    # event costs three stores, not a list and five stores.
    _ok = True
    _value = None
    callbacks: Any = (_run_call,)  # a tuple: nothing may add to a list all events share

    def __init__(self, env: simpy.Environment, fn: Callable[[_Call], None], payload: Any) -> None:
        self.env = env
        self.fn = fn
        self.payload = payload


class Simulation:
    """Run sans-IO nodes over virtual ZeroMQ sockets, with faults, reproducibly.

    ``run(until_ns)`` processes every event scheduled strictly before ``until_ns`` (simpy's
    convention) and leaves the clock at ``until_ns``; runs can be chained.
    """

    def __init__(self, seed: int, trace: TraceWriter | None = None, *,
                 latency: LatencyModel | None = None, rules: RuleSet | None = None,
                 record_frames: bool = True,
                 fields_of: Callable[[list[bytes]], Any] | None = None) -> None:
        self.seed = seed
        self.trace = trace
        self.stats = SimStats()
        self._env = simpy.Environment()
        # simpy's own event queue and id counter, pushed to directly on the hot path (one call
        # less per event than Environment.schedule; the entries are exactly what it pushes).
        self._queue: list[tuple[int, int, int, Event]] = self._env._queue  # type: ignore[assignment]
        self._eid = self._env._eid
        self._net = Network(seed, latency or LatencyModel())
        # A fresh copy: rules that pick messages by count (nth) count per run.
        self._rules = rules.fresh() if rules is not None and len(rules) else None
        self._fields_of = fields_of  # decoded fields of a message, for rules with field conditions
        self._emit = trace.emit if trace is not None else None
        self._emit_message = trace.emit_message if trace is not None else None
        self._pack = trace is not None and record_frames
        # Same bytes as harness.trace.pack_frames, without building a Packer per call.
        self._packb: Callable[[list[bytes]], bytes] = msgpack.Packer(use_bin_type=True).pack
        self._slots: dict[str, NodeSlot] = {}
        self._bound: dict[str, SimSocket] = {}
        self._hooks: list[ActionHook] = []
        self._next_msg_id = 1
        if trace is not None:
            trace.register_node(NEMESIS, NEMESIS, "")

    # ==== public API ==========================================================================
    @property
    def now_ns(self) -> int:
        return self._env.now  # type: ignore[return-value]

    @property
    def env(self) -> simpy.Environment:
        return self._env

    @property
    def network(self) -> Network:
        return self._net

    def add_node(self, name: str, factory: NodeFactory, *, role: str,
                 config: dict[str, Any] | None = None, implementation: str = "reference",
                 start_at_ns: int = 0) -> None:
        if name in self._slots:
            raise SimulationError(f"a node named {name!r} already exists")
        if name == NEMESIS:
            raise SimulationError(f"{NEMESIS!r} is reserved for network-wide trace rows")
        if start_at_ns < self.now_ns:
            raise SimulationError(f"node {name}: start_at_ns {start_at_ns} is in the past (now {self.now_ns})")
        slot = NodeSlot(name, factory, role, dict(config or {}), implementation, start_at_ns)
        self._slots[name] = slot
        if self.trace is not None:
            self.trace.register_node(name, role, implementation)
        self._after(start_at_ns - self.now_ns, self._start_ev, slot)

    def node(self, name: str) -> Node | None:
        """The node's current object (None while crashed or not yet started)."""
        return self._slot(name).node

    def store(self, name: str) -> DurableStore:
        return self._slot(name).store

    def nodes(self) -> list[str]:
        return list(self._slots)

    def is_running(self, name: str) -> bool:
        return self._slot(name).running

    def is_paused(self, name: str) -> bool:
        return self._slot(name).paused

    def incarnation(self, name: str) -> int:
        return self._slot(name).incarnation

    def node_time(self, name: str) -> int:
        """What the node's (possibly skewed) clock reads now."""
        return self._slot(name).node_time(self.now_ns)

    def on_action(self, callback: ActionHook) -> None:
        """Call ``callback(node_name, action, virtual_time_ns)`` for every action a node returns,
        after the simulator carried it out."""
        self._hooks.append(callback)

    def command(self, at_ns: int, node: str, request: dict[str, Any]) -> None:
        """Hand ``request`` to the node's ``command`` at ``at_ns`` (it waits if the node is paused,
        and is lost if the node is down then)."""
        slot = self._slot(node)
        self._after(self._delay_to(at_ns), self._command_ev, (slot, request))

    def command_stream(self, stream: Iterator[tuple[int, str, dict[str, Any]]]) -> None:
        """Hand each ``(at_ns, node, request)`` of a time-ordered stream to its node like
        ``command``, drawing the next item only when the previous one is due: a long workload
        is never all in memory (or in the event queue) at once."""
        self._next_from(stream)

    def _next_from(self, stream: Iterator[tuple[int, str, dict[str, Any]]]) -> None:
        item = next(stream, None)
        if item is not None:
            at, node, request = item
            self._after(self._delay_to(at), self._stream_ev, (self._slot(node), request, stream))

    def _stream_ev(self, ev: _Call) -> None:
        slot, request, stream = ev.payload
        self._next_from(stream)  # first, so it is ordered like a command scheduled up front
        self._command(slot, request)

    def schedule(self, at_ns: int, fn: Callable[[], object]) -> None:
        """Call ``fn()`` at virtual time ``at_ns``."""
        self._after(self._delay_to(at_ns), self._call_ev, fn)

    def run(self, until_ns: int) -> None:
        """Process the events due before ``until_ns``, in simpy's order over simpy's queue. The
        simulator's own events run here directly (no ``Environment.step`` call and no stop event
        of ``Environment.run`` per event); any other event is left to ``Environment.step``."""
        env = self._env
        if until_ns <= env._now:
            return
        queue = self._queue
        pop = heapq.heappop
        while queue and queue[0][0] < until_ns:
            env._now, priority, eid, event = pop(queue)
            if event.__class__ is _Call:  # ours: one callback, never failing, never looked at again
                event.fn(event)
                continue
            # Anything else (a simpy process's event on ``env``) goes back where it was, the
            # earliest entry, and simpy's own step processes it.
            heapq.heappush(queue, (env._now, priority, eid, event))
            env.step()
        env._now = until_ns

    # ---- nemesis primitives --------------------------------------------------------------
    def crash(self, node: str) -> None:
        """Throw the node object away: its sockets close, messages in flight to and from it and
        everything it had queued are lost; its durable store is kept. No-op if it is down."""
        slot = self._slot(node)
        if not slot.running:
            return
        now = self.now_ns
        if self._emit is not None:
            self._emit(node, CRASH, now, None, None, None, None, None, None, None, None, None, None,
                       "crash", None, None, f"incarnation {slot.incarnation}", None)
        slot.running = False
        slot.paused = False
        slot.node = None
        slot.timer_gen += 1
        slot.timer_at = None
        slot.wake_gen += 1
        slot.wakes = []
        while slot.backlog:
            item = slot.backlog.popleft()
            if item[0] == _MSG:
                _, dst, src, msg, _fault = item
                src.pending -= 1
                self._drop(node, dst.socket.name, msg, src.slot.name, "crash")
        for sock in list(slot.sockets.values()):
            self._close_socket(sock, "crash")
        slot.sockets = {}

    def restart(self, node: str) -> None:
        """Build a new object from the same factory and store (a new rng incarnation), re-create
        its sockets and binds; peers reconnect. A running node is crashed first."""
        slot = self._slot(node)
        if slot.running:
            self.crash(node)
        if self._emit is not None:
            self._emit(node, RESTART, self.now_ns, None, None, None, None, None, None, None, None,
                       None, None, "restart", None, None, f"incarnation {slot.incarnation + 1}", None)
        self._start(slot)

    def pause(self, node: str) -> None:
        """Stop running the node's handlers; its inputs wait (and count against the HWM)."""
        slot = self._slot(node)
        if not slot.running or slot.paused:
            return
        slot.paused = True
        if self._emit is not None:
            self._emit(node, PAUSE, self.now_ns, None, None, None, None, None, None, None, None,
                       None, None, "pause", None, None, None, None)

    def resume(self, node: str) -> None:
        """Run the node again; what waited is handled first, in arrival order."""
        slot = self._slot(node)
        if not slot.running or not slot.paused:
            return
        slot.paused = False
        if self._emit is not None:
            self._emit(node, RESUME, self.now_ns, None, None, None, None, None, None, None, None,
                       None, None, "resume", None, None, f"{len(slot.backlog)} waiting", None)
        self._schedule_drain(slot)

    def partition(self, groups: Sequence[Sequence[str]], one_way: bool = False) -> int:
        """Cut the network between groups (names or globs); returns the partition id.
        ``one_way``: only messages from groups[0] to groups[1] are cut."""
        for group in groups:
            for name in group:
                if not any(c in name for c in "*?[") and name not in self._slots:
                    raise SimulationError(f"partition: unknown node {name!r}")
        pid = self._net.partition(groups, one_way)
        self._fault_row("partition", f"p{pid} {'one-way ' if one_way else ''}{[list(g) for g in groups]}")
        return pid

    def heal(self, pid: int | None = None) -> None:
        """Heal one partition, or all of them."""
        healed = self._net.heal(pid)
        if healed:
            self._fault_row("heal", " ".join(f"p{p}" for p in healed))

    def set_clock(self, node: str, offset_ns: int, drift: float = 0.0) -> None:
        """From now on the node reads ``virtual + offset_ns + drift * virtual``; a pending timer
        is re-converted to virtual time. Survives restarts (it is the host's clock)."""
        if drift <= -1.0:
            raise SimulationError(f"set_clock({node}): drift must be > -1, got {drift}")
        slot = self._slot(node)
        slot.offset = int(offset_ns)
        slot.drift = float(drift)
        slot.skewed = slot.offset != 0 or slot.drift != 0.0
        if self._emit is not None:
            self._emit(node, FAULT, self.now_ns, None, None, None, None, None, None, None, None,
                       None, None, "clock", None, None, f"offset={slot.offset}ns drift={slot.drift}", None)
        if slot.running and slot.timer_at is not None:
            self._set_timer(slot, slot.timer_at)

    def slow_link(self, src: str, dst: str, latency: DistSpec) -> int:
        """Replace the latency from src to dst (names or globs) until ``restore_link``."""
        lid = self._net.slow(src, dst, latency)
        self._fault_row("slow-link", f"l{lid} {src}->{dst} {latency!r}")
        return lid

    def restore_link(self, lid: int) -> None:
        self._net.restore(lid)
        self._fault_row("restore-link", f"l{lid}")

    # ==== scheduling ==========================================================================
    def _after(self, delay: int, fn: Callable[[_Call], None], payload: Any) -> None:
        env = self._env
        heapq.heappush(self._queue, (env._now + delay, NORMAL, next(self._eid), _Call(env, fn, payload)))

    def _delay_to(self, at_ns: int) -> int:
        delay = at_ns - self.now_ns
        if delay < 0:
            raise SimulationError(f"cannot schedule at {at_ns} ns: the clock is already at {self.now_ns} ns")
        return delay

    def _call_ev(self, ev: _Call) -> None:
        self.stats.events += 1
        ev.payload()

    def _slot(self, name: str) -> NodeSlot:
        try:
            return self._slots[name]
        except KeyError:
            raise SimulationError(f"unknown node {name!r}; known: {', '.join(self._slots)}") from None

    # ==== node life cycle ======================================================================
    def _start_ev(self, ev: _Call) -> None:
        self.stats.events += 1
        slot: NodeSlot = ev.payload
        if slot.incarnation < 0:  # a restart before the scheduled start already started it
            self._start(slot)

    def _start(self, slot: NodeSlot) -> None:
        slot.incarnation += 1
        inc = slot.incarnation
        rng = random.Random(f"{self.seed}/{slot.name}/{inc}")
        try:
            node = slot.factory(NodeContext(slot.name, rng, slot.store, dict(slot.config)))
            specs = node.sockets()
        except Exception as exc:
            raise NodeError(f"node {slot.name} (incarnation {inc}) failed to build at t={self.now_ns} ns: "
                            f"{type(exc).__name__}: {exc}") from exc
        slot.node = node
        slot.running = True
        slot.paused = False
        slot.backlog.clear()
        slot.sockets = {}
        for spec in specs:
            if spec.name in slot.sockets:
                raise SimulationError(f"node {slot.name}: two sockets named {spec.name!r}")
            rid_seed = random.Random(f"{self.seed}/{slot.name}/{inc}/{spec.name}/routing-id").getrandbits(32)
            slot.sockets[spec.name] = make_socket(slot, spec, rid_seed)
        for sock in slot.sockets.values():
            for endpoint in sock.spec.bind:
                self._bind(sock, endpoint)
        for sock in slot.sockets.values():
            for endpoint in sock.spec.connect:
                self._connect(sock, endpoint)
        now = self.now_ns
        actions = self._call(slot, node, "start", node.start, slot.node_time(now))
        self._done(slot, node, actions)

    def _call(self, slot: NodeSlot, node: Node, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            raise NodeError(f"node {slot.name} (incarnation {slot.incarnation}) raised "
                            f"{type(exc).__name__} in {what} at t={self.now_ns} ns: {exc}") from exc

    # ==== actions ==============================================================================
    def _apply(self, slot: NodeSlot, node: Node, actions: list[Action]) -> None:
        hooks = self._hooks
        for action in actions:
            if slot.node is not node:
                break  # a hook crashed or restarted the node in the middle of this batch
            kind = action.__class__
            if kind is Send:
                self._send(slot, action)  # type: ignore[arg-type]
            elif kind is Deliver or kind is Note:
                self._deliver_row(slot, action)  # type: ignore[arg-type]
            elif kind is Discard:
                self._discard_row(slot, action)  # type: ignore[arg-type]
            elif kind is Subscribe or kind is Unsubscribe:
                sock = self._socket(slot, action.socket)  # type: ignore[union-attr]
                if kind is Subscribe:
                    frames = sock.subscribe(action.topic)  # type: ignore[union-attr]
                    if frames is not None:
                        self._control(sock, list(sock.pipes), frames, SUBSCRIBE)
                else:
                    frames = sock.unsubscribe(action.topic)  # type: ignore[union-attr]
                    if frames is not None:
                        self._control(sock, list(sock.pipes), frames, UNSUBSCRIBE)
            elif kind is Connect:
                self._connect(self._socket(slot, action.socket), action.endpoint)  # type: ignore[union-attr]
            elif kind is Disconnect:
                self._disconnect(self._socket(slot, action.socket), action.endpoint)  # type: ignore[union-attr]
            else:
                raise SimulationError(f"node {slot.name} returned {action!r}, which is not an action")
            if hooks:
                now = self.now_ns
                for hook in hooks:
                    hook(slot.name, action, now)

    def _done(self, slot: NodeSlot, node: Node, actions: list[Action] | None) -> None:
        """After an input: carry out the node's actions, then ask when it next needs waking."""
        if actions:
            self._apply(slot, node, actions)
        if slot.node is node:  # not crashed or restarted by a hook meanwhile
            try:
                at = node.get_timer()
            except Exception as exc:
                raise NodeError(f"node {slot.name} (incarnation {slot.incarnation}) raised "
                                f"{type(exc).__name__} in get_timer at t={self.now_ns} ns: {exc}") from exc
            if at != slot.timer_at:
                self._set_timer(slot, at)

    def _socket(self, slot: NodeSlot, name: str) -> SimSocket:
        sock = slot.sockets.get(name)
        if sock is None:
            raise SimulationError(f"node {slot.name} has no socket {name!r}; it declared: "
                                  f"{', '.join(slot.sockets) or 'none'}")
        return sock

    def _new_message(self, slot: NodeSlot, wire: list[bytes], msg_type: str,
                     meta: dict[str, Any] | None) -> Message:
        _check_frames(slot, wire)
        size = len(b"".join(wire))
        msg_id = self._next_msg_id
        self._next_msg_id = msg_id + 1
        if meta:
            topic, seq, term, index, corr = _meta(meta)
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
            topic, seq, term, index, corr = _meta(meta)
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
        if self._emit is not None:
            if self._pack:
                msg.packed = self._packb(frames)
            self._emit_message(slot.name, SEND, self.now_ns, sock.name, pipes[0].label() if len(pipes) == 1 else None,
                               None, "socket-internal", msg.packed, msg.row)
        for pipe in pipes:
            self._write(pipe, msg)

    def _set_timer(self, slot: NodeSlot, at: int | None) -> None:
        slot.timer_gen += 1
        slot.timer_at = at
        if at is not None:
            self._wake(slot, slot.to_virtual(at) if slot.skewed else at)

    def _wake(self, slot: NodeSlot, virtual: int) -> None:
        """Make sure a timer event comes at or before ``virtual``. Nodes move their deadline
        later after most messages (a heartbeat expiry, a request timeout) and earlier now and
        then (a worker's service time); an event already due earlier is kept and re-arms itself
        when it finds the deadline not yet reached, so the queue does not fill with events that
        would only find themselves stale."""
        wakes = slot.wakes
        if wakes and wakes[0] <= virtual:
            return
        now: int = self._env._now  # type: ignore[assignment]
        if virtual < now:
            virtual = now
        wakes.insert(0, virtual)  # earlier than every pending one: the list stays sorted
        self._after(virtual - now, self._timer_ev, (slot, slot.wake_gen))

    def _deliver_row(self, slot: NodeSlot, action: Deliver | Note) -> None:
        if self._emit is None:
            return
        data = action.data
        topic, seq, term, index, corr = _meta(data) if data else (None, None, None, None, None)
        self._emit(slot.name, DELIVER if action.__class__ is Deliver else NOTE, self._env._now, None,  # type: ignore[arg-type]
                   action.kind, None, topic, seq, term, index, None, corr, None, None, None, None,
                   None, None, pack_data(data))

    def _discard_row(self, slot: NodeSlot, action: Discard) -> None:
        if self._emit is None:
            return
        frames = action.frames
        self._emit(slot.name, DISCARD, self.now_ns, action.socket, None, None, None, None, None, None,
                   None, None, sum(len(f) for f in frames), None, None, action.clause or None,
                   action.reason, self._packb(list(frames)) if self._pack else None)

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
        at = now + link.sample(link.rng) + extra
        if at < pipe.last:
            at = pipe.last  # FIFO per connection, like TCP
        pipe.last = at
        pipe.inflight += 1
        self.stats.wire += 1
        payload = (msg, pipe, pipe.peer, pipe.session, fault)
        queue, eid, push = self._queue, self._eid, heapq.heappush
        push(queue, (at, NORMAL, next(eid), _Call(env, self._arrive, payload)))
        if copies:
            for _ in range(copies):
                pipe.pending += 1
                pipe.inflight += 1
                self.stats.wire += 1
                push(queue, (at, NORMAL, next(eid), _Call(env, self._arrive, payload)))
        if pipe.held:
            for entry in pipe.held:  # reordered messages arrive right behind this one
                entry[1] = True
                push(queue, (at, NORMAL, next(eid), _Call(env, self._arrive, entry[0])))
            pipe.held = None

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

    def _release_ev(self, ev: _Call) -> None:
        self.stats.events += 1
        entry = ev.payload
        if entry[1]:
            return  # already released behind a later message
        entry[1] = True
        pipe: Pipe = entry[0][1]
        if pipe.held and entry in pipe.held:
            pipe.held.remove(entry)
        self._after(0, self._arrive, entry[0])

    def _arrive(self, ev: _Call) -> None:
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
            raise NodeError(f"node {slot.name} (incarnation {slot.incarnation}) raised "
                            f"{type(exc).__name__} in receive on socket {sock.name!r} at t={now} ns: "
                            f"{exc}") from exc
        if actions:
            self._apply(slot, node, actions)  # type: ignore[arg-type]
            if slot.node is not node:
                return  # a hook crashed or restarted it
        at = node.get_timer()  # type: ignore[union-attr]
        if at != slot.timer_at:
            self._set_timer(slot, at)

    def _drop(self, node: str, socket: str | None, msg: Message, peer: str | None, cause: str) -> None:
        dropped = self.stats.dropped
        dropped[cause] = dropped.get(cause, 0) + 1
        if self._emit is not None:
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
                if self._emit is not None:
                    self._emit(me, FAULT, self.now_ns, pipe.socket.name, None, binder.slot.name, None,
                               None, None, None, None, None, None, "incompatible-sockets", None, None,
                               f"{pipe.socket.kind.value} cannot talk to {binder.kind.value} at "
                               f"{pipe.endpoint}", None)
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

    def _retry_ev(self, ev: _Call) -> None:
        self.stats.events += 1
        pipe: Pipe = ev.payload
        pipe.connecting = False
        self._attempt(pipe)

    def _establish_ev(self, ev: _Call) -> None:
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
        if self._emit is not None:
            self._emit(cname, "connect", self.now_ns, csock.name, None, bname, None, None, None, None,
                       None, None, None, None, None, None, cpipe.endpoint, None)
            for problem, node, peer_name in ((problems[0], cname, bname), (problems[1], bname, cname)):
                if problem:
                    self._emit(node, FAULT, self.now_ns, None, None, peer_name, None, None, None, None,
                               None, None, None, problem, None, None,
                               "routing id already in use: the peer is not routable", None)
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
        if self._emit is not None:
            self._emit(cpipe.slot.name, "disconnect", self.now_ns, cpipe.socket.name, None,
                       bpipe.slot.name, None, None, None, None, None, None, None, cause, None, None,
                       cpipe.endpoint, None)
        cpipe.cap = cpipe.socket.hwm
        if not cpipe.closed:
            self._retry(cpipe)
        self._destroy(bpipe)

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
        if self._emit is not None:
            self._emit(sock.slot.name, NOTE, self.now_ns, sock.name, "disconnect-unknown-endpoint", None,
                       None, None, None, None, None, None, None, None, None, None, endpoint, None)

    # ==== local inputs: timers, commands, notifications, backlog ===============================
    def _timer_ev(self, ev: _Call) -> None:
        self.stats.events += 1
        slot, gen = ev.payload
        if gen != slot.wake_gen or not slot.running:
            return
        del slot.wakes[0]  # this event: the slot's earliest (events run in time order)
        at = slot.timer_at
        if at is None:
            return  # cancelled since
        if slot.skewed:
            if slot.node_time(self.now_ns) < at:
                self._wake(slot, slot.to_virtual(at))  # moved later since
                return
        elif self._env._now < at:  # type: ignore[operator]
            self._wake(slot, at)
            return
        if slot.paused or slot.backlog:
            slot.backlog.append((_TIMER, slot.timer_gen))
            return
        self._fire_timer(slot)

    def _fire_timer(self, slot: NodeSlot) -> None:
        slot.timer_at = None
        node = slot.node
        assert node is not None
        now: int = self._env._now  # type: ignore[assignment]
        if now == slot.fired_at:
            slot.fired_count += 1
            if slot.fired_count >= TIMER_SPIN_LIMIT:
                raise NodeError(f"node {slot.name} (incarnation {slot.incarnation}): handle_timer ran "
                                f"{TIMER_SPIN_LIMIT} times at t={now} ns and get_timer() still names a time "
                                "that has come; virtual time cannot move on")
        else:
            slot.fired_at = now
            slot.fired_count = 0
        actions = self._call(slot, node, "handle_timer", node.handle_timer, slot.node_time(self._env._now))  # type: ignore[arg-type]
        self._done(slot, node, actions)

    def _command_ev(self, ev: _Call) -> None:
        slot, request = ev.payload
        self._command(slot, request)

    def _command(self, slot: NodeSlot, request: dict[str, Any]) -> None:
        self.stats.events += 1
        if not slot.running:
            self._command_row(slot, request, "node-down")
            return
        if slot.paused or slot.backlog:
            slot.backlog.append((_CMD, request))
            return
        self._run_command(slot, request)

    def _run_command(self, slot: NodeSlot, request: dict[str, Any]) -> None:
        self._command_row(slot, request, None)
        node = slot.node
        assert node is not None
        actions = self._call(slot, node, "command", node.command, request, slot.node_time(self._env._now))  # type: ignore[arg-type]
        self._done(slot, node, actions)

    def _command_row(self, slot: NodeSlot, request: dict[str, Any], fault: str | None) -> None:
        if self._emit is None:
            return
        topic, seq, term, index, corr = _meta(request)
        op = request.get("op", request.get("type", ""))
        self._emit(slot.name, COMMAND, self._env._now, None, str(op), None, topic, seq, term, index,  # type: ignore[arg-type]
                   None, corr, None, fault, None, None, None, None, pack_data(request))

    def _local(self, sock: SimSocket, frames: list[bytes], peer: str, msg_type: str, detail: str) -> None:
        """A socket tells its own node something (XPUB: an unsubscription when a peer left)."""
        slot = sock.slot
        if not slot.running:
            return
        if slot.paused or slot.backlog:
            slot.backlog.append((_LOCAL, sock, frames, peer, msg_type, detail))
            return
        self._local_now(slot, sock, frames, peer, msg_type, detail)

    def _local_now(self, slot: NodeSlot, sock: SimSocket, frames: list[bytes], peer: str,
                   msg_type: str, detail: str) -> None:
        if sock.closed:
            return
        self.stats.delivered += 1
        if self._emit is not None:
            self._emit(slot.name, RECV, self.now_ns, sock.name, msg_type, peer, None, None, None, None,
                       None, None, sum(len(f) for f in frames), None, None, None, detail,
                       self._packb(list(frames)) if self._pack else None)
        node = slot.node
        assert node is not None
        actions = self._call(slot, node, f"receive on socket {sock.name!r}", node.receive, sock.name,
                             list(frames), slot.node_time(self.now_ns))
        self._done(slot, node, actions)

    def _schedule_drain(self, slot: NodeSlot) -> None:
        if slot.backlog and not slot.drain_pending:
            slot.drain_pending = True
            self._after(0, self._drain_ev, (slot, slot.incarnation))

    def _drain_ev(self, ev: _Call) -> None:
        """Handle what waited during a pause, in arrival order, until caught up or paused again."""
        self.stats.events += 1
        slot, incarnation = ev.payload
        slot.drain_pending = False
        backlog = slot.backlog
        while backlog and slot.running and not slot.paused and slot.incarnation == incarnation:
            item = backlog.popleft()
            tag = item[0]
            if tag == _MSG:
                self._consume(slot, item[1], item[2], item[3], item[4])
            elif tag == _TIMER:
                if item[1] == slot.timer_gen:
                    self._fire_timer(slot)
            elif tag == _CMD:
                self._run_command(slot, item[1])
            else:
                self._local_now(slot, item[1], item[2], item[3], item[4], item[5])

    # ==== trace helpers ========================================================================
    def _fault_row(self, fault: str, detail: str) -> None:
        if self._emit is not None:
            self._emit(NEMESIS, FAULT, self.now_ns, None, None, None, None, None, None, None, None,
                       None, None, fault, None, None, detail, None)

    def _fault_msg_row(self, pipe: Pipe, msg: Message, fault: str, detail: str) -> None:
        if self._emit is not None:
            self._emit_message(pipe.slot.name, FAULT, self.now_ns, pipe.socket.name, pipe.peer_name, fault, detail,
                               None, msg.row)


# ==== plain-data helpers ========================================================================

_BYTES = frozenset({bytes})


def _check_frames(slot: NodeSlot, frames: list[Any]) -> None:
    for f in frames:
        if f.__class__ is not bytes:
            raise SimulationError(f"node {slot.name}: message frames must be bytes, got "
                                  f"{type(f).__name__} ({f!r:.40})")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "backslashreplace")
    return str(value)


def _int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _meta(meta: dict[str, Any]) -> tuple[str | None, int | None, int | None, int | None, str | None]:
    """The trace's topic / seq / term / index / corr columns from a meta or data dict."""
    get = meta.get
    topic, seq, term, index, corr = get("topic"), get("seq"), get("term"), get("index"), get("corr")
    # Fast path: the usual types pass straight through.
    if topic is not None and topic.__class__ is not str:
        topic = _text(topic)
    if seq is not None and seq.__class__ is not int:
        seq = _int(seq)
    if term is not None and term.__class__ is not int:
        term = _int(term)
    if index is not None and index.__class__ is not int:
        index = _int(index)
    if corr is not None and corr.__class__ is not str:
        corr = _text(corr)
    return topic, seq, term, index, corr
