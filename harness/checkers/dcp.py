"""DCP properties, checked from what crosses the sockets and what the application sees."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import (
    COMMAND, CRASH, DELIVER, NOTE, PAUSE, RECV, RESTART, RESUME, SEND, STALL, START, Checker, Event, Pauses, Verdict,
)
from harness.checkers.external import not_judged
from harness.protocols.codec import Message

CLIENT, BROKER, WORKER = frozenset({"client"}), frozenset({"broker"}), frozenset({"worker"})


class ExactlyOnce(Checker):
    """Every request a client application makes is answered to it exactly once (retries are
    allowed; duplicate replies must be hidden), with the data the service computes. A client
    that crashes takes its unanswered requests with it (its memory, and the application that
    made them, are gone): those are not expected to be answered.

    A SHOULD check (opt-in): that every request is answered rests on ``dcp.client.retry`` and
    ``dcp.broker.service-queue`` (a broker need not queue nor keep requests), and hiding
    duplicates on ``dcp.client.track-by-metadata``. Each failure names the clause it proves:
    a request never answered or given up ``dcp.client.retry``; a reply delivered twice or one
    never requested ``dcp.client.track-by-metadata``; reply data other than what the reference
    service computes ``dcp.broker.data-unmodified`` (E-DCP-14). Only the clients the harness
    runs are seen making requests and taking replies: an external client's application is not
    judged, nor the data of a service an external worker may serve (what it computes is its own).

    A run is finite: a request made just before the end may still be on its way, and one made late
    whose attempts a lossy file lawfully took may still be retried. Such a request is in flight,
    not lost, and is counted apart, not judged: its client has not given up, and either it was made
    less than ``transit_ns`` before the end (the time its round trip may take on the file's network,
    no fault acting), or its client is one whose path the file's faults may cut (``timeouts_ms``
    names those, with their timeouts), it was made (or its path, cut by a partition, slow link,
    pause or crash, was whole again: ``cut_until_ns``) less than ``IN_FLIGHT_TIMEOUTS`` timeouts
    before the end, and the client sent its latest attempt less than a timeout before the end (a
    quarter more for a live run's lateness). A client that stopped retrying, or a broker that loses
    every request, is still caught on the requests made earlier."""

    name = "exactly-once"
    clause = "dcp.client.retry"
    level = "SHOULD"
    kinds = frozenset({COMMAND, DELIVER, CRASH, SEND})
    roles = CLIENT  # (the requests, replies, crashes and sends it reads are the harness's clients')

    def __init__(self, behaviours: dict[str, str] | None = None, external_clients: frozenset[str] = frozenset(),
                 external_workers: frozenset[str] = frozenset(), timeouts_ms: dict[str, int] | None = None,
                 cut_until_ns: dict[str, int] | None = None, transit_ns: int = 0, **params: Any) -> None:
        super().__init__(**params)
        self.timeouts_ms = timeouts_ms or {}  # lossy client -> its retry timeout
        self.cut_until_ns = cut_until_ns or {}  # lossy client -> until when a fault may cut its path
        self.transit_ns = transit_ns  # a round trip on the file's network, no fault acting
        # service -> reference behaviour, to verify reply data; none when an external worker may serve it
        self.behaviours = {} if external_workers else (behaviours or {})
        self.external_clients, self.external_workers = external_clients, external_workers
        self.requests: dict[tuple[str, str], Event] = {}
        self.replies: dict[tuple[str, str], list[Event]] = {}
        self.failed: list[Event] = []
        self.abandoned = 0  # unanswered requests of clients that crashed
        self.sends: dict[tuple[str, str], list[int]] = {}  # (client, id) -> [times sent, last send]

    def on_event(self, ev: Event) -> None:
        if ev.kind == SEND:
            self._sent(ev)
        elif ev.kind == CRASH:
            if ev.role == "client":
                lost = [k for k in self.requests if k[0] == ev.node and k not in self.replies]
                for k in lost:
                    del self.requests[k]
                self.abandoned += len(lost)
        elif ev.kind == COMMAND and ev.data and ev.data.get("op") == "request":
            self.requests[(ev.node, str(ev.data["id"]))] = ev
        elif ev.kind == DELIVER and ev.data is not None:
            if ev.msg_type == "reply":
                self.replies.setdefault((ev.node, str(ev.data.get("id"))), []).append(ev)
            elif ev.msg_type == "request-failed":
                self.failed.append(ev)

    def _sent(self, ev: Event) -> None:
        """Count a REQUEST a client sent (a retry is the same message, E-DCP-16), by its first
        metadata part: the reference client's request id."""
        if ev.msg_type != "REQUEST":
            return
        msg = ev.message()
        if msg is None or not msg["metadata"]:
            return
        seen = self.sends.setdefault((ev.node, msg["metadata"][0].decode("utf-8", "backslashreplace")), [0, 0])
        seen[0] += 1
        seen[1] = ev.time_ns

    def _unanswered(self, key: tuple[str, str], end_ns: int) -> str:
        """How often the request went out: a client still retrying when the run ended lost it to the
        run's horizon as much as to anything else (the file must leave it attempts enough), and its
        broker or workers never answered its attempts (lost them, or were saturated by the load)."""
        times, last = self.sends.get(key, (0, 0))
        if not times:
            return f"request {key[1]} of {key[0]} was never answered"
        retrying = ("; its client was still retrying it: the broker or its workers answered none of its "
                    "attempts (they lost them, or the file's load saturated them)") if times > 1 else ""
        return (f"request {key[1]} of {key[0]} was never answered (sent {times} time(s), the last "
                f"{(end_ns - last) / 1e6:.0f} ms before the run ended{retrying})")

    def _still_in_flight(self, key: tuple[str, str], req: Event, end_ns: int) -> bool:
        """Whether an unanswered request was made too late to judge and its client was still at it."""
        if end_ns - req.time_ns < self.transit_ns:
            return True  # its answer may still be on its way
        timeout_ms = self.timeouts_ms.get(key[0])
        times, last = self.sends.get(key, (0, 0))
        if timeout_ms is None or not times:
            return False
        timeout_ns = timeout_ms * 1_000_000
        # on a path a fault cut, the attempts that count began when it was whole again
        since = max(req.time_ns, self.cut_until_ns.get(key[0], 0))
        return end_ns - since < IN_FLIGHT_TIMEOUTS * timeout_ns and end_ns - last <= timeout_ns * 5 // 4

    def finish(self, end_ns: int) -> list[Verdict]:
        bad: list[tuple[Event, str, str]] = []
        in_flight = 0  # unanswered requests still being retried when the run ended
        given_up = {(ev.node, str((ev.data or {}).get("id"))) for ev in self.failed}
        for key, req in self.requests.items():
            got = self.replies.get(key, [])
            if not got and key not in given_up and self._still_in_flight(key, req, end_ns):
                in_flight += 1
            elif not got:
                bad.append((req, self._unanswered(key, end_ns), RETRY))
            elif len(got) > 1:
                bad += [(e, f"request {key[1]} of {key[0]} was answered {len(got)} times", TRACK) for e in (req, *got)]
            else:
                want = expected_reply(req.data or {}, self.behaviours)
                have = (got[0].data or {}).get("data")
                if want is not None and have is not None and list(have) != want:
                    bad += [(e, f"request {key[1]} of {key[0]} got data {have!r}, expected {want!r}", DATA)
                            for e in (req, got[0])]
        for key, got in self.replies.items():
            if key not in self.requests:
                bad += [(e, f"{key[0]} delivered a reply to {key[1]}, which it never requested", TRACK) for e in got]
        for ev in self.failed:
            bad.append((ev, f"{ev.node} gave up on request {(ev.data or {}).get('id')}", RETRY))
        unseen = (not_judged("the requests and replies of their applications", self.external_clients)
                  + not_judged("the reply data of the services they may serve", self.external_workers))
        if in_flight:
            unseen += (f"; {in_flight} request(s) not judged: still in flight when the run ended (made less than "
                       f"{self.transit_ns // 1_000_000} ms before it, a round trip on the file's network, or, on a "
                       f"path the file's faults may cut, less than {IN_FLIGHT_TIMEOUTS} timeouts before it, or before "
                       f"its path was whole again, with the latest attempt within its timeout)")
        if not bad:
            lost = f" ({self.abandoned} more lost with clients that crashed)" if self.abandoned else ""
            judged = len(self.requests) - in_flight
            return [self.ok(f"{judged} request(s), each answered exactly once{lost}{unseen}")]
        problems = list(dict.fromkeys(detail for _, detail, _ in bad))  # (one per request, in order)
        verdict = self.first_problem(bad, "event(s) of failed requests")
        verdict.detail = f"{len(problems)} problem(s): " + "; ".join(problems[:3]) + unseen
        return [verdict]


RETRY, TRACK, DATA = "dcp.client.retry", "dcp.client.track-by-metadata", "dcp.broker.data-unmodified"
# A request made less than this many client timeouts before the end had at most two attempts
# before the one in flight: a lossy file may lawfully have taken them.
IN_FLIGHT_TIMEOUTS = 3


def expected_reply(request: dict[str, Any], behaviours: dict[str, str]) -> list[bytes] | None:
    """What the reference service of the request returns, when the scenario says which
    behaviour serves it (forwarding chains are not predicted)."""
    behaviour = behaviours.get(str(request.get("service")))
    data = [bytes(d) for d in request.get("data", [])]
    if behaviour == "echo":
        return data
    if behaviour == "upper":
        return [d.upper() for d in data]
    if behaviour == "reverse":
        return [d[::-1] for d in data]
    return None


class MetadataUnchanged(Checker):
    """Every reply a client receives carries exactly the metadata parts of a request it sent:
    the broker must not modify them and the worker must copy them unchanged. An external client
    is judged where its requests and replies are seen: observed by the chaos proxy, or as a
    reference broker receives and sends them under the routing identity that is the client's node
    name (``--identity {name}``); one seen neither way is named as not judged."""

    name = "metadata-unchanged"
    clause = "dcp.worker.metadata-copied"
    kinds = frozenset({SEND, RECV})
    roles = CLIENT
    from_capture = True  # a client's REQUESTs and REPLYs travel on its one connection

    def __init__(self, external_clients: frozenset[str] = frozenset(), **params: Any) -> None:
        super().__init__(**params)
        self.external = external_clients
        self.by_identity = {n.encode(): n for n in sorted(external_clients)}
        if external_clients:
            self.roles = CLIENT | BROKER  # (the broker's side of their connection)
        self.sent: dict[str, set[tuple[bytes, ...]]] = {}
        self.bad: list[Event] = []
        self.judged: set[str] = set()  # clients whose replies were seen
        self.checked = 0

    def on_event(self, ev: Event) -> None:
        if ev.kind not in (SEND, RECV):
            return
        if ev.role == "client":
            node, msg = ev.node, ev.message()
        elif ev.role == "broker" and not ev.via and ev.frames and ev.frames[0] in self.by_identity:
            node, msg = self.by_identity[ev.frames[0]], ev.message(skip=1)
            if msg is not None and msg.name in ("REQUEST", "REPLY"):  # as the client sent and got them
                msg = msg if (ev.kind == RECV) == (msg.name == "REQUEST") else None
        else:
            return
        if msg is None:
            return
        if msg.name == "REQUEST" and (ev.kind == SEND or ev.role == "broker"):
            self.sent.setdefault(node, set()).add(tuple(msg["metadata"]))
        elif msg.name == "REPLY" and (ev.kind == RECV or ev.role == "broker"):
            self.checked += 1
            self.judged.add(node)
            if tuple(msg["metadata"]) not in self.sent.get(node, set()):
                self.bad.append(ev)

    def finish(self, end_ns: int) -> list[Verdict]:
        unseen = not_judged("the replies they received (seen neither observed nor under their node name at the "
                            "broker)", self.external - self.judged)
        if not self.bad:
            return [self.ok(f"{self.checked} repl(ies) carried their request's metadata unchanged{unseen}")]
        return [self.fail(f"{len(self.bad)} repl(ies) carried metadata that no request of the client had{unseen}",
                          [e.describe() for e in self.bad])]


class ReplyUnchanged(Checker):
    """The broker forwards a worker's reply as it came (E-DCP-04): every REPLY it sends equals,
    part for part after the routing identity, a REPLY it received in the same life, including
    the client-address part (``dcp.reply.format``: the reply has one format on both hops), and
    it goes to the peer that client address names (``dcp.broker.route-reply``). A client that
    matches replies by metadata alone would take a re-addressed or misrouted reply all the same,
    so only the broker's own sends show it. Events of an external broker seen by the chaos proxy
    are not judged (the proxy reads a connection's bytes, not the broker's life)."""

    name = "reply-unchanged"
    clause = "dcp.broker.route-reply"
    kinds = frozenset({SEND, RECV, CRASH, RESTART})
    roles = BROKER

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.received: dict[str, dict[tuple[bytes, ...], Message]] = {}  # broker -> REPLYs of its life
        self.bad: list[tuple[Event, str, str]] = []
        self.forwarded = 0

    def on_event(self, ev: Event) -> None:
        if ev.kind in (CRASH, RESTART):
            self.received.pop(ev.node, None)
            return
        if ev.via or not ev.frames:
            return
        msg = ev.message(skip=1)
        if msg is None or msg.name != "REPLY":
            return
        body = tuple(ev.frames[1:])
        if ev.kind == RECV:
            self.received.setdefault(ev.node, {})[body] = msg
            return
        self.forwarded += 1
        to, address = ev.frames[0], msg["client_address"]
        if body not in self.received.get(ev.node, {}):
            self.bad.append((ev, *self._altered(ev.node, msg)))
        elif to != address:
            self.bad.append((ev, f"{ev.node} sent a reply for {address!r} to {to!r}", self.clause))

    def _altered(self, broker: str, msg: Message) -> tuple[str, str]:
        """Why a forwarded reply matches no received one, and the clause: only its client address
        differs (the reply format of the second hop), or more (the reply was not passed on as it came)."""
        for got in self.received.get(broker, {}).values():
            if got["metadata"] == msg["metadata"] and got["data"] == msg["data"]:
                return (f"{broker} re-addressed a reply: the worker sent it for {got['client_address']!r}, the "
                        f"broker forwarded it with {msg['client_address']!r}", "dcp.reply.format")
        return f"{broker} sent a REPLY that no worker sent it (parts changed or made up)", self.clause

    def finish(self, end_ns: int) -> list[Verdict]:
        if not self.bad:
            return [self.ok(f"{self.forwarded} repl(ies) forwarded unchanged, each to its client address")]
        return [self.first_problem(self.bad, "repl(ies) not forwarded as the worker sent them")]


READY_SIGNALS = ("REGISTER", "REPLY", "REQUEST", "PING")


class OneRequestPerWorker(Checker):
    """The broker gives a worker a request only when the worker has asked for work (registered,
    replied, passed work on, or pinged) since the last one (errata E-DCP-06). A SHOULD NOT of
    the document: opt-in (a broker may lawfully give a busy worker a second request)."""

    name = "one-request-per-worker"
    clause = "dcp.broker.one-request-per-worker"
    level = "SHOULD"
    kinds = frozenset({SEND, RECV})
    roles = BROKER
    # Workers are only those whose REGISTER was seen, and a worker's REQUESTs and ready signals
    # travel on its one connection to the broker.
    from_capture = True

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.ready: dict[bytes, bool] = {}
        self.workers: set[bytes] = set()
        self.bad: list[tuple[Event, Event | None]] = []
        self.last_given: dict[bytes, Event] = {}
        self.given = 0

    def on_event(self, ev: Event) -> None:
        if ev.role != "broker" or ev.kind not in (SEND, RECV) or not ev.frames or ev.via:
            return  # (the proxy's view of an external broker has no routing identities)
        ident = ev.frames[0]
        msg = ev.message(skip=1)
        if msg is None:
            return
        if ev.kind == RECV:
            if msg.name == "REGISTER":
                self.workers.add(ident)
            if msg.name in READY_SIGNALS and ident in self.workers:
                self.ready[ident] = True
        elif msg.name == "REQUEST" and ident in self.workers:
            self.given += 1
            if not self.ready.get(ident, False):
                self.bad.append((ev, self.last_given.get(ident)))
            self.ready[ident] = False
            self.last_given[ident] = ev

    def finish(self, end_ns: int) -> list[Verdict]:
        if not self.bad:
            return [self.ok(f"{self.given} request(s) given to workers, never to a busy one")]
        first, prev = self.bad[0]
        evidence = [e.describe() for pair in self.bad[:5] for e in pair if e is not None]
        return [self.fail(f"{len(self.bad)} request(s) given to a worker still holding one "
                          f"(first at {first.time_ns / 1e6:.3f} ms to {first.frames[0]!r})", evidence)]


class WorkerExpiry(Checker):
    """A worker that dies is detected (dropped by the broker) within ``liveness`` heartbeat
    intervals of the last message the broker had from it (plus one interval of slack). Expiry is
    seen only in a reference broker's notes: of an external broker it is not judged, nor of an
    external worker the broker never heard under its node name (its routing identity is its own).
    No clause requires expiry (E-DCP-09): it serves ``dcp.broker.service-queue`` (requests served
    to workers as they become available; a dead one never does), a SHOULD, so the check is opt-in.

    The broker's own faults move the bound: the time it was paused (or held up by the harness's
    loop) before the deadline is added to it (a paused broker runs no timer), and a broker that
    crashes after it last heard the worker, before the deadline, forgets the worker with the rest
    of its memory: nothing is left to expire (counted apart in the verdict)."""

    name = "worker-expiry"
    clause = "dcp.broker.service-queue"
    level = "SHOULD"
    kinds = frozenset({RECV, CRASH, RESTART, NOTE, PAUSE, RESUME, STALL, START})

    def __init__(self, heartbeat_ms: int = 1000, liveness: int = 3, external_brokers: frozenset[str] = frozenset(),
                 external_workers: frozenset[str] = frozenset(), **params: Any) -> None:
        super().__init__(**params)
        self.external_brokers, self.external_workers = external_brokers, external_workers
        self.unheard: set[str] = set()  # external workers that crashed, never heard under their name
        self.window_ns = (liveness + 1) * heartbeat_ms * 1_000_000
        self.last_heard: dict[bytes, tuple[int, str]] = {}  # worker identity -> (when, by which broker)
        self.crashes: list[tuple[str, int, tuple[int, str] | None]] = []  # node, crashed at, last heard before
        self.restarts: dict[str, list[int]] = {}
        self.expired: dict[bytes, list[int]] = {}
        self.broker_pauses = Pauses()  # a paused broker runs no timer: its deadlines move
        self.broker_crashes: dict[str, list[int]] = {}

    def on_event(self, ev: Event) -> None:
        kind = ev.kind
        if ev.role == "broker" and kind in (PAUSE, RESUME, STALL, START, CRASH, RESTART):
            self.broker_pauses.on_event(ev)
            if kind == CRASH:
                self.broker_crashes.setdefault(ev.node, []).append(ev.time_ns)
        elif kind == RECV and ev.role == "broker" and ev.frames and not ev.via:
            self.last_heard[ev.frames[0]] = (ev.time_ns, ev.node)
        elif kind == CRASH and ev.role == "worker":
            self.crashes.append((ev.node, ev.time_ns, self.last_heard.get(ev.node.encode())))
        elif ev.kind == RESTART and ev.role == "worker":
            self.restarts.setdefault(ev.node, []).append(ev.time_ns)
        elif ev.kind == NOTE and ev.role == "broker" and ev.msg_type == "worker-expired" and ev.data:
            ident = ev.data.get("worker", ev.data.get("identity"))
            if isinstance(ident, str):
                ident = ident.encode()
            self.expired.setdefault(ident, []).append(ev.time_ns)

    def finish(self, end_ns: int) -> list[Verdict]:
        problems = []
        checked = forgotten = 0
        for node, crashed_at, last in self.crashes:
            ident = node.encode()
            if last is None:
                if node in self.external_workers:
                    self.unheard.add(node)
                continue  # never registered: nothing to expire
            heard, broker = last
            deadline = self.broker_pauses.deadline(broker, max(heard, crashed_at), self.window_ns)
            back = [t for t in self.restarts.get(node, []) if t >= crashed_at]
            if deadline is None or deadline > end_ns or (back and back[0] <= deadline):
                continue  # it came back (or the run ended) before detection was due
            if any(heard < t <= deadline for t in self.broker_crashes.get(broker, ())):
                forgotten += 1  # the broker's crash took the worker with it
                continue
            checked += 1
            # dropped after the last it heard of it (also before the crash: silent, cut off) is dropped
            hits = [t for t in self.expired.get(ident, []) if heard <= t <= deadline]
            if not hits:
                problems.append(f"{node} crashed at {crashed_at / 1e6:.1f} ms, last heard {heard / 1e6:.1f} ms; "
                                f"not expired by {deadline / 1e6:.1f} ms")
        unseen = (not_judged("the expiry of crashed workers (a broker's expiry shows in no message)",
                             self.external_brokers if self.crashes else ())
                   + not_judged("the expiry of these crashed workers (never heard under their node name)",
                                self.unheard))
        if problems:
            return [self.fail("; ".join(problems) + unseen)]
        lost = f" ({forgotten} more forgotten in a crash of the broker first)" if forgotten else ""
        return [self.ok(f"{checked} dead worker(s) detected in time{lost}{unseen}")]
