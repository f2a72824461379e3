"""The traffic of external nodes, as the chaos proxy saw it, for the run's checkers and trace.

External nodes (groups with a ``command``) run no probe: their side of what they send and get is
seen only by the ZMTP chaos proxy between them and their peers (`fault_injection.observe`); of a
message between an external node and one the harness runs, only the external side is passed on
(the other is its probe's), before the receiver's probe reports its receipt
(`LiveRuntime.catch_up_with`). `ObservedTraffic` takes the
proxy's `Seen` reports and presents each as a probe would: a ``send`` event of the sender when
the proxy read the message, a ``recv`` event of the receiver for each copy the proxy handed on
(none for a message a rule dropped or a partition lost), with the socket's name, its frames as
the application hands them over or gets them (a ROUTER's routing id in front), and the message
type, and in its data the other node (``peer``) and the proxy's number of the connection
(``connection``). A subscription an external node's socket sent on a connection becomes a ``subscribe`` (or
``unsubscribe``) event of that node, as a probe reports a node's ``Subscribe``, with the prefix,
the peer and the proxy's connection number in its data; one that reached an external node's
XPUB, from any node, a receipt of that XPUB (the ``\x01``/``\x00`` message its application
gets). The events go to the run's `Observer`
and rows to its trace, on the runtime's loop thread (reports are queued by the proxy's thread
and drained there in the order the proxy saw them), so
checkers see them in one time order with the in-process nodes' events. Their time is the
runtime's clock when they are drained: a few hundred microseconds after the proxy saw them, never
before an event that came earlier.

An external node's sockets are named by their ZMTP socket type (``router``, ``pub``, ``sub``); a
connecting socket that talks to one peer (a DEALER, a REQ) is named after the node it connects to
(``dealer:peers.1``), since a node has one such socket per peer. The sockets are declared to the
checkers as they appear (the wire check reads a node's messages by its socket types).

Time and order: on one connection the proxy sees a node's messages in the order the node sent
them. Across two connections it need not: the proxy sees a message when it leaves the node, and
ZeroMQ holds a message for a peer that is not connected (yet, or again) until it is, so a message
handed over first may cross the wire much later. The time the proxy reads a message bounds when
the node sent it from above only; the time it hands a message on bounds when the node took it in
from below. Events carry ``via="proxy"``; a checker that orders one node's messages in time uses
only what these make certain: the order within one connection, and an answer after its request
was handed on (Raft's term-update).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Callable

from fault_injection.observe import SEEN_SEND, SUBSCRIBED, UNSUBSCRIBED, Seen
from harness.checkers.base import RECV, SEND, SUBSCRIBE, UNSUBSCRIBE, VIA_PROXY, Observer, Verdict
from harness.node import SocketSpec, SocketType
from harness.protocols.codec import Codec
from harness.trace import TraceWriter, pack_frames

MAX_QUEUED = 100_000  # reports waiting for the loop before the proxy is held back
BEHIND_WAIT_S = 2.0  # how long it is held back at most before observation stops
FAN_TYPES = frozenset({"ROUTER", "PUB", "XPUB", "SUB", "XSUB"})  # sockets that talk to many peers as one


def socket_name(seen_name: str, own_type: str, binds: bool, other: str) -> str:
    """The name an external node's socket gets in events and the trace (see the module docstring)."""
    if seen_name:
        return seen_name
    kind = own_type.lower() or "socket"
    return kind if binds or own_type in FAN_TYPES else f"{kind}:{other}"


