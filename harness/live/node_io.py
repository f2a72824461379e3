"""The part of `harness.live.runtime.LiveRuntime` that moves messages: draining a readable
socket into its node, and carrying out the actions a node returns (send, deliver, note,
discard, connect, subscribe), with their trace rows. Runs on the loop thread only.

Kept apart from the runtime's life cycle and scheduling so each module stays readable; the
runtime class inherits it.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Sized
from dataclasses import dataclass, field
from typing import Any, Callable

import zmq

from harness.live.collector_time import CollectorTime
from harness.live.deliveries import DeliveryLog
from harness.live.sockets import from_source, subscribe
from harness.node import (
    Action, Connect, Deliver, Discard, Disconnect, DurableStore, Node, NodeFactory, Note, Send, SocketSpec,
    SocketType, Subscribe, Unsubscribe,
)
from harness.runtime import ActionHook, NodeClock
from harness.trace import CONNECT, DELIVER, DISCONNECT, DROP, NOTE, RECV, SEND, TraceWriter, meta_columns, pack_frames

_NOBLOCK = int(zmq.NOBLOCK)
_MORE = int(zmq.NOBLOCK | zmq.SNDMORE)
# The Cython socket methods, without pyzmq's Python layer: it converts IntFlag/enum options on
# every frame, which costs more than the send or receive itself for small multipart messages.
_base_send = zmq.backend.Socket.send
_base_recv = zmq.backend.Socket.recv
# The loop thread's CPU time: a node's own handling, not the OS's pauses (less the harness
# process's garbage collections, `_collections.spent`, where a handler's own time is taken)
thread_time = time.thread_time_ns

BATCH = 256  # messages drained from one readable socket per wake-up, so no socket starves others


def recv_multipart(sock: zmq.Socket) -> list[bytes]:
    # Frames (copy=False) carry their RCVMORE flag: asking the socket for it instead goes through
    # pyzmq's option enum per frame, ~30% of the receive for a small 3-4 frame message.
    frame = _base_recv(sock, _NOBLOCK, False)
    parts = [frame.bytes]
    while frame.more:
        frame = _base_recv(sock, _NOBLOCK, False)
        parts.append(frame.bytes)
    return parts


def take_queued(sock: zmq.Socket) -> list[list[bytes]]:
    """Every whole message queued on ``sock`` now. Taken before a ``disconnect()``: libzmq 4.3
    aborts the process ("Assertion failed: !_more (src/fq.cpp:80)") when a receive follows the
    disconnect of the pipe whose message's first frame a poll had already fetched (a SUB, XSUB
    or any fair-queued socket; libzmq issue 2163)."""
    out = []
    while True:
        try:
            out.append(recv_multipart(sock))
        except zmq.Again:
            return out


def message_columns(msg_type: str | None, size: int, meta: dict[str, Any] | None) -> tuple[Any, ...]:
    """The trace's MESSAGE_COLUMNS of a live send or receive (no message ids live)."""
    topic, seq, term, index, corr = meta_columns(meta) if meta else (None, None, None, None, None)
    return (msg_type or None, topic, seq, term, index, None, corr, size, None, None, None)


# A node held up this long or longer by the loop is reported (`LiveRuntime.on_stall`); less is
# within every check's tolerance (the loop polls with millisecond timeouts).
STALL_MIN_NS = 2_000_000


@dataclass(eq=False)
class Slot(NodeClock):
    """Everything the runtime keeps about one node name across its incarnations."""

    name: str
    factory: NodeFactory
    role: str
    config: dict[str, Any]
    implementation: str
    store: DurableStore
    node: Node | None = None
    incarnation: int = 0
    started: bool = False
    crashed: bool = False
    paused: bool = False
    # How late its overdue timer is by the harness's doing (`NodeIO._held`, `LiveRuntime.on_stall`):
    late_for: int | None = None  # the deadline (timer_at) being followed
    late_from: int = 0  # lateness not yet reported counts from here (the deadline, a resume, a report)
    waiting: list[dict[str, Any]] = field(default_factory=list)  # commands held while paused
    timer_at: int | None = None  # on the runtime's clock
    timer_node: int | None = None  # the same deadline as the node asked for it, on its own clock
    offset: int = 0  # clock skew (a fault): node time = t + offset + drift * t, t on the runtime's clock
    drift: float = 0.0
    skewed: bool = False
    notes: dict[str, Any] = field(default_factory=dict)  # latest Note data per kind, this incarnation
    specs: dict[str, SocketSpec] = field(default_factory=dict)
    sockets: dict[str, zmq.Socket] = field(default_factory=dict)
    bound: dict[str, list[str]] = field(default_factory=dict)  # socket -> resolved endpoints
    resolved: dict[tuple[str, str], str] = field(default_factory=dict)  # (socket, spec ep) -> ep
    connected: dict[str, list[str]] = field(default_factory=dict)  # socket -> endpoints
    peers: dict[str, str] = field(default_factory=dict)  # socket -> endpoint label for the trace
    routers: set[str] = field(default_factory=set)  # names of ROUTER sockets
    source: str | None = None  # the local address its TCP connections come from (a 127.x address)
    ctx: zmq.Context | None = None  # its own ZeroMQ context while its sockets are open (LiveRuntime._end_context)
    pending_start: int | None = None  # the incarnation a restart will bring up (LiveRuntime._come_back)
    down_at: int | None = None  # when its sockets last closed in a crash, on the runtime's clock


