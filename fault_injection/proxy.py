"""A ZMTP-aware chaos proxy on loopback: real sockets, whole messages, the simulator's faults.

The run puts one listener of the proxy in front of each endpoint a node binds (``add_link``)
and hands the connecting nodes the proxy's endpoint. For every TCP connection it accepts, the
proxy opens one to the real endpoint and relays both directions, parsing ZMTP
(`fault_injection.zmtp`): the greeting and the handshake go through unchanged, then every whole
message (all frames of a multipart message, or one command) gets the same treatment as in the
simulator (`NetworkFaults`): lost under a partition, then the ordered message rules
(`RuleSet.decide`: drop, delay, duplicate, reorder) with draws from a generator derived from
the seed per (src, dst), then the latency and bandwidth of a slow link, FIFO per connection.
Each fault applied is a `FaultEvent` (a trace row). The messages of connections between
nodes the ``observe`` callback names are reported to ``on_seen`` as they are read from the sender
and as each copy is handed on to the receiver (`fault_injection.observe`); such connections are
never relayed in bulk unparsed.

Who is on each side: the binder is the node the link was added for; the connecter is named by
the link (a listener handed to one node), else by its source address (``name_source``: the
run gives each in-process node its own 127.x address), else it is ``?`` (counted).

What it cannot parse passes through unchanged and is counted (``stats.opaque``); with
``hostile="cut"`` such a connection is reset instead. A peer that floods only fills a bounded
buffer: the proxy stops reading from it until the other side has taken the bytes. Messages a
path no fault touches are relayed in bulk without being looked at (the fast path).

Threading: one background thread runs a ``selectors`` loop and owns every socket and all
state; other threads act through methods that hand a call to it (``_call``). ``stop`` ends the
loop within its timeout and closes every socket. This module is the proxy's API, listeners and
loop; what happens to the bytes of one connection is in `fault_injection.relay`.
"""

from __future__ import annotations

import heapq
import logging
import selectors
import socket
import threading
import time
from collections import Counter, deque
from concurrent.futures import Future
from typing import Any, Callable, Sequence, TypeVar

from fault_injection.damage import TypedMalformed
from fault_injection.netfaults import UNKNOWN, FaultEvent, NetworkFaults, network_fault
from fault_injection.naming import Classifier, FieldsOf, codec_classifier
from fault_injection.observe import ObservePairs, SeenHook
from fault_injection.relay import (
    Connection, Direction, LinkSpec, ProxyError, ProxyStats, Relay, close_with_rst, parse_tcp,
)
from fault_injection.rules import DistSpec, RuleSet
from fault_injection.zmtp import DEFAULT_MAX_MESSAGE
from harness.trace import FAULT

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_CONNECTIONS = 1024
_READ = selectors.EVENT_READ


