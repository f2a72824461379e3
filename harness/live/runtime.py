"""LiveRuntime: sans-IO nodes over real pyzmq sockets, all in one event-loop thread. It
implements `harness.runtime.Runtime`, like the simulator.

The loop thread owns every socket (ZeroMQ sockets are not thread-safe). Other threads talk to
it only through `call` and `schedule` (a queue, a timed heap and a wake-up pipe the poller
watches). Node clock and trace time are both nanoseconds since `start()` on
`time.monotonic_ns`; ``schedule(at_ns, fn)`` runs ``fn`` on the loop thread at that time, so
the nemesis and the workload act from the thread that owns the nodes, as in simulation.

Nodes that the harness runs in this process and implementations under test started as
processes (`attach_process`) are both "nodes" here: crash, restart, pause and resume act on
either (a process is killed, restarted, stopped with SIGSTOP and continued).

Message rules, partitions and slow links act in a ZMTP-aware chaos proxy placed between the
nodes (`fault_injection.proxy`, placed by `harness.live_faults`); `attach_proxy` hands it to
the runtime, which then forwards those faults to it, writes the rows of what it did into the
trace on the loop thread, and makes each in-process node connect from its own source address
so the proxy can tell who connected.

A node that raises follows the one policy of `harness.runtime`: an ``error`` row with the
traceback, a ``crash`` row, a `NodeFailure` in ``failures``, the ``on_failure`` hooks; the
other nodes keep running. An exception of the harness's own (a hook, a scheduled callback)
stops the loop; ``run`` and the waits then raise `LiveRuntimeError`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import zmq

from harness.live.deliveries import Delivery, DeliveryLog
from harness.live.external import ExternalNode
from harness.live.loop import EventLoop, LiveRuntimeError
from harness.live.node_io import NodeIO, Slot, set_timer
from harness.live.sockets import (
    BIND_RETRY_S, FILES_WANTED, STOP_LINGER_MS, SocketSetupError, enough_files, open_socket,
)
from harness.node import DurableStore, Node, NodeContext, NodeFactory, SocketType
from harness.runtime import (
    CLOCK as CAN_CLOCK, CRASH as CAN_CRASH, PARTITION as CAN_PARTITION, PAUSE as CAN_PAUSE, RESTART as CAN_RESTART,
    RULES as CAN_RULES, SLOW_LINK as CAN_SLOW_LINK, ActionHook, FailureHook, NodeFailure, StallHook, UnsupportedFault,
    failure_of, node_rng,
)
from harness.trace import CRASH, PAUSE, RESTART, RESUME, TraceWriter

log = logging.getLogger(__name__)

SEND_ONLY = frozenset({zmq.PUB, zmq.PUSH})  # nothing to read: a recv on them fails (ENOTSUP)
LIVE_FAULTS = frozenset({CAN_CRASH, CAN_RESTART, CAN_PAUSE, CAN_PARTITION, CAN_SLOW_LINK, CAN_RULES, CAN_CLOCK})
NO_PROXY = "needs the ZMTP proxy between the nodes (attach_proxy); the run driver places it when a scenario asks"

__all__ = ["LIVE_FAULTS", "LiveRuntime", "LiveRuntimeError", "SocketSetupError"]


@dataclass
class StallStats:
    """How far behind the loop ran its in-process nodes' timers in this run (`LiveRuntime.on_stall`)."""

    count: int = 0
    worst_ns: int = 0
    worst_node: str = ""
    worst_at_ns: int = 0


# How long a crashed in-process node stays down at least, however soon it is restarted. Its old
# connections close at the crash, but a peer learns of that only when its own ZeroMQ thread and
# socket have handled the close. A new connection of the same routing id that reaches a ROUTER
# first is ignored for good (libzmq keeps it as an anonymous pipe and never identifies it again),
# so a client restarted in the same instant talked into the void: explore --live found an Event
# BUS client that never synchronised again, the bus blamed (search seed 91,
# eventbus/explore/restarts.yaml). A process takes longer than this to come back, and the
# simulator's peers see a crash at once.
RESTART_GAP_NS = 100 * 1_000_000


