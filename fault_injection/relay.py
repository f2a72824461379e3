"""The relay inside the chaos proxy: one proxied TCP connection at a time, both directions.

For each direction a `ZmtpStream` cuts the bytes into units; the greeting and handshake go on
unchanged (held while a partition cuts the path), then every whole message is named (the
protocol's codec, or the simulator's names for socket-internal messages), lost to a partition,
judged by the message rules, and sent on after the latency and bandwidth of a slow link, FIFO
per connection. Writes a loop turn produced go out in one send; a sender whose peer does not
read is throttled (the proxy stops reading it), so memory stays bounded.

`Relay` is a mixin of `ChaosProxy` (which owns the selector, the timers and the loop thread):
it declares the attributes it uses from it.
"""

from __future__ import annotations

import errno
import logging
import random
import selectors
import socket
import struct
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Callable

from fault_injection.damage import TypedMalformed, damage
from fault_injection.naming import Classifier, FieldsOf
from fault_injection.netfaults import UNKNOWN, FaultEvent, NetworkFaults, message_drop, message_fault
from fault_injection.observe import (
    SEEN_RECV, SEEN_SEND, SUBSCRIBED, UNSUBSCRIBED, ObservePairs, Seen, SeenHook, made_up_id,
)
from fault_injection.rules import PASS, Distribution
from fault_injection.zmtp import CMD, MESSAGE, OPAQUE, Command, ZmtpStream, encode_message
from harness.trace import DROP, FAULT

log = logging.getLogger(__name__)

READ_SIZE = 256 * 1024
HIGH_WATER = 8 * 1024 * 1024  # bytes waiting toward a peer before the proxy stops reading the sender
LOW_WATER = 1024 * 1024
SUB_TYPES = frozenset(("PUB", "XPUB"))  # a one-frame \x00/\x01 message to these is a subscription
COMMAND_TYPES = {"SUBSCRIBE": SUBSCRIBED, "CANCEL": UNSUBSCRIBED}
SUBSCRIPTIONS = frozenset(COMMAND_TYPES.values())

_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE
# What travels with a message through the relay: its type, size, and when its direction is
# observed the frames the receiver gets and the message's number (else None, 0).
Info = tuple[str, int, "tuple[bytes, ...] | None", int]


class ProxyError(RuntimeError):
    """The proxy itself failed (not a peer): bad endpoint, stuck loop, misuse."""


@dataclass(frozen=True)
class LinkSpec:
    """One proxied endpoint: what it forwards to and who is on each side."""

    target: str  # the binder's real endpoint, tcp://127.0.0.1:PORT
    binder: str  # the node that binds it
    binder_socket: str = ""
    connecter: str | None = None  # the only node handed this listener (None: name by source address)
    connecter_socket: str = ""
    label: str = ""  # the endpoint as rules' ``endpoint`` sees it (default: target)
    welcome: bytes | None = None  # the binder's XPUB welcome message, traced as zmq.welcome


@dataclass
class ProxyStats:
    connections: int = 0  # accepted
    refused: int = 0  # closed at once: closing partition, too many connections, target down
    unidentified: int = 0  # connecters named "?"
    messages: int = 0  # whole messages and commands relayed or acted on
    bytes: int = 0
    by_type: Counter = field(default_factory=Counter)  # messages looked at, by type
    opaque: Counter = field(default_factory=Counter)  # directions not followed, by reason
    hostile_cut: int = 0
    effects: Counter = field(default_factory=Counter)  # fault label -> messages
    lost_on_close: int = 0  # delayed messages lost with their connection
    resets: int = 0  # connections reset by a fault
    throttled: int = 0  # times a sender was paused because its peer was not reading
    observed_sends: int = 0  # messages of observed connections reported as read from their sender
    observed_receives: int = 0  # ... and as handed on to their receiver (copies count)


def parse_tcp(endpoint: str) -> tuple[str, int]:
    if not endpoint.startswith("tcp://") or ":" not in endpoint[6:]:
        raise ProxyError(f"not a tcp://host:port endpoint: {endpoint!r}")
    host, port = endpoint[6:].rsplit(":", 1)
    try:
        return host, int(port)
    except ValueError:
        raise ProxyError(f"not a tcp://host:port endpoint: {endpoint!r}") from None


