"""Checkers: properties verified over the events of a run.

A checker sees every `Event` of a run in time order (sends, receives, application commands
and deliveries, discards, notes, crashes and restarts) through ``on_event`` and gives its
verdicts at the end with ``finish``. The same checkers run on simulated and live runs: the
runtime feeds them through an `Observer`. Every failed verdict carries evidence (decoded
messages, times, nodes) and the clause it concerns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from harness.node import SocketSpec
from harness.protocols import Codec, DecodeError
from harness.protocols.codec import Message

SEND, RECV, COMMAND, DELIVER, DISCARD, NOTE, CRASH, RESTART, ERROR = (
    "send", "recv", "command", "deliver", "discard", "note", "crash", "restart", "error",
)
PAUSE, RESUME = "pause", "resume"  # a node stopped (SIGSTOP, or the simulator holding it) and going on
# What a probed node does to its sockets (data: ``{"topic": bytes}`` or ``{"endpoint": str}``), when
# an incarnation starts, and a clock fault on its host (data: ``{"offset_ns", "drift"}``).
SUBSCRIBE, UNSUBSCRIBE, CONNECT, DISCONNECT = "subscribe", "unsubscribe", "connect", "disconnect"
START, CLOCK = "start", "clock"
# Live only: the runtime fired an in-process node's timer late, its one loop busy with other nodes
# (data: ``{"late_ns"}``). The node was held up by the harness for that long, as by a short pause:
# timing checks excuse it (`Pauses`, the PPPP checks' credit); external nodes have none.
STALL = "stall"
# An event of an external node seen by the chaos proxy (harness.live_observe), not by a probe: its
# time bounds a send from above and a receive from below only, and across two connections of a
# node the order need not be the order the node sent them in (harness.live_observe).
VIA_PROXY = "proxy"
# The role of a live run's passive listener on what external nodes publish (reference_nodes.tap):
# its receipt on the socket named after a node is that node's publication, heard after it was sent.
TAP = "tap"


@dataclass(slots=True)  # slots: built for most sends and receives of a run, read by every checker
class Event:
    time_ns: int
    node: str
    role: str
    kind: str
    socket: str = ""
    frames: list[bytes] | None = None
    msg_type: str = ""
    data: dict[str, Any] | None = None  # command request, Deliver/Note data, error detail
    codec: Codec | None = None
    _msg: Any = None
    _msg_skip: int = 0  # the envelope frames ``_msg`` was decoded after
    _decoded: dict[tuple[int, str | None, str | None], Message | None] | None = None
    via: str = ""  # "proxy": a send or receive of an external node, as the chaos proxy saw it (harness.live_observe)

    def message(self, skip: int = 0) -> Message | None:
        """The frames decoded (after ``skip`` envelope frames), or None if they do not decode."""
        if self._msg is None:
            if self.frames is None or self.codec is None:
                self._msg = False
            else:
                self._msg_skip = skip
                try:
                    self._msg = self.codec.decode(self.frames[skip:])
                except DecodeError:
                    self._msg = False
        return self._msg or None

    def decoded(self, skip: int = 0, as_: str | None = None, channel: str | None = None) -> Message | None:
        """The frames after ``skip`` decoded as ``as_`` or on ``channel``, or None if they do not
        decode; cached on the event, which every checker of the run shares, so each way of
        decoding a message runs once."""
        cache = self._decoded
        if cache is None:
            cache = self._decoded = {}
        key = (skip, as_, channel)
        if key in cache:
            return cache[key]
        msg = None
        if self.frames is not None and self.codec is not None and len(self.frames) > skip:
            try:
                msg = self.codec.decode(self.frames[skip:], as_=as_, channel=channel)
            except DecodeError:
                msg = None
        cache[key] = msg
        return msg

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"time_ms": round(self.time_ns / 1e6, 3), "node": self.node, "kind": self.kind}
        if self.socket:
            out["socket"] = self.socket
        if self.msg_type:
            out["message"] = self.msg_type
        if self.via:
            out["seen_by"] = self.via
        if self.frames is not None and self.codec is not None:
            m = self._msg if self._msg not in (None, False) else None
            if m is not None:
                out["fields"] = self.codec.show(m)
            else:
                out["frames"] = ["0x" + f.hex() if f else "" for f in self.frames[:12]]
        if self.data:
            out["data"] = {k: (v.hex() if isinstance(v, bytes) else v) for k, v in self.data.items()
                           if not isinstance(v, (list, dict)) or len(str(v)) < 200}
        return out


def tapped_from(ev: Event, nodes: frozenset[str] | dict[str, str]) -> str | None:
    """The node of ``nodes`` the tap heard ``ev`` from (its socket is named after that node), or
    None when ``ev`` is no receipt of the tap from one of them."""
    return ev.socket if ev.role == TAP and ev.kind == RECV and ev.socket in nodes and ev.frames else None


@dataclass
class Verdict:
    check: str
    clause: str
    ok: bool
    detail: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    level: str = "MUST"

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "clause": self.clause, "ok": self.ok, "level": self.level,
                "detail": self.detail, "evidence": self.evidence}


class Checker:
    name = ""
    clause = ""
    # What the checker wants to see; None = everything. The observer skips building events no
    # checker wants (most sends and receives), which keeps the simulator's hot path short.
    kinds: frozenset[str] | None = None
    roles: frozenset[str] | None = None
    # True when the verdict is sound on a capture of the traffic alone (`zmq-harness pcap`):
    # the checker needs only sends and receives, and it neither misses nor invents a violation
    # because the capture holds each connection's traffic only from its first byte (a
    # connection that began earlier is not read) nor because a PUB socket's sends that no
    # subscriber wanted never reach the wire. The others are reported as not applicable there.
    from_capture = False
    capture_note = ""  # why not, when the event kinds it needs do not already say it
    # The level of what the check judges. A check of a SHOULD, or of a MAY feature the document
    # lets an implementation leave out, is never among a package's default checks: a scenario
    # (or an exploration file) that names it in `check:` says the implementation claims it.
    level = "MUST"

    def __init__(self, **params: Any) -> None:
        self.params = params

    def on_event(self, ev: Event) -> None:
        raise NotImplementedError

    def on_sockets(self, node: str, sockets: list[SocketSpec]) -> None:
        """The sockets a node (each incarnation) declared; most checkers need not know."""

    def finish(self, end_ns: int) -> list[Verdict]:
        raise NotImplementedError

    def ok(self, detail: str) -> Verdict:
        return Verdict(self.name, self.clause, True, detail, level=self.level)

    def fail(self, detail: str, evidence: Iterable[dict[str, Any]] = (), clause: str | None = None) -> Verdict:
        return Verdict(self.name, clause or self.clause, False, detail, list(evidence)[:20], level=self.level)

    def first_problem(self, bad: list[tuple[Event, str, str]], what: str) -> Verdict:
        """The failing verdict of problems ``(event, detail, clause)``: how many (``what``), the first
        one's detail and clause, the first five events as evidence."""
        _, detail, clause = bad[0]
        return self.fail(f"{len(bad)} {what}; first: {detail}", [e.describe() for e, _, _ in bad[:5]], clause=clause)


