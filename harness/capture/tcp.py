"""TCP stream reassembly: segments in, each connection's two byte streams out, in order.

`Reassembler.feed(segment)` returns the stream events the segment completes:

* `Opened` — a new connection (a SYN, or the first segment of one the capture joined late);
* `Data` — the next bytes of one direction, in sequence order, with the time of the segment
  that made them available (for bytes that arrived out of order: the segment that filled the
  hole, which is when the receiver could read them);
* `Gap` — bytes of one direction the capture does not hold (cut by the snapshot length, lost
  by the capturing host, or never seen before the connection ended); the stream cannot be
  followed past it and says so, it is never silently skipped;
* `Closed` — FIN or RST.

Retransmitted bytes (whole or overlapping) are dropped and counted; out-of-order segments
wait in a buffer bounded per direction (`MAX_PENDING_BYTES`): when it overflows, the hole
before them becomes a `Gap`. Sequence numbers wrap modulo 2^32. A SYN on the 4-tuple of a
finished connection starts a new connection; one that only repeats the same SYN does not.
`finish()` reports what is still missing at the end of the capture.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from harness.capture.pcapfile import FIN, RST, SYN, Segment

MOD = 1 << 32
HALF = 1 << 31
MAX_PENDING_BYTES = 8 << 20  # out-of-order bytes held per direction before the hole is a gap
RECENTLY_CLOSED = 4096  # finished connections remembered, so a late retransmission opens nothing
CUT = "the capture cut the packet short (snapshot length or truncated file)"

Endpoint = tuple[str, int]


def endpoint_text(ep: Endpoint) -> str:
    host, port = ep
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass
class Connection:
    id: int
    client: Endpoint  # the side that sent the SYN (or, joined late, the first sender seen)
    server: Endpoint
    opened_ns: int
    syn_seen: bool  # False: the capture joined the connection after it started

    def __str__(self) -> str:
        return f"#{self.id} {endpoint_text(self.client)} -> {endpoint_text(self.server)}"


@dataclass
class Opened:
    conn: Connection


@dataclass
class Data:
    conn: Connection
    from_client: bool
    time_ns: int
    data: bytes


@dataclass
class Gap:
    conn: Connection
    from_client: bool
    time_ns: int
    size: int  # bytes missing; 0 when unknown (the stream ended with data still outstanding)
    reason: str
    since_ns: int  # the missing bytes were sent after this time (the last bytes before them)


@dataclass
class Closed:
    conn: Connection
    from_client: bool
    time_ns: int
    reset: bool


Event = Union[Opened, Data, Gap, Closed]


@dataclass
class _Direction:
    next_seq: int | None = None  # the sequence number of the next byte to deliver
    pending: dict[int, tuple[int, bytes, int]] = field(default_factory=dict)  # seq -> (time, bytes, missing)
    pending_bytes: int = 0
    fin_seq: int | None = None
    last_ns: int = 0  # when the last in-order bytes (or the SYN) arrived
    closed: bool = False
    broken: bool = False  # after a gap nothing more is delivered


@dataclass
class _State:
    conn: Connection
    dirs: tuple[_Direction, _Direction]  # (from client, from server)
    isn: list[int | None]  # the SYN's sequence number per direction, to recognise a repeated SYN


@dataclass
class StreamStats:
    connections: int = 0
    joined_late: int = 0
    retransmitted_bytes: int = 0
    out_of_order_segments: int = 0
    gaps: int = 0
    gap_bytes: int = 0


def _diff(a: int, b: int) -> int:
    """a - b on the 32-bit sequence circle, as a signed number."""
    d = (a - b) % MOD
    return d - MOD if d >= HALF else d


class Reassembler:
    def __init__(self) -> None:
        self._conns: dict[tuple[Endpoint, Endpoint], _State] = {}
        self._closed: dict[tuple[Endpoint, Endpoint], None] = {}  # oldest first
        self._next_id = 1
        self.stats = StreamStats()

    def feed(self, seg: Segment) -> list[Event]:
        a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
        key = (a, b) if a <= b else (b, a)
        st = self._conns.get(key)
        out: list[Event] = []
        syn = bool(seg.flags & SYN)
        if st is not None and syn and self._is_new_syn(st, a, seg.seq):
            out.extend(self._finish(st, seg.time_ns, "a new connection reused the ports"))
            del self._conns[key]
            st = None
        if st is None:
            if not syn and not seg.payload and not seg.missing:
                return out  # a bare ACK/FIN/RST of a connection we never saw carry data
            if not syn and key in self._closed:
                self.stats.retransmitted_bytes += len(seg.payload) + seg.missing
                return out  # a late retransmission into a finished connection
            self._closed.pop(key, None)
            st = self._open(key, a, b, seg, syn)
            out.append(Opened(st.conn))
        from_client = a == st.conn.client
        d = st.dirs[0 if from_client else 1]
        if syn:
            idx = 0 if from_client else 1
            if st.isn[idx] is None:
                st.isn[idx] = seg.seq
                d.next_seq = (seg.seq + 1) % MOD
                d.last_ns = seg.time_ns
            return out
        if d.next_seq is None:  # joined late: the stream starts where the capture does
            d.next_seq = seg.seq
            d.last_ns = seg.time_ns
        if seg.payload or seg.missing:
            self._data(st, d, from_client, seg, out)
        if seg.flags & (FIN | RST) and not d.closed:
            reset = bool(seg.flags & RST)
            if reset:
                for dd, fc in ((st.dirs[0], True), (st.dirs[1], False)):
                    self._close(st, dd, fc, seg.time_ns, True, "connection reset", out)
            else:
                d.fin_seq = (seg.seq + len(seg.payload) + seg.missing) % MOD
                if not d.pending and d.next_seq == d.fin_seq:
                    self._close(st, d, from_client, seg.time_ns, False, "", out)
            if all(x.closed for x in st.dirs):
                del self._conns[key]
                self._closed[key] = None
                if len(self._closed) > RECENTLY_CLOSED:
                    del self._closed[next(iter(self._closed))]
        return out

    def finish(self, time_ns: int) -> list[Event]:
        """The end of the capture: what every open connection still lacks."""
        out: list[Event] = []
        for st in self._conns.values():
            out.extend(self._finish(st, time_ns, "the capture ended"))
        self._conns.clear()
        return out

    # ---- internals ------------------------------------------------------------------------

    def _is_new_syn(self, st: _State, sender: Endpoint, seq: int) -> bool:
        idx = 0 if sender == st.conn.client else 1
        isn = st.isn[idx]
        if isn is not None and isn == seq:
            return False  # the same SYN again (retransmitted)
        if idx == 1 and isn is None:
            return False  # the SYN-ACK of this connection
        return True

    def _open(self, key: tuple[Endpoint, Endpoint], a: Endpoint, b: Endpoint, seg: Segment, syn: bool) -> _State:
        from harness.capture.pcapfile import ACK

        client, server = (a, b) if not (syn and seg.flags & ACK) else (b, a)  # a lone SYN-ACK: b is the client
        conn = Connection(self._next_id, client, server, seg.time_ns, syn)
        self._next_id += 1
        self.stats.connections += 1
        if not syn:
            self.stats.joined_late += 1
        st = _State(conn, (_Direction(), _Direction()), [None, None])
        self._conns[key] = st
        return st

    def _data(self, st: _State, d: _Direction, from_client: bool, seg: Segment, out: list[Event]) -> None:
        if d.broken or d.closed:
            return
        assert d.next_seq is not None
        off = _diff(seg.seq, d.next_seq)
        payload, missing = seg.payload, seg.missing
        total = len(payload) + missing
        if off + total <= 0:
            self.stats.retransmitted_bytes += total
            return
        if off < 0:  # overlaps what was delivered: keep only the new tail
            self.stats.retransmitted_bytes += -off
            cut = -off
            if cut <= len(payload):
                payload = payload[cut:]
            else:
                missing -= cut - len(payload)
                payload = b""
            off = 0
        if off > 0:
            self.stats.out_of_order_segments += 1
            seq = (d.next_seq + off) % MOD
            prev = d.pending.get(seq)
            if prev is None or len(prev[1]) + prev[2] < len(payload) + missing:
                d.pending_bytes += len(payload) - (len(prev[1]) if prev else 0)
                d.pending[seq] = (seg.time_ns, payload, missing)
            if d.pending_bytes > MAX_PENDING_BYTES:
                self._skip_hole(st, d, from_client, seg.time_ns, "out-of-order buffer overflow", out)
            return
        self._deliver(st, d, from_client, seg.time_ns, payload, out)
        if missing:
            self._gap(st, d, from_client, seg.time_ns, missing, CUT, out)
            return
        self._drain(st, d, from_client, seg.time_ns, out)

    def _deliver(self, st: _State, d: _Direction, from_client: bool, t: int, payload: bytes,
                 out: list[Event]) -> None:
        d.last_ns = t
        if payload:
            assert d.next_seq is not None
            d.next_seq = (d.next_seq + len(payload)) % MOD
            out.append(Data(st.conn, from_client, t, payload))

    def _drain(self, st: _State, d: _Direction, from_client: bool, t: int, out: list[Event]) -> None:
        """Deliver buffered segments that now continue the stream."""
        while d.pending:
            assert d.next_seq is not None
            progressed = False
            for seq in list(d.pending):
                off = _diff(seq, d.next_seq)
                if off > 0:
                    continue
                _, data, missing = d.pending.pop(seq)
                d.pending_bytes -= len(data)
                if off + len(data) + missing <= 0:
                    self.stats.retransmitted_bytes += len(data) + missing
                    continue
                self._deliver(st, d, from_client, t, data[-off:] if off else data, out)
                if missing:
                    self._gap(st, d, from_client, t, missing, CUT, out)
                    return
                progressed = True
            if not progressed:
                break
        if d.fin_seq is not None and not d.pending and d.next_seq == d.fin_seq:
            self._close(st, d, from_client, t, False, "", out)

    def _skip_hole(self, st: _State, d: _Direction, from_client: bool, t: int, reason: str,
                   out: list[Event]) -> None:
        assert d.next_seq is not None
        first = min(d.pending, key=lambda s: _diff(s, d.next_seq))  # type: ignore[arg-type]
        self._gap(st, d, from_client, t, _diff(first, d.next_seq), reason, out)

    def _gap(self, st: _State, d: _Direction, from_client: bool, t: int, size: int, reason: str,
             out: list[Event]) -> None:
        d.broken = True
        d.pending.clear()
        d.pending_bytes = 0
        self.stats.gaps += 1
        self.stats.gap_bytes += max(size, 0)
        out.append(Gap(st.conn, from_client, t, max(size, 0), reason, d.last_ns))

    def _close(self, st: _State, d: _Direction, from_client: bool, t: int, reset: bool, reason: str,
               out: list[Event]) -> None:
        if d.closed:
            return
        if d.pending and not d.broken:
            self._skip_hole(st, d, from_client, t, reason or "data missing before the end of the stream", out)
        d.closed = True
        out.append(Closed(st.conn, from_client, t, reset))

    def _finish(self, st: _State, t: int, reason: str) -> list[Event]:
        out: list[Event] = []
        for d, fc in ((st.dirs[0], True), (st.dirs[1], False)):
            if d.closed:
                continue
            if d.pending and not d.broken:
                self._skip_hole(st, d, fc, t, reason, out)
            elif d.fin_seq is not None and not d.broken and d.next_seq != d.fin_seq:
                assert d.next_seq is not None
                self._gap(st, d, fc, t, _diff(d.fin_seq, d.next_seq), reason, out)
        return out
