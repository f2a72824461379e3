"""DCP heartbeating, checked from what the broker receives and sends back (specs/dcp.txt,
"Heartbeating", with docs/errata.md E-DCP-02, -07, -08).

The rules hold for every correct implementation in every run, whatever the faults: they judge
what a node sent in answer to what it received, never what the network did with it.
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import (
    CLOCK, CRASH, PAUSE, RECV, RESTART, RESUME, SEND, STALL, START, Checker, Event, Pauses, Verdict,
)
from harness.protocols import DecodeError

ANSWERS = ("PONG", "RECONNECT")
# A PING is unanswered once this many later PINGs of the same peer reached the broker with no
# answer in between: generous for a broker that answers on its own heartbeat tick, not at once.
LATER_PINGS = 2


class HeartbeatAnswers(Checker):
    """The broker answers every PING: before two more PINGs of the same peer reach it, it has
    sent that peer a PONG, or a RECONNECT (``dcp.heartbeat.pong``); it PONGs only a peer that
    REGISTERed with it since it last started, and a RECONNECT is the answer to any other
    (``dcp.heartbeat.reconnect-unknown``); a registration it PONGs was confirmed with the same
    REGISTER message first, and so was one it accepted by giving the peer a request: by the end of
    that broker life it has sent the peer a REGISTER (``dcp.broker.register-confirm``, E-DCP-07).
    Every well-formed REGISTER it receives is owed its own echo (E-DCP-07: silence is the
    failure; a repeat is echoed again): echoes match REGISTERs in order, and one is unconfirmed
    once two more PINGs or REGISTERs of the same peer reached the broker with no echo left for it
    (counted, not timed, like the PINGs; its requests and replies do not count, which a broker
    may read in a burst before it writes). Clients never send a PING
    (``dcp.heartbeat.client-no-heartbeat``). A broker that crashes owes nothing for the PINGs of
    its earlier life; a PING still unanswered when the run ends is not judged. An external
    client's PINGs are seen as a reference broker receives them, from the routing identity that
    is the client's node name (``--identity {name}``) and that never REGISTERed (a client that
    registers is a worker, ``dcp.client.may-register``)."""

    name = "heartbeat-answers"
    clause = "dcp.heartbeat.pong"
    kinds = frozenset({SEND, RECV, CRASH, RESTART})

    def __init__(self, external_clients: frozenset[str] = frozenset(), **params: Any) -> None:
        super().__init__(**params)
        self.external_clients = {n.encode(): n for n in sorted(external_clients)}  # identity -> node
        self.ever_registered: set[bytes] = set()  # peers that REGISTERed with any broker
        self.registered_clients: set[str] = set()  # clients that sent a REGISTER (workers, then)
        self.registered: dict[str, set[bytes]] = {}  # broker -> peers that REGISTERed in this life
        self.confirmed: dict[str, set[bytes]] = {}  # broker -> peers it sent a REGISTER back
        self.pending: dict[tuple[str, bytes], list[Event]] = {}  # (broker, peer) -> its PINGs since an answer
        self.given: dict[tuple[str, bytes], Event] = {}  # (broker, registered peer) -> first REQUEST it got
        self.heard: dict[tuple[str, bytes], int] = {}  # (broker, peer) -> its PINGs and REGISTERs, this life
        # (broker, peer) -> its REGISTERs not yet echoed, oldest first, each with `heard` when it came
        self.unechoed: dict[tuple[str, bytes], list[tuple[Event, int]]] = {}
        self.echoes = 0
        self.bad: list[tuple[Event, str, str]] = []
        self.pings = 0

    def on_event(self, ev: Event) -> None:
        if ev.kind in (CRASH, RESTART):
            if ev.role == "broker":
                self._judge_accepted(ev.node)
                self.registered.pop(ev.node, None)
                self.confirmed.pop(ev.node, None)
                self.pending = {k: v for k, v in self.pending.items() if k[0] != ev.node}
                self.unechoed = {k: v for k, v in self.unechoed.items() if k[0] != ev.node}
                self.heard = {k: v for k, v in self.heard.items() if k[0] != ev.node}
            return
        if ev.role == "client" and ev.kind == SEND:
            if ev.msg_type == "REGISTER":  # a client that registers is a worker (dcp.client.may-register)
                self.registered_clients.add(ev.node)
            elif ev.msg_type == "PING" and ev.node not in self.registered_clients:
                self.bad.append((ev, f"client {ev.node} sent a PING", "dcp.heartbeat.client-no-heartbeat"))
            return
        if ev.role != "broker" or not ev.frames or ev.via:
            return  # (the proxy's view of an external broker has no routing identities)
        peer, key, kind = ev.frames[0], (ev.node, ev.frames[0]), message_type(ev)
        if ev.kind == RECV and kind in ("PING", "REGISTER"):
            self._owe_echo(ev, key, kind)
        if ev.kind == RECV and kind == "REGISTER":
            self.registered.setdefault(ev.node, set()).add(peer)
            self.ever_registered.add(peer)
        elif ev.kind == RECV and kind == "PING":
            self.pings += 1
            client = self.external_clients.get(peer)
            if client is not None and peer not in self.ever_registered:
                self.bad.append((ev, f"client {client} (external) sent a PING", "dcp.heartbeat.client-no-heartbeat"))
                self.external_clients.pop(peer)  # (once per client)
            waiting = self.pending.setdefault(key, [])
            waiting.append(ev)
            if len(waiting) > LATER_PINGS:
                first = waiting[0]
                self.bad.append((first, f"{ev.node} did not answer the PING of {peer!r} received at "
                                 f"{first.time_ns / 1e6:.1f} ms before {LATER_PINGS} more came", self.clause))
                waiting.clear()
        elif ev.kind == SEND and kind == "REGISTER":
            self.confirmed.setdefault(ev.node, set()).add(peer)
            owed = self.unechoed.get(key)
            if owed:
                owed.pop(0)
                self.echoes += 1
        elif ev.kind == SEND and kind == "REQUEST" and peer in self.registered.get(ev.node, set()):
            self.given.setdefault(key, ev)
        elif ev.kind == SEND and kind in ANSWERS:
            self.pending.pop(key, None)
            if kind == "PONG":
                self._judge_pong(ev, peer)

    def _owe_echo(self, ev: Event, key: tuple[str, bytes], kind: str) -> None:
        """A PING or REGISTER of a peer reached the broker: one more later message for each of its
        REGISTERs still unechoed (the oldest fails after ``LATER_PINGS``), and a REGISTER is owed
        its own echo."""
        heard = self.heard[key] = self.heard.get(key, 0) + 1
        owed = self.unechoed.setdefault(key, [])
        if owed and heard - owed[0][1] >= LATER_PINGS:
            first = owed[0][0]
            self.bad.append((first, f"{ev.node} did not confirm the REGISTER of {key[1]!r} received at "
                                    f"{first.time_ns / 1e6:.1f} ms (no echo of its own) before {LATER_PINGS} "
                                    f"more PINGs or REGISTERs of that peer came", "dcp.broker.register-confirm"))
            owed.clear()  # (one failure per stretch of silence)
        if kind == "REGISTER":
            owed.append((ev, heard))

    def _judge_pong(self, ev: Event, peer: bytes) -> None:
        if peer not in self.registered.get(ev.node, set()):
            self.bad.append((ev, f"{ev.node} sent PONG to {peer!r}, which had not REGISTERed with it since it "
                                 "started (a RECONNECT is the answer)", "dcp.heartbeat.reconnect-unknown"))
        elif peer not in self.confirmed.get(ev.node, set()):
            self.bad.append((ev, f"{ev.node} sent PONG to {peer!r}, whose registration it never confirmed with "
                                 "a REGISTER", "dcp.broker.register-confirm"))
            self.confirmed.setdefault(ev.node, set()).add(peer)  # one failure per registration

    def _judge_accepted(self, broker: str) -> None:
        """At the end of a broker's life: every registration it accepted (it gave the peer a
        request) was confirmed."""
        confirmed = self.confirmed.get(broker, set())
        for (node, peer), ev in list(self.given.items()):
            if node != broker:
                continue
            del self.given[(node, peer)]
            if peer not in confirmed:
                self.bad.append((ev, f"{broker} gave {peer!r} a request, so it accepted its registration, but it "
                                     "never confirmed it with a REGISTER", "dcp.broker.register-confirm"))

    def finish(self, end_ns: int) -> list[Verdict]:
        for broker in sorted({b for b, _ in self.given}):
            self._judge_accepted(broker)
        if not self.bad:
            return [self.ok(f"{self.pings} PING(s) received by the broker, each answered in time; "
                            f"{self.echoes} REGISTER(s) each confirmed by its own echo; "
                            "PONGs only to confirmed registrations; no client PING")]
        return [self.first_problem(self.bad, "heartbeat problem(s)")]


NS_PER_MS = 1_000_000
FACTOR = 2.5  # E-DCP-09's tolerance factor: a reference worker is never silent for 2 intervals
TOLERANCE_MS = 20  # slack for a live run's scheduling (the simulator keeps timers exactly)
EXTERNAL_SLACK_MS = 1000  # at most, on an external worker's bound (a quarter of its interval by default)


class WorkerInterval(Checker):
    """A worker sends the broker something at least once per ``factor`` (default 2.5) x the
    agreed heartbeat interval of its own clock, from its first message of a life to its crash or
    the end of the run (``dcp.heartbeat.worker-interval``, E-DCP-09: any message counts; the
    factor is the scenario's tolerance). The reference worker pings one interval after its last
    message, or one after it took up a request it is still working on, so it is never silent for
    two. Time it is paused does not count; a gap across a change of its clock is not judged, and
    after a clock fault that slows it the bound is stretched by the slower rate. ``tolerance``
    (default 20 ms) is slack for a live run's scheduling: give a live run on a loaded host more.

    A worker run as an external process (``external``) is judged from its sends as the chaos
    proxy read them (``observed``: `harness.live_observe`). A read bounds the send from above
    only, so its bound gets ``external_slack`` on top (default a quarter of its interval, at most
    1 s: the proxy's and a loaded host's scheduling; the factor already allows 1.5 intervals more
    than a worker that pings every interval needs, and a quarter still fails one that pings every
    third). A message waits unread while the worker has no connection to a broker, so a gap is
    not judged across a broker's crash, restart or pause, and a file whose partitions may cut the
    worker off from a broker judges none of its gaps (the verdict says so)."""

    name = "worker-interval"
    clause = "dcp.heartbeat.worker-interval"
    kinds = frozenset({SEND, START, CRASH, RESTART, PAUSE, RESUME, STALL, CLOCK})
    roles = frozenset({"worker"})

    def __init__(self, heartbeat_ms: dict[str, int] | None = None, default_ms: int = 1000, factor: float = FACTOR,
                 tolerance_ms: int = TOLERANCE_MS, external: frozenset[str] = frozenset(),
                 brokers: frozenset[str] = frozenset(), external_slack_ms: int | None = None, **params: Any) -> None:
        super().__init__(**params)
        self.heartbeat = {n: int(ms) * NS_PER_MS for n, ms in (heartbeat_ms or {}).items()}
        self.default = int(default_ms) * NS_PER_MS
        self.factor, self.tolerance = float(factor), int(tolerance_ms) * NS_PER_MS
        self.external, self.brokers = frozenset(external), frozenset(brokers)  # (external: judged as observed)
        self.slack = {n: min(self.heartbeat.get(n, self.default) // 4, EXTERNAL_SLACK_MS * NS_PER_MS)
                      if external_slack_ms is None else int(external_slack_ms) * NS_PER_MS for n in self.external}
        if self.external:
            self.roles = frozenset({"worker", "broker"})  # a broker's absence ends what is judged of them
        self.pauses = Pauses()
        self.last: dict[str, Event] = {}  # worker -> its last send of this life (none: not judged now)
        self.rate: dict[str, float] = {}  # worker -> its clock's rate, when slower than real time
        self.bad: list[tuple[Event, str, str]] = []
        self.gaps = 0
        self.longest = 0.0  # the longest gap judged, as a share of its bound

    def bound(self, node: str) -> int:
        return (int(self.factor * self.heartbeat.get(node, self.default) / self.rate.get(node, 1.0)) + self.tolerance
                + self.slack.get(node, 0))

    def on_event(self, ev: Event) -> None:
        if ev.node in self.brokers:
            if ev.kind in (CRASH, RESTART, START, PAUSE, RESUME) and not ev.via:
                for worker in self.external:  # what waited for the broker is not the worker's gap
                    self.last.pop(worker, None)
            return
        if ev.via:
            if ev.kind == SEND and ev.node in self.external:
                self._seen_send(ev)
            return
        node = ev.node
        if ev.kind in (CRASH, RESTART, START):
            self._judge(node, ev.time_ns, ended=True)
            self.last.pop(node, None)
        self.pauses.on_event(ev)
        if ev.kind == CLOCK:
            drift = float((ev.data or {}).get("drift", 0.0))
            self.rate[node] = min(self.rate.get(node, 1.0), 1.0 + drift)
            self.last.pop(node, None)  # how long it waits across the change, by its clock, is unknown
        elif ev.kind == SEND:
            self._judge(node, ev.time_ns)
            self.last[node] = ev

    def _seen_send(self, ev: Event) -> None:
        """A send of an external worker as the proxy read it (see the class docstring). A gap
        across a connection it opened anew is judged: a worker that reconnects because it heard
        nothing (it sent no PING to be answered) was silent all the same."""
        self._judge(ev.node, ev.time_ns)
        self.last[ev.node] = ev

    def _judge(self, node: str, now: int, ended: bool = False) -> None:
        last = self.last.get(node)
        if last is None:
            return
        gap = now - last.time_ns - self.pauses.between(node, last.time_ns, now)
        bound = self.bound(node)
        self.gaps += 1
        self.longest = max(self.longest, gap / bound)
        if gap > bound:
            until = "until its life ended" if ended else "before its next message"
            slack = f" + {self.slack[node] / NS_PER_MS:g} ms, seen by the proxy" if node in self.slack else ""
            self.bad.append((last, f"{node} sent the broker nothing for {gap / NS_PER_MS:.1f} ms {until} (bound "
                                   f"{self.factor:g} x {self.heartbeat.get(node, self.default) / NS_PER_MS:g} ms"
                                   f" + {self.tolerance / NS_PER_MS:g} ms{slack})", self.clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        for node in list(self.last):
            self._judge(node, end_ns, ended=True)
        slack = ", ".join(f"{n} +{ns / NS_PER_MS:g} ms" for n, ns in sorted(self.slack.items()))
        seen = f"; external workers judged from their sends as the chaos proxy read them, with more slack: {slack}" \
            if self.slack else ""
        if not self.bad:
            return [self.ok(f"{self.gaps} gap(s) between a worker's messages, the longest "
                            f"{self.longest:.0%} of its bound{seen}")]
        verdict = self.first_problem(self.bad, "worker silence(s) longer than the heartbeat bound")
        verdict.detail += seen
        return [verdict]


def message_type(ev: Event) -> str:
    """The DCP message type of a broker's send or receive (a receive comes undecoded: frame 0 is
    the peer's identity on the ROUTER), or "" when it does not decode."""
    if ev.msg_type or ev.codec is None or not ev.frames:
        return ev.msg_type
    try:
        return ev.codec.decode(ev.frames[1:]).name
    except DecodeError:
        return ""