class Pauses:
    """When each node was paused, so that a bound can leave that time out."""

    def __init__(self) -> None:
        self.spans: dict[str, list[tuple[int, int | None]]] = {}  # node -> [(from, until or None), ...]

    def on_event(self, ev: Event) -> None:
        """Feed PAUSE, RESUME, CRASH, RESTART, START and STALL events (others change nothing)."""
        spans = self.spans.setdefault(ev.node, [])
        open_ = bool(spans) and spans[-1][1] is None
        if ev.kind == STALL:  # held up until now by the harness's busy loop: a pause that just ended
            if not open_:
                lo = ev.time_ns - int((ev.data or {}).get("late_ns", 0))
                spans.append((max(lo, spans[-1][1]) if spans else lo, ev.time_ns))  # type: ignore[type-var]
            return
        if ev.kind == PAUSE and not open_:
            spans.append((ev.time_ns, None))
        elif ev.kind in (RESUME, CRASH, RESTART, START) and open_:  # (a crash ends a pause too)
            spans[-1] = (spans[-1][0], ev.time_ns)  # a pause within a pause ends with the one resume

    def between(self, node: str, a: int, b: int) -> int:
        """Nanoseconds the node was paused within [a, b]."""
        total = 0
        for lo, hi in self.spans.get(node, ()):
            total += max(0, min(b if hi is None else hi, b) - max(lo, a))
        return total

    def deadline(self, node: str, since: int, span: int) -> int | None:
        """When the node has run (not paused) for ``span`` since ``since``: a bound on something
        it must do by its own timers; None when a pause still open when the run ended holds it."""
        t, left = since, span
        for lo, hi in self.spans.get(node, ()):
            if hi is not None and hi <= t:
                continue
            if lo > t:
                if lo - t >= left:
                    break
                left -= lo - t
            if hi is None:
                return None
            t = max(t, hi)
        return t + left


