"""ZMTP connections out of a capture: `read_links(path, ports)` yields `WireEvent`s in capture
order — a link's handshake, each whole message with its direction and time, subscriptions,
and everything that stops a link from being read (with the reason).

A *link* is one TCP connection that carries ZMTP. Which connections are read:

* with ``ports``: every connection with either end on one of them; one that does not speak
  ZMTP 3 from its first byte is a finding (`Problem` "not-zmtp"), unless the capture joined it
  after it began ("joined-late": its start, the greeting, is not in the file);
* without: every connection that starts with a ZMTP greeting; others are counted and ignored.

A gap in either direction (bytes the capture does not hold) or a framing error ends the link:
nothing after it, in either direction, is reported, since the frame boundaries past a gap are
unknowable and a request/answer pair cut in half would mislead a checker. A gap is only known
for sure once the stream has gone on without the missing bytes; a reader given the gaps of a
first pass (``cuts``: link id -> the time the missing bytes were sent after) stops the link at
that time, so nothing the other side sent after the missing bytes is reported either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Union

from harness.capture import zmtp
from harness.capture.pcapfile import ReadStats, segments
from harness.capture.tcp import Closed, Connection, Data, Gap, Opened, Reassembler, StreamStats, endpoint_text

# Problem kinds.
NOT_ZMTP, JOINED_LATE, GAP, FRAMING, ENCRYPTED = "not-zmtp", "joined-late", "gap", "framing", "encrypted"


@dataclass
class Side:
    endpoint: str  # host:port
    socket_type: str = ""  # from its READY / INITIATE metadata
    identity: bytes = b""  # the routing id it presented ("Identity" property), b"" for none
    mechanism: str = ""
    version: str = ""


@dataclass
class Link:
    id: int
    conn: Connection
    sides: tuple[Side, Side]  # (client: the connecting side, server: the listening side)
    readers: tuple[zmtp.ZmtpReader, zmtp.ZmtpReader] = field(default_factory=lambda: (zmtp.ZmtpReader(),
                                                                                       zmtp.ZmtpReader()))
    ended: str = ""  # why nothing more is read ("" while it is read)
    up: bool = False  # both READYs seen
    down: bool = False  # closed (FIN or RST in either direction)
    closed: int = 0  # directions closed

    def describe(self) -> str:
        c, s = self.sides
        return f"link #{self.id} {c.endpoint} -> {s.endpoint}"


@dataclass
class LinkUp:
    time_ns: int
    link: Link


@dataclass
class WireMessage:
    time_ns: int
    link: Link
    from_client: bool
    frames: list[bytes]

    @property
    def sender(self) -> Side:
        return self.link.sides[0 if self.from_client else 1]

    @property
    def receiver(self) -> Side:
        return self.link.sides[1 if self.from_client else 0]


@dataclass
class WireSubscription:
    time_ns: int
    link: Link
    from_client: bool
    subscribe: bool
    topic: bytes


@dataclass
class Problem:
    time_ns: int
    link: Link
    from_client: bool
    kind: str  # NOT_ZMTP, JOINED_LATE, GAP, FRAMING, ENCRYPTED
    detail: str


@dataclass
class LinkDown:
    time_ns: int
    link: Link
    reset: bool


WireEvent = Union[LinkUp, WireMessage, WireSubscription, Problem, LinkDown]


@dataclass
class LinkStats:
    tcp_connections: int = 0
    links: int = 0  # connections read as ZMTP
    ignored_connections: int = 0  # not on the ports / not ZMTP (without --ports)
    messages: int = 0
    commands: dict[str, int] = field(default_factory=dict)  # ZMTP command name -> count
    problems: dict[str, int] = field(default_factory=dict)  # problem kind -> count
    first_ns: int | None = None
    last_ns: int | None = None


SUBSCRIBER_TYPES = ("SUB", "XSUB")


class LinkReader:
    """Turns reassembled stream events into wire events (see the module docstring)."""

    def __init__(self, ports: set[int] | None, cuts: dict[int, tuple[int, bool, str]] | None = None) -> None:
        self.ports = ports
        self.cuts = cuts or {}
        # link id -> (when its first gap's missing bytes were sent after, from the client?, what)
        self.gaps: dict[int, tuple[int, bool, str]] = {}
        self.stats = LinkStats()
        self._links: dict[int, Link | None] = {}  # connection id -> link (None: ignored)
        self._next = 1
        self.reassembly: StreamStats | None = None  # set when the capture has been read

    def on_stream(self, ev: Opened | Data | Gap | Closed) -> list[WireEvent]:
        if isinstance(ev, Opened):
            self.stats.tcp_connections += 1
            c = ev.conn
            if self.ports is not None and c.client[1] not in self.ports and c.server[1] not in self.ports:
                self._links[c.id] = None
                self.stats.ignored_connections += 1
                return []
            link = Link(self._next, c, (Side(endpoint_text(c.client)), Side(endpoint_text(c.server))))
            self._next += 1
            self._links[c.id] = link
            return []
        link = self._links.get(ev.conn.id)
        if link is None:
            if isinstance(ev, Closed):
                self._links.pop(ev.conn.id, None)
            return []
        if isinstance(ev, Closed):
            return self._closed(link, ev)
        if link.ended:
            return []
        if isinstance(ev, Gap):
            size = f"{ev.size} byte(s)" if ev.size else "bytes"
            what = f"{size} missing from {link.sides[0 if ev.from_client else 1].endpoint}: {ev.reason}"
            self.gaps.setdefault(link.id, (ev.since_ns, ev.from_client, what))
            return self._end(link, ev.from_client, ev.time_ns, GAP, what)
        cut = self.cuts.get(link.id)
        if cut is not None and ev.time_ns > cut[0]:
            return self._end(link, cut[1], cut[0], GAP, cut[2])
        return self._data(link, ev)

    def _data(self, link: Link, ev: Data) -> list[WireEvent]:
        reader = link.readers[0 if ev.from_client else 1]
        side = link.sides[0 if ev.from_client else 1]
        first = reader.bytes == 0
        out: list[WireEvent] = []
        for z in reader.feed(ev.time_ns, ev.data):
            cls = z.__class__
            if cls is zmtp.Message:
                self.stats.messages += 1
                if side.socket_type in SUBSCRIBER_TYPES and z.frames and z.frames[0][:1] in (b"\x00", b"\x01"):
                    # ZMTP 3.0 subscriptions travel as messages (01/00 + topic) from SUB/XSUB
                    out.append(WireSubscription(z.time_ns, link, ev.from_client, z.frames[0][:1] == b"\x01",
                                                z.frames[0][1:]))
                else:
                    out.append(WireMessage(z.time_ns, link, ev.from_client, z.frames))
            elif cls is zmtp.Command:
                self.stats.commands[z.name] = self.stats.commands.get(z.name, 0) + 1
                if z.name in ("SUBSCRIBE", "CANCEL"):
                    out.append(WireSubscription(z.time_ns, link, ev.from_client, z.name == "SUBSCRIBE", z.data))
                elif z.name in ("READY", "INITIATE") and z.properties is not None:
                    side.socket_type = z.properties.get("Socket-Type", b"").decode("ascii", "replace")
                    side.identity = z.properties.get("Identity", b"")
                    if all(s.socket_type for s in link.sides) and not link.up:
                        link.up = True
                        self.stats.links += 1
                        out.append(LinkUp(z.time_ns, link))
            elif cls is zmtp.Greeting:
                side.mechanism, side.version = z.mechanism, f"{z.major}.{z.minor}"
                if z.mechanism == "CURVE":
                    out.extend(self._end(link, ev.from_client, z.time_ns, ENCRYPTED,
                                         "CURVE-encrypted: its messages cannot be read from a capture"))
                    return out
            elif cls is zmtp.Failure:
                if first and z.offset == 0 and not link.conn.syn_seen:
                    out.extend(self._end(link, ev.from_client, z.time_ns, JOINED_LATE,
                                         "the connection began before the capture (its ZMTP greeting is not in it)"))
                elif z.offset < zmtp.GREETING_SIZE and self.ports is None:
                    self._ignore(link)
                else:
                    kind = NOT_ZMTP if z.offset < zmtp.GREETING_SIZE else FRAMING
                    out.extend(self._end(link, ev.from_client, z.time_ns, kind,
                                         f"{side.endpoint}, byte {z.offset} of its stream: {z.reason}"))
                return out
        return out

    def _ignore(self, link: Link) -> None:
        link.ended = "ignored"
        self._links[link.conn.id] = None
        self.stats.ignored_connections += 1

    def _end(self, link: Link, from_client: bool, t: int, kind: str, detail: str) -> list[WireEvent]:
        link.ended = kind
        self.stats.problems[kind] = self.stats.problems.get(kind, 0) + 1
        return [Problem(t, link, from_client, kind, detail)]

    def _closed(self, link: Link, ev: Closed) -> list[WireEvent]:
        """The first FIN or RST ends the link for the trace (a half-closed ZMTP connection
        carries nothing more that a peer would read)."""
        link.closed += 1
        if link.closed == 2:
            self._links.pop(link.conn.id, None)  # forget it: memory stays flat over many connections
        if link.down:
            return []
        link.down = True
        return [LinkDown(ev.time_ns, link, ev.reset)] if link.up else []


def read_links(path: str, ports: set[int] | None, read_stats: ReadStats | None = None,
               reader: LinkReader | None = None) -> Iterator[WireEvent]:
    """``reader`` may carry the ``cuts`` of an earlier pass (see the module docstring)."""
    """Every wire event of the capture at ``path`` (see the module docstring)."""
    links = reader or LinkReader(ports)
    stream = Reassembler()
    st = links.stats
    t = 0
    for seg in segments(path, read_stats):
        t = seg.time_ns
        if st.first_ns is None:
            st.first_ns = t
        for ev in stream.feed(seg):
            yield from links.on_stream(ev)
    st.last_ns = t
    for ev in stream.finish(t):
        yield from links.on_stream(ev)
    links.reassembly = stream.stats