class Direction:
    """One direction of a proxied connection: src sends on ``rsock``, dst reads ``wsock``."""

    __slots__ = ("conn", "name", "src", "dst", "socket", "rsock", "wsock", "stream", "out", "queue", "queued",
                 "last_at", "wire_free", "held", "stalled", "plain", "version", "latency", "bandwidth", "rng",
                 "lat_rng", "label", "reading", "first", "peer_type", "dirty", "observed", "channels")

    def __init__(self, conn: Connection, name: str, src: str, dst: str, socket_name: str, rsock: socket.socket,
                 wsock: socket.socket, max_message: int) -> None:
        self.conn = conn
        self.name = name  # to_binder | to_connecter
        self.src, self.dst, self.socket = src, dst, socket_name
        self.rsock, self.wsock = rsock, wsock
        self.stream = ZmtpStream(max_message)
        self.out = bytearray()  # bytes the kernel has not taken yet
        self.queue: deque[tuple[int, bytes, Info | None]] = deque()  # (leave at, raw, info)
        self.queued = 0
        self.last_at = 0  # FIFO: nothing leaves before what was queued earlier
        self.wire_free = 0  # bandwidth: when the previous message has finished leaving
        self.held: list[list[Any]] = []  # reordered messages waiting for the next one
        self.stalled = bytearray()  # greeting/handshake/opaque bytes held while the path is cut
        self.plain = False
        self.version = -1
        self.latency: Distribution | None = None
        self.bandwidth: int | None = None
        self.rng: random.Random | None = None
        self.lat_rng: random.Random | None = None
        self.label = conn.link.label or conn.link.target
        self.reading = True
        self.first = True  # no data message seen yet (an XPUB's welcome comes first)
        self.peer_type = ""  # socket type of the receiving side, from its READY
        self.dirty = False  # has bytes in ``out`` the loop has not tried to send yet
        self.observed = False  # its messages are reported (`fault_injection.observe`)
        self.channels: tuple[str, ...] = ()  # the channel names of the sockets at both ends (the classifier's)

    def pending(self) -> int:
        return len(self.out) + self.queued + len(self.stalled)


class Connection:
    __slots__ = ("link", "client", "server", "connecter", "up", "down", "connected", "closed", "endpoint", "masks",
                 "welcome", "number")

    def __init__(self, link: LinkSpec, client: socket.socket, server: socket.socket, connecter: str,
                 endpoint: str, max_message: int, connecter_socket: str, binder_socket: str) -> None:
        self.link = link
        self.client, self.server = client, server
        self.connecter = connecter
        self.endpoint = endpoint  # the proxy's endpoint the connecter used
        self.welcome = link.welcome
        self.connected = False
        self.closed = False
        self.masks = {client: _READ, server: _WRITE}  # selector interest as registered
        self.up = Direction(self, "to_binder", connecter, link.binder, connecter_socket, client, server, max_message)
        self.down = Direction(self, "to_connecter", link.binder, connecter, binder_socket, server, client, max_message)
        self.number = 0  # the proxy's count of connections when it was accepted
        # (named once per connection: the classifier reads them for every message)
        self.up.channels = _channels(connecter_socket, binder_socket)
        self.down.channels = _channels(binder_socket, connecter_socket)


def _channels(own: str, other: str) -> tuple[str, ...]:
    """The socket names of a direction's sender and receiver, without a ``.N`` suffix."""
    return tuple(name.split(".", 1)[0] for name in (own, other) if name)