class Absences(Pauses):
    """When each node was away: down (from its crash to its restart) or paused (to its resume).
    The spans, and what `Pauses` reads of them, are the same; only what opens and closes one
    differs (a crash opens one here, where it ends a pause there)."""

    def on_event(self, ev: Event) -> None:
        """Feed PAUSE, RESUME, CRASH, RESTART and START events (others change nothing)."""
        spans = self.spans.setdefault(ev.node, [])
        open_ = bool(spans) and spans[-1][1] is None
        if ev.kind in (PAUSE, CRASH) and not open_:
            spans.append((ev.time_ns, None))
        elif ev.kind in (RESUME, RESTART, START) and open_:
            spans[-1] = (spans[-1][0], ev.time_ns)

    def near(self, node: str, a: int, b: int, after: int = 0) -> bool:
        """Whether the node was away at some time in [a, b], or came back less than ``after``
        before ``a``."""
        return any(lo < b and (hi is None or hi + after > a) for lo, hi in self.spans.get(node, ()))


class ClockSkews:
    """The clock faults of each node, as the simulator applies them (``set_clock``): from a CLOCK
    event on, the node reads ``t + offset + drift * t``."""

    def __init__(self) -> None:
        self.history: dict[str, list[tuple[int, int, float]]] = {}  # node -> (from, offset, drift), in time order

    def _skew(self, node: str) -> tuple[int, float]:
        """The node's clock fault now (its latest): (offset, drift)."""
        h = self.history.get(node)
        return (h[-1][1], h[-1][2]) if h else (0, 0.0)

    def node_time(self, node: str, t: int) -> float:
        """What the node's clock reads at ``t`` by its latest clock fault (``t`` not before it)."""
        offset, drift = self._skew(node)
        return t + offset + drift * t

    def node_time_at(self, node: str, t: int) -> float:
        """What the node's clock read at real time ``t``, by the clock faults in force then."""
        offset, drift = 0, 0.0
        for since, o, d in self.history.get(node, ()):
            if since > t:
                break
            offset, drift = o, d
        return t + offset + drift * t

    def elapsed(self, node: str, t0: int, t1: int) -> float:
        """How much time the node's own clock counted from real time ``t0`` to ``t1``: more than
        ``t1 - t0`` when it jumped forward or runs fast, so its timers fire early in real time."""
        return self.node_time_at(node, t1) - self.node_time_at(node, t0)

    def drift(self, node: str) -> float:
        return self._skew(node)[1]

    def on_clock(self, ev: Event) -> float:
        """Apply a CLOCK event; how far it set the node's clock back (0 when forward): its timers
        then fire that much later in real time."""
        before = self.node_time(ev.node, ev.time_ns)
        d = ev.data or {}
        skew = (ev.time_ns, int(d.get("offset_ns", 0)), float(d.get("drift", 0.0)))
        self.history.setdefault(ev.node, []).append(skew)
        return max(0.0, before - self.node_time(ev.node, ev.time_ns))


