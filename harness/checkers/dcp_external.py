"""DCP checks of a broker that runs as an external process, judged from the wire: what the
harness's own workers and clients (probed, in-process) sent it and received from it. An external
broker gives no events of its own, so the broker-side checks of `harness.checkers.dcp` and
`harness.checkers.dcp_heartbeat` see nothing of it; these take their place (the package picks
them when the broker group has a ``command:``).

Each judges only what the wire proves whatever the broker's timing: a receipt comes after the
send it copies, a worker's message reaches the broker after the worker sent it, and messages
on one connection keep their order. Where the file's faults break that (a rule that duplicates
or damages the messages concerned, one that may lose or delay them), the verdict says what it
could not judge.
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import (
    CONNECT, CRASH, DISCONNECT, PAUSE, RECV, RESTART, RESUME, SEND, START, Checker, Event, Verdict,
)
from harness.checkers.dcp import READY_SIGNALS
from harness.checkers.dcp_heartbeat import HeartbeatAnswers, message_type
from harness.node import SocketSpec
from harness.protocols.codec import Message

NS_PER_MS = 1_000_000
CLIENT, WORKER = frozenset({"client"}), frozenset({"worker"})


def kind_of(ev: Event) -> str:
    """The DCP message type of a worker's or client's send or receipt ("" if it does not decode)."""
    if ev.msg_type:
        return ev.msg_type
    msg = ev.message()
    return msg.name if msg is not None else ""


def unjudged(why: str) -> str:
    return f"; not judged: {why} (external: broker)" if why else ""


class RepliesAsClientsGetThem(Checker):
    """``reply-unchanged`` of an external broker, from the clients' side (E-DCP-04: the broker
    forwards a reply unchanged, client address included, to the peer that address names). The
    reference client sends its requests without a client address, so the broker inserts the
    client's routing identity (E-DCP-05) and every reply for it names that identity: a REPLY a
    client of the harness receives with another client address was re-addressed by the broker
    (``dcp.reply.format``, when a worker of the harness sent it with the client's identity) or
    misrouted (``dcp.broker.route-reply``): no lawful broker hands a client a reply addressed to
    someone else, whichever worker sent it. When every worker is the harness's, each reply a client
    receives must also equal, part for part, a REPLY a worker sent (``dcp.broker.route-reply``)."""

    name = "reply-unchanged"
    clause = "dcp.broker.route-reply"
    kinds = frozenset({SEND, RECV})
    roles = CLIENT | WORKER

    def __init__(self, external_workers: frozenset[str] = frozenset(), unsound: str = "", **params: Any) -> None:
        super().__init__(**params)
        self.external_workers, self.unsound = external_workers, unsound
        self.identity: dict[str, bytes] = {}  # client -> its routing identity (None: a random one)
        self.sent: set[tuple[bytes, ...]] = set()  # every REPLY a worker of the harness sent
        self.addresses: dict[tuple[tuple[bytes, ...], tuple[bytes, ...]], set[bytes]] = {}  # (metadata, data) -> addresses
        self.bad: list[tuple[Event, str, str]] = []
        self.certain = 0  # the first problems of ``bad`` whose clause is certain: a worker's copy shows it
        self.checked = 0

    def on_sockets(self, node: str, sockets: list[SocketSpec]) -> None:
        for spec in sockets:
            if spec.identity:
                self.identity[node] = bytes(spec.identity)

    def on_event(self, ev: Event) -> None:
        if self.unsound or ev.via or not ev.frames or kind_of(ev) != "REPLY":
            return
        msg = ev.message()
        if msg is None:
            return
        if ev.role == "worker" and ev.kind == SEND:
            self.sent.add(tuple(ev.frames))
            self.addresses.setdefault(_content(msg), set()).add(msg["client_address"])
        elif ev.role == "client" and ev.kind == RECV and ev.node in self.identity:
            self.checked += 1
            self._judge(ev, msg, self.identity[ev.node])

    def _judge(self, ev: Event, msg: Message, own: bytes) -> None:
        address = msg["client_address"]
        if address != own:
            sent_for = self.addresses.get(_content(msg), set())
            if own in sent_for:  # (certain, so it comes first: the verdict names its clause)
                self.bad.insert(self.certain, (ev, f"the broker re-addressed a reply: a worker sent it for {own!r}, "
                                                   f"{ev.node} received it with client address {address!r}",
                                               "dcp.reply.format"))
                self.certain += 1
            else:
                self.bad.append((ev, f"{ev.node} (identity {own!r}) received a reply for {address!r}: the broker "
                                     "must send a reply to the peer its client address names", self.clause))
        elif not self.external_workers and tuple(ev.frames) not in self.sent:
            self.bad.append((ev, f"{ev.node} received a REPLY that no worker sent (parts changed or made up)",
                             self.clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        if self.unsound:
            return [self.ok(f"nothing judged{unjudged(self.unsound)}")]
        others = ("" if not self.external_workers else
                  f"; not judged: whether the replies of external workers came unchanged (external: "
                  f"{', '.join(sorted(self.external_workers))})")
        if not self.bad:
            return [self.ok(f"{self.checked} repl(ies) received by the harness's clients, each addressed to its "
                            f"client{'' if self.external_workers else ' and as a worker sent it'} (the broker is "
                            f"external: judged as its clients received them){others}")]
        verdict = self.first_problem(self.bad, "repl(ies) not forwarded as the worker sent them")
        verdict.detail += others
        return [verdict]


def _content(msg: Message) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    return tuple(msg["metadata"]), tuple(msg["data"])


SPARE = unjudged("a request it gave a busy worker that had sent ready signals to spare (how long a signal "
                 "waited before the broker read it is not on the wire)")


class RequestsAsWorkersGetThem(Checker):
    """``one-request-per-worker`` of an external broker, from the workers' side (E-DCP-06). The
    broker gives a worker a request only after a ready signal of it (REGISTER, REPLY, REQUEST or
    PING) that came since the last one, and it received each signal after the worker sent it and
    sent each request before the worker received it. How long a signal waited before the broker
    read it does not show on the wire, so this is the whole of what it proves: by the time a worker
    receives its n-th request it has sent at least n ready signals. A worker that receives more
    requests than it sent signals was given one while still holding one. A broker that sometimes
    gives a busy worker a request while it has signals to spare (idle PINGs) is not caught."""

    name = "one-request-per-worker"
    clause = "dcp.broker.one-request-per-worker"
    level = "SHOULD"
    kinds = frozenset({SEND, RECV})
    roles = WORKER

    def __init__(self, external_workers: frozenset[str] = frozenset(), unsound: str = "", **params: Any) -> None:
        super().__init__(**params)
        self.external_workers, self.unsound = external_workers, unsound
        self.signals: dict[str, int] = {}  # worker -> ready signals sent (its whole run: a broker may not know it restarted)
        self.given: dict[str, int] = {}  # worker -> requests received
        self.bad: list[tuple[Event, str, str]] = []

    def on_event(self, ev: Event) -> None:
        if self.unsound or ev.via or not ev.frames:
            return
        kind = kind_of(ev)
        if ev.kind == SEND and kind in READY_SIGNALS:
            self.signals[ev.node] = self.signals.get(ev.node, 0) + 1
        elif ev.kind == RECV and kind == "REQUEST":
            n = self.given[ev.node] = self.given.get(ev.node, 0) + 1
            sent = self.signals.get(ev.node, 0)
            if n > sent:
                self.bad.append((ev, f"{ev.node} received its request no. {n} at {ev.time_ns / NS_PER_MS:.1f} ms "
                                     f"having sent the broker {sent} ready signal(s) (registrations, replies, "
                                     "requests, pings) in all: it was given a request while it held one", self.clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        if self.unsound:
            return [self.ok(f"nothing judged{unjudged(self.unsound)}")]
        others = ("" if not self.external_workers else
                  "; not judged: the requests it gave external workers (external: broker)")
        if not self.bad:
            return [self.ok(f"{sum(self.given.values())} request(s) received by the harness's workers, never more "
                            "than the ready signals they had sent (the broker is external: judged as its workers "
                            f"received them){SPARE}{others}")]
        verdict = self.first_problem(self.bad, "request(s) given to a worker that had not asked for them")
        verdict.detail += SPARE + others
        return [verdict]


SLACK_MS = 1000  # a loaded host's scheduling, and a broker that answers on a tick of its own


class PingAnswersAsWorkersGetThem(HeartbeatAnswers):
    """``heartbeat-answers`` of an external broker: the broker-side rules of
    `HeartbeatAnswers` see nothing of it, so ``dcp.heartbeat.pong`` is judged from the workers'
    side: a PING a worker of the harness sends is answered, with a PONG or (a broker that does not
    know it, E-DCP-08) a RECONNECT, that reaches the worker while its connection and the broker's
    life last. A PING counts as unanswered when its worker then went ``2 x interval + 1 s`` (the
    two later PINGs of the broker-side rule, a broker that answers on its own tick, a loaded host)
    with no answer, on one connection, the broker up and running all that time; one answer clears
    every PING before it (a broker may answer several at once). Not judged: PINGs sent while the
    broker is down, paused, or not yet heard from since it restarted, and files whose rules or
    faults may lose or delay a PING or its answer (given as ``unsound``). An in-process client's
    PING still fails ``dcp.heartbeat.client-no-heartbeat``. A REGISTER a worker sends is owed its
    echo the same way (``dcp.broker.register-confirm``, E-DCP-07: silence is the failure): a
    REGISTER from the broker reaching the worker within the same bound, one echo per REGISTER, in
    order (a repeat is echoed again, as the conformance case ``register-echo`` holds too).

    ``observed``: where the rules may drop, delay or reorder a PING or its answer but the chaos
    proxy observes the broker (harness.live_observe), the same rule is judged where the proxy
    stands: a PING (or REGISTER) of one of the harness's ``workers`` counts when the proxy handed
    it to the broker (one a rule dropped never reached it and is owed nothing), and is answered
    when the proxy read a PONG or RECONNECT (or REGISTER) the broker sent that worker, whether or
    not a rule then lost it. The hand-over bounds the broker's intake from below and the read its
    send from above, so a broker that answered in time is never blamed. A stretch also ends when
    the worker's messages come on another connection."""

    roles = None  # workers, clients, and the external broker's crashes, restarts and pauses

    def __init__(self, heartbeat_ms: dict[str, int] | None = None, default_ms: int = 1000,
                 slack_ms: int = SLACK_MS, unsound: str = "", brokers: frozenset[str] = frozenset(),
                 observed: bool = False, workers: frozenset[str] = frozenset(), **params: Any) -> None:
        super().__init__(**params)
        self.observed, self.workers = observed, workers  # (workers: the harness's, judged when observed)
        self.connection: dict[str, Any] = {}  # worker -> the proxy's connection of its stretch (observed)
        self.kinds = self.kinds | {START, CONNECT, DISCONNECT, PAUSE, RESUME}
        self.heartbeat = {n: int(ms) * NS_PER_MS for n, ms in (heartbeat_ms or {}).items()}
        self.default, self.slack = int(default_ms) * NS_PER_MS, int(slack_ms) * NS_PER_MS
        self.unsound, self.brokers = unsound, brokers
        self.waiting: dict[str, list[Event]] = {}  # worker -> its PINGs since its last answer, this stretch
        self.echo_owed: dict[str, list[Event]] = {}  # worker -> its REGISTERs since the last echo, this stretch
        self.unheard: set[str] = set()  # workers that heard nothing from the broker since it restarted
        self.away = False  # the broker is down or paused
        self.answered = 0
        self.echoed = 0  # REGISTERs of the harness's workers the broker confirmed

    def owed_ns(self, worker: str) -> int:
        return 2 * self.heartbeat.get(worker, self.default) + self.slack

    def on_event(self, ev: Event) -> None:
        super().on_event(ev)
        if self.unsound:
            return
        if ev.via:
            if self.observed and ev.node in self.brokers and ev.kind in (SEND, RECV):
                self._seen_at_broker(ev)
        elif ev.node in self.brokers:
            self._broker(ev)
        elif ev.role == "worker":
            self._worker(ev)

    def _broker(self, ev: Event) -> None:
        if ev.kind in (CRASH, PAUSE, RESTART):
            self._close_all(ev.time_ns)
        if ev.kind in (CRASH, PAUSE):
            self.away = True
        elif ev.kind == RESUME:
            self.away = False
        elif ev.kind == RESTART:  # up once a worker hears from it: a restart waits for the process to be ready
            self.away = False
            self.unheard = set(self.heartbeat)

    def _worker(self, ev: Event) -> None:
        node = ev.node
        if ev.kind in (CRASH, START, RESTART, CONNECT, DISCONNECT, PAUSE, RESUME):
            self._close(node, ev.time_ns)
        elif self.observed:
            return  # its messages are judged where the broker took them in and sent its answers
        elif ev.kind == RECV:
            self._answered(node, kind_of(ev))
        elif ev.kind == SEND:
            self._asked(node, ev)

    def _seen_at_broker(self, ev: Event) -> None:
        """A message between the broker and one of the harness's workers, on the broker's side
        of the proxy: a receipt asks, a send answers (see the class docstring)."""
        worker = (ev.data or {}).get("peer", "")
        if worker not in self.workers:
            return
        connection = (ev.data or {}).get("connection")
        if self.connection.get(worker, connection) != connection:
            self._close(worker, ev.time_ns)  # a new connection: what was owed on the old one is settled
        self.connection[worker] = connection
        if ev.kind == SEND:
            self._answered(worker, message_type(ev))
        else:
            self._asked(worker, ev)

    def _answered(self, worker: str, kind: str) -> None:
        self.unheard.discard(worker)
        if kind in ("PONG", "RECONNECT") and self.waiting.get(worker):
            self.answered += len(self.waiting[worker])
            self.waiting[worker] = []
        elif kind == "REGISTER" and self.echo_owed.get(worker):
            self.echoed += 1
            self.echo_owed[worker].pop(0)  # each REGISTER is owed its own echo, a repeat too (E-DCP-07)

    def _asked(self, worker: str, ev: Event) -> None:
        if self.away or worker in self.unheard:
            return
        kind = message_type(ev) if ev.via else kind_of(ev)
        if kind == "PING":
            self.waiting.setdefault(worker, []).append(ev)
        elif kind == "REGISTER":
            self.echo_owed.setdefault(worker, []).append(ev)

    def _close(self, worker: str, now: int) -> None:
        """The stretch of the worker's connection ends: a PING or REGISTER it waited long enough
        for is unanswered."""
        self._owed(worker, self.echo_owed.pop(worker, []), now, "confirm the REGISTER", "REGISTER echo",
                   "unconfirmed", "dcp.broker.register-confirm")
        self._owed(worker, self.waiting.pop(worker, []), now, "answer the PING", "PONG or RECONNECT",
                   "unanswered", self.clause)

    def _owed(self, worker: str, sent: list[Event], now: int, what: str, answer: str, left: str,
              clause: str) -> None:
        """Messages ``sent`` by the worker that no answer cleared: a failure once the first of them
        waited the bound."""
        bound = self.owed_ns(worker)
        if sent and now - sent[0].time_ns >= bound:
            first, at, waited = sent[0], f"{sent[0].time_ns / NS_PER_MS:.1f} ms", (now - sent[0].time_ns) / NS_PER_MS
            said = (f"the broker did not {what} of {worker} handed to it at {at}: it sent {worker} no {answer} in "
                    f"{waited:.0f} ms (seen by the proxy; " if first.via else
                    f"the broker did not {what} {worker} sent at {at}: no {answer} reached it in {waited:.0f} ms (")
            self.bad.append((first, f"{said}bound {bound / NS_PER_MS:.0f} ms; {len(sent)} {what.split()[-1]}(s) "
                                    f"{left})", clause))

    def _close_all(self, now: int) -> None:
        for worker in dict.fromkeys([*self.waiting, *self.echo_owed]):
            self._close(worker, now)

    def finish(self, end_ns: int) -> list[Verdict]:
        self._close_all(end_ns)
        verdicts = super().finish(end_ns)
        note = unjudged(f"its answers to PINGs and REGISTERs ({self.unsound})" if self.unsound else "")
        for v in verdicts:
            if v.ok:
                v.detail = ("no client PING" + note if self.unsound else
                            f"{self.answered} PING(s) of the harness's workers answered and {self.echoed} "
                            "REGISTER(s) confirmed (the broker is external: judged "
                            + ("where the proxy handed it the PINGs and saw it send the answers, since the "
                               "file's rules may lose them on the way" if self.observed else
                               "as its workers received the answers") + "); no client PING")
            else:
                v.detail += note
        return verdicts