class ObservedTraffic:
    """See the module docstring. ``runtime``: the live runtime (``post``, ``now_ns``)."""

    def __init__(self, runtime: Any, observer: Observer | None, trace: TraceWriter | None,
                 record_frames: bool = True,
                 notes: tuple[Codec, Callable[[Codec, list[bytes]], list[tuple[str, dict[str, Any]]]]] | None = None,
                 external: frozenset[str] | None = None) -> None:
        """``notes``: the run's codec and its package's ``wire_notes``: what a node's sends say
        about it goes to the runtime (``note_observed``), for symbolic fault targets.
        ``external``: the nodes whose side of a message is passed on (None: every node's); the
        other side of a message between an external node and one the harness runs is its probe's."""
        self.runtime = runtime
        self.external = external
        self.notes = notes
        self.observer = observer
        self.trace = trace
        self.record_frames = record_frames
        self.sends = 0  # reported to the checkers
        self.receives = 0
        self.subscriptions = 0  # (un)subscriptions reported
        self.after_end = 0  # reports that came after the checks were judged (not fed)
        self.overflowed = False  # the loop fell too far behind: observation stopped (see push)
        self.by_node: dict[str, int] = {}  # messages sent, per external node
        self._queue: deque[Seen] = deque()
        self._posted = False
        self._closed = False
        self._lock = threading.Lock()
        self._sockets: dict[str, dict[str, SocketSpec]] = {}  # node -> declared sockets
        self._declared: set[tuple[str, str, str, bool, str]] = set()  # (node, socket, type, binds, endpoint) seen

    # ---- the proxy's thread ------------------------------------------------------------------
    def push(self, seen: Seen) -> None:
        """From the proxy's thread: queue the report, and have the loop drain the queue. A loop
        that falls `MAX_QUEUED` reports behind holds the proxy back (and with it the senders, as a
        slow network would) for at most `BEHIND_WAIT_S`; then observation stops for the rest of
        the run (what was seen until then is judged: a prefix of the traffic, every message in it
        with its receives) and a failing ``observation-complete`` verdict says so."""
        if self.overflowed:
            return
        queue = self._queue
        if len(queue) >= MAX_QUEUED:
            deadline = time.monotonic() + BEHIND_WAIT_S
            while len(queue) >= MAX_QUEUED // 2 and time.monotonic() < deadline:
                time.sleep(0.001)
            if len(queue) >= MAX_QUEUED // 2:
                self.overflowed = True
                return
        queue.append(seen)
        with self._lock:
            if self._posted:
                return
            self._posted = True
        self.runtime.post(self.drain)

    @property
    def pending(self) -> deque[Seen]:
        """The reports the loop has not drained yet (`LiveRuntime.catch_up_with`)."""
        return self._queue

    # ---- the loop thread ---------------------------------------------------------------------
    def drain(self) -> None:
        with self._lock:
            self._posted = False
        queue = self._queue
        if not queue:
            return
        now = self.runtime.now_ns
        while queue:
            seen = queue.popleft()
            if self._closed:
                self.after_end += 1
                continue
            self._one(seen, now)

    def close(self) -> None:
        """On the loop thread, before the checks are judged: feed what is queued, then nothing more."""
        self.drain()
        self._closed = True

    def flush_rows(self) -> None:
        """After the runtime stopped (a run that ended early): what is still queued goes to the
        trace only (the checks were judged, or never will be)."""
        fed = not self._closed  # reports after the verdicts were taken are counted as after_end
        self._closed = True
        self.observer = None
        queue = self._queue
        now = self.runtime.now_ns
        while queue:
            if not fed:
                self.after_end += 1
            self._one(queue.popleft(), now, counted=fed)

    def _one(self, seen: Seen, now: int, counted: bool = True) -> None:
        send = seen.kind == SEEN_SEND
        node, other = (seen.src, seen.dst) if send else (seen.dst, seen.src)
        if seen.msg_type in (SUBSCRIBED, UNSUBSCRIBED) and seen.dst_type == "XPUB":
            self._xpub_receipt(seen, now)
        if self.external is not None and node not in self.external:
            return  # a node the harness runs: its own probe reports what it sends and gets
        own_type = seen.src_type if send else seen.dst_type
        binds = seen.binder == node
        name = socket_name(seen.src_socket if send else seen.dst_socket, own_type, binds, other)
        self._declare(node, name, own_type, binds, seen.endpoint)
        if seen.msg_type in (SUBSCRIBED, UNSUBSCRIBED):
            self._subscription(seen, node, other, name, now, counted)
            return
        frames = list(seen.frames)
        if own_type == "ROUTER":  # the peer's routing id in front, as ZeroMQ hands it over
            frames.insert(0, seen.dst_id if send else seen.src_id)
        kind = SEND if send else RECV
        if counted and send:
            self.sends += 1
            self.by_node[node] = self.by_node.get(node, 0) + 1
            if self.notes is not None:
                for note_kind, data in self.notes[1](self.notes[0], list(seen.frames)):
                    self.runtime.note_observed(node, note_kind, data)
        elif counted:
            self.receives += 1
        if self.observer is not None:
            self.observer.emit(now, node, kind, socket=name, frames=frames, msg_type=seen.msg_type,
                               data={"peer": other, "connection": seen.connection}, via=VIA_PROXY)
        if self.trace is not None and not self.trace.closed:
            self.trace.emit(node, kind, now, socket=name, msg_type=seen.msg_type or None, peer=other,
                            msg_id=seen.number, size=sum(map(len, seen.frames)), detail="seen by the proxy",
                            frames=pack_frames(frames) if self.record_frames else None)

    def _subscription(self, seen: Seen, node: str, other: str, name: str, now: int, counted: bool) -> None:
        """A subscription the node's socket sent ``other`` on one connection: a probe's
        ``subscribe``/``unsubscribe`` event, with the peer and the connection in its data (a
        socket sends its subscriptions again on each connection it makes)."""
        kind = SUBSCRIBE if seen.msg_type == SUBSCRIBED else UNSUBSCRIBE
        topic = seen.frames[0] if seen.frames else b""
        if counted:
            self.subscriptions += 1
        if self.observer is not None:
            self.observer.emit(now, node, kind, socket=name, data={"topic": topic, "peer": other,
                                                                   "connection": seen.connection}, via=VIA_PROXY)
        if self.trace is not None and not self.trace.closed:
            self.trace.subscription(node, kind, now, name, topic)

    def _xpub_receipt(self, seen: Seen, now: int) -> None:
        """A subscription that reached an external node's XPUB: what ZeroMQ hands its application
        (the subscription message, ``\x01`` or ``\x00`` and the prefix), as a probe reports an
        XPUB's receipt; whoever subscribed (a node the harness runs, too)."""
        node = seen.dst
        if self.external is not None and node not in self.external:
            return
        name = socket_name(seen.dst_socket, "XPUB", seen.binder == node, seen.src)
        self._declare(node, name, "XPUB", seen.binder == node, seen.endpoint)
        frames = [(b"\x01" if seen.msg_type == SUBSCRIBED else b"\x00") + (seen.frames[0] if seen.frames else b"")]
        if self.observer is not None:
            self.observer.emit(now, node, RECV, socket=name, frames=frames, via=VIA_PROXY)
        if self.trace is not None and not self.trace.closed:
            self.trace.local(node, now, name, seen.msg_type, seen.src, len(frames[0]), "seen by the proxy",
                             pack_frames(frames) if self.record_frames else None)

    def _declare(self, node: str, name: str, own_type: str, binds: bool, endpoint: str) -> None:
        key = (node, name, own_type, binds, endpoint)
        if key in self._declared:  # the common case: a socket already declared
            return
        self._declared.add(key)
        specs = self._sockets.setdefault(node, {})
        old = specs.get(name)
        try:
            stype = SocketType(own_type)
        except ValueError:
            return  # no READY seen (or a type the harness does not know): nothing to declare
        bind = (endpoint,) if binds else ()
        connect = () if binds else (endpoint,)
        if old is not None:
            if (binds and endpoint in old.bind) or (not binds and endpoint in old.connect):
                return
            bind, connect = tuple(dict.fromkeys(old.bind + bind)), tuple(dict.fromkeys(old.connect + connect))
        specs[name] = SocketSpec(name, stype, bind=bind, connect=connect)
        if self.observer is not None:
            self.observer.declare(node, list(specs.values()))

    def summary(self) -> dict[str, Any]:
        """For the run's stats: how many messages of external nodes were observed."""
        return {"sends": self.sends, "receives": self.receives, "subscriptions": self.subscriptions,
                "by_node": dict(sorted(self.by_node.items())),
                "after_end": self.after_end, "stopped_behind": self.overflowed}

    def verdicts(self) -> list[Verdict]:
        """A failing ``observation-complete`` when observation stopped early (else nothing)."""
        if not self.overflowed:
            return []
        return [Verdict("observation-complete", "", False,
                        f"the checks saw only the first {self.sends} message(s) of external nodes: the run's "
                        f"loop fell {MAX_QUEUED} reports behind the proxy and observation stopped (a limit of the "
                        "harness, not necessarily a fault of the implementation)")]


__all__ = ["ObservedTraffic", "VIA_PROXY", "socket_name"]