def set_timer(slot: Slot, at: int | None) -> None:
    """Take the deadline a node asked for (on its own clock) as when its timer is due."""
    slot.timer_node = at
    slot.timer_at = None if at is None else slot.runtime_time(at)


class NodeIO:
    """Draining sockets and carrying out actions (see the module docstring)."""

    # Set by LiveRuntime.__init__.
    _trace: TraceWriter | None
    _record: bool
    _log: DeliveryLog
    _hooks: list[ActionHook]
    _collections: CollectorTime  # (set by EventLoop.__init__)

    def _init_io(self) -> None:
        self._handling: int | None = None  # the time of the input a node is handling now (None: none)
        self._handlers: dict[type, Callable[[Slot, Any, int], None]] = {
            Send: self._send, Deliver: self._deliver, Note: self._note, Discard: self._discard,
            Connect: self._connect, Disconnect: self._connect, Subscribe: self._subscribe,
            Unsubscribe: self._subscribe,
        }
        # messages taken off a socket before a disconnect, delivered before it is read again
        self._taken: dict[zmq.Socket, list[list[bytes]]] = {}
        # What the chaos proxy reported and the checks have not seen yet (`catch_up_with`)
        self._reports: Sized | None = None
        self._catch_up: Callable[[], None] = lambda: None

    def catch_up_with(self, reports: Sized, drain: Callable[[], None]) -> None:
        """Have ``drain`` run (on the loop thread) whenever ``reports`` is not empty before an
        in-process node takes a message in. The chaos proxy reports an external node's send
        before it hands the message on, but the loop may read the message before it runs the
        drain posted for the report: the receiver's probe would report the receipt first."""
        self._reports, self._catch_up = reports, drain

    # Provided by LiveRuntime.
    def _node_failed(self, slot: Slot, where: str, exc: BaseException) -> None:
        raise NotImplementedError

    def _clock(self) -> int:
        raise NotImplementedError

    def _stalled(self, node: str, now: int, late: int) -> None:
        raise NotImplementedError

    def input_time(self) -> int:
        """When the input an in-process node is handling now was handed to it (else: now). A
        probe stamps what the node does with it, as the simulator does: the node's decisions, not
        how long the harness took to run them (the OS may stop the process mid-handler)."""
        handling = self._handling
        return handling if handling is not None else self._clock()

    def _harness_failed(self, exc: BaseException) -> None:
        raise NotImplementedError

    def schedule(self, at_ns: int, fn: Callable[[], object]) -> None:
        raise NotImplementedError

    def _serve(self, sock: Any) -> None:
        raise NotImplementedError

    # ---- input -------------------------------------------------------------------------------
    def _drain(self, sock: zmq.Socket, own: tuple[Slot, str, bool]) -> None:
        """Up to BATCH messages of one readable socket into its node, until EAGAIN. The hot
        path of a live run: `_input` unrolled, and the node's timer asked for at the end of the
        batch, and within it whenever `STALL_MIN_NS` has passed since it was last asked (a
        handler that ran long, or the OS stopping the process between two messages): a deadline
        an earlier message set may have come due meanwhile. The node was held from that deadline,
        not from the batch's end; and the loop runs its timer before the next message, as the
        simulator orders them."""
        slot, sname, is_router = own
        node = slot.node
        if node is None:
            return
        receive = node.receive
        trace = self._trace
        clock = self._clock
        apply = self._apply
        reports = self._reports
        collections = self._collections
        taken = self._taken.pop(sock, None) if self._taken else None
        # when the node's timer was last asked for; when its last handler returned, counting only
        # the CPU time it took (the OS may stop the process inside a handler: no lateness of the
        # node's), less the harness's garbage collections in it
        asked = ended = clock()
        self._held(slot, asked)
        for _ in range(BATCH):
            if slot.paused:
                break  # what is still queued waits in ZeroMQ, as for a stopped process
            now = clock()
            if now - asked >= STALL_MIN_NS:
                if not self._ask_timer(slot, node, ended):
                    return
                asked = now
                due = slot.timer_at
                if due is not None and due <= now:
                    break  # its timer first (this turn's `_tick`); the rest waits for the next turn
            try:
                frames = taken.pop(0) if taken else recv_multipart(sock)
            except zmq.Again:
                break
            if reports:  # its sender's send first, and the receipt no earlier
                self._catch_up()
                now = clock()
            self._handling = now
            if trace is not None:
                peer = frames[0].hex() if is_router else slot.peers.get(sname, "")
                trace.emit_message(slot.name, RECV, now, sname, peer, None, None, pack_frames(frames),
                                   message_columns(None, sum(map(len, frames)), None))
            cpu = thread_time() - collections.spent
            try:
                actions = receive(sname, frames, slot.node_time(now) if slot.skewed else now)
                if actions:
                    apply(slot, node, actions, now)
            except Exception as exc:
                self._handling = None
                self._node_failed(slot, "receive", exc)
                return
            if slot.node is not node:
                self._handling = None
                return  # crashed or restarted by a hook
            ended = now + thread_time() - collections.spent - cpu
        if taken:  # (a batch's worth, or the node's timer came first)
            self._taken[sock] = taken + self._taken.get(sock, [])
            # the socket may have nothing more to wake the poll; not due in this turn's timed
            # callbacks, which run before its timers
            self.schedule(clock() + 1, lambda: self._serve(sock))
        self._handling = None
        self._ask_timer(slot, node, ended)

    def _ask_timer(self, slot: Slot, node: Node, since: int, where: str = "receive") -> bool:
        """Take the node's timer (False: asking failed the node, in ``where``). A deadline it set
        since it was last asked, in handlers that had all returned by ``since``, is late from
        ``since`` at the earliest."""
        try:
            set_timer(slot, node.get_timer())
        except Exception as exc:
            self._handling = None
            self._node_failed(slot, where, exc)
            return False
        self._follow(slot, since)
        return True

    def _input(self, slot: Slot, node: Node, where: str, fn: Callable[..., list[Action]], *args: Any) -> None:
        """Hand one input to the node, carry out its actions, ask for its next timer; a node
        that raises or misbehaves is failed (one policy, `harness.runtime`). The last argument is
        the time, on the runtime's clock: the node gets it on its own (skewed) clock, the trace
        and the hooks on the runtime's."""
        try:
            now = args[-1]  # (every caller takes it fresh from the clock)
            self._held(slot, now)
            self._handling = now
            cpu = self._collections.own_cpu()
            actions = fn(*args[:-1], slot.node_time(now))
            if actions:
                self._apply(slot, node, actions, now)
            if slot.node is node:
                self._ask_timer(slot, node, now + self._collections.own_cpu() - cpu, where)
        except Exception as exc:
            self._node_failed(slot, where, exc)
        finally:
            self._handling = None

    def _held(self, slot: Slot, now: int) -> None:
        """The node is handed an input at ``now``, its timer overdue since ``slot.late_from``: it
        could not run that timer until now, the loop (its own handlers included: what a
        reference node costs in Python is no protocol behaviour) being busy. Reported from
        `STALL_MIN_NS` on, as a timer fired late or as an input handled first."""
        due = slot.timer_at
        if due is None or due >= now:
            return
        if slot.late_for != due:  # a deadline set outside a handler (a clock fault): from now on
            slot.late_for, slot.late_from = due, now
        late = now - slot.late_from
        if late >= STALL_MIN_NS:
            self._stalled(slot.name, now, late)
            slot.late_from = now

    def _follow(self, slot: Slot, since: int) -> None:
        """The node's handlers ran, and would have returned by ``since`` had the OS not stopped
        the process (their start plus the CPU time they took, less the harness's garbage
        collections in them), leaving its timer due at
        ``slot.timer_at``. A deadline set anew is late from when it was set at the earliest: a
        deadline already past when its handler returned (one that ran long) is the node's own
        lateness, not the loop's."""
        due = slot.timer_at
        if due is not None and slot.late_for != due:
            slot.late_for, slot.late_from = due, max(due, since)

    # ---- actions -----------------------------------------------------------------------------
    def _apply(self, slot: Slot, node: Node, actions: list[Action], now: int) -> None:
        hooks = self._hooks
        handlers = self._handlers
        for action in actions:
            if slot.node is not node:
                break  # crashed or restarted by a hook in the middle of this batch
            handler = handlers.get(type(action))
            if handler is None:
                raise TypeError(f"node {slot.name!r} returned a non-action: {action!r}")
            handler(slot, action, now)
            if hooks:
                for hook in hooks:  # copied on write (on_action): a hook may add one
                    try:
                        hook(slot.name, action, now)
                    except Exception as exc:  # the harness's own bug: stop the run loudly
                        self._harness_failed(exc)
                        return

    def _send(self, slot: Slot, action: Send, now: int) -> None:
        sock = slot.sockets.get(action.socket)
        if sock is None:
            raise KeyError(f"node {slot.name!r} sent on unknown socket {action.socket!r}")
        frames = action.frames
        fault = None
        try:
            # Frame by frame with plain int flags: pyzmq's send_multipart ORs IntFlag enums per
            # frame, which costs more than the send itself for small messages.
            if frames:
                for f in frames[:-1]:
                    _base_send(sock, f, _MORE)
                _base_send(sock, frames[-1], _NOBLOCK)
        except zmq.Again:
            fault = "hwm"
        except zmq.ZMQError as exc:
            if exc.errno != zmq.EHOSTUNREACH:
                raise
            fault = "unroutable"
        trace = self._trace
        if trace is not None:
            router = action.socket in slot.routers and frames
            peer = frames[0].hex() if router else slot.peers.get(action.socket, "")
            trace.emit_message(slot.name, SEND if fault is None else DROP, now, action.socket, peer, fault, None,
                               pack_frames(frames), message_columns(action.msg_type, sum(map(len, frames)),
                                                                    action.meta))

    def _deliver(self, slot: Slot, action: Deliver, now: int) -> None:
        if self._trace is not None:
            self._trace.delivery(slot.name, DELIVER, now, action.kind, action.data)
        if self._record:
            self._log.append(slot.name, action.kind, action.data, now)

    def _note(self, slot: Slot, action: Note, now: int) -> None:
        slot.notes[action.kind] = action.data  # symbolic fault targets ask for the latest
        if self._trace is not None:
            self._trace.delivery(slot.name, NOTE, now, action.kind, action.data)

    def _discard(self, slot: Slot, action: Discard, now: int) -> None:
        if self._trace is not None:
            self._trace.discard(slot.name, now, action.socket, sum(map(len, action.frames)), action.clause or None,
                                action.reason, pack_frames(action.frames))

    def _connect(self, slot: Slot, action: Connect | Disconnect, now: int) -> None:
        sock = self._socket(slot, action.socket)
        if type(action) is Connect:
            sock.connect(from_source(action.endpoint, slot.source))
            kind = CONNECT
        else:
            if sock.type not in (zmq.PUB, zmq.PUSH):
                queued = take_queued(sock)  # (libzmq's abort, take_queued)
                if queued:
                    self._taken.setdefault(sock, []).extend(queued)
                    self.schedule(0, lambda: self._serve(sock))
            try:
                sock.disconnect(from_source(action.endpoint, slot.source))
            except zmq.ZMQError as exc:
                if exc.errno != errno.ENOENT:  # not connected there: nothing to undo
                    raise
            kind = DISCONNECT
        self._update_peer_label(slot, action.socket, action.endpoint, kind == CONNECT)
        if self._trace is not None:
            self._trace.connection(slot.name, kind, now, action.socket, action.endpoint, action.endpoint)

    def _subscribe(self, slot: Slot, action: Subscribe | Unsubscribe, now: int) -> None:
        on = type(action) is Subscribe
        sock = self._socket(slot, action.socket)
        subscribe(sock, SocketType(slot.specs[action.socket].type), action.topic, on)
        if self._trace is not None:
            self._trace.subscription(slot.name, "subscribe" if on else "unsubscribe", now, action.socket,
                                     action.topic)

    def _update_peer_label(self, slot: Slot, socket: str, endpoint: str, add: bool) -> None:
        connected = slot.connected.setdefault(socket, [])
        if add:
            connected.append(endpoint)
        elif endpoint in connected:
            connected.remove(endpoint)
        slot.peers[socket] = ",".join(connected or slot.bound.get(socket, ()))

    def _socket(self, slot: Slot, name: str) -> zmq.Socket:
        sock = slot.sockets.get(name)
        if sock is None:
            raise KeyError(f"node {slot.name!r} has no socket {name!r}")
        return sock
