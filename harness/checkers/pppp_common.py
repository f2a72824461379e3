"""What the PPPP checkers share: the agreed-upon times and their tolerances, reading a PPPP
message out of a trace event, and numbers as sorted inclusive ranges.

Times (E-PPPP-12): a checker is built with the run's ``first_idle_ms``, ``idle_ms``,
``liveness`` and ``grace_ms`` and a ``tolerance_ms`` for latency and scheduling. Where the
document allows a multiple "usually 3-5", an implementation may pick any of them: a reaction to
silence is expected no later than 5 x the interval plus the tolerance, and behaviour is excused
once 3 x the interval has passed (the earliest the other side may act).

Subscribers are named by node on their own events and by ROUTER routing id on the
publisher's; scenarios give every subscriber its node name as identity (`harness.packages.pppp`).

External nodes seen by the chaos proxy (``observed``, `harness.live_observe`): a send's time is
when the proxy read it, no earlier than the node sent it; a receipt's when the proxy handed it
on, no later than the node took it in. A deadline of an external node therefore gets
``external_slack_ms`` on top of the tolerance (the proxy's and a loaded host's scheduling; by
default half an ``idle`` interval, at most 1000 ms: a whole interval let a node that heartbeats
every two intervals, or waits a whole interval for its first heartbeat, pass), and a rule that a
receipt handed on but not yet taken in could break is not applied to it (each check says which).
A connection an observed external subscriber opens while a partition of the file holds waits,
handshake and all, for the heal (`fault_injection.proxy`), and what the subscriber sent on it
meanwhile is read only then: so at each heal (``cuts``) the checks of subscribers forget their
deadlines as they do when the publisher crashes (`PpppCheck.forget_peer`), and a partition
still open at the end leaves them unjudged.
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import (
    CLOCK, CRASH, PAUSE, RESTART, RESUME, START, STALL, VIA_PROXY, Checker, ClockSkews, Event, Pauses,
)
from harness.checkers.external_wire import ExternalWire
from harness.protocols.codec import Message
from harness.protocols.pppp import cut_number

PUBLISHER, SUBSCRIBER = "publisher", "subscriber"
MIN_MULTIPLE, MAX_MULTIPLE = 3, 5
NS_PER_MS = 1_000_000
EXTERNAL_SLACK_MS = 1000  # at most, on an observed external node's deadlines (see the module docstring)


class PpppCheck(Checker):
    """Base of the PPPP checkers: the agreed-upon times in ns."""

    def __init__(self, first_idle_ms: int = 250, idle_ms: int = 1000, liveness: int = 3, grace_ms: int = 30_000,
                 tolerance_ms: int = 25, external: dict[str, str] | None = None, observed: bool = False,
                 external_slack_ms: int | None = None, cuts: tuple[tuple[int, int], ...] = (),
                 **params: Any) -> None:
        super().__init__(**params)
        # node -> role of the nodes run as external processes: no probe reports their sends,
        # receipts or deliveries, so a check names those of the roles it judges as not judged
        self.external = dict(external or {})
        # whether the chaos proxy reports their messages (a live run's default); their deadlines'
        # slack then (their deliveries and notes are still unseen)
        self.observed = bool(observed) and bool(self.external)
        slack_ms = min(int(idle_ms) // 2, EXTERNAL_SLACK_MS) if external_slack_ms is None else int(external_slack_ms)
        self.slack = slack_ms * NS_PER_MS
        self.first_idle = int(first_idle_ms) * NS_PER_MS
        self.idle = int(idle_ms) * NS_PER_MS
        self.liveness = int(liveness)
        self.grace = int(grace_ms) * NS_PER_MS
        self.tol = int(tolerance_ms) * NS_PER_MS
        self.may_drop = MIN_MULTIPLE * self.idle  # silence after which a peer may be considered gone
        self.must_drop = MAX_MULTIPLE * self.idle + self.tol  # ... after which it must have been
        self._paused_at: dict[str, int] = {}  # node -> when its pause began
        self._credit: dict[str, int] = {}  # node -> paused time since its last message
        # The clock faults of each node, and since when (the credit last cleared or the clock last
        # set) a node's clock lag counts, for nodes whose clock a fault set
        self._clocks = ClockSkews()
        self._clock_mark: dict[str, int] = {}
        self._pauses = Pauses()  # for deadlines that a pause moves (`held`, `due_after`)
        if type(self).forget_peer is not PpppCheck.forget_peer:
            self._watch_peer_crashes()
        # the ends of the file's partitions (ns), while an observed external subscriber may be cut
        # off by one: what it sends on a connection opened meanwhile is read at the heal
        subscribers = self.observed and SUBSCRIBER in self.external.values()
        self._heals = sorted(end for _, end in cuts) if subscribers else []

    def slack_for(self, node: str) -> int:
        """What a deadline of ``node`` gets on top of the tolerance: the slack of an observed
        external node (see the module docstring), else nothing."""
        return self.slack if self.observed_node(node) else 0

    def tol_for(self, node: str) -> int:
        return self.tol + self.slack_for(node)

    def _lag(self, node: str, now: int) -> int:
        """How far the node's clock fell behind real time since its mark (never negative: a
        clock that runs fast or jumps forward fires early, which no bound needs to allow)."""
        mark = self._clock_mark.get(node)
        if mark is None:
            return 0
        return max(0, int((now - mark) - self._clocks.elapsed(node, mark, now)))

    def paused_for(self, ev: Event) -> bool:
        """Track pauses of ``ev``'s node (True: the event was a pause, resume, stall or clock
        change, handled). A clock set back, or running slow, delays the node's timers in real
        time: that lag is credited like a pause (the simulator's set_clock: the node reads
        ``t + offset + drift * t`` from then on)."""
        if ev.kind == CLOCK:
            node, t = ev.node, ev.time_ns
            lag = self._lag(node, t)
            back = self._clocks.on_clock(ev)
            self._credit[node] = self._credit.get(node, 0) + lag + int(back)
            self._clock_mark[node] = t
            return True
        if ev.kind == STALL:  # the harness's loop held the node up: credited as a pause that just ended
            if ev.node not in self._paused_at:
                self._credit[ev.node] = self._credit.get(ev.node, 0) + int((ev.data or {}).get("late_ns", 0))
            return True
        if ev.kind == PAUSE:  # as the runtimes do: pausing a paused node changes nothing
            self._paused_at.setdefault(ev.node, ev.time_ns)
            return True
        if ev.kind == RESUME:
            since = self._paused_at.pop(ev.node, None)
            if since is not None:
                self._credit[ev.node] = self._credit.get(ev.node, 0) + ev.time_ns - since
            return True
        if ev.kind in (CRASH, RESTART):  # a crash ends a pause (its time counts up to the crash)
            since = self._paused_at.pop(ev.node, None)
            if since is not None:
                self._credit[ev.node] = self._credit.get(ev.node, 0) + ev.time_ns - since
        return False

    LIFE = frozenset({PAUSE, RESUME, STALL, START, RESTART, CRASH})

    def held(self, ev: Event) -> bool:
        """Record when nodes are paused, for `due_after` (True: ``ev`` was a pause, resume, stall,
        start or restart, handled; a crash is recorded and left to the caller)."""
        if ev.kind not in self.LIFE:
            return False
        self._pauses.on_event(ev)
        return ev.kind != CRASH

    def due_after(self, node: str, since: int, span: int) -> int | None:
        """When ``node`` has run ``span`` since ``since``, its pauses and stalls left out; None while
        a pause holds it. An external process observed by the proxy is handed a request while it is
        stopped (SIGSTOP) and can act on it only once it runs again."""
        return self._pauses.deadline(node, since, span)

    def clock_event(self, ev: Event) -> bool:
        """For a check that judges no timing of its own but asks `silent_long`: record a CLOCK
        event (True: it was one, handled)."""
        if ev.kind != CLOCK:
            return False
        self._clocks.on_clock(ev)
        return True

    def silent_long(self, node: str, heard: int, t: int) -> bool:
        """Whether ``node`` may count a peer it last heard at ``heard`` as disconnected by ``t``:
        3 x idle of real time, or of its own clock (a clock that jumped forward or runs fast
        reaches it sooner; the check must ask for CLOCK events)."""
        return t - heard >= self.may_drop or self._clocks.elapsed(node, heard, t) >= self.may_drop

    def credit(self, node: str, now: int) -> int:
        """How long ``node`` has been paused since its credit was last cleared: a paused node
        cannot keep a deadline, so its deadlines move by that much."""
        since = self._paused_at.get(node)
        return self._credit.get(node, 0) + (now - since if since is not None else 0) + self._lag(node, now)

    def clear_credit(self, node: str, now: int) -> None:
        self._credit.pop(node, None)
        if node in self._paused_at:
            self._paused_at[node] = now
        if node in self._clock_mark:
            self._clock_mark[node] = now

    def not_judged(self) -> str:
        """The part of a verdict's detail that names the external nodes of the roles this check
        judges (a check that learns a role's behaviour from its probe cannot see theirs; one that
        judges messages judges theirs from what the chaos proxy saw, when it did)."""
        judged = self.roles if self.judged_roles is None else self.judged_roles
        names = [n for n, role in self.external.items() if judged is None or role in judged]
        if not names:
            return ""
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        if not self.observed:
            return f"; not judged: {shown} (external: {self.unseen})"
        if self.unseen_observed:
            return f"; not judged: {shown} (external: {self.unseen_observed})"
        later = f"; its deadlines {self.slack / NS_PER_MS:g} ms later" if self.timed else ""
        return f"; judged from what the chaos proxy saw: {shown} (external{later}{self.observed_note})"

    unseen = "no probe reports what it does"  # why an external node of a judged role is not judged
    # ... when the chaos proxy reports its messages ("": its messages are all the check needs)
    unseen_observed = ""
    observed_note = ""  # what judging an external node from the proxy's view leaves out, if anything
    timed = False  # it judges deadlines (an observed external node's get the slack)
    judged_roles: frozenset[str] | None = None  # the roles whose duties it judges (None: its roles)

    def forget_peer(self, peer: str) -> None:
        """What an observed external node of this check's roles owes the peer that just crashed
        (a subscriber's routing id, or "publisher"), and the timing of its sends across the peer's
        absence, are not judged: messages between a node and a crashed peer do not cross the wire
        as a probe would report them. An external publisher's ROUTER drops what it sends a gone
        subscriber (no connection to read it from), and an external subscriber's DEALER holds
        what it sends while the publisher is down, which the proxy reads only once the publisher
        is back. A check that overrides this hears the other role's crashes (`of_peer`)."""

    def _watch_peer_crashes(self) -> None:
        mine = type(self).roles or frozenset()
        if self.observed and any(role in mine for role in self.external.values()):
            self.roles = mine | {SUBSCRIBER if PUBLISHER in mine else PUBLISHER}

    def healed(self, now: int, final: bool = False) -> None:
        """Forget what observed external subscribers owe across each heal up to ``now`` (every
        partition still open, when ``final``: the run ended before the heal), as `forget_peer`
        does for the publisher's crash (see the module docstring)."""
        while self._heals and (final or self._heals[0] <= now):
            self._heals.pop(0)
            if SUBSCRIBER in (type(self).roles or ()):
                self.forget_peer(PUBLISHER)

    def of_peer(self, ev: Event) -> bool:
        """Whether ``ev`` is of the other role, heard only for its crashes (handed to
        `forget_peer`): the caller then has nothing more to do with it. Heals of partitions up
        to ``ev`` are handled first (`healed`)."""
        self.healed(ev.time_ns)
        if ev.role in (type(self).roles or ()):
            return False
        gone = self.peer_crash(ev)
        if gone is not None:
            self.forget_peer(gone)
        return True

    def peer_crash(self, ev: Event) -> str | None:
        """For an event of the other role (`forget_peer`): the routing id of a crashed
        subscriber, or "publisher" for a crashed publisher, when an observed external node of this
        check's roles is at the other end; else None. Any such event is the caller's to drop."""
        if ev.kind != CRASH:
            return None
        mine = type(self).roles or frozenset()
        if ev.role == SUBSCRIBER and PUBLISHER in mine and self.observed_node(self._external_publisher()):
            return ev.node
        if ev.role == PUBLISHER and SUBSCRIBER in mine:
            return PUBLISHER
        return None

    def _external_publisher(self) -> str:
        return next((n for n, role in self.external.items() if role == PUBLISHER), "")

    def observed_node(self, node: str) -> bool:
        """An external node whose traffic the chaos proxy reports."""
        return self.observed and node in self.external

    def observed_event(self, ev: Event) -> bool:
        """An event of an external node that the chaos proxy saw (its times are bounds only)."""
        return ev.via == VIA_PROXY

    def done(self, bad: list[tuple[str, list[Event], str]], ok: str) -> list:
        """One verdict: ok, or the first problems with their evidence and the clause of the first."""
        if not bad:
            return [self.ok(ok + self.not_judged())]
        detail = f"{len(bad)} problem(s); first: " + "; ".join(p for p, _, _ in bad[:3]) + self.not_judged()
        evidence = [e.describe() for _, evs, _ in bad[:4] for e in evs[:4]]
        return [self.fail(detail, evidence, clause=bad[0][2])]


def message(ev: Event) -> Message | None:
    """The PPPP message of a send or receive: after the routing id on the publisher's ROUTER."""
    return ev.message(1 if ev.role == PUBLISHER else 0)


def peer_of(ev: Event) -> bytes:
    """The subscriber a publisher event is about: its routing id."""
    return ev.frames[0] if ev.frames else b""


def inside(seq: int, ranges: list[Any]) -> bool:
    for first, last in ranges:
        if first <= seq <= last:
            return True
    return False


class Gaps:
    """Numbers skipped so far (sorted, disjoint, inclusive ranges): what arrived above a gap
    opens it, what arrives inside one fills it."""

    __slots__ = ("highest", "ranges")

    def __init__(self, first: int) -> None:
        self.highest = first
        self.ranges: list[list[int]] = []

    def add(self, seq: int) -> None:
        if seq > self.highest:
            if seq > self.highest + 1:
                self.ranges.append([self.highest + 1, seq - 1])
            self.highest = seq
            return
        cut_number(self.ranges, seq)

    def below(self, h: int) -> list[tuple[int, int]]:
        """The skipped ranges up to h (cut at h)."""
        return [(f, min(last, h)) for f, last in self.ranges if f <= h]


def covered(need: list[tuple[int, int]], ranges: list[Any]) -> tuple[int, int] | None:
    """The first part of ``need`` that no range of ``ranges`` holds, or None."""
    spans = sorted((int(f), int(last)) for f, last in ranges)
    for first, last in need:
        at = first
        for f, last2 in spans:
            if f <= at <= last2:
                at = last2 + 1
                if at > last:
                    break
        if at <= last:
            return at, last
    return None


class PpppExternalWire(ExternalWire):
    """`ExternalWire` of PPPP: the reference publisher's drop names the subscriber by its routing
    id (in-process subscribers have their node name as identity); a reference subscriber's drop
    is the publisher's, when it is external."""

    def __init__(self, subscribers: list[str] | None = None, external_publisher: str = "", **params: Any) -> None:
        super().__init__(**params)
        self.in_process_subscribers = {s.encode() for s in subscribers or ()}
        self.external_publisher = external_publisher

    fan_in = frozenset({PUBLISHER})

    def sender(self, ev: Event, routing_id: bytes | None) -> tuple[str, str | None] | None:
        if ev.role == PUBLISHER:  # (a drop whose receipt is not found is not judged)
            return None if routing_id is None or routing_id in self.in_process_subscribers else (
                f"the subscriber with identity {routing_id!r}", "to-publisher")
        return (self.external_publisher, "to-subscriber") if self.external_publisher else None