class NoNodeErrors(Checker):
    """No node raised an exception (a reference node or an implementation must not crash on
    any input, including malformed messages)."""

    name = "no-node-errors"
    clause = ""
    kinds = frozenset({ERROR})

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.errors: list[Event] = []

    def on_event(self, ev: Event) -> None:
        if ev.kind == ERROR:
            self.errors.append(ev)

    def finish(self, end_ns: int) -> list[Verdict]:
        if not self.errors:
            return [self.ok("no node raised an exception")]
        first = self.errors[0]
        return [self.fail(f"{len(self.errors)} node error(s); first on {first.node}: "
                          f"{(first.data or {}).get('error', '')}", [e.describe() for e in self.errors])]


class Observer:
    """Fans events out to checkers; runtimes call ``emit``. A checker that raises is a bug of the
    harness, not of the node whose event it was reading: it is taken out of the run and its
    verdict fails naming the error (the node runs on, and ``no-node-errors`` does not blame it)."""

    def __init__(self, checkers: list[Checker], codec: Codec | None, roles: dict[str, str]) -> None:
        self.checkers = checkers
        self.codec = codec
        self.roles = roles
        self.count = 0
        # (kind, role) -> the checkers that want such events, computed on first sight.
        self._routes: dict[tuple[str, str], list[Checker]] = {}
        self.broken: dict[int, Verdict] = {}  # id(checker) -> its failing verdict

    def _route(self, kind: str, role: str) -> list[Checker]:
        out = [c for c in self.checkers
               if (c.kinds is None or kind in c.kinds) and (c.roles is None or role in c.roles)
               and id(c) not in self.broken]
        self._routes[(kind, role)] = out
        return out

    def _broke(self, c: Checker, err: Exception, ev: Event | None) -> None:
        import traceback  # only on a harness bug
        where = "".join(traceback.format_exception_only(type(err), err)).strip()
        self.broken[id(c)] = Verdict(c.name, c.clause, False,
                                     f"the checker itself failed (a bug of the harness, not of the nodes): {where}",
                                     [ev.describe()] if ev is not None else [], level=c.level)
        self._routes = {}  # routes are computed again without it

    def emit(self, time_ns: int, node: str, kind: str, *, socket: str = "", frames: list[bytes] | None = None,
             msg_type: str = "", data: dict[str, Any] | None = None, via: str = "") -> None:
        self.count += 1
        role = self.roles.get(node, "")
        targets = self._routes.get((kind, role))
        if targets is None:
            targets = self._route(kind, role)
        if not targets:
            return
        ev = Event(time_ns, node, role, kind, socket, frames, msg_type, data, self.codec)
        if via:
            ev.via = via
        for c in targets:
            try:
                c.on_event(ev)
            except Exception as err:  # noqa: BLE001 - any checker bug; see the class docstring
                self._broke(c, err, ev)

    def declare(self, node: str, sockets: list[SocketSpec]) -> None:
        """A node was built with these sockets (the probe says so; runtimes need not)."""
        for c in self.checkers:
            if id(c) not in self.broken:
                try:
                    c.on_sockets(node, sockets)
                except Exception as err:  # noqa: BLE001
                    self._broke(c, err, None)

    def finish(self, end_ns: int) -> list[Verdict]:
        out = []
        for c in self.checkers:
            if id(c) not in self.broken:
                try:
                    out.extend(c.finish(end_ns))
                except Exception as err:  # noqa: BLE001
                    self._broke(c, err, None)
            if id(c) in self.broken:
                out.append(self.broken[id(c)])
        return out