class Relay:
    """Connection handling of `ChaosProxy`; the attributes below are the proxy's."""

    faults: NetworkFaults
    seed: int
    classify: Classifier
    clock: Callable[[], int]
    hostile: str
    max_message: int
    name_socket: Callable[[str, str], str] | None
    welcome_of: Callable[[str, str], bytes | None] | None
    fields_of: FieldsOf | None
    malformed: TypedMalformed | None
    on_seen: SeenHook | None
    observe: ObservePairs | None
    _seen_count: int
    _stats: ProxyStats
    _sel: selectors.BaseSelector
    _conns: list[Connection]
    _dirty: list[Direction]

    def _event(self, ev: FaultEvent) -> None:
        raise NotImplementedError

    def _timer(self, at: int, fn: Callable[..., None], arg: Any) -> None:
        raise NotImplementedError

    def _open(self, link: LinkSpec, client: socket.socket, connecter: str, endpoint: str) -> None:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        for s in (client, server):
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        csock = link.connecter_socket or self._socket_name(connecter, endpoint)
        bsock = link.binder_socket or self._socket_name(link.binder, link.target)
        conn = Connection(link, client, server, connecter, endpoint, self.max_message, csock, bsock)
        conn.number = self._stats.connections
        if self.observe is not None and connecter != UNKNOWN:
            conn.up.observed = self.observe(connecter, link.binder)
            conn.down.observed = self.observe(link.binder, connecter)
        if conn.welcome is None and self.welcome_of is not None:
            try:
                conn.welcome = self.welcome_of(link.binder, link.target)
            except Exception:  # like a socket's name: for the trace only
                conn.welcome = None
        self._conns.append(conn)
        err = server.connect_ex(parse_tcp(link.target))
        if err not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
            self._stats.refused += 1
            self._close(conn, rst=True)
            return
        self._sel.register(client, _READ, (conn, "client"))
        self._sel.register(server, _WRITE, (conn, "server"))

    def _socket_name(self, node: str, endpoint: str) -> str:
        if self.name_socket is None or node == UNKNOWN:
            return ""
        try:
            return self.name_socket(node, endpoint)
        except Exception:  # naming is for the trace; a failure must not cost the connection
            return ""

    def _ready(self, conn: Connection, side: str, mask: int) -> None:
        if side == "server" and not conn.connected:
            err = conn.server.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self._stats.refused += 1
                self._close(conn, rst=True)  # the binder is down: the connecter reconnects later
                return
            conn.connected = True
            self._mask(conn.up)
            self._mask(conn.down)
            self._flush(conn.up)
            self._flush(conn.down)
            return
        reader, writer = (conn.up, conn.down) if side == "client" else (conn.down, conn.up)
        if mask & _WRITE:
            self._flush(writer)
        if mask & _READ and not conn.closed:
            self._receive(reader)

    def _mask(self, d: Direction) -> None:
        """Selector interest of the socket ``d`` reads from: read (unless throttled) and write
        (while the other direction has bytes for it). Before the connection to the binder is
        up, only the connecter's socket is read (its greeting is buffered)."""
        conn = d.conn
        if conn.closed:
            return
        sock = d.rsock
        if not conn.connected:
            if sock is conn.server:
                return  # waiting for connect(): registered for write
            mask = _READ if d.reading else 0
        else:
            other = conn.down if d is conn.up else conn.up
            mask = (_READ if d.reading else 0) | (_WRITE if other.out else 0)
        if conn.masks[sock] == mask:
            return
        side = "client" if sock is conn.client else "server"
        if mask == 0:
            self._sel.unregister(sock)
        elif conn.masks[sock] == 0:
            self._sel.register(sock, mask, (conn, side))
        else:
            self._sel.modify(sock, mask, (conn, side))
        conn.masks[sock] = mask

    def _receive(self, d: Direction) -> None:
        try:
            data = d.rsock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(d.conn)
            return
        if not data:
            self._close(d.conn)  # the sender closed: so does the proxy, toward the other side too
            return
        self._stats.bytes += len(data)
        d.stream.feed(data)
        self._process(d)

    def _process(self, d: Direction) -> None:
        faults = self.faults
        if d.version != faults.version:
            self._refresh(d)
        stream = d.stream
        if d.plain and stream.traffic:
            raw, count = stream.take_messages()
            if count:
                self._stats.messages += count
                self._write(d, raw)
            if not stream.opaque:
                return
        for kind, raw, frames, cmd in stream.units():
            if d.conn.closed:
                return
            if kind == MESSAGE or kind == CMD:
                self._message(d, raw, frames, cmd)
            elif kind == OPAQUE:
                self._opaque(d, raw)
            else:  # greeting and handshake: unchanged, held while the path is cut
                if stream.ready is not None:
                    other = d.conn.down if d is d.conn.up else d.conn.up
                    other.peer_type = stream.ready.socket_type
                self._pass_through(d, raw)
            if d.version != faults.version:
                self._refresh(d)

    def _refresh(self, d: Direction) -> None:
        f = self.faults
        d.version = f.version
        d.latency, d.bandwidth = f.shaping(d.src, d.dst)
        d.plain = (not d.queue and not d.held and not d.stalled and d.bandwidth is None and d.latency is None
                   and not d.observed and not f.touches(d.src, d.dst, d.socket, d.name, d.label))

    def _pass_through(self, d: Direction, raw: bytes) -> None:
        if d.stalled or self.faults.is_cut(d.src, d.dst):
            d.stalled += raw
            self._throttle(d)
        else:
            self._send_on(d, raw, None)

    def _opaque(self, d: Direction, raw: bytes) -> None:
        reason = d.stream.opaque_reason
        if reason:
            self._stats.opaque[reason] += 1
            self._event(FaultEvent(self.clock(), d.src, FAULT, "opaque", d.dst, d.socket or None, None, len(raw),
                                   f"{d.name}: {reason}; passed on unparsed" if self.hostile == "pass"
                                   else f"{d.name}: {reason}; connection reset"))
            d.stream.opaque_reason = ""  # counted once per direction
            if self.hostile == "cut":
                self._stats.hostile_cut += 1
                self._reset(d.conn, f"hostile peer: {reason}")
                return
        self._pass_through(d, raw)

    def _msg_type(self, d: Direction, frames: list[bytes] | None, cmd: Command | None) -> str:
        if cmd is not None:
            return COMMAND_TYPES.get(cmd.name, "zmq." + cmd.name.lower())
        assert frames is not None
        first, d.first = d.first, False
        if d.peer_type in SUB_TYPES and len(frames) == 1 and frames[0][:1] in (b"\x00", b"\x01"):
            return SUBSCRIBED if frames[0][0] == 1 else UNSUBSCRIBED
        if first and d.name == "to_connecter" and d.conn.welcome is not None and frames == [d.conn.welcome]:
            return "zmq.welcome"
        try:
            return self.classify(frames, (d.conn.number, d.name), d.channels)
        except Exception:  # a classifier bug must not take the proxy down
            log.exception("proxy classifier failed")
            return ""

    def _message(self, d: Direction, raw: bytes, frames: list[bytes] | None, cmd: Command | None) -> None:
        stats = self._stats
        stats.messages += 1
        msg_type = self._msg_type(d, frames, cmd)
        stats.by_type[msg_type] += 1
        faults = self.faults
        size = len(raw)
        info: Info = (msg_type, size, None, 0)
        if d.observed:
            if frames is not None and not msg_type.startswith("zmq."):
                seen = tuple(frames)
                self._seen_count += 1
                info = (msg_type, size, seen, self._seen_count)
                self._report(d, SEEN_SEND, info)
            elif msg_type in SUBSCRIPTIONS:
                self._report_subscription(d, msg_type, frames, cmd)
        # As in the simulator: the rules judge a message when it is sent (drawing from the
        # path's generator even on a cut path), a partition loses it when it would arrive.
        rules = faults.rules
        if not len(rules):
            self._send_on(d, raw, info)
            return
        if d.rng is None:
            d.rng = faults.rng(d.src, d.dst)
        fields_of = self.fields_of
        fields = None
        if rules.needs_fields and fields_of is not None and frames is not None:
            fields = lambda: fields_of(frames)  # noqa: E731 - decoded only if a rule asks
        v = rules.decide(d.src, d.dst, msg_type, d.socket, d.name, d.rng, d.label, fields)
        if v is PASS:
            self._send_on(d, raw, info)
            return
        stats.effects[v.label] += 1
        now = self.clock()
        if v.effect == "drop":
            self._event(message_drop(now, d.src, d.dst, d.socket, msg_type, size, v.label))
        elif v.effect == "delay":
            self._event(message_fault(now, d.src, d.dst, d.socket, msg_type, size, v.label, f"+{v.delay_ns}ns"))
            self._send_on(d, raw, info, v.delay_ns)
        elif v.effect == "duplicate":
            self._event(message_fault(now, d.src, d.dst, d.socket, msg_type, size, v.label, f"{v.copies} extra"))
            for _ in range(1 + v.copies):
                self._send_on(d, raw, info)
        elif v.effect == "reorder":
            self._event(message_fault(now, d.src, d.dst, d.socket, msg_type, size, v.label,
                                      f"held up to {v.hold_ns}ns" + (" or behind the next" if v.behind_next else "")))
            entry = [raw, info, False]
            if v.behind_next:
                d.held.append(entry)
            self._timer(time.monotonic_ns() + self._latency(d) + v.hold_ns, self._release_held, (d, entry))
            d.plain = False
        elif v.effect == "corrupt":
            self._corrupt(d, raw, frames, info, v.label, v.how)
        else:
            self._send_on(d, raw, info)

    def _corrupt(self, d: Direction, raw: bytes, frames: list[bytes] | None, info: Info, label: str,
                 how: tuple[str, ...]) -> None:
        """Send the message on with its frames damaged as the simulator damages them (a ZMTP
        command or a socket-internal message goes on intact: the socket reads it, not the node)."""
        assert d.rng is not None
        msg_type, size = info[0], len(raw)
        done = None
        if frames is None or msg_type.startswith("zmq."):
            why = "left intact: socket-internal, read by the socket, not the node"
        else:
            typed = self.malformed
            done = damage(frames, d.rng, how, None if typed is None else lambda f: typed(f, msg_type))
            why = "left intact: no damage tried left it malformed"
        if done is None:
            self._event(message_fault(self.clock(), d.src, d.dst, d.socket, msg_type, size, label, why))
            self._send_on(d, raw, info)
            return
        damaged, what = done
        self._event(message_fault(self.clock(), d.src, d.dst, d.socket, msg_type, size, label, what))
        out = encode_message(damaged)
        # the receiver gets the damaged frames: so does its reported receive
        self._send_on(d, out, (msg_type, len(out), None if info[2] is None else tuple(damaged), info[3]))

    def _latency(self, d: Direction) -> int:
        if d.latency is None:
            return 0
        if d.lat_rng is None:
            d.lat_rng = random.Random(f"{self.seed}/latency/{d.src}>{d.dst}")
        return d.latency.sample(d.lat_rng)

    def _send_on(self, d: Direction, raw: bytes, info: Info | None, extra_ns: int = 0) -> None:
        """Send toward dst after the path's latency (+ ``extra_ns``) and bandwidth, FIFO; then
        let reordered messages out right behind it."""
        if d.conn.closed:
            return
        delay = extra_ns + self._latency(d)
        if delay == 0 and d.bandwidth is None and not d.queue:
            self._leave(d, raw, info)
        else:
            at = time.monotonic_ns() + delay
            if d.bandwidth is not None:
                at = max(at, d.wire_free) + len(raw) * 1_000_000_000 // d.bandwidth
                d.wire_free = at
            if at < d.last_at:
                at = d.last_at
            d.last_at = at
            d.queue.append((at, raw, info))
            d.queued += len(raw)
            if len(d.queue) == 1:
                self._timer(at, self._release_queue, d)
            self._throttle(d)
        if d.held and info is not None:
            held, d.held = d.held, []
            for entry in held:
                if not entry[2]:
                    entry[2] = True
                    self._send_on(d, entry[0], entry[1])

    def _release_held(self, arg: tuple[Direction, list[Any]]) -> None:
        d, entry = arg
        if entry[2] or d.conn.closed:
            return
        entry[2] = True
        if entry in d.held:
            d.held.remove(entry)
        self._leave(d, entry[0], entry[1])  # overtaken: out of FIFO order on purpose
        if not d.held and not d.queue:
            self._refresh(d)

    def _release_queue(self, d: Direction) -> None:
        if d.conn.closed:
            return
        now = time.monotonic_ns()
        queue = d.queue
        while queue and queue[0][0] <= now:
            _, raw, info = queue.popleft()
            d.queued -= len(raw)
            self._leave(d, raw, info)
        if queue:
            self._timer(queue[0][0], self._release_queue, d)
        else:
            self._refresh(d)
        self._unthrottle(d)

    def _leave(self, d: Direction, raw: bytes, info: Info | None) -> None:
        """A message reaches its destination now (at once, or after its delay), unless a
        partition cuts the path (as the simulator decides at arrival)."""
        if info is not None:
            if self.faults.partitions.partitioned and self.faults.is_cut(d.src, d.dst):
                self._stats.effects["partition"] += 1
                self._event(FaultEvent(self.clock(), d.dst, DROP, "partition", d.src, None, info[0], info[1], "proxy"))
                return
            if info[2] is not None:
                self._report(d, SEEN_RECV, info)
        self._write(d, raw)

    def _report(self, d: Direction, kind: str, info: Info) -> None:
        """Hand a message of an observed direction to ``on_seen`` (`fault_injection.observe`)."""
        hook = self.on_seen
        if hook is None or info[2] is None:
            return
        conn = d.conn
        up = d is conn.up
        other = conn.down if up else conn.up
        src_ready, dst_ready = d.stream.ready, other.stream.ready
        src_id = (src_ready.identity if src_ready is not None else b"") or made_up_id(2 * conn.number + (0 if up else 1))
        dst_id = (dst_ready.identity if dst_ready is not None else b"") or made_up_id(2 * conn.number + (1 if up else 0))
        if kind == SEEN_SEND:
            self._stats.observed_sends += 1
        else:
            self._stats.observed_receives += 1
        try:
            hook(Seen(kind, info[3], self.clock(), d.src, d.dst, d.socket, other.socket,
                      src_ready.socket_type if src_ready is not None else "", d.peer_type, src_id, dst_id,
                      conn.link.target, conn.link.binder, info[0], info[2], conn.number))
        except Exception:  # a consumer's bug must not take the proxy down: loud, and no more reports
            log.exception("proxy on_seen callback failed; no more messages are reported")
            self.on_seen = None

    def _report_subscription(self, d: Direction, msg_type: str, frames: list[bytes] | None,
                             cmd: Command | None) -> None:
        """A subscriber's (un)subscription, as a send of the subscriber with the prefix as its one
        frame (a probe reports what a node subscribes to; the proxy, what its socket sent). It is
        not reported as received: the subscribing socket, not the node, reads it."""
        prefix = cmd.data if cmd is not None else (frames[0][1:] if frames else b"")
        self._seen_count += 1
        self._report(d, SEEN_SEND, (msg_type, len(prefix), (bytes(prefix),), self._seen_count))

    def _write(self, d: Direction, raw: bytes) -> None:
        """Hand bytes to dst; the loop sends everything a turn produced with one send call."""
        d.out += raw
        if not d.dirty:
            d.dirty = True
            self._dirty.append(d)
        if len(d.out) > HIGH_WATER:
            self._throttle(d)

    def _flush_dirty(self) -> None:
        dirty, self._dirty = self._dirty, []
        for d in dirty:
            d.dirty = False
            self._flush(d)

    def _flush(self, d: Direction) -> None:
        conn = d.conn
        if not d.out or conn.closed or not conn.connected:
            return
        try:
            sent = d.wsock.send(d.out)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._close(conn)
            return
        if sent:
            del d.out[:sent]
        self._mask(conn.down if d is conn.up else conn.up)  # write interest on d's socket while bytes wait
        if not d.reading:
            self._unthrottle(d)

    def _throttle(self, d: Direction) -> None:
        if d.reading and d.pending() > HIGH_WATER:
            d.reading = False
            self._stats.throttled += 1
            self._mask(d)

    def _unthrottle(self, d: Direction) -> None:
        if not d.reading and d.pending() < LOW_WATER:
            d.reading = True
            self._mask(d)

    def _reset(self, conn: Connection, why: str) -> None:
        self._stats.resets += 1
        self._event(FaultEvent(self.clock(), conn.connecter, FAULT, "reset", conn.link.binder,
                               conn.up.socket or None, detail=f"{why} ({conn.endpoint} -> {conn.link.target})"))
        self._close(conn, rst=True)

    def _close(self, conn: Connection, rst: bool = False) -> None:
        if conn.closed:
            return
        conn.closed = True
        for d in (conn.up, conn.down):
            self._stats.lost_on_close += sum(1 for _, _, info in d.queue if info is not None)
            d.queue.clear()
            if d.out and not rst and conn.connected:
                try:
                    d.wsock.send(d.out)  # best effort: what was already "on the wire"
                except OSError:
                    pass
        for s in (conn.client, conn.server):
            try:
                self._sel.unregister(s)
            except (KeyError, ValueError):
                pass
            if rst:
                close_with_rst(s)
            else:
                s.close()
        try:
            self._conns.remove(conn)
        except ValueError:
            pass


def close_with_rst(sock: socket.socket) -> None:
    """Close with an RST instead of a FIN (SO_LINGER on, zero seconds)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


__all__ = ["LinkSpec", "ProxyError", "ProxyStats", "Relay", "parse_tcp"]
