"""The deterministic simulator: sans-IO nodes, virtual ZeroMQ sockets and a seeded network on
one simpy clock (virtual integer nanoseconds). It implements `harness.runtime.Runtime`.

Determinism (DESIGN rule 3): every random draw comes from a generator derived from the seed
(per node incarnation, per link, per ROUTER socket); simultaneous events run in the order they
were scheduled (simpy breaks time ties by an insertion counter); all containers iterate in
insertion order. No wall clock, no hash-dependent order.

Speed: one simpy event per message copy in flight, carrying a plain tuple, with a bound-method
callback (no process per message); message rows share one tuple per message
(`TraceWriter.emit_message`); other rows go through the trace's named constructors.

This module holds nodes, time and faults; `harness.sim.transport` moves the messages.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import msgpack
import simpy

from fault_injection.damage import TypedMalformed
from fault_injection.rules import DistSpec, RuleSet
from harness.node import (
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
from harness.runtime import ActionHook, FailureHook, NodeFailure, failure_of, node_rng
from harness.sim.errors import NodeError, SimulationError
from harness.sim.events import Call, SimStats
from harness.sim.network import LatencyModel, Network
from harness.sim.slots import CMD as _CMD, LOCAL as _LOCAL, MSG as _MSG, TIMER as _TIMER, NodeSlot
from harness.sim.sockets import SUBSCRIBE, UNSUBSCRIBE, SimSocket, make_socket
from harness.sim.transport import RECONNECT_IVL_NS, Transport
from harness.trace import CRASH, DELIVER, NOTE, PAUSE, RESTART, RESUME, TraceWriter

# A node whose handle_timer never moves its deadline past now would hold virtual time still.
TIMER_SPIN_LIMIT = 10_000
NEMESIS = "nemesis"  # the node column of rows about the whole network (partitions, slow links)
ALL_FAULTS = frozenset({"crash", "restart", "pause", "partition", "clock_skew", "slow_link", "rules"})

__all__ = ["NEMESIS", "RECONNECT_IVL_NS", "TIMER_SPIN_LIMIT", "SimStats", "Simulation"]


class Simulation(Transport):
    """Run sans-IO nodes over virtual ZeroMQ sockets, with faults, reproducibly.

    ``run(until_ns)`` processes every event scheduled strictly before ``until_ns`` (simpy's
    convention) and leaves the clock at ``until_ns``; runs can be chained.
    """

    capabilities = ALL_FAULTS

    def __init__(self, seed: int, trace: TraceWriter | None = None, *,
                 latency: LatencyModel | None = None, rules: RuleSet | None = None,
                 record_frames: bool = True,
                 fields_of: Callable[[list[bytes]], Any] | None = None,
                 malformed: TypedMalformed | None = None) -> None:
        self.seed = seed
        self.trace = trace
        self.stats = SimStats()
        self._env = simpy.Environment()
        # simpy's own event queue and id counter, pushed to directly on the hot path (one call
        # less per event than Environment.schedule; the entries are exactly what it pushes).
        self._queue = self._env._queue  # type: ignore[assignment]
        self._eid = self._env._eid
        self._net = Network(seed, latency or LatencyModel())
        # A fresh copy: rules that pick messages by count (nth) count per run.
        self._rules = rules.fresh() if rules is not None and len(rules) else None
        self._fields_of = fields_of  # decoded fields of a message, for rules with field conditions
        self._malformed = malformed  # whether damaged frames no longer decode (corrupt rules)
        self._emit_message = trace.emit_message if trace is not None else None
        self._pack = trace is not None and record_frames
        # Same bytes as harness.trace.pack_frames, without building a Packer per call.
        self._packb = msgpack.Packer(use_bin_type=True).pack
        self._slots: dict[str, NodeSlot] = {}
        self._bound: dict[str, SimSocket] = {}
        self._hooks: list[ActionHook] = []
        self._failure_hooks: list[FailureHook] = []
        self._failures: list[NodeFailure] = []
        self._next_msg_id = 1
        # What each action does: one dict lookup per action instead of a chain of class tests.
        self._handlers: dict[type, Callable[[NodeSlot, Any], None]] = {
            Send: self._send, Deliver: self._deliver_row, Note: self._note_row, Discard: self._discard_row,
            Subscribe: self._subscribe, Unsubscribe: self._unsubscribe, Connect: self._connect_action,
            Disconnect: self._disconnect_action,
        }
        if trace is not None:
            trace.register_node(NEMESIS, NEMESIS, "")

    # ==== the runtime interface: nodes ==========================================================
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

    def node_names(self) -> list[str]:
        return list(self._slots)

    def role_of(self, name: str) -> str:
        return self._slot(name).role

    def is_running(self, name: str) -> bool:
        return self._slot(name).running

    def is_paused(self, name: str) -> bool:
        return self._slot(name).paused

    def last_note(self, name: str, kind: str) -> dict[str, Any] | None:
        return self._slot(name).notes.get(kind)

    def incarnation(self, name: str) -> int:
        return self._slot(name).incarnation

    def node_time(self, name: str) -> int:
        """What the node's (possibly skewed) clock reads now."""
        return self._slot(name).node_time(self.now_ns)

    @property
    def failures(self) -> list[NodeFailure]:
        return list(self._failures)

    def on_action(self, hook: ActionHook) -> None:
        """Call ``hook(node_name, action, virtual_time_ns)`` for every action a node returns,
        after the simulator carried it out."""
        self._hooks.append(hook)

    def on_failure(self, hook: FailureHook) -> None:
        """Call ``hook(failure)`` after a node that raised or misbehaved was crashed."""
        self._failure_hooks.append(hook)

    # ==== the runtime interface: time ===========================================================
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

    def _stream_ev(self, ev: Call) -> None:
        slot, request, stream = ev.payload
        self._next_from(stream)  # first, so it is ordered like a command scheduled up front
        self._command(slot, request)

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` now (the simulation has one thread) and return its result."""
        return fn()

    def attach_process(self, name: str, external: Any) -> None:
        raise SimulationError(f"{name}: an implementation that runs as a process needs real sockets (run --live)")

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
            if event.__class__ is Call:  # ours: one callback, never failing, never looked at again
                event.fn(event)
                continue
            # Anything else (a simpy process's event on ``env``) goes back where it was, the
            # earliest entry, and simpy's own step processes it.
            heapq.heappush(queue, (env._now, priority, eid, event))
            env.step()
        env._now = until_ns

    # ==== the runtime interface: faults =========================================================
    def crash(self, node: str, detail: str | None = None) -> None:
        """Throw the node object away: its sockets close, messages in flight to and from it and
        everything it had queued are lost; its durable store is kept. No-op if it is down."""
        slot = self._slot(node)
        if not slot.running:
            return
        if self.trace is not None:
            self.trace.lifecycle(node, CRASH, self.now_ns, detail or f"incarnation {slot.incarnation}")
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
        if self.trace is not None:
            self.trace.lifecycle(node, RESTART, self.now_ns, f"incarnation {slot.incarnation + 1}")
        self._start(slot)

    def pause(self, node: str) -> None:
        """Stop running the node's handlers; its inputs wait (and count against the HWM)."""
        slot = self._slot(node)
        if not slot.running or slot.paused:
            return
        slot.paused = True
        if self.trace is not None:
            self.trace.lifecycle(node, PAUSE, self.now_ns)

    def resume(self, node: str) -> None:
        """Run the node again; what waited is handled first, in arrival order."""
        slot = self._slot(node)
        if not slot.running or not slot.paused:
            return
        slot.paused = False
        if self.trace is not None:
            self.trace.lifecycle(node, RESUME, self.now_ns, f"{len(slot.backlog)} waiting")
        self._schedule_drain(slot)

    def partition(self, groups: Sequence[Sequence[str]], one_way: bool = False) -> int:
        """Cut the network between groups (names or globs); returns the partition id.
        ``one_way``: only messages from groups[0] to groups[1] are cut."""
        for group in groups:
            for name in group:
                if not any(c in name for c in "*?[") and name not in self._slots:
                    raise SimulationError(f"partition: unknown node {name!r}")
        pid = self._net.partition(groups, one_way)
        self.fault_note("partition", f"p{pid} {'one-way ' if one_way else ''}{[list(g) for g in groups]}")
        return pid

    def heal(self, pid: int | None = None) -> None:
        """Heal one partition, or all of them."""
        healed = self._net.heal(pid)
        if healed:
            self.fault_note("heal", " ".join(f"p{p}" for p in healed))

    def set_clock(self, node: str, offset_ns: int, drift: float = 0.0) -> None:
        """From now on the node reads ``virtual + offset_ns + drift * virtual``; a pending timer
        is re-converted to virtual time. Survives restarts (it is the host's clock)."""
        if drift <= -1.0:
            raise SimulationError(f"set_clock({node}): drift must be > -1, got {drift}")
        slot = self._slot(node)
        slot.set_skew(int(offset_ns), float(drift))
        self.fault_note("clock", f"offset={slot.offset}ns drift={slot.drift}", node)
        if slot.running and slot.timer_at is not None:
            self._set_timer(slot, slot.timer_at)

    def slow_link(self, src: str, dst: str, latency: DistSpec) -> int:
        """Replace the latency from src to dst (names or globs) until ``restore_link``."""
        lid = self._net.slow(src, dst, latency)
        self.fault_note("slow-link", f"l{lid} {src}->{dst} {latency!r}")
        return lid

    def restore_link(self, lid: int) -> None:
        self._net.restore(lid)
        self.fault_note("restore-link", f"l{lid}")

    def fault_note(self, fault: str, detail: str, node: str | None = None) -> None:
        """A fault row that acts on no single message (node: the nemesis unless given)."""
        if self.trace is not None:
            self.trace.fault(node or NEMESIS, self.now_ns, fault, detail)

    # ==== scheduling ==========================================================================
    def _delay_to(self, at_ns: int) -> int:
        delay = at_ns - self.now_ns
        if delay < 0:
            raise SimulationError(f"cannot schedule at {at_ns} ns: the clock is already at {self.now_ns} ns")
        return delay

    def _call_ev(self, ev: Call) -> None:
        self.stats.events += 1
        ev.payload()

    def _slot(self, name: str) -> NodeSlot:
        try:
            return self._slots[name]
        except KeyError:
            raise SimulationError(f"unknown node {name!r}; known: {', '.join(self._slots)}") from None

    # ==== node life cycle ======================================================================
    def _start_ev(self, ev: Call) -> None:
        self.stats.events += 1
        slot: NodeSlot = ev.payload
        if slot.incarnation < 0:  # a restart before the scheduled start already started it
            self._start(slot)

    def _start(self, slot: NodeSlot) -> None:
        slot.incarnation += 1
        inc = slot.incarnation
        rng = node_rng(self.seed, slot.name, inc)
        try:
            node = slot.factory(NodeContext(slot.name, rng, slot.store, dict(slot.config)))
            specs = node.sockets()
            names = [spec.name for spec in specs]
            if len(set(names)) != len(names):
                raise SimulationError(f"node {slot.name}: two sockets with one name in {names}")
        except Exception as exc:
            self._fail(slot, "start", exc)  # it never came up: nothing to crash
            return
        slot.node = node
        slot.running = True
        slot.paused = False
        slot.backlog.clear()
        slot.notes = {}
        slot.sockets = {}
        try:
            for spec in specs:
                rid_seed = random.Random(f"{self.seed}/{slot.name}/{inc}/{spec.name}/routing-id").getrandbits(32)
                slot.sockets[spec.name] = make_socket(slot, spec, rid_seed)
            for sock in slot.sockets.values():
                for endpoint in sock.spec.bind:
                    self._bind(sock, endpoint)
            for sock in slot.sockets.values():
                for endpoint in sock.spec.connect:
                    self._connect(sock, endpoint)
        except SimulationError as exc:  # a socket it cannot have (an endpoint bound twice, ...)
            self._fail(slot, "start", exc)
            return
        actions = self._call(slot, node, "start", node.start, slot.node_time(self.now_ns))
        self._done(slot, node, actions)

    def _call(self, slot: NodeSlot, node: Node, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """A node handler's actions, or None when it raised (the node is crashed then)."""
        try:
            return fn(*args)
        except Exception as exc:
            self._fail(slot, what, exc)
            return None

    def _fail(self, slot: NodeSlot, where: str, exc: BaseException) -> None:
        """The one policy for a node that raised or misbehaved: an error row, a crash, the hooks."""
        failure = failure_of(slot.name, slot.incarnation, self.now_ns, where, exc)
        self._failures.append(failure)
        if self.trace is not None:
            self.trace.error(slot.name, failure.time_ns, where, failure.detail)
        self.crash(slot.name, f"exception in {where} (incarnation {slot.incarnation})")
        for hook in self._failure_hooks:
            hook(failure)

    # ==== actions ==============================================================================
    def _apply(self, slot: NodeSlot, node: Node, actions: list[Action]) -> None:
        hooks = self._hooks
        handlers = self._handlers
        try:
            for action in actions:
                if slot.node is not node:
                    break  # a hook crashed or restarted the node in the middle of this batch
                handler = handlers.get(action.__class__)
                if handler is None:
                    raise SimulationError(f"node {slot.name} returned {action!r}, which is not an action")
                handler(slot, action)
                if hooks:
                    now = self.now_ns
                    for hook in hooks:
                        hook(slot.name, action, now)
        except SimulationError as exc:  # the node asked for something impossible
            self._fail(slot, "action", exc)

    def _done(self, slot: NodeSlot, node: Node, actions: list[Action] | None) -> None:
        """After an input: carry out the node's actions, then ask when it next needs waking."""
        if actions:
            self._apply(slot, node, actions)
        if slot.node is node:  # not crashed or restarted meanwhile
            try:
                at = node.get_timer()
            except Exception as exc:
                self._fail(slot, "get_timer", exc)
                return
            if at != slot.timer_at:
                self._set_timer(slot, at)

    def _subscribe(self, slot: NodeSlot, action: Subscribe) -> None:
        sock = self._socket(slot, action.socket)
        frames = sock.subscribe(action.topic)
        if frames is not None:
            self._control(sock, list(sock.pipes), frames, SUBSCRIBE)

    def _unsubscribe(self, slot: NodeSlot, action: Unsubscribe) -> None:
        sock = self._socket(slot, action.socket)
        frames = sock.unsubscribe(action.topic)
        if frames is not None:
            self._control(sock, list(sock.pipes), frames, UNSUBSCRIBE)

    def _connect_action(self, slot: NodeSlot, action: Connect) -> None:
        self._connect(self._socket(slot, action.socket), action.endpoint)

    def _disconnect_action(self, slot: NodeSlot, action: Disconnect) -> None:
        self._disconnect(self._socket(slot, action.socket), action.endpoint)

    def _set_timer(self, slot: NodeSlot, at: int | None) -> None:
        slot.timer_gen += 1
        slot.timer_at = at
        if at is not None:
            self._wake(slot, slot.runtime_time(at) if slot.skewed else at)

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

    def _deliver_row(self, slot: NodeSlot, action: Deliver) -> None:
        if self.trace is not None:
            self.trace.delivery(slot.name, DELIVER, self._env._now, action.kind, action.data)  # type: ignore[arg-type]

    def _note_row(self, slot: NodeSlot, action: Note) -> None:
        slot.notes[action.kind] = action.data  # symbolic fault targets ask for the latest
        if self.trace is not None:
            self.trace.delivery(slot.name, NOTE, self._env._now, action.kind, action.data)  # type: ignore[arg-type]

    def _discard_row(self, slot: NodeSlot, action: Discard) -> None:
        if self.trace is not None:
            frames = action.frames
            self.trace.discard(slot.name, self.now_ns, action.socket, sum(len(f) for f in frames),
                               action.clause or None, action.reason, self._packb(list(frames)) if self._pack else None)

    # ==== local inputs: timers, commands, notifications, backlog ===============================
    def _timer_ev(self, ev: Call) -> None:
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
                self._wake(slot, slot.runtime_time(at))  # moved later since
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
                self._fail(slot, "handle_timer", NodeError(
                    f"handle_timer ran {TIMER_SPIN_LIMIT} times at t={now} ns and get_timer() still names a "
                    "time that has come; virtual time cannot move on"))
                return
        else:
            slot.fired_at = now
            slot.fired_count = 0
        actions = self._call(slot, node, "handle_timer", node.handle_timer, slot.node_time(now))
        self._done(slot, node, actions)

    def _command_ev(self, ev: Call) -> None:
        slot, request = ev.payload
        self._command(slot, request)

    def _command(self, slot: NodeSlot, request: dict[str, Any]) -> None:
        self.stats.events += 1
        if not slot.running:
            if self.trace is not None:
                self.trace.command(slot.name, self._env._now, request, "node-down")  # type: ignore[arg-type]
            return
        if slot.paused or slot.backlog:
            slot.backlog.append((_CMD, request))
            return
        self._run_command(slot, request)

    def _run_command(self, slot: NodeSlot, request: dict[str, Any]) -> None:
        if self.trace is not None:
            self.trace.command(slot.name, self._env._now, request)  # type: ignore[arg-type]
        node = slot.node
        assert node is not None
        actions = self._call(slot, node, "command", node.command, request, slot.node_time(self._env._now))  # type: ignore[arg-type]
        self._done(slot, node, actions)

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
        if self.trace is not None:
            self.trace.local(slot.name, self.now_ns, sock.name, msg_type, peer, sum(len(f) for f in frames), detail,
                             self._packb(list(frames)) if self._pack else None)
        node = slot.node
        assert node is not None
        actions = self._call(slot, node, "receive", node.receive, sock.name, list(frames),
                             slot.node_time(self.now_ns))
        self._done(slot, node, actions)

    def _schedule_drain(self, slot: NodeSlot) -> None:
        if slot.backlog and not slot.drain_pending:
            slot.drain_pending = True
            self._after(0, self._drain_ev, (slot, slot.incarnation))

    def _drain_ev(self, ev: Call) -> None:
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
                if item[1].lingering:
                    self._unread(item[1])
            elif tag == _TIMER:
                if item[1] == slot.timer_gen:
                    self._fire_timer(slot)
            elif tag == _CMD:
                self._run_command(slot, item[1])
            else:
                self._local_now(slot, item[1], item[2], item[3], item[4], item[5])