class LiveRuntime(EventLoop, NodeIO):
    # Crashes, restarts, pauses and the clocks of in-process nodes by itself; message rules,
    # partitions and slow links through the ZMTP proxy it is given (attach_proxy).
    capabilities = LIVE_FAULTS

    def __init__(self, trace: TraceWriter | None = None, *, seed: int = 0, record_deliveries: bool = True) -> None:
        super().__init__()
        self._trace = trace
        if trace is not None:
            trace.defer_flushes()  # written between turns (`_tick`), not in a node's handler
        self.seed = seed
        enough_files(FILES_WANTED)
        self._record = record_deliveries
        self._slots: dict[str, Slot] = {}
        # The same slots in order, as a tuple replaced (never changed) when a node is added: the
        # loop iterates it every turn while `add_node` may run in another thread, and a dict that
        # grows during a loop's iteration stops it ("dictionary changed size during iteration")
        self._slot_seq: tuple[Slot, ...] = ()
        self._external: dict[str, ExternalNode] = {}
        self._observed_notes: dict[str, dict[str, dict[str, Any]]] = {}  # external node -> kind -> data
        self._order: list[str] = []  # every node name, in the order added
        self._owner: dict[zmq.Socket, tuple[Slot, str, bool]] = {}  # -> (slot, name, is_router)
        self._hooks: list[ActionHook] = []
        self._failure_hooks: list[FailureHook] = []
        self._stall_hooks: list[StallHook] = []
        self.stalls = StallStats()
        self._log = DeliveryLog()
        self._failures: list[NodeFailure] = []
        self._proxy: Any = None  # fault_injection.proxy.ChaosProxy, when attached
        self._sources: dict[str, str] = {}  # node -> the address its connections come from
        self._init_io()

    # ==== the runtime interface: nodes ==========================================================
    def add_node(self, name: str, factory: NodeFactory, *, role: str, config: dict[str, Any] | None = None,
                 implementation: str = "reference", start_at_ns: int = 0) -> Node | None:
        """A node of this process. Built now (and returned) unless it starts later
        (``start_at_ns``); its sockets open and it starts at `start` (at once if running)."""
        self._new_name(name)
        if self._stopped:
            raise LiveRuntimeError("runtime is stopped")
        slot = Slot(name, factory, role, dict(config or {}), implementation, DurableStore(),
                    source=self._sources.get(name))
        self._slots[name] = slot
        self._slot_seq = (*self._slot_seq, slot)
        self._order.append(name)
        if self._trace is not None:
            self._trace.register_node(name, role, implementation)
        if start_at_ns > 0:
            self.schedule(start_at_ns, lambda: self._build_and_start(slot))
            return None
        slot.node = slot.factory(self._context_for(slot))
        if self.running:
            self.call(lambda: self._open_and_start(slot, first=True))
        return slot.node

    def attach_process(self, name: str, external: ExternalNode) -> None:
        """An implementation under test running as a process, so that faults and targets can
        name it like any node."""
        self._new_name(name)
        self._external[name] = external
        self._order.append(name)
        if self._trace is not None:
            self._trace.register_node(name, external.role, external.implementation)

    def attach_proxy(self, proxy: Any, sources: dict[str, str] | None = None) -> None:
        """Carry out message rules, partitions and slow links in ``proxy`` (a ChaosProxy whose
        listeners the nodes' configs already name), write its fault rows into the trace, and
        connect each node named in ``sources`` from its address. Before `add_node`."""
        self._proxy = proxy
        self._sources = dict(sources or {})
        trace = self._trace
        if trace is not None:
            trace.register_node("nemesis", "nemesis", "")
            proxy.on_event = lambda ev: self.post(lambda: trace.emit(ev.node, ev.kind, ev.time_ns, **ev.row()))

    @property
    def proxy(self) -> Any:
        return self._proxy

    def _new_name(self, name: str) -> None:
        if name in self._slots or name in self._external:
            raise ValueError(f"node name {name!r} is already in use")

    def set_trace(self, trace: TraceWriter) -> None:
        """Attach a trace writer before `start` (e.g. once the protocol of a node is known)."""
        if self._thread is not None:
            raise LiveRuntimeError("set_trace must come before start()")
        self._trace = trace
        trace.defer_flushes()
        for slot in self._slots.values():
            trace.register_node(slot.name, slot.role, slot.implementation)

    def node(self, name: str) -> Node | None:
        """The current node object (None while crashed). Read it from the loop thread, or only
        for things that are safe to read racily."""
        return self._slot(name).node

    def node_names(self) -> list[str]:
        return list(self._order)

    def role_of(self, name: str) -> str:
        ext = self._external.get(name)
        return ext.role if ext is not None else self._slot(name).role

    def is_running(self, name: str) -> bool:
        ext = self._external.get(name)
        if ext is not None:
            return ext.running
        slot = self._slot(name)
        return slot.node is not None and slot.started

    def is_crashed(self, name: str) -> bool:
        return not self.is_running(name)

    def last_note(self, name: str, kind: str) -> dict[str, Any] | None:
        if name in self._external:
            # a process under test tells nothing but what it sends: what that implies, if the
            # proxy observed it (`note_observed`)
            return self._observed_notes.get(name, {}).get(kind)
        return self._slot(name).notes.get(kind)

    def note_observed(self, name: str, kind: str, data: dict[str, Any]) -> None:
        """On the loop thread: what an external node's observed message implies about it (its
        protocol package's ``wire_notes``), for symbolic fault targets (``crash: leader``). A
        crash or restart of the node forgets it."""
        if name in self._external:
            self._observed_notes.setdefault(name, {})[kind] = data

    def store(self, name: str) -> DurableStore:
        return self._slot(name).store

    def endpoints(self, name: str) -> dict[str, list[str]]:
        """Bound endpoints per socket, as resolved (wildcard ports filled in)."""
        return {k: list(v) for k, v in self._slot(name).bound.items()}

    def connected(self, name: str) -> dict[str, list[str]]:
        """Endpoints each socket of the node connects to, as the node named them."""
        return {k: list(v) for k, v in self._slot(name).connected.items()}

    @property
    def failures(self) -> list[NodeFailure]:
        return list(self._failures)

    @property
    def deliveries(self) -> list[Delivery]:
        return self._log.snapshot()

    def on_action(self, hook: ActionHook) -> ActionHook:
        """Call ``hook(node, action, time_ns)`` on the loop thread for every action a node
        returns, after it was carried out. A hook that raises stops the run (a harness bug)."""
        self._hooks = [*self._hooks, hook]  # a new list: the loop iterates the old one without copying
        return hook

    def on_failure(self, hook: FailureHook) -> None:
        self._failure_hooks.append(hook)

    def on_stall(self, hook: StallHook) -> None:
        """Call ``hook(node, time_ns, late_ns)`` on the loop thread when an in-process node's timer
        fires at least `STALL_MIN_NS` late (written to the trace as a ``stall`` row too)."""
        self._stall_hooks.append(hook)

    # ==== the runtime interface: time (now_ns, schedule, run: EventLoop) =========================
    def command(self, at_ns: int, node: str, request: dict[str, Any]) -> None:
        """Hand ``request`` to the node's ``command`` at ``at_ns`` (0: as soon as it can)."""
        slot = self._slot(node)
        self.schedule(at_ns, lambda: self._do_command(slot, request))

    def command_stream(self, stream: Iterator[tuple[int, str, dict[str, Any]]]) -> None:
        """Each ``(at_ns, node, request)`` of a time-ordered stream, drawn when the previous
        one is due (as `harness.sim.Simulation.command_stream`)."""
        def next_one() -> None:
            item = next(stream, None)
            if item is not None:
                at, node, request = item
                slot = self._slot(node)

                def due() -> None:
                    next_one()
                    self._do_command(slot, request)

                self.schedule(at, due)

        next_one()

    # ==== the runtime interface: faults =========================================================
    def crash(self, node: str) -> None:
        ext = self._external.get(node)
        if ext is not None:
            self._observed_notes.pop(node, None)
            self.call(lambda: self._row_lifecycle(node, CRASH, f"process killed: {ext.kill()}"))
            return
        slot = self._slot(node)
        self.call(lambda: self._crash(slot, "crash"))

    def restart(self, node: str) -> None:
        """Rebuild the node from its factory with the same store, reopen its sockets on the same
        endpoints and start it (a process: the same command line and data directory). A node
        that is still up is crashed first (a process: SIGKILL, before this returns)."""
        ext = self._external.get(node)
        if ext is not None:
            if ext.running:  # killed at once, as by a crash fault: nothing it sends comes after the crash row
                self.crash(node)
            self._observed_notes.pop(node, None)
            self.call(lambda: self._row_lifecycle(node, RESTART, "process restarting"))
            ext.restart_in_background()
            return
        slot = self._slot(node)
        self.call(lambda: self._restart(slot))

    def pause(self, node: str) -> None:
        """Stop serving the node (a process: SIGSTOP): its input waits in ZeroMQ's queues, its
        timers and commands wait until `resume`."""
        ext = self._external.get(node)
        if ext is not None:
            if ext.running:
                ext.pause()
                self.call(lambda: self._row_lifecycle(node, PAUSE))
            return
        slot = self._slot(node)
        self.call(lambda: self._pause(slot, True))

    def resume(self, node: str) -> None:
        ext = self._external.get(node)
        if ext is not None:
            if ext.running:
                ext.resume()
                self.call(lambda: self._row_lifecycle(node, RESUME))
            return
        slot = self._slot(node)
        self.call(lambda: self._pause(slot, False))

    def partition(self, groups: Sequence[Sequence[str]], one_way: bool = False) -> int:
        return self._need_proxy("partitions").partition(groups, one_way)

    def heal(self, pid: int | None = None) -> None:
        self._need_proxy("partitions").heal(pid)

    def set_clock(self, node: str, offset_ns: int, drift: float = 0.0) -> None:
        """From now on the in-process node reads ``t + offset_ns + drift * t`` (``t``: this
        runtime's clock); a pending timer is re-converted. Survives restarts (it is the host's
        clock). An external process reads the host's clock, which the harness cannot move."""
        if node in self._external:
            raise UnsupportedFault(f"clock skew of {node}: an external process reads the host's clock, which the "
                                   "harness cannot move (skew the nodes the harness runs, or run it in simulation)")
        if drift <= -1.0:
            raise ValueError(f"set_clock({node}): drift must be > -1, got {drift}")
        slot = self._slot(node)
        self.call(lambda: self._set_clock(slot, int(offset_ns), float(drift)))

    def node_time(self, name: str) -> int:
        """What the in-process node's (possibly skewed) clock reads now."""
        return self._slot(name).node_time(self.now_ns)

    def _set_clock(self, slot: Slot, offset: int, drift: float) -> None:
        slot.set_skew(offset, drift)
        set_timer(slot, slot.timer_node)
        self.fault_note("clock", f"offset={offset}ns drift={drift}", slot.name)

    def slow_link(self, src: str, dst: str, latency: Any) -> int:
        return self._need_proxy("slow links").slow_link(src, dst, latency)

    def restore_link(self, lid: int) -> None:
        self._need_proxy("slow links").restore_link(lid)

    def _need_proxy(self, what: str) -> Any:
        if self._proxy is None:
            raise UnsupportedFault(f"{what} over real sockets {NO_PROXY}")
        return self._proxy

    def fault_note(self, fault: str, detail: str, node: str | None = None) -> None:
        if self._trace is not None:
            self._trace.fault(node or "nemesis", self.now_ns, fault, detail)

    # ==== waits and the loop's hooks ===========================================================
    def wait_for(self, predicate: Callable[[list[Delivery]], bool], timeout: float) -> list[Delivery]:
        """Block until ``predicate(deliveries)`` is true (it runs under a lock on the live list:
        keep it quick and read-only). Returns a copy of the deliveries. Raises TimeoutError
        (naming any node failures), or LiveRuntimeError at once if the loop has ended."""
        try:
            return self._log.wait_for(predicate, timeout, self._broken, self._error_context)
        except RuntimeError as exc:
            raise LiveRuntimeError(str(exc)) from None

    def wait_delivery(self, kind: str | None = None, *, node: str | None = None,
                      where: Callable[[Delivery], bool] | None = None, start: int = 0, timeout: float) -> Delivery:
        """The first delivery at index >= ``start`` matching kind / node / ``where``."""
        try:
            return self._log.wait_delivery(kind, node, where, start, timeout, self._broken, self._error_context)
        except RuntimeError as exc:
            raise LiveRuntimeError(str(exc)) from None

    def _error_context(self) -> str:
        errors = "; ".join(f"{f.node}: {f.error}" for f in self._failures)
        return f"; node failures: {errors}" if errors else ""

    def _setup(self) -> None:
        for slot in self._slot_seq:
            self._open_sockets(slot)

    def _begin(self) -> None:
        for slot in self._slot_seq:
            if slot.node is not None:
                slot.started = True
                self._start_node(slot)

    def _serve(self, sock: Any) -> None:
        own = self._owner.get(sock)
        if own is not None:  # None: closed by a crash earlier in this batch
            self._drain(sock, own)
        else:
            self._taken.pop(sock, None)

    def _earliest_timer(self, earliest: int | None) -> int | None:
        for slot in self._slot_seq:
            at = slot.timer_at
            if at is not None and not slot.paused and (earliest is None or at < earliest):
                earliest = at
        return earliest

    def _tick(self, now: int) -> None:
        trace = self._trace
        if trace is not None:
            # A full row group is written here, between turns: timers that come due meanwhile
            # fire late, and the stall rows credit their nodes, as for any wait of the loop.
            trace.flush_due()
        for slot in self._slot_seq:
            at = slot.timer_at
            if at is None or at > now or slot.node is None or slot.paused:
                continue
            fired = self._clock()  # (``now`` is when this turn began: other nodes' timers may have run since)
            self._held(slot, fired)
            slot.timer_at = slot.timer_node = None
            node = slot.node
            self._input(slot, node, "handle_timer", node.handle_timer, fired)

    def _stalled(self, node: str, now: int, late: int) -> None:
        """The one loop serves every in-process node: one busy handler makes the others' timers
        late. Say so, so that timing checks do not blame a node for the harness's lateness."""
        self.stalls.count += 1
        if late > self.stalls.worst_ns:
            self.stalls.worst_ns, self.stalls.worst_node, self.stalls.worst_at_ns = late, node, now
        if self._trace is not None:
            self._trace.stall(node, now, late)
        for hook in self._stall_hooks:
            hook(node, now, late)

    def _teardown(self) -> None:
        self._close_all_sockets()
        self._log.wake()

    def _after_stop(self, stuck: bool) -> None:
        if not stuck:  # (a stuck handler's thread still holds its sockets: a term would wait for it)
            for slot in self._slot_seq:
                self._end_context(slot, STOP_LINGER_MS)
        if self._trace is not None and not self._trace.closed:
            self._trace.flush()
        self._log.wake()

    # ==== node life cycle (loop thread) =========================================================
    def _context_for(self, slot: Slot) -> NodeContext:
        return NodeContext(slot.name, node_rng(self.seed, slot.name, slot.incarnation), slot.store,
                           dict(slot.config))

    def _open_sockets(self, slot: Slot, bind_retry: float = 0.0) -> None:
        node = slot.node
        if node is None:  # crashed before the runtime started, or starts later
            return
        specs = list(node.sockets())
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise SocketSetupError(f"node {slot.name!r} declares duplicate socket names {names}")
        slot.specs = {s.name: s for s in specs}
        slot.routers = {s.name for s in specs if s.type == SocketType.ROUTER}
        try:
            for spec in specs:
                rebind = {ep: r for (sn, ep), r in slot.resolved.items() if sn == spec.name}
                if slot.ctx is None:
                    slot.ctx = zmq.Context()
                sock, bound = open_socket(slot.ctx, spec, slot.name, rebind, bind_retry, slot.source)
                slot.sockets[spec.name] = sock
                slot.bound[spec.name] = bound
                for ep, r in zip(spec.bind, bound):
                    slot.resolved[(spec.name, ep)] = r
                slot.connected[spec.name] = list(spec.connect)
                slot.peers[spec.name] = ",".join(spec.connect or tuple(bound))
                self._owner[sock] = (slot, spec.name, spec.type == SocketType.ROUTER)
                if not slot.paused:
                    self._poll_items.append((sock, zmq.POLLIN))
        except BaseException:
            self._close_sockets(slot)
            raise

    def _start_node(self, slot: Slot) -> None:
        node = slot.node
        if node is not None:
            slot.notes = {}
            self._input(slot, node, "start", node.start, self._clock())

    def _build_and_start(self, slot: Slot) -> None:
        """The scheduled start of a node added with ``start_at_ns`` (as in the simulator: a
        restart before it already started the node, which then does not start again)."""
        if slot.incarnation > 0 or slot.started:
            return
        try:
            slot.node = slot.factory(self._context_for(slot))
        except Exception as exc:
            self._node_failed(slot, "start", exc)
            return
        self._open_and_start(slot, first=True)

    def _open_and_start(self, slot: Slot, first: bool = False) -> None:
        try:
            # A restart's own closed socket may still hold the port for a moment.
            self._open_sockets(slot, 0.0 if first else BIND_RETRY_S)
        except Exception as exc:
            self._node_failed(slot, "start", exc)
            return
        slot.started = True
        self._start_node(slot)

    def _do_command(self, slot: Slot, request: dict[str, Any]) -> None:
        now = self._clock()
        node = slot.node
        if node is not None and slot.paused:
            slot.waiting.append(request)
            return
        if self._trace is not None:
            self._trace.command(slot.name, now, request, "node-down" if node is None else None)
        if node is not None:
            self._input(slot, node, "command", node.command, request, now)

    def _pause(self, slot: Slot, on: bool) -> None:
        if slot.node is None or slot.paused == on:
            return
        slot.paused = on
        socks = set(slot.sockets.values())
        if on:
            self._poll_items = [item for item in self._poll_items if item[0] not in socks]
            self._row_lifecycle(slot.name, PAUSE)
            return
        self._row_lifecycle(slot.name, RESUME, f"{len(slot.waiting)} commands waiting")
        slot.late_from = max(slot.late_from, self._clock())  # a timer due meanwhile waited for the resume
        self._poll_items.extend((sock, zmq.POLLIN) for sock in slot.sockets.values())
        waiting, slot.waiting = slot.waiting, []
        for request in waiting:
            self._do_command(slot, request)
        for sock, own in list(self._owner.items()):  # what queued in ZeroMQ meanwhile
            if own[0] is slot and slot.node is not None and not slot.paused and sock.type not in SEND_ONLY:
                self._drain(sock, own)

    def _crash(self, slot: Slot, detail: str) -> None:
        if slot.node is None:
            if slot.pending_start is not None:  # a crash while it was coming back: it stays down
                slot.pending_start = None
                self._row_lifecycle(slot.name, CRASH, detail)
            return
        self._close_sockets(slot)
        slot.down_at = self._clock()
        slot.node = None
        slot.crashed = True
        slot.paused = False
        slot.waiting = []
        slot.timer_at = slot.timer_node = None
        self._row_lifecycle(slot.name, CRASH, detail)

    def _restart(self, slot: Slot) -> None:
        """Restart the node; one that is up is crashed first. It comes back no sooner than
        `RESTART_GAP_NS` after its last crash: its peers must see its old connections go before
        its new ones come (see there)."""
        if slot.node is not None:
            self._crash(slot, "crash before restart")
        slot.incarnation += 1
        slot.pending_start = incarnation = slot.incarnation
        now = self._clock()
        at = now if slot.down_at is None else max(now, slot.down_at + RESTART_GAP_NS)
        gap = f" (up {(at - now) / 1e6:.0f} ms later, {RESTART_GAP_NS // 1_000_000} ms after its crash)"
        self._row_lifecycle(slot.name, RESTART, f"incarnation {incarnation}{gap if at > now else ''}")
        if at > now:
            self.schedule(at, lambda: self._come_back(slot, incarnation))
        else:
            self._come_back(slot, incarnation)

    def _come_back(self, slot: Slot, incarnation: int) -> None:
        if slot.pending_start != incarnation:
            return  # crashed or restarted again meanwhile
        slot.pending_start = None
        try:
            slot.node = slot.factory(self._context_for(slot))
        except Exception as exc:
            self._node_failed(slot, "start", exc)
            return
        slot.crashed = False
        self._open_and_start(slot)

    def _node_failed(self, slot: Slot, where: str, exc: BaseException) -> None:
        """The one policy for a node that raised or misbehaved (`harness.runtime`)."""
        failure = failure_of(slot.name, slot.incarnation, self._clock(), where, exc)
        log.error("node %r failed in %s: %s", slot.name, where, failure.error)
        if self._trace is not None:
            self._trace.error(slot.name, failure.time_ns, where, failure.detail)
        self._crash(slot, f"exception in {where} (incarnation {slot.incarnation})")
        # listed once crashed: another thread that sees the failure sees the node down
        self._failures.append(failure)
        for hook in self._failure_hooks:
            try:
                hook(failure)
            except Exception as hook_exc:
                self._harness_failed(hook_exc)
        self._log.wake()

    def _row_lifecycle(self, node: str, kind: str, detail: str | None = None) -> None:
        if self._trace is not None:
            self._trace.lifecycle(node, kind, self._clock(), detail)

    def _close_sockets(self, slot: Slot, linger: int = 0) -> None:
        """Close the node's sockets. With linger 0 (a crash) its context is ended too, which
        returns once libzmq has torn down every connection of the node (`_end_context`)."""
        for sock in slot.sockets.values():
            self._owner.pop(sock, None)
            self._poll_items = [item for item in self._poll_items if item[0] is not sock]
            sock.close(linger=linger)
        slot.sockets.clear()
        slot.bound.clear()
        if linger == 0:
            self._end_context(slot, 0)

    @staticmethod
    def _end_context(slot: Slot, linger: int) -> None:
        """End the node's ZeroMQ context, once its sockets are closed. Each node has its own, so
        that a crash can wait for libzmq to tear the node's connections down before anything
        else closes: libzmq 4.3.5 aborts the whole process ("Resource temporarily unavailable
        (src/session_base.cpp:233)", libzmq issue 3442) when a session whose engine had sent
        part of a multipart message, its pipe torn down by a close with linger 0, loses its TCP
        connection — which is what closing the peer a moment later does. Two connected nodes
        crashed in one loop turn while one streamed to the other (`crash: peers`) aborted so;
        ending the context (``destroy``: its ``term`` after closing what is still open) returns
        only when every session of the context is gone, so the second close finds the first
        node's connections already closed."""
        if slot.ctx is not None:
            # destroy, not term: a socket the runtime lost track of (a harness bug) would make
            # term wait for ever; destroy closes it first, with the linger of the close before
            slot.ctx.destroy(linger=linger)
            slot.ctx = None

    def _close_all_sockets(self) -> None:
        for slot in self._slot_seq:  # (not linger 0: libzmq's abort, STOP_LINGER_MS)
            self._close_sockets(slot, STOP_LINGER_MS)

    def _slot(self, name: str) -> Slot:
        try:
            return self._slots[name]
        except KeyError:
            known = ", ".join(self._order) or "none"
            raise KeyError(f"no node named {name!r} of this process (have: {known})") from None
