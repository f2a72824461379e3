"""LiveRuntime: sans-IO nodes over real pyzmq sockets, all in one event-loop thread.

The loop thread owns every socket (ZeroMQ sockets are not thread-safe). Other threads talk to
it only through `call` (a queue plus a wake-up pipe the poller watches): commands, crashes,
restarts and late `add_node`s all go that way. Node clock and trace time are both nanoseconds
since `start()` on `time.monotonic_ns`.

A node that raises is traced (a "note" row with the traceback, then a "crash" row), recorded in
`errors`, and taken down like a crash; the other nodes keep running. `restart` brings it back.

`pause` stops a node the way SIGSTOP stops a process, without a process: the loop stops reading
its sockets (messages wait in ZeroMQ's queues, up to the high-water mark, then in the kernel's
buffers), firing its timer and handing it commands (they wait, in order); `resume` hands it
what waited. A node given a ``source`` address connects from it (``tcp://SOURCE:0;HOST:PORT``),
so a proxy in front of the endpoint can tell who connected.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import random
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

import zmq

_NOBLOCK = int(zmq.NOBLOCK)
_MORE = int(zmq.NOBLOCK | zmq.SNDMORE)
_RCVMORE = int(zmq.RCVMORE)
# The Cython socket methods, without pyzmq's Python layer: it converts IntFlag/enum options on
# every frame, which costs more than the send or receive itself for small multipart messages.
_base_send = zmq.backend.Socket.send
_base_recv = zmq.backend.Socket.recv
_base_get = zmq.backend.Socket.get


def _recv_multipart(sock: zmq.Socket) -> list[bytes]:
    parts = [_base_recv(sock, _NOBLOCK)]
    while _base_get(sock, _RCVMORE):
        parts.append(_base_recv(sock, _NOBLOCK))
    return parts

from harness.live import rows
from harness.live.deliveries import Delivery, DeliveryLog, NodeError
from harness.live.sockets import BIND_RETRY_S, SocketSetupError, from_source, open_socket, subscribe
from harness.node import (
    Action, Connect, Deliver, Discard, Disconnect, DurableStore, Node, NodeContext, NodeFactory,
    Note, Send, SocketSpec, SocketType, Subscribe, Unsubscribe,
)
from harness.trace import (
    COMMAND, CRASH, DELIVER, DISCARD, DROP, NOTE, PAUSE, RECV, RESTART, RESUME, SEND, TraceWriter, pack_data,
    pack_frames,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
ActionHook = Callable[[str, Action, int], None]  # (node name, action, time_ns)

BATCH = 256  # messages drained from one readable socket per wake-up, so no socket starves others
START_TIMEOUT_S = 10.0


class LiveRuntimeError(RuntimeError):
    """The runtime itself failed (not a node): setup error, dead loop, misuse."""


@dataclass(eq=False)
class _Slot:
    """Everything the runtime keeps about one node name across its incarnations."""

    name: str
    factory: NodeFactory
    role: str
    config: dict[str, Any]
    implementation: str
    store: DurableStore
    node: Node | None = None
    incarnation: int = 0
    crashed: bool = False
    timer_at: int | None = None
    specs: dict[str, SocketSpec] = field(default_factory=dict)
    sockets: dict[str, zmq.Socket] = field(default_factory=dict)
    bound: dict[str, list[str]] = field(default_factory=dict)  # socket -> resolved endpoints
    resolved: dict[tuple[str, str], str] = field(default_factory=dict)  # (socket, spec ep) -> ep
    connected: dict[str, list[str]] = field(default_factory=dict)  # socket -> endpoints
    peers: dict[str, str] = field(default_factory=dict)  # socket -> endpoint label for the trace
    routers: set[str] = field(default_factory=set)  # names of ROUTER sockets
    source: str | None = None  # address its TCP connections come from
    paused: bool = False
    backlog: deque[dict[str, Any]] = field(default_factory=deque)  # commands that came while paused


class LiveRuntime:
    def __init__(
        self,
        trace: TraceWriter | None = None,
        *,
        seed: int = 0,
        context: zmq.Context | None = None,
        record_deliveries: bool = True,
    ) -> None:
        self._trace = trace
        self.seed = seed
        self._own_ctx = context is None
        self._ctx = context if context is not None else zmq.Context()
        self._record = record_deliveries
        self._slots: dict[str, _Slot] = {}
        self._owner: dict[zmq.Socket, tuple[_Slot, str, bool]] = {}  # -> (slot, name, is_router)
        self._poll_items: list[tuple[Any, int]] = []
        self._hooks: list[ActionHook] = []
        self._calls: deque[tuple[Callable[[], Any], Future | None]] = deque()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._log = DeliveryLog()
        self._errors: list[NodeError] = []
        self._fatal: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._setup_error: BaseException | None = None
        self._stopping = False
        self._stopped = False
        self._t0 = time.monotonic_ns()

    # ---- setup ----------------------------------------------------------------------------

    def add_node(
        self,
        name: str,
        factory: NodeFactory,
        *,
        role: str,
        config: dict[str, Any] | None = None,
        implementation: str = "reference",
        source: str | None = None,
    ) -> Node:
        """Build a node now; its sockets are created at `start` (or at once if running).
        ``source``: the local address its TCP connections come from (a 127.x address)."""
        if name in self._slots:
            raise ValueError(f"node name {name!r} is already in use")
        if self._stopped:
            raise LiveRuntimeError("runtime is stopped")
        slot = _Slot(name, factory, role, dict(config or {}), implementation, DurableStore(), source=source)
        slot.node = factory(self._context_for(slot))
        self._slots[name] = slot
        if self._trace is not None:
            self._trace.register_node(name, role, implementation)
        if self.running:
            try:
                self.call(lambda: self._open_sockets(slot))
            except BaseException:
                del self._slots[name]
                raise
            self.call(lambda: self._start_node(slot))
        return slot.node

    def set_trace(self, trace: TraceWriter) -> None:
        """Attach a trace writer before `start` (e.g. once the protocol of a node is known)."""
        if self._thread is not None:
            raise LiveRuntimeError("set_trace must come before start()")
        self._trace = trace
        for slot in self._slots.values():
            trace.register_node(slot.name, slot.role, slot.implementation)

    def on_action(self, callback: ActionHook) -> ActionHook:
        """Call ``callback(node, action, time_ns)`` on the loop thread for every Send (carried
        out or dropped), Deliver, Discard and Note. A hook that raises is recorded in `errors`
        and removed."""
        self._hooks.append(callback)
        return callback

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Create and bind every socket, start every node, run the loop in a thread. Raises
        `SocketSetupError` (nothing left running) if a socket cannot be set up."""
        if self._stopped:
            raise LiveRuntimeError("runtime is stopped")
        if self._thread is not None:
            raise LiveRuntimeError("start() called twice")
        self._t0 = time.monotonic_ns()
        self._thread = threading.Thread(target=self._run, name="zmq-harness-live", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            self.stop()
            raise LiveRuntimeError(f"runtime did not start within {timeout}s")
        if self._setup_error is not None:
            error = self._setup_error
            self.stop()
            raise error

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop, close every socket with linger 0, terminate an owned context and flush
        the trace (the caller still owns and closes it). Idempotent."""
        if self._stopped:
            return
        thread = self._thread
        if thread is threading.current_thread():
            self._stopping = True  # from a hook or call: the loop ends; a later stop() cleans up
            return
        self._stopped = True
        self._stopping = True
        stuck = False
        if thread is not None:
            self._wake()
            thread.join(timeout)
            stuck = thread.is_alive()
        elif thread is None:
            self._close_all_sockets()
        if stuck:
            # A node is stuck inside a handler; its sockets belong to that thread, so leave
            # them (and the context) alone rather than crash the process.
            log.error("live runtime loop did not stop within %ss", timeout)
        else:
            if self._own_ctx:
                self._ctx.term()
            wake_r, wake_w = self._wake_r, self._wake_w
            self._wake_r = self._wake_w = -1  # a closed fd number may be reused: never write it
            os.close(wake_r)
            os.close(wake_w)
        if self._trace is not None and not self._trace.closed:
            self._trace.flush()
        self._log.wake()
        if stuck:
            raise LiveRuntimeError(f"live runtime loop did not stop within {timeout}s")

    def __enter__(self) -> "LiveRuntime":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ---- talking to the loop from any thread --------------------------------------------------

    @property
    def running(self) -> bool:
        t = self._thread
        return t is not None and t.is_alive() and self._ready.is_set() and not self._stopping

    def call(self, fn: Callable[[], T], timeout: float = 5.0) -> T:
        """Run ``fn`` on the loop thread and return its result (or raise its exception). Before
        `start` and after `stop` it runs in the caller's thread: no loop owns the sockets then."""
        if threading.current_thread() is self._thread or not self.running:
            return fn()
        fut: Future = Future()
        self._calls.append((fn, fut))
        self._wake()
        return fut.result(timeout)

    def command(self, node: str, request: dict[str, Any]) -> None:
        """Hand ``request`` to ``node.command`` on the loop thread; returns at once. A command
        sent before `start` waits for it."""
        slot = self._slot(node)
        self._calls.append((lambda: self._do_command(slot, request), None))
        self._wake()

    def crash(self, node: str, timeout: float = 5.0) -> None:
        """Close the node's sockets and throw the object away (its DurableStore survives)."""
        slot = self._slot(node)
        self.call(lambda: self._crash(slot, "crash"), timeout)

    def restart(self, node: str, timeout: float = 5.0) -> None:
        """Rebuild the node from its factory with the same store, reopen its sockets on the same
        endpoints and start it. A node that is still up is crashed first."""
        slot = self._slot(node)
        self.call(lambda: self._restart(slot), timeout)

    def pause(self, node: str, timeout: float = 5.0) -> None:
        """Stop handing the node anything (see the module docstring); its sockets stay open."""
        slot = self._slot(node)
        self.call(lambda: self._pause(slot), timeout)

    def resume(self, node: str, timeout: float = 5.0) -> None:
        """Hand a paused node what waited (commands in order; messages from its sockets)."""
        slot = self._slot(node)
        self.call(lambda: self._resume(slot), timeout)

    # ---- observing ------------------------------------------------------------------------------

    def node(self, name: str) -> Node | None:
        """The current node object (None while crashed). Read it from the loop thread, or
        only for things that are safe to read racily."""
        return self._slot(name).node

    def node_names(self) -> list[str]:
        return list(self._slots)

    def is_crashed(self, name: str) -> bool:
        return self._slot(name).crashed

    def is_paused(self, name: str) -> bool:
        return self._slot(name).paused

    def connected(self, name: str) -> dict[str, list[str]]:
        """Endpoints each socket of the node connects to, as the node named them."""
        return {k: list(v) for k, v in self._slot(name).connected.items()}

    def store(self, name: str) -> DurableStore:
        return self._slot(name).store

    def endpoints(self, name: str) -> dict[str, list[str]]:
        """Bound endpoints per socket, as resolved (wildcard ports filled in)."""
        return {k: list(v) for k, v in self._slot(name).bound.items()}

    @property
    def errors(self) -> list[NodeError]:
        return list(self._errors)

    @property
    def deliveries(self) -> list[Delivery]:
        return self._log.snapshot()

    def now(self) -> int:
        """Trace/node time: ns since `start`."""
        return time.monotonic_ns() - self._t0

    def wait_for(
        self, predicate: Callable[[list[Delivery]], bool], timeout: float
    ) -> list[Delivery]:
        """Block until ``predicate(deliveries)`` is true (it runs under a lock on the live list:
        keep it quick and read-only). Returns a copy of the deliveries. Raises TimeoutError
        (naming any node errors), or LiveRuntimeError at once if the loop has ended."""
        try:
            return self._log.wait_for(predicate, timeout, self._broken, self._error_context)
        except RuntimeError as exc:
            raise LiveRuntimeError(str(exc)) from None

    def wait_delivery(
        self,
        kind: str | None = None,
        *,
        node: str | None = None,
        where: Callable[[Delivery], bool] | None = None,
        start: int = 0,
        timeout: float,
    ) -> Delivery:
        """The first delivery at index >= ``start`` matching kind / node / ``where``."""
        try:
            return self._log.wait_delivery(kind, node, where, start, timeout, self._broken,
                                           self._error_context)
        except RuntimeError as exc:
            raise LiveRuntimeError(str(exc)) from None

    def _broken(self) -> str | None:
        if self._fatal is not None:
            return f"live runtime loop died: {self._fatal!r}"
        t = self._thread
        if t is not None and self._ready.is_set() and not t.is_alive():
            return "live runtime is not running"
        return None

    def _error_context(self) -> str:
        errors = "; ".join(f"{e.node}: {e.error}" for e in self._errors)
        return f"; node errors: {errors}" if errors else ""

    # ---- the loop -------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._poll_items.append((self._wake_r, zmq.POLLIN))
            for slot in list(self._slots.values()):
                self._open_sockets(slot)
        except BaseException as exc:  # setup errors go back to start()
            self._setup_error = exc
            self._close_all_sockets()
            self._ready.set()
            return
        try:
            for slot in list(self._slots.values()):
                self._start_node(slot)
            self._ready.set()  # start() returns once every node has started
            self._loop()
        except BaseException as exc:  # a bug in the runtime itself: make it loud
            log.exception("live runtime loop died")
            self._fatal = exc
            self._errors.append(NodeError("", "runtime", repr(exc), rows.exception_summary(exc)))
        finally:
            self._ready.set()
            self._close_all_sockets()
            self._fail_pending_calls()
            self._log.wake()

    def _loop(self) -> None:
        owner = self._owner
        poll = zmq.zmq_poll
        clock = time.monotonic_ns
        while not self._stopping:
            events = poll(self._poll_items, self._poll_timeout())
            for sock, _ in events:
                if type(sock) is int:
                    self._run_calls()
                else:
                    own = owner.get(sock)
                    if own is not None:  # None: closed by a crash earlier in this batch
                        self._drain(sock, own)
                if self._stopping:
                    return
            self._fire_timers(clock() - self._t0)

    def _poll_timeout(self) -> int:
        earliest = None
        for slot in self._slots.values():
            at = slot.timer_at
            if at is not None and not slot.paused and (earliest is None or at < earliest):
                earliest = at
        if self._calls:
            return 0
        if earliest is None:
            return -1
        wait_ns = earliest - (time.monotonic_ns() - self._t0)
        return 0 if wait_ns <= 0 else math.ceil(wait_ns / 1_000_000)

    def _drain(self, sock: zmq.Socket, own: tuple[_Slot, str, bool]) -> None:
        slot, sname, is_router = own
        if slot.paused:
            return  # paused earlier in this batch of events
        node = slot.node
        trace = self._trace
        clock = time.monotonic_ns
        t0 = self._t0
        for _ in range(BATCH):
            try:
                frames = _recv_multipart(sock)
            except zmq.Again:
                return
            now = clock() - t0
            if trace is not None:
                trace.emit(
                    slot.name, RECV, now, sname,
                    peer=frames[0].hex() if is_router else slot.peers.get(sname, ""),
                    size=sum(map(len, frames)), frames=pack_frames(frames),
                )
            try:
                actions = node.receive(sname, frames, now)  # type: ignore[union-attr]
                if actions:
                    self._apply(slot, actions, now)
                if slot.node is node:
                    slot.timer_at = node.get_timer()  # type: ignore[union-attr]
            except Exception as exc:
                self._node_failed(slot, "receive", exc)
                return
            if slot.node is not node:
                return

    def _fire_timers(self, now: int) -> None:
        for slot in list(self._slots.values()):
            at = slot.timer_at
            if at is None or at > now or slot.node is None or slot.paused:
                continue
            slot.timer_at = None
            node = slot.node
            try:
                actions = node.handle_timer(now)
                if actions:
                    self._apply(slot, actions, now)
                if slot.node is node:
                    slot.timer_at = node.get_timer()
            except Exception as exc:
                self._node_failed(slot, "handle_timer", exc)

    def _run_calls(self) -> None:
        try:
            os.read(self._wake_r, 65536)
        except BlockingIOError:
            pass
        calls = self._calls
        while calls:
            fn, fut = calls.popleft()
            if fut is None:
                fn()  # internal calls (commands) handle their own errors
                continue
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn())
            except BaseException as exc:
                fut.set_exception(exc)

    def _fail_pending_calls(self) -> None:
        while self._calls:
            _, fut = self._calls.popleft()
            if fut is not None and fut.set_running_or_notify_cancel():
                fut.set_exception(LiveRuntimeError("runtime stopped before the call ran"))

    def _wake(self) -> None:
        fd = self._wake_w
        if fd < 0:
            return
        try:
            os.write(fd, b"\0")
        except (BlockingIOError, OSError):
            pass  # pipe full: a wake-up is already pending; closed: the loop is gone

    # ---- carrying out actions ----------------------------------------------------------------

    def _apply(self, slot: _Slot, actions: list[Action], now: int) -> None:
        hooks = self._hooks
        for action in actions:
            kind = type(action)
            if kind is Send:
                self._send(slot, action, now)  # type: ignore[arg-type]
            elif kind is Deliver:
                self._deliver(slot, action, now)  # type: ignore[arg-type]
            elif kind is Discard:
                self._discard(slot, action, now)  # type: ignore[arg-type]
            elif kind is Note:
                if self._trace is not None:
                    self._trace.emit(slot.name, NOTE, now, msg_type=action.kind,  # type: ignore[union-attr]
                                     data=pack_data(action.data))  # type: ignore[union-attr]
            elif kind is Connect or kind is Disconnect:
                self._connect(slot, action, now)  # type: ignore[arg-type]
            elif kind is Subscribe or kind is Unsubscribe:
                sock = self._socket(slot, action.socket)  # type: ignore[union-attr]
                subscribe(sock, SocketType(slot.specs[action.socket].type),  # type: ignore[union-attr]
                          action.topic, kind is Subscribe)  # type: ignore[union-attr]
                if self._trace is not None:
                    self._trace.emit(slot.name, "subscribe" if kind is Subscribe else "unsubscribe",
                                     now, action.socket,  # type: ignore[union-attr]
                                     topic=rows.as_text(action.topic))  # type: ignore[union-attr]
            else:
                raise TypeError(f"node {slot.name!r} returned a non-action: {action!r}")
            if hooks and kind in _HOOKED:
                self._call_hooks(slot, action, now)

    def _send(self, slot: _Slot, action: Send, now: int) -> None:
        sock = slot.sockets.get(action.socket)
        if sock is None:
            raise KeyError(f"node {slot.name!r} sent on unknown socket {action.socket!r}")
        frames = action.frames
        fault = None
        try:
            # Frame by frame with plain int flags: pyzmq's send_multipart ORs IntFlag enums per
            # frame, which costs more than the send itself for small messages.
            last = len(frames) - 1
            for k, f in enumerate(frames):
                _base_send(sock, f, _MORE if k < last else _NOBLOCK)
        except zmq.Again:
            fault = "hwm"
        except zmq.ZMQError as exc:
            if exc.errno != zmq.EHOSTUNREACH:
                raise
            fault = "unroutable"
        trace = self._trace
        if trace is not None:
            extra = rows.meta_columns(action.meta) if action.meta else {}
            router = action.socket in slot.routers and frames
            trace.emit(
                slot.name, SEND if fault is None else DROP, now, action.socket,
                msg_type=action.msg_type or None,
                peer=frames[0].hex() if router else slot.peers.get(action.socket, ""),
                size=sum(map(len, frames)), fault=fault, frames=pack_frames(frames), **extra,
            )

    def _deliver(self, slot: _Slot, action: Deliver, now: int) -> None:
        if self._trace is not None:
            extra = rows.meta_columns(action.data)
            self._trace.emit(slot.name, DELIVER, now, msg_type=action.kind,
                             data=pack_data(action.data), **extra)
        if self._record:
            self._log.append(slot.name, action.kind, action.data, now)

    def _discard(self, slot: _Slot, action: Discard, now: int) -> None:
        if self._trace is not None:
            self._trace.emit(
                slot.name, DISCARD, now, action.socket, size=sum(map(len, action.frames)),
                clause=action.clause or None, detail=action.reason,
                frames=pack_frames(action.frames),
            )

    def _connect(self, slot: _Slot, action: Connect | Disconnect, now: int) -> None:
        sock = self._socket(slot, action.socket)
        if type(action) is Connect:
            sock.connect(from_source(action.endpoint, slot.source))
            kind = "connect"
        else:
            try:
                sock.disconnect(from_source(action.endpoint, slot.source))
            except zmq.ZMQError as exc:
                if exc.errno != errno.ENOENT:  # not connected there: nothing to undo
                    raise
            kind = "disconnect"
        self._update_peer_label(slot, action.socket, action.endpoint, kind == "connect")
        if self._trace is not None:
            self._trace.emit(slot.name, kind, now, action.socket, peer=action.endpoint)

    def _update_peer_label(self, slot: _Slot, socket: str, endpoint: str, add: bool) -> None:
        connected = slot.connected.setdefault(socket, [])
        if add:
            connected.append(endpoint)
        elif endpoint in connected:
            connected.remove(endpoint)
        slot.peers[socket] = ",".join(connected or slot.bound.get(socket, ()))

    def _call_hooks(self, slot: _Slot, action: Action, now: int) -> None:
        for hook in list(self._hooks):
            try:
                hook(slot.name, action, now)
            except Exception as exc:
                self._hooks.remove(hook)
                self._record_error(slot.name, "hook", exc)

    def _socket(self, slot: _Slot, name: str) -> zmq.Socket:
        sock = slot.sockets.get(name)
        if sock is None:
            raise KeyError(f"node {slot.name!r} has no socket {name!r}")
        return sock

    # ---- node lifecycle (loop thread) -----------------------------------------------------------

    def _context_for(self, slot: _Slot) -> NodeContext:
        label = f"{self.seed}/{slot.name}"
        if slot.incarnation:
            label += f"/{slot.incarnation}"
        return NodeContext(slot.name, random.Random(label), slot.store, dict(slot.config))

    def _open_sockets(self, slot: _Slot, bind_retry: float = 0.0) -> None:
        node = slot.node
        if node is None:  # crashed before the runtime started
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
                sock, bound = open_socket(self._ctx, spec, slot.name, rebind, bind_retry, slot.source)
                slot.sockets[spec.name] = sock
                slot.bound[spec.name] = bound
                for ep, r in zip(spec.bind, bound):
                    slot.resolved[(spec.name, ep)] = r
                slot.connected[spec.name] = list(spec.connect)
                slot.peers[spec.name] = ",".join(spec.connect or tuple(bound))
                self._owner[sock] = (slot, spec.name, spec.type == SocketType.ROUTER)
                self._poll_items.append((sock, zmq.POLLIN))
        except BaseException:
            self._close_sockets(slot)
            raise

    def _start_node(self, slot: _Slot) -> None:
        node = slot.node
        if node is None:
            return
        now = self.now()
        try:
            actions = node.start(now)
            if actions:
                self._apply(slot, actions, now)
            if slot.node is node:
                slot.timer_at = node.get_timer()
        except Exception as exc:
            self._node_failed(slot, "start", exc)

    def _open_and_start(self, slot: _Slot) -> None:
        try:
            self._open_sockets(slot, BIND_RETRY_S)  # our own closed socket may still hold the port
        except Exception as exc:
            self._node_failed(slot, "restart", exc)
            return
        self._start_node(slot)

    def _do_command(self, slot: _Slot, request: dict[str, Any]) -> None:
        if slot.paused:
            slot.backlog.append(request)
            return
        now = self.now()
        node = slot.node
        if self._trace is not None:
            self._trace.emit(slot.name, COMMAND, now, data=pack_data(request),
                             corr=rows.as_text(request["corr"]) if "corr" in request else None,
                             fault="node-down" if node is None else None)
        if node is None:
            return
        try:
            actions = node.command(request, now)
            if actions:
                self._apply(slot, actions, now)
            if slot.node is node:
                slot.timer_at = node.get_timer()
        except Exception as exc:
            self._node_failed(slot, "command", exc)

    def _pause(self, slot: _Slot) -> None:
        if slot.node is None or slot.paused:
            return
        slot.paused = True
        socks = set(slot.sockets.values())
        self._poll_items = [item for item in self._poll_items if item[0] not in socks]
        if self._trace is not None:
            self._trace.emit(slot.name, PAUSE, self.now(), fault="pause")

    def _resume(self, slot: _Slot) -> None:
        if not slot.paused:
            return
        slot.paused = False
        self._poll_items.extend((sock, zmq.POLLIN) for sock in slot.sockets.values())
        if self._trace is not None:
            self._trace.emit(slot.name, RESUME, self.now(), fault="resume", detail=f"{len(slot.backlog)} waiting")
        while slot.backlog and not slot.paused and slot.node is not None:
            self._do_command(slot, slot.backlog.popleft())

    def _crash(self, slot: _Slot, detail: str) -> None:
        if slot.node is None and slot.crashed:
            return
        slot.paused = False
        slot.backlog.clear()
        self._close_sockets(slot)
        slot.node = None
        slot.crashed = True
        slot.timer_at = None
        if self._trace is not None:
            self._trace.emit(slot.name, CRASH, self.now(), detail=detail)

    def _restart(self, slot: _Slot) -> None:
        if slot.node is not None:
            self._crash(slot, "crash before restart")
        slot.incarnation += 1
        try:
            slot.node = slot.factory(self._context_for(slot))
        except Exception as exc:
            self._node_failed(slot, "restart", exc)
            return
        slot.crashed = False
        if self._trace is not None:
            self._trace.emit(slot.name, RESTART, self.now(), detail=f"incarnation {slot.incarnation}")
        self._open_and_start(slot)

    def _node_failed(self, slot: _Slot, where: str, exc: Exception) -> None:
        self._record_error(slot.name, where, exc)
        if self._trace is not None:
            self._trace.emit(slot.name, NOTE, self.now(), msg_type="exception",
                             detail=f"in {where}: {rows.exception_summary(exc)}")
        slot.crashed = False  # let _crash run even if the node object is already gone
        self._crash(slot, f"exception in {where}")

    def _record_error(self, node: str, where: str, exc: BaseException) -> None:
        err = NodeError(node, where, f"{type(exc).__name__}: {exc}", rows.exception_summary(exc))
        self._errors.append(err)
        log.error("node %r raised in %s: %s", node, where, err.error)
        self._log.wake()

    def _close_sockets(self, slot: _Slot) -> None:
        for sock in slot.sockets.values():
            self._owner.pop(sock, None)
            self._poll_items = [item for item in self._poll_items if item[0] is not sock]
            sock.close(linger=0)
        slot.sockets.clear()
        slot.bound.clear()

    def _close_all_sockets(self) -> None:
        for slot in self._slots.values():
            self._close_sockets(slot)

    def _slot(self, name: str) -> _Slot:
        try:
            return self._slots[name]
        except KeyError:
            raise KeyError(f"no node named {name!r} (have: {', '.join(self._slots) or 'none'})") from None


_HOOKED = frozenset((Send, Deliver, Discard, Note))