class ChaosProxy(Relay):
    """See the module docstring. Typical use::

        proxy = ChaosProxy(rules=RuleSet.from_dicts([{"message": "PING", "drop": True}]), seed=1,
                           classify=codec_classifier("dcp"))
        ep = proxy.add_link(LinkSpec("tcp://127.0.0.1:5555", binder="broker", connecter="worker"))
        proxy.start()          # the worker connects to ep instead of the broker's endpoint
        ...
        proxy.stop()
    """

    def __init__(self, *, rules: RuleSet | None = None, seed: int = 0, classify: Classifier | None = None,
                 clock: Callable[[], int] | None = None, host: str = "127.0.0.1", hostile: str = "pass",
                 max_message: int = DEFAULT_MAX_MESSAGE, on_event: Callable[[FaultEvent], None] | None = None,
                 name_socket: Callable[[str, str], str] | None = None,
                 welcome_of: Callable[[str, str], bytes | None] | None = None,
                 identify: Callable[[tuple[str, int], tuple[str, int]], str | None] | None = None,
                 fields_of: FieldsOf | None = None, malformed: TypedMalformed | None = None,
                 observe: ObservePairs | None = None, on_seen: SeenHook | None = None) -> None:
        if hostile not in ("pass", "cut"):
            raise ValueError(f"hostile must be 'pass' or 'cut', got {hostile!r}")
        self.faults = NetworkFaults(rules, seed)
        self.seed = seed
        self.classify = classify or (lambda frames, where=None, channels=(): "")
        self.clock = clock or time.monotonic_ns
        self.host = host
        self.hostile = hostile
        self.max_message = max_message
        self.on_event = on_event
        # (node, endpoint) -> the name of the node's socket on that endpoint: a connecter's that
        # connects to the proxy's endpoint, a binder's that binds the link's target.
        self.name_socket = name_socket
        self.welcome_of = welcome_of  # (binder, target) -> its XPUB welcome, when the link names none
        # (connecter's address, listener's address) -> node, for connecters nothing else names
        self.identify = identify
        self.fields_of = fields_of  # decoded fields, for rules with field conditions
        self.malformed = malformed  # whether damaged frames no longer decode (corrupt rules)
        # (src, dst) -> whether the messages between them are reported to ``on_seen`` (read when
        # a connection is accepted; see fault_injection.observe)
        self.observe = observe
        self.on_seen = on_seen
        self._seen_count = 0
        self._stats = ProxyStats()
        self._events: deque[FaultEvent] = deque()
        self._sources: dict[str, str] = {}
        self._sel = selectors.DefaultSelector()
        self._listeners: dict[socket.socket, tuple[LinkSpec, str]] = {}
        self._conns: list[Connection] = []
        self._dirty: list[Direction] = []  # directions with bytes to send, flushed once per loop turn
        self._timers: list[tuple[int, int, Callable[..., None], Any]] = []
        self._timer_seq = 0
        self._calls: deque[tuple[Callable[[], Any], Future]] = deque()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, _READ, None)
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._closed = False
        self._links_at_close = 0  # link_count once the listeners are closed

    # ---- set-up ---------------------------------------------------------------------------

    def add_link(self, link: LinkSpec, listen: str | None = None) -> str:
        """Listen for ``link`` (on ``listen``, default a free port on the proxy's host) and
        return the endpoint connecters should use."""
        parse_tcp(link.target)
        host, port = parse_tcp(listen) if listen else (self.host, 0)
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            lsock.bind((host, port))
            lsock.listen(128)
            lsock.setblocking(False)
        except OSError as exc:
            lsock.close()
            raise ProxyError(f"cannot listen on {host}:{port} for {link.target}: {exc}") from exc
        endpoint = f"tcp://{host}:{lsock.getsockname()[1]}"

        def register() -> None:
            self._listeners[lsock] = (link, endpoint)
            self._sel.register(lsock, _READ, ("listen", lsock))

        try:
            self._call(register)
        except BaseException:
            lsock.close()
            raise
        return endpoint

    def name_source(self, address: str, node: str) -> None:
        """Connections from this source address come from ``node``."""
        self._call(lambda: self._sources.__setitem__(address, node))

    def start(self) -> ChaosProxy:
        if self._closed or self._thread is not None:
            raise ProxyError("a proxy starts once")
        self._thread = threading.Thread(target=self._run, name="zmq-harness-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """End the loop and close every socket (listeners, connections, the wake-up pair)."""
        if self._closed:
            return
        self._stopping = True
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            self._wake()
            thread.join(timeout)
            if thread.is_alive():
                raise ProxyError(f"proxy loop did not stop within {timeout}s")
        self._close_everything()

    def __enter__(self) -> ChaosProxy:
        return self.start() if self._thread is None else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        t = self._thread
        return t is not None and t.is_alive() and not self._stopping

    # ---- faults (any thread) --------------------------------------------------------------

    def set_rules(self, rules: RuleSet) -> None:
        self._call(lambda: self.faults.set_rules(rules))

    def partition(self, groups: Sequence[Sequence[str]], one_way: bool = False, close: bool = False) -> int:
        """Cut the nodes of different groups apart (``one_way``: only groups[0] -> groups[1]).
        Messages on a cut path are lost; greeting and handshake bytes wait for the heal.
        ``close``: connections across the cut are reset and new ones refused until the heal."""
        def cut() -> int:
            pid = self.faults.partition(groups, one_way, close)
            self._event(network_fault(self.clock(), "partition", self.faults.describe_partition(pid)))
            if close:
                for conn in list(self._conns):
                    if self.faults.refuses(conn.connecter, conn.link.binder):
                        self._reset(conn, f"partition p{pid}")
            return pid

        return self._call(cut)

    def heal(self, pid: int | None = None) -> None:
        def heal() -> None:
            healed = self.faults.heal(pid)
            if healed:
                self._event(network_fault(self.clock(), "heal", " ".join(f"p{p}" for p in healed)))
            for conn in list(self._conns):
                for d in (conn.up, conn.down):
                    if d.stalled and not self.faults.is_cut(d.src, d.dst):
                        raw = bytes(d.stalled)
                        d.stalled.clear()
                        self._send_on(d, raw, None)

        self._call(heal)

    def slow_link(self, src: str, dst: str, latency: DistSpec | None = None, bandwidth: int | None = None) -> int:
        def slow() -> int:
            lid = self.faults.slow_link(src, dst, latency, bandwidth)
            self._event(network_fault(self.clock(), "slow-link", self.faults._slow[lid].text))
            return lid

        return self._call(slow)

    def restore_link(self, lid: int) -> None:
        def restore() -> None:
            if self.faults.restore_link(lid) is not None:
                self._event(network_fault(self.clock(), "restore-link", f"l{lid}"))

        self._call(restore)

    def reset(self, a: str = "*", b: str = "*") -> int:
        """Reset (TCP RST) every connection between nodes matching ``a`` and ``b`` (globs, either
        side); returns how many."""
        from fault_injection.partitions import matcher

        ma, mb = matcher(a), matcher(b)

        def reset() -> int:
            hit = [c for c in self._conns if (ma(c.connecter) and mb(c.link.binder))
                   or (mb(c.connecter) and ma(c.link.binder))]
            self._event(network_fault(self.clock(), "reset", f"{a}<->{b}: {len(hit)} connection(s)"))
            for conn in hit:
                self._reset(conn, "reset")
            return len(hit)

        return self._call(reset)

    def inject(self, src: str, dst: str, data: bytes) -> int:
        """Write ``data`` as it is into every connection from ``src`` to ``dst`` (names or globs)
        between two messages: malformed bytes on purpose. Returns how many connections."""
        from fault_injection.partitions import matcher

        ms, md = matcher(src), matcher(dst)

        def inject() -> int:
            dirs = [d for c in self._conns for d in (c.up, c.down) if ms(d.src) and md(d.dst)]
            for d in dirs:
                self._event(FaultEvent(self.clock(), d.src, FAULT, "inject", d.dst, d.socket or None, None,
                                       len(data), data[:64].hex()))
                self._send_on(d, data, None)
            return len(dirs)

        return self._call(inject)

    # ---- observing (any thread) -----------------------------------------------------------

    def settle(self, turns: int = 2) -> None:
        """Return once the loop has run ``turns`` more turns: what was readable when this was
        called has been read, and reported to ``on_seen`` (a process killed just now: what it
        sent before it died)."""
        for _ in range(turns):
            self._call(lambda: None)

    def stats(self) -> ProxyStats:
        """The counts so far; after `stop`, the final ones (the loop is gone: nothing changes them)."""
        def snapshot() -> ProxyStats:
            s = self._stats
            return ProxyStats(s.connections, s.refused, s.unidentified, s.messages, s.bytes, Counter(s.by_type),
                              Counter(s.opaque), s.hostile_cut, Counter(s.effects), s.lost_on_close, s.resets,
                              s.throttled, s.observed_sends, s.observed_receives)

        return snapshot() if self._closed else self._call(snapshot)

    def link_count(self) -> int:
        """Listeners added (one per proxied endpoint and connecter, or shared); after `stop`, those
        it had."""
        return self._links_at_close if self._closed else self._call(lambda: len(self._listeners))

    def open_connections(self) -> int:
        return self._call(lambda: len(self._conns))

    def drain_events(self) -> list[FaultEvent]:
        """The fault rows recorded since the last call, when no ``on_event`` takes them (safe
        from any thread)."""
        out = []
        events = self._events
        while events:
            out.append(events.popleft())
        return out

    # ---- the loop thread ------------------------------------------------------------------

    def _call(self, fn: Callable[[], T], timeout: float = 5.0) -> T:
        if not self.running or threading.current_thread() is self._thread:
            if self._closed:
                raise ProxyError("the proxy is stopped")
            return fn()
        fut: Future = Future()
        self._calls.append((fn, fut))
        self._wake()
        return fut.result(timeout)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass  # full: a wake-up is pending anyway; closed: the loop is gone

    def _run(self) -> None:
        try:
            while not self._stopping:
                timeout = None
                if self._timers:
                    timeout = max(0.0, (self._timers[0][0] - time.monotonic_ns()) / 1e9)
                if self._calls:
                    timeout = 0.0
                for key, mask in self._sel.select(timeout):
                    data = key.data
                    if data is None:
                        self._run_calls()
                    elif data[0] == "listen":
                        self._accept(data[1])
                    else:
                        conn, side = data
                        if not conn.closed:
                            self._ready(conn, side, mask)
                self._fire_timers()
                if self._dirty:
                    self._flush_dirty()
        except BaseException:  # a bug in the proxy: loud, and every socket still gets closed
            log.exception("proxy loop died")
        finally:
            self._fail_pending_calls()

    def _run_calls(self) -> None:
        try:
            self._wake_r.recv(65536)
        except OSError:
            pass
        while self._calls:
            fn, fut = self._calls.popleft()
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn())
                except BaseException as exc:
                    fut.set_exception(exc)

    def _fail_pending_calls(self) -> None:
        while self._calls:
            _, fut = self._calls.popleft()
            if fut.set_running_or_notify_cancel():
                fut.set_exception(ProxyError("the proxy stopped before the call ran"))

    def _close_everything(self) -> None:
        if self._closed:
            return
        self._closed = True
        for conn in list(self._conns):
            self._close(conn)
        self._links_at_close = len(self._listeners)
        for lsock in list(self._listeners):
            lsock.close()
        self._listeners.clear()
        self._wake_r.close()
        self._wake_w.close()
        self._sel.close()

    def _timer(self, at: int, fn: Callable[..., None], arg: Any) -> None:
        self._timer_seq += 1
        heapq.heappush(self._timers, (at, self._timer_seq, fn, arg))

    def _fire_timers(self) -> None:
        timers = self._timers
        now = time.monotonic_ns()
        while timers and timers[0][0] <= now:
            _, _, fn, arg = heapq.heappop(timers)
            fn(arg)

    def _event(self, ev: FaultEvent) -> None:
        """A fault row: to ``on_event`` when there is one, else kept for ``drain_events``."""
        if self.on_event is None:
            self._events.append(ev)
            return
        try:
            self.on_event(ev)
        except Exception:
            log.exception("proxy on_event callback failed; rows go to drain_events from now on")
            self.on_event = None
            self._events.append(ev)

    def _accept(self, lsock: socket.socket) -> None:
        link, endpoint = self._listeners[lsock]
        for _ in range(64):
            try:
                client, addr = lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.warning("proxy accept on %s failed: %s", endpoint, exc)
                return
            self._stats.connections += 1
            connecter = link.connecter or self._sources.get(addr[0]) or self._identify(client, addr) or UNKNOWN
            if connecter == UNKNOWN:
                self._stats.unidentified += 1
                self._event(network_fault(self.clock(), "unidentified",
                                          f"connection from {addr[0]}:{addr[1]} to {endpoint} ({link.binder})"))
            if len(self._conns) >= MAX_CONNECTIONS or self.faults.refuses(connecter, link.binder):
                self._stats.refused += 1
                close_with_rst(client)
                continue
            self._open(link, client, connecter, endpoint)

    def _identify(self, client: socket.socket, addr: tuple[str, int]) -> str | None:
        if self.identify is None:
            return None
        try:
            return self.identify(addr, client.getsockname()[:2])
        except Exception:
            log.exception("proxy identify callback failed")
            return None



__all__ = ["ChaosProxy", "Classifier", "FieldsOf", "LinkSpec", "ProxyError", "ProxyStats", "codec_classifier",
           "parse_tcp"]
