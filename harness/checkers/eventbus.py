"""Event BUS properties, checked from what crosses the sockets and what the applications see.

Client checkers judge what a client applies (its ``Deliver("event", ...)`` rows, and its
``synced`` notes), per incarnation: a client that crashes loses its memory and starts afresh.
Server checkers judge what a server sends, seen at the server (its receive and the answers of
the same step), so a snapshot is matched exactly with the SYNCSTART it answers.

Every check allows what the document with docs/errata.md allows: BROADCAST sequences need not
grow by one (E-EVENTBUS-10), SYNCEND may carry the latest sequence when no SYNC was sent
(E-EVENTBUS-08), a server need not keep events across a restart (E-EVENTBUS-09), and a client
may discard more than the rule requires (it must only never apply a stale BROADCAST).
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import (
    CRASH, DELIVER, NOTE, PAUSE, RECV, RESTART, RESUME, SEND, START, Checker, Event, Verdict,
)
from harness.checkers.eventbus_views import VIA_CLIENT, ServerViews
from harness.protocols import DecodeError
from harness.protocols.codec import Message

CLIENT, SERVER = frozenset({"client"}), frozenset({"server"})
CLIENTS_AND_SERVERS = CLIENT | SERVER


def decoded(ev: Event, skip: int = 0) -> Message | None:
    """The frames of a send or receive decoded on the channel of their socket (BROADCAST and PUB
    have the same frames: only the socket tells them apart), or None."""
    if ev.frames is None or ev.codec is None:
        return None
    try:
        return ev.codec.decode(ev.frames[skip:], channel=ev.socket.split(".", 1)[0])
    except DecodeError:
        return None


def snapshot_message(ev: Event) -> tuple[tuple[str, bytes], Message] | None:
    """A server's snapshot-socket send or receive: ((server, client identity), the message), or None."""
    if ev.socket != "snapshot" or not ev.frames:
        return None
    msg = decoded(ev, skip=1)
    return None if msg is None else ((ev.node, ev.frames[0]), msg)


def in_subtrees(topic: str, subtrees: list[str]) -> bool:
    return not subtrees or any(topic.startswith(s) for s in subtrees)


# Why a client that runs as an external process is not judged by a check of what clients apply:
# it reports no deliveries, and the wire shows what reached it, not what it applied.
NOT_ON_WIRE = "what it applies is not on the wire"
# Why a server that runs as an external process is not judged by a check of its whole history:
# no probe reports its sends, and each client receives only the part it subscribed to, late.
NOT_PROBED = "its sends are not probed and each client sees only its subscriptions' part"
NOT_PROBED_HISTORY = "its SYNCENDs against its SYNCs only: its history of sends is not probed"


def not_judged(external: list[str], why: str = NOT_ON_WIRE) -> str:
    """The part of a verdict's detail that names the external clients a check could not judge."""
    if not external:
        return ""
    names = ", ".join(external[:5]) + (f" and {len(external) - 5} more" if len(external) > 5 else "")
    return f"; not judged: {names} (external: {why})"


class _Incarnations:
    """Per node, what belongs to its current incarnation (reset by a crash or a restart)."""

    def __init__(self) -> None:
        self.generation: dict[str, int] = {}
        self.down: set[str] = set()

    def on(self, ev: Event) -> bool:
        """Track crashes and restarts; True when the event was one."""
        if ev.kind == CRASH:
            self.down.add(ev.node)
            self.generation[ev.node] = self.generation.get(ev.node, 0) + 1
            return True
        if ev.kind == RESTART:
            self.down.discard(ev.node)
            self.generation[ev.node] = self.generation.get(ev.node, 0) + 1
            return True
        return False


class AppliedOnce(Checker):
    """No client applies an event twice: within one incarnation, each event (UUID) reaches the
    application at most once, whether it came as a SYNC, a BROADCAST or both."""

    name = "applied-once"
    clause = "eventbus.client.discard-old"
    kinds = frozenset({DELIVER, CRASH, RESTART})
    roles = CLIENT

    def __init__(self, external: list[str] | None = None, **params: Any) -> None:
        super().__init__(**params)
        self.external = external or []  # clients run as processes: not judged (NOT_ON_WIRE)
        self.seen: dict[str, dict[str, Event]] = {}
        self.bad: list[tuple[Event, Event]] = []
        self.applied = 0

    def on_event(self, ev: Event) -> None:
        if ev.kind in (CRASH, RESTART):
            self.seen.pop(ev.node, None)
            return
        if ev.msg_type != "event" or not ev.data:
            return
        self.applied += 1
        mine = self.seen.setdefault(ev.node, {})
        uuid = str(ev.data.get("uuid"))
        if uuid in mine:
            self.bad.append((mine[uuid], ev))
        else:
            mine[uuid] = ev

    def finish(self, end_ns: int) -> list[Verdict]:
        if not self.bad:
            return [self.ok(f"{self.applied} event(s) applied, none twice" + not_judged(self.external))]
        first, again = self.bad[0]
        d = again.data or {}
        return [self.fail(f"{len(self.bad)} event(s) applied twice; first: {again.node} applied {d.get('uuid')} "
                          f"(topic {d.get('topic')!r}) as {(first.data or {}).get('source')} and again as "
                          f"{d.get('source')}", [e.describe() for pair in self.bad[:5] for e in pair])]


class ClientSequence(Checker):
    """The BROADCASTs a client applies have strictly increasing sequences, each above the last
    SYNCEND or BROADCAST it took (the discard rule): nothing stale, nothing twice, nothing out
    of order. A synchronisation (its ``synced`` note) sets the threshold to the SYNCEND's
    sequence, also lower after a failover to another server (E-EVENTBUS-10)."""

    name = "client-sequence"
    clause = "eventbus.client.discard-old"
    kinds = frozenset({DELIVER, NOTE, CRASH, RESTART})
    roles = CLIENT

    def __init__(self, external: list[str] | None = None, **params: Any) -> None:
        super().__init__(**params)
        self.external = external or []  # clients run as processes: not judged (NOT_ON_WIRE)
        self.threshold: dict[str, tuple[int, Event]] = {}
        self.bad: list[tuple[Event, Event | None, str]] = []
        self.checked = 0

    def on_event(self, ev: Event) -> None:
        if ev.kind in (CRASH, RESTART):
            self.threshold.pop(ev.node, None)
            return
        d = ev.data or {}
        if ev.kind == NOTE:
            if ev.msg_type == "synced":
                self.threshold[ev.node] = (int(d.get("sequence") or 0), ev)
            elif ev.msg_type == "failover":
                self.threshold.pop(ev.node, None)
            return
        if ev.msg_type != "event" or d.get("source") != "broadcast":
            return
        self.checked += 1
        seq = d.get("sequence")
        last = self.threshold.get(ev.node)
        if last is None:
            self.bad.append((ev, None, f"{ev.node} applied BROADCAST {seq} before any SYNCEND"))
        elif not isinstance(seq, int) or seq <= last[0]:
            self.bad.append((ev, last[1], f"{ev.node} applied BROADCAST {seq} after {last[1].msg_type} "
                                          f"{last[0]} (not strictly greater)"))
        if isinstance(seq, int):
            self.threshold[ev.node] = (max(seq, last[0]) if last else seq, ev)

    def finish(self, end_ns: int) -> list[Verdict]:
        if not self.bad:
            return [self.ok(f"{self.checked} applied BROADCAST(s), each above the last SYNCEND or BROADCAST" + not_judged(self.external))]
        return [self.fail(f"{len(self.bad)} stale or out-of-order BROADCAST(s) applied; first: {self.bad[0][2]}",
                          [e.describe() for ev, prev, _ in self.bad[:5] for e in (prev, ev) if e is not None])]


class _ClientHoldings(Checker):
    """What the running clients hold at the end (events of their current incarnation), and
    which of them have synchronised, for the convergence and delivery checks. Clients that run
    as external processes (``external``) report neither: they are not judged, and the verdict
    says so.

    A run is finite: an event first offered to the bus (its first PUB sent, or taken by a server,
    or applied by a client, whichever came first) less than ``in_flight_ms[client]`` before the end
    may still be on its way to that client, and a client that came back less than that before the
    end may still be synchronising. So may every event the client lacks if the file's faults may
    lose a message less than that before the end (``healed_ns``: the repair begins at the loss).
    Such an event, or client, is in flight: counted apart, not judged. The package gives each client
    its window: its own sync timeout (how long it waits for a server's answer), and where the file's
    faults may lose a message so late that the repair is not over by the end, also two of its
    resynchronisations (which repair a lost BROADCAST) and two PUB timeouts of the publishers (which
    resend a lost PUB)."""

    kinds: frozenset[str] | None = frozenset({DELIVER, NOTE, CRASH, RESTART})

    def __init__(self, subtrees: dict[str, list[str]] | None = None, external: list[str] | None = None,
                 lossy: bool = False, in_flight_ms: dict[str, int] | None = None, healed_ns: int = 0,
                 **params: Any) -> None:
        super().__init__(**params)
        self.subtrees = subtrees or {}  # client node -> its subtrees ([] = everything)
        self.external = [c for c in self.subtrees if c in set(external or ())]
        self.lives = _Incarnations()
        # lossy: the scenario's message rules may drop or damage messages. Then an event a server
        # sent a client in a SYNC that never reached it intact was lost on the way, not withheld:
        # the server kept its MUST, and a client can repair only so many losses (its resyncs)
        self.lossy = lossy
        self.in_flight_ns = {c: int(ms) * 1_000_000 for c, ms in (in_flight_ms or {}).items()}
        self.healed_ns = healed_ns  # the last moment the file's faults may lose a message (0: never)
        if lossy or self.in_flight_ns:
            self.kinds = frozenset((self.kinds or frozenset()) | {SEND, RECV, START})
        self.first_offered: dict[str, int] = {}  # uuid -> when the bus was first offered it
        self.back_at: dict[str, int] = {}  # client -> when its current life started
        self.in_flight: set[tuple[str, str]] = set()  # (client, uuid) not judged: still on its way
        self.coming_back: set[str] = set()  # clients not judged: restarted too late to synchronise
        self.offered: dict[tuple[str, str], int] = {}  # (client identity, uuid) -> its incarnation then
        self.took: set[tuple[str, str, int]] = set()  # (client, uuid, incarnation): a SYNC of it arrived intact
        self.set_aside = 0
        self.holds: dict[str, dict[str, str]] = {}  # client -> uuid -> topic (current incarnation)
        self.source: dict[str, dict[str, str]] = {}  # client -> uuid -> how it came first (sync, broadcast)
        self.synced_at: dict[str, int] = {}  # client -> first completed sync of this incarnation
        self.server_of: dict[str, int] = {}  # client -> index of the server it synced with last

    def client_event(self, ev: Event) -> bool:
        """Book a client's event; True when it was one."""
        if ev.kind in (SEND, RECV):
            if self.lossy:
                self._sync_seen(ev)
            # a client's PUB, or a server's receipt on its collector (a probe names no receipt's
            # type: the server's is what shows when an external client published)
            if self.in_flight_ns and (ev.msg_type == "PUB" or ev.socket == "collector"):
                self._pub_seen(ev)
        if ev.role != "client":
            return False
        if ev.kind == START:  # (a late start, or the start of a life after a restart)
            self.back_at[ev.node] = ev.time_ns
            return True
        if self.lives.on(ev):
            self.holds.pop(ev.node, None)
            self.source.pop(ev.node, None)
            self.synced_at.pop(ev.node, None)
            return True
        d = ev.data or {}
        if ev.kind == DELIVER and ev.msg_type == "event":
            self._offered(str(d.get("uuid")), ev.time_ns)
            self.holds.setdefault(ev.node, {})[str(d.get("uuid"))] = str(d.get("topic"))
            self.source.setdefault(ev.node, {}).setdefault(str(d.get("uuid")), str(d.get("source")))
        elif ev.kind == NOTE and ev.msg_type == "synced":
            self.synced_at.setdefault(ev.node, ev.time_ns)
            self.server_of[ev.node] = int(d.get("server", 0))
        return True

    def _sync_seen(self, ev: Event) -> None:
        """A SYNC a server sent (to the client its routing identity names), or one a client took."""
        if ev.role == "server" and ev.kind == SEND:
            found = snapshot_message(ev)
            if found is not None and found[1].name == "SYNC":
                client = found[0][1].decode("utf-8", "replace")
                self.offered[(client, str(found[1]["uuid"]))] = self.lives.generation.get(client, 0)
        elif ev.role == "client" and ev.kind == RECV and ev.socket.split(".", 1)[0] == "snapshot":
            msg = decoded(ev)
            if msg is not None and msg.name == "SYNC":
                self.took.add((ev.node, str(msg["uuid"]), self.lives.generation.get(ev.node, 0)))

    def _pub_seen(self, ev: Event) -> None:
        """A PUB a client sent, or a server took: the bus was offered its event then."""
        if (ev.role, ev.kind) in (("client", SEND), ("server", RECV)):
            msg = decoded(ev, skip=1 if ev.kind == RECV else 0)  # (a server's collector: a ROUTER)
            if msg is not None and msg.name == "PUB":
                self._offered(str(msg["uuid"]), ev.time_ns)

    def _offered(self, uuid: str, t: int) -> None:
        if t < self.first_offered.get(uuid, t + 1):
            self.first_offered[uuid] = t

    def judged(self, client: str, lacking: list[str], end_ns: int) -> list[str]:
        """The events of ``lacking`` the client's current incarnation did not lose on the way: a
        server sent it a SYNC of the event and none arrived intact (those are counted in
        ``set_aside``; none without ``lossy``, where no SYNC is booked), nor still in flight when
        the run ended (counted in ``in_flight``)."""
        generation = self.lives.generation.get(client, 0)
        kept = [u for u in lacking
                if self.offered.get((client, u)) != generation or (client, u, generation) in self.took]
        self.set_aside += len(lacking) - len(kept)
        window = self.in_flight_ns.get(client, 0)
        if window:
            # (a loss is repaired from when it happens: a late fault leaves older events in flight too)
            flying = {u for u in kept if max(self.first_offered.get(u, -1), self.healed_ns) >= end_ns - window}
            self.in_flight.update((client, u) for u in flying)
            kept = [u for u in kept if u not in flying]
        return kept

    def set_aside_note(self) -> str:
        note = (f"; not judged: {self.set_aside} (client, event) pair(s) a server sent in a SYNC that the "
                "scenario's message rules lost on the way") if self.set_aside else ""
        if self.in_flight or self.coming_back:
            windows = sorted({self.in_flight_ns[c] // 1_000_000 for c, _ in self.in_flight} |
                             {self.in_flight_ns[c] // 1_000_000 for c in self.coming_back})
            note += (f"; not judged, still in flight when the run ended (less than {'/'.join(map(str, windows))} "
                     f"ms before it, the clients' windows): {len(self.in_flight)} (client, event) pair(s) of "
                     f"events first offered to the bus then")
            if self.coming_back:
                note += (f", {len(self.coming_back)} client(s) started or restarted then "
                         f"({', '.join(sorted(self.coming_back))})")
        return note

    def judged_clients(self, end_ns: int) -> tuple[list[str], list[str]]:
        """(clients up at the end that synchronised in their current incarnation, clients up at
        the end that never did), external clients left out, and those that started or came back
        too late to have synchronised (in ``coming_back``)."""
        up = [c for c in self.subtrees if c not in self.lives.down and c not in self.external]
        unsynced = [c for c in up if c not in self.synced_at]
        late = {c for c in unsynced if c in self.back_at and self.in_flight_ns.get(c)
                and self.back_at[c] >= end_ns - self.in_flight_ns[c]}
        self.coming_back |= late
        return [c for c in up if c in self.synced_at], [c for c in unsynced if c not in late]


class Convergence(_ClientHoldings):
    """At the end every running client that has synchronised holds exactly the events the bus
    holds for its subtrees: none missing, none it should not have (another subtree's, or one the
    bus never had). The bus's holdings are the final status of the active server(s); when the
    servers are implementations under test (no reference server spoke), every event some client
    holds, so that the clients must at least agree (less what a client that synchronised only
    after a server's restart need not have, E-EVENTBUS-09).

    The clients it judges are the harness's own (they ask again until answered and
    resynchronise periodically), so a failure proves a server's MUST (E-EVENTBUS-18): a client
    that never synchronised, or lacks an event the bus holds, got no complete snapshot
    (``eventbus.server.sync-response``); an event of another subtree it took from a SYNC breaks
    ``eventbus.server.sync-subtree-filter``; one the bus does not hold came by SYNC
    (``sync-response``) or by BROADCAST (``eventbus.server.broadcast``). Another subtree's event
    applied from a BROADCAST is the client's own doing (its SUB subscribes to its subtrees): the
    opt-in ``client-subtrees`` judges that SHOULD. A client run as an external process is not
    judged: what it applies is not on the wire, and the verdict names it."""

    name = "convergence"
    clause = "eventbus.server.sync-response"
    kinds = frozenset({DELIVER, NOTE, CRASH, RESTART})
    roles = CLIENTS_AND_SERVERS

    def __init__(self, subtrees: dict[str, list[str]] | None = None, external: list[str] | None = None,
                 **params: Any) -> None:
        super().__init__(subtrees, external, **params)
        self.bus: dict[str, dict[str, str]] = {}  # active server -> uuid -> topic, from its final status
        self.reference_servers: set[str] = set()  # servers that are reference nodes (they note their state)
        self.first_held: dict[str, int] = {}  # uuid -> when a client first applied it
        self.server_restarts: list[int] = []
        self.status_at = 0  # when the last final status was given: events first applied later may be newer

    def on_event(self, ev: Event) -> None:
        if ev.role == "client" and ev.kind == DELIVER and ev.msg_type == "event" and ev.data:
            self.first_held.setdefault(str(ev.data.get("uuid")), ev.time_ns)
        if self.client_event(ev):
            return
        if ev.kind == RESTART:
            self.server_restarts.append(ev.time_ns)
        if ev.kind == NOTE and ev.msg_type == "ha-state":
            self.reference_servers.add(ev.node)
        if ev.kind == DELIVER and ev.msg_type == "server-status" and ev.data:
            if ev.data.get("state") == "primary":
                self.bus[ev.node] = {str(u): str(t) for _, u, t in ev.data.get("events", [])}
                self.status_at = max(self.status_at, ev.time_ns)

    def _forgotten(self, client: str, uuid: str) -> bool:
        """Inferred holdings only: the client synchronised only after a server restarted, and the
        event is older than that restart (a server need not keep events across it, E-EVENTBUS-09)."""
        held, joined = self.first_held.get(uuid, 0), self.synced_at.get(client, 0)
        return any(held < r <= joined for r in self.server_restarts)

    def _newer(self, uuid: str, inferred: bool) -> bool:
        """No client had the event before the bus gave its final status: it may be newer."""
        return not inferred and self.first_held.get(uuid, 0) > self.status_at

    def _differences(self, c: str, bus: dict[str, str], inferred: bool, end_ns: int) -> tuple[str, str] | None:
        """What client ``c`` holds wrongly, as (detail, clause), or None."""
        have, source = self.holds.get(c, {}), self.source.get(c, {})
        want = {u for u, t in bus.items() if in_subtrees(t, self.subtrees[c])}
        missing = sorted(self.judged(c, [u for u in want - set(have) if not (inferred and self._forgotten(c, u))],
                                     end_ns))
        # another subtree's event applied from a BROADCAST: the client's own doing (client-subtrees);
        # one no client had before the bus gave its status may have been published since (a live
        # run asks for the status 300 ms before the end, and an external publisher may go on)
        extra = sorted(u for u in set(have) - want
                       if (not in_subtrees(have[u], self.subtrees[c]) and source.get(u) != "broadcast")
                       or (in_subtrees(have[u], self.subtrees[c]) and not self._newer(u, inferred)))
        if not missing and not extra:
            return None
        detail = (f"{c} lacks {len(missing)} and has {len(extra)} extra of the {len(want)} event(s) the bus holds "
                  f"for {self.subtrees[c] or 'all topics'}"
                  + (f" (e.g. {missing[0]})" if missing else "")
                  + (f" (extra e.g. {extra[0]}: {have[extra[0]]!r} by {source.get(extra[0])})" if extra else ""))
        if missing:
            return detail, "eventbus.server.sync-response"
        u = extra[0]
        if not in_subtrees(have[u], self.subtrees[c]):
            return detail, "eventbus.server.sync-subtree-filter"
        return detail, "eventbus.server.broadcast" if source.get(u) == "broadcast" else "eventbus.server.sync-response"

    def finish(self, end_ns: int) -> list[Verdict]:
        bus: dict[str, str] = {}
        for held in self.bus.values():
            bus.update(held)
        inferred = not self.bus and not self.reference_servers
        if inferred:
            for held in self.holds.values():
                bus.update(held)
        elif not self.bus:
            return [self.fail("no active server gave its status at the end: the bus's state is unknown")]
        judged, unsynced = self.judged_clients(end_ns)
        problems = [(f"{c} never synchronised", "eventbus.server.sync-response") for c in unsynced]
        for c in judged:
            found = self._differences(c, bus, inferred, end_ns)
            if found is not None:
                problems.append(found)
        if not problems:
            source = " (the bus's state taken from the clients: its servers are not reference nodes)" if inferred else ""
            return [self.ok(f"{len(judged)} client(s) hold exactly the bus's {len(bus)} event(s) of their "
                            f"subtrees{source}" + self.set_aside_note() + not_judged(self.external))]
        return [self.fail(f"{len(problems)} client(s) differ from the bus: " + "; ".join(p for p, _ in problems[:3])
                          + self.set_aside_note() + not_judged(self.external), clause=problems[0][1])]


class ClientSubtrees(Checker):
    """A client applies only events of the subtrees it asked for (``subtrees``; none: every
    topic): its SUB subscribes to them, so a BROADCAST of another subtree is not among the
    "messages from its subscriber connection" it SHOULD apply
    (``eventbus.client.apply-after-syncend``). Opt-in (a SHOULD); another subtree's event that
    came by SYNC is the server's fault and ``convergence``'s. What an external client applies is
    not on the wire: it is not judged, and the verdict names it."""

    name = "client-subtrees"
    clause = "eventbus.client.apply-after-syncend"
    level = "SHOULD"
    kinds = frozenset({DELIVER})
    roles = CLIENT

    def __init__(self, subtrees: dict[str, list[str]] | None = None, external: list[str] | None = None,
                 **params: Any) -> None:
        super().__init__(**params)
        self.subtrees = subtrees or {}
        self.external = [c for c in self.subtrees if c in set(external or ())]
        self.bad: list[tuple[Event, str, str]] = []
        self.applied = 0

    def on_event(self, ev: Event) -> None:
        d = ev.data or {}
        if ev.msg_type != "event" or d.get("source") != "broadcast":
            return
        self.applied += 1
        topic = str(d.get("topic"))
        if not in_subtrees(topic, self.subtrees.get(ev.node, [])):
            self.bad.append((ev, f"{ev.node} applied a BROADCAST of {topic!r}, outside its subtrees "
                                 f"{self.subtrees.get(ev.node)}", self.clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        if self.bad:
            return [self.first_problem(self.bad, "event(s) of other subtrees applied")]
        return [self.ok(f"{self.applied} applied BROADCAST(s), each of the client's subtrees" + not_judged(self.external))]


PUBLISH_SLACK = 2_000_000_000  # a PUB sent this close to the end may still be on its way back
DISRUPTION = 1_000_000_000  # PUBs this close to a server's crash, restart, pause or resume are not counted


class CompleteDelivery(_ClientHoldings):
    """Every event the bus accepted (an active server took its PUB, a server broadcast or synced
    it, or some client applied it) reaches every client subscribed to its topic that is up at
    the end. A client that joined after the server's restart need not get what the server had
    before it (E-EVENTBUS-09). And, whoever the clients are, every PUB an active reference
    server took is broadcast by some server, unless that server's life ended first (its probe
    shows both). A client run as an external process is not judged (what it applies is not on
    the wire; what reaches it depends on the faults and on choices the document leaves to it,
    such as resynchronising): the verdict names it.

    When every server runs as an external process (``external_servers``), nothing shows what
    they took, so an event they never broadcast would not count as accepted and nothing would be
    owed: a server that swallows every PUB passed. Then an event a client the harness runs
    published is owed too, once that client sent its PUB twice clear of the faults (at least
    ``PUBLISH_SLACK`` before the end, and not within ``DISRUPTION`` of a server's crash, restart,
    pause or resume), its topic is in some in-process client's subtrees, and yet no client of the
    harness received it by BROADCAST or SYNC nor applied it. Where the scenario's faults may lose
    a PUB (``pub_loss``: a rule that drops or damages PUBs, a partition), this is not judged and
    the verdict says so."""

    name = "complete-delivery"
    clause = "eventbus.server.broadcast"
    kinds = frozenset({SEND, RECV, DELIVER, NOTE, CRASH, RESTART, PAUSE, RESUME})
    roles = CLIENTS_AND_SERVERS

    def __init__(self, subtrees: dict[str, list[str]] | None = None, servers: list[str] | None = None,
                 external: list[str] | None = None, lossy: bool = False, external_servers: bool = False,
                 pub_loss: str = "", **params: Any) -> None:
        super().__init__(subtrees, external, lossy, **params)
        self.unseen_servers = external_servers  # every server external: what they took is not seen
        self.pub_loss = pub_loss  # why the faults may lose a PUB ("": they cannot)
        self.published: dict[str, tuple[str, str, list[int]]] = {}  # uuid -> (client, topic, its PUBs' times)
        self.reached: set[str] = set()  # uuids an in-process client received by BROADCAST or SYNC
        # server -> its [start, end] windows of crash..restart and pause..resume (end None: still open)
        self.disruptions: dict[str, list[list[int | None]]] = {}
        self.servers = servers or []  # in the clients' order (index 0: the primary)
        self.accepted: dict[str, tuple[str, int, str]] = {}  # uuid -> (topic, time, by)
        self.active: set[str] = set()
        self.restarts: dict[str, list[int]] = {}
        self.taken: dict[str, tuple[str, int, str]] = {}  # uuid -> (topic, time, server): PUBs an active server took
        self.life_ends: dict[str, list[int]] = {}  # server -> when it crashed, restarted or stood by
        self.broadcast: set[str] = set()  # uuids some server broadcast

    def _accept(self, uuid: Any, topic: Any, ev: Event) -> None:
        if str(uuid) not in self.accepted:
            self.accepted[str(uuid)] = (str(topic), ev.time_ns, ev.node)

    def on_event(self, ev: Event) -> None:
        if self.unseen_servers:
            self._watch_publishing(ev)
        if self.client_event(ev):
            if ev.kind == DELIVER and ev.msg_type == "event" and ev.data:
                self._accept(ev.data.get("uuid"), ev.data.get("topic"), ev)
            return
        if ev.role != "server" or ev.kind in (PAUSE, RESUME) or ev.via:
            # (an external server as the proxy saw it: what it took and broadcast does not make an
            # event accepted, as its state, active or standing by, is not on the wire)
            return
        if ev.kind in (CRASH, RESTART):
            self.active.discard(ev.node)
            self.life_ends.setdefault(ev.node, []).append(ev.time_ns)
            if ev.kind == RESTART:
                self.restarts.setdefault(ev.node, []).append(ev.time_ns)
        elif ev.kind == NOTE and ev.msg_type == "ha-state":
            if (ev.data or {}).get("state") == "primary":
                self.active.add(ev.node)
            else:
                self.active.discard(ev.node)
                self.life_ends.setdefault(ev.node, []).append(ev.time_ns)
        elif ev.kind == RECV and ev.socket == "collector" and ev.node in self.active:
            msg = decoded(ev, skip=1)
            if msg is not None and msg.name == "PUB":
                self._accept(msg["uuid"], msg["topic"], ev)
                self.taken.setdefault(str(msg["uuid"]), (str(msg["topic"]), ev.time_ns, ev.node))
        elif ev.kind == SEND and ev.msg_type == "BROADCAST":
            msg = decoded(ev)
            if msg is not None:
                self._accept(msg["uuid"], msg["topic"], ev)
                self.broadcast.add(str(msg["uuid"]))

    def _watch_publishing(self, ev: Event) -> None:
        """What the in-process clients publish and receive, and when an external server was down
        or stopped: what `_published_unseen` needs."""
        if ev.role == "server":
            windows = self.disruptions.setdefault(ev.node, [])
            open_ = bool(windows) and windows[-1][1] is None
            if ev.kind in (CRASH, PAUSE) and not open_:  # (a crash while paused: one window, to the restart)
                windows.append([ev.time_ns, None])
            elif ev.kind in (RESTART, RESUME):
                if not open_:  # (a restart without a crash first: a moment's disruption)
                    windows.append([ev.time_ns, None])
                windows[-1][1] = ev.time_ns
            return
        if ev.role != "client" or ev.kind not in (SEND, RECV) or ev.via or ev.node in self.external:
            return
        msg = decoded(ev)
        if msg is None:
            return
        if ev.kind == SEND and msg.name == "PUB":
            self.published.setdefault(str(msg["uuid"]), (ev.node, str(msg["topic"]), []))[2].append(ev.time_ns)
        elif ev.kind == RECV and msg.name in ("BROADCAST", "SYNC"):
            self.reached.add(str(msg["uuid"]))

    def _disrupted(self, t: int) -> bool:
        return any(start - DISRUPTION <= t and (end is None or t <= end + DISRUPTION)  # type: ignore[operator]
                   for windows in self.disruptions.values() for start, end in windows)

    def _published_unseen(self, end_ns: int) -> list[str]:
        """Events in-process clients published to external servers that no client got, though
        their PUB went out twice clear of the faults (see the class docstring)."""
        subscribed = [t for c, t in self.subtrees.items() if c not in self.external]
        out = []
        for uuid, (_, topic, times) in self.published.items():
            if uuid in self.reached or uuid in self.accepted or not any(in_subtrees(topic, t) for t in subscribed):
                continue
            if sum(1 for t in times if t <= end_ns - PUBLISH_SLACK and not self._disrupted(t)) >= 2:
                out.append(uuid)
        return out

    def _exempt(self, client: str, accepted_at: int) -> bool:
        """The client's current incarnation synchronised only after its server restarted, and the
        event is older than that restart: E-EVENTBUS-09 does not require it in a snapshot."""
        idx = self.server_of.get(client, 0)
        server = self.servers[idx] if idx < len(self.servers) else None
        joined = self.synced_at.get(client, 0)
        return any(accepted_at < r <= joined for r in self.restarts.get(server or "", []))

    def _never_broadcast(self) -> list[str]:
        """PUBs an active server took and no server broadcast, its life going on after it took them."""
        return [u for u, (_, t, server) in self.taken.items()
                if u not in self.broadcast and not any(e >= t for e in self.life_ends.get(server, []))]

    def finish(self, end_ns: int) -> list[Verdict]:
        pairs = 0
        judged, unsynced = self.judged_clients(end_ns)
        lost = self._never_broadcast()
        problems = []
        if lost:
            topic, t, by = self.taken[lost[0]]
            problems.append(f"{by} took {len(lost)} PUB(s) it never broadcast, e.g. {lost[0]} on {topic!r} at "
                            f"{t / 1e6:.1f} ms")
        unseen = self._published_unseen(end_ns) if self.unseen_servers and not self.pub_loss else []
        if unseen:
            client, topic, times = self.published[unseen[0]]
            problems.append(f"{len(unseen)} published event(s) no client got from the servers (external), e.g. "
                            f"{unseen[0]} on {topic!r}, whose PUB {client} sent {len(times)} time(s) from "
                            f"{times[0] / 1e6:.1f} ms")
        problems += [f"{c} never synchronised" for c in unsynced]
        for c in judged:
            have = self.holds.get(c, {})
            lacking = self.judged(c, [u for u, (topic, t, _) in self.accepted.items()
                                      if in_subtrees(topic, self.subtrees[c]) and u not in have
                                      and not self._exempt(c, t)], end_ns)
            pairs += sum(1 for topic, _, _ in self.accepted.values() if in_subtrees(topic, self.subtrees[c]))
            if lacking:
                topic, t, by = self.accepted[lacking[0]]
                problems.append(f"{c} never got {len(lacking)} event(s), e.g. {lacking[0]} on {topic!r} "
                                f"(accepted by {by} at {t / 1e6:.1f} ms)")
        unjudged = self.set_aside_note() + not_judged(self.external)
        if self.unseen_servers and self.pub_loss:
            unjudged += (f"; not judged: whether the servers (external) broadcast what the clients published "
                         f"({self.pub_loss})")
        if not problems:
            published = ""
            if self.unseen_servers and not self.pub_loss:
                came = sum(1 for u in self.published if u in self.reached or u in self.accepted)
                published = (f"; of {len(self.published)} event(s) the clients published to the servers (external), "
                             f"{came} came back to a client")
            return [self.ok(f"{len(self.accepted)} event(s) accepted, {len(self.taken)} PUB(s) taken by a reference "
                            f"server all broadcast; all {pairs} (client, event) deliveries made to {len(judged)} "
                            f"client(s)" + published + unjudged)]
        return [self.fail(f"{len(problems)} problem(s) of delivery: " + "; ".join(problems[:3]) + unjudged)]


class ConnectionLives:
    """Which life of an external server each connection the chaos proxy reported belongs to: the
    one it was first seen in, lives counted by restarts (what the proxy reads of a killed
    process's connection after the restart is still of the old life)."""

    def __init__(self) -> None:
        self.restarts: dict[str, int] = {}  # server -> restarts seen
        self.of: dict[tuple[str, Any], int] = {}  # (server, connection) -> its life

    def restarted(self, server: str) -> None:
        self.restarts[server] = self.restarts.get(server, 0) + 1

    def life(self, ev: Event) -> int:
        """The life of the connection ``ev`` (a report of the proxy) came on."""
        return self.of.setdefault((ev.node, (ev.data or {}).get("connection")), self.restarts.get(ev.node, 0))

    @property
    def servers(self) -> set[str]:
        """The servers the proxy reported anything of."""
        return {server for server, _ in self.of}


class ObservedHistory:
    """An external server's snapshots against its history of BROADCASTs, as the chaos proxy read
    them (`SyncEndSequence`, one server in the scenario). On one connection the proxy reads what
    the server sent in the order it sent it, before any rule of the file acts on it; a BROADCAST
    goes to each subscriber's connection, so one seen on any of them is one the server sent.

    A connection belongs to the server's life it was first seen in (restarts count lives). A
    request is judged when it was the only one open on its connection: an answer to a request
    asked again before the first was answered may interleave with it (the deployed bus answers
    each from its own query). Each snapshot is judged at the end of the run, against every
    BROADCAST of that life: one read later on another connection may have been sent before the
    SYNCEND, and a correct server numbers events in the order it holds them, so any event it
    broadcast with a sequence up to the SYNCEND's, above the request's and in its subtrees is
    one it held when it answered."""

    def __init__(self) -> None:
        self.lives = ConnectionLives()
        self.broadcast: dict[tuple[str, int], dict[int, str]] = {}  # (server, life) -> sequence -> topic
        self.asked: dict[tuple[str, Any, bytes], int] = {}  # requests not answered yet, per connection
        # (server, connection, routing id) -> the sole open request: (subtrees, since, SYNC sequences, life)
        self.open: dict[tuple[str, Any, bytes], tuple[list[str], int, set[int], int]] = {}
        self.answers: list[tuple[Event, Any, list[str], int, set[int], int]] = []
        self.tangled = 0  # answers not judged: another request was open on the connection

    def on_event(self, ev: Event) -> None:
        conn = (ev.data or {}).get("connection")
        life = self.lives.life(ev)
        if ev.kind == SEND and ev.socket == "publisher":
            msg = decoded(ev)
            if msg is not None and msg.name == "BROADCAST" and isinstance(msg["sequence"], int):
                self.broadcast.setdefault((ev.node, life), {})[msg["sequence"]] = str(msg["topic"])
            return
        found = snapshot_message(ev)
        if found is None:
            return
        key, msg = (ev.node, conn, found[0][1]), found[1]
        if ev.kind == RECV and msg.name == "SYNCSTART":
            self.asked[key] = self.asked.get(key, 0) + 1
            if self.asked[key] == 1:
                self.open[key] = (list(msg["subtrees"]), msg["sequence"] or 0, set(), life)
            else:
                self.open.pop(key, None)
        elif ev.kind == SEND and msg.name == "SYNC" and key in self.open and isinstance(msg["sequence"], int):
            self.open[key][2].add(msg["sequence"])
        elif ev.kind == SEND and msg.name == "SYNCEND" and self.asked.get(key):
            self.asked[key] -= 1
            request = self.open.pop(key, None)
            if request is not None:
                self.answers.append((ev, msg["sequence"], *request))
            else:
                self.tangled += 1

    def incomplete(self) -> list[tuple[Event, str]]:
        out = []
        for ev, end, subtrees, since, syncs, life in self.answers:
            if not isinstance(end, int):
                continue  # (no sequence at all: judged from the clients' side)
            missing = sorted(s for s, topic in self.broadcast.get((ev.node, life), {}).items()
                             if since < s <= end and s not in syncs and in_subtrees(topic, subtrees))
            if missing:
                out.append((ev, f"{ev.node}'s snapshot for {subtrees or 'all topics'} above {since} (external, as "
                                f"the proxy read it): SYNCEND {end} covers event(s) {missing[:5]} it broadcast in "
                                f"that life, which are in the request but not among its {len(syncs)} SYNC(s)"))
        return out

    def summary(self) -> str:
        servers = self.lives.servers
        if not servers:
            return ""
        seen = sum(len(b) for b in self.broadcast.values())
        tangled = (f" ({self.tangled} answer(s) to a request asked again before it came not judged)"
                   if self.tangled else "")
        return (f"; {', '.join(sorted(servers))} (external): {len(self.answers)} snapshot(s) judged complete "
                f"against the {seen} BROADCAST(s) the proxy read from it{tangled}; not judged: its latest sequence "
                "(a BROADCAST no subscriber's connection carried is not seen)")


class SyncEndSequence(ServerViews):
    """Every snapshot a server sends is complete up to its SYNCEND and its SYNCEND sequence is
    right: every event the server broadcast since it last started (or last stood by) that is in
    the requested subtrees and between the requested and the SYNCEND sequence is among its SYNCs;
    the SYNCEND sequence is not above the server's latest; in strict mode it is the highest SYNC
    sequence when there are SYNCs (E-EVENTBUS-08), in the micro-toolkit dialect at least that.

    A server that stands by (``ha-state`` note ``backup``, the package's dual-server contract)
    may give up its own history for its peer's (Binary Star: the passive server is a replica of
    the active one), so what it broadcast before no longer binds its later snapshots, as after a
    restart: two servers both active for a moment (a start-up race) must not raise an alarm when
    the one that yields later serves the other's history.

    A server run as an external process is judged from the in-process clients (`ServerViews`) on
    what one answer shows, its SYNCEND against its SYNCs. When it is the scenario's only server
    (``observed_history``) and the chaos proxy observes it, its snapshots are also judged complete
    against the BROADCASTs the proxy read from it in the same life (`on_observed`); otherwise what
    needs the server's whole history of sends is not judged, and the verdict names it. Its latest
    sequence is not judged either way: a BROADCAST that no subscriber's connection carried is not
    seen."""

    name = "syncend-sequence"
    clause = "eventbus.server.syncend-sequence"
    kinds = frozenset({SEND, RECV, NOTE, CRASH, RESTART})
    roles = SERVER

    def __init__(self, dialect: str = "strict", external_servers: dict[int, str] | None = None,
                 observed_history: bool = False, **params: Any) -> None:
        super().__init__(external_servers, **params)
        self.strict = dialect == "strict"
        self.external = list(self.external_servers.values())  # judged in part only (NOT_PROBED)
        self.history = ObservedHistory() if observed_history else None
        self.broadcast: dict[str, list[tuple[int, str, str]]] = {}  # server -> (seq, topic, uuid) since its start
        self.latest: dict[str, int] = {}
        self.open: dict[tuple[str, bytes], tuple[list[str], int, list[int], Event]] = {}
        self.bad: list[tuple[Event, str]] = []
        self.snapshots = 0

    def on_observed(self, ev: Event) -> None:
        if self.history is not None:
            self.history.on_event(ev)

    def on_server_event(self, ev: Event) -> None:
        if ev.kind in (CRASH, RESTART):
            self.broadcast.pop(ev.node, None)
            self.open = {k: v for k, v in self.open.items() if k[0] != ev.node}
            if ev.kind == RESTART and self.history is not None:
                self.history.lives.restarted(ev.node)
            return
        if ev.kind == NOTE:
            if ev.msg_type == "ha-state" and isinstance((ev.data or {}).get("sequence"), int):
                self.latest[ev.node] = max(self.latest.get(ev.node, 0), ev.data["sequence"])  # type: ignore[index]
            if ev.msg_type == "ha-state" and (ev.data or {}).get("state") == "backup":
                self.broadcast.pop(ev.node, None)  # it stands by: its history may become the peer's
            return
        if ev.kind == SEND and ev.socket == "publisher":
            msg = decoded(ev)
            if msg is not None and isinstance(msg["sequence"], int):
                self.broadcast.setdefault(ev.node, []).append((msg["sequence"], msg["topic"], msg["uuid"]))
                self.latest[ev.node] = max(self.latest.get(ev.node, 0), msg["sequence"])
            return
        found = snapshot_message(ev)
        if found is None:
            return
        key, msg = found
        if ev.kind == RECV and msg.name == "SYNCSTART":
            if ev.via == VIA_CLIENT and key in self.open:
                # asked again before the answer came: at the client the two answers may interleave
                self.open.pop(key)
                return
            self.open[key] = (msg["subtrees"], msg["sequence"] or 0, [], ev)
        elif ev.kind == SEND and msg.name == "SYNC" and key in self.open:
            self.open[key][2].append(msg["sequence"])
        elif ev.kind == SEND and msg.name == "SYNCEND" and key in self.open:
            self._judge(ev, msg, *self.open.pop(key))

    def _judge(self, ev: Event, end: Message, subtrees: list[str], since: int, syncs: list[int], req: Event) -> None:
        self.snapshots += 1
        seq = end["sequence"]
        who = f"{ev.node}'s snapshot for {subtrees or 'all topics'} above {since}"
        if not isinstance(seq, int):
            self.bad.append((ev, f"{who}: SYNCEND without a sequence"))
            return
        top = max(syncs) if syncs else None
        if top is not None and self.strict and seq != top:
            self.bad.append((ev, f"{who}: SYNCEND {seq}, highest SYNC {top} (must be equal, E-EVENTBUS-08)"))
        elif top is not None and seq < top:
            self.bad.append((ev, f"{who}: SYNCEND {seq} below its highest SYNC {top}"))
        if ev.via == VIA_CLIENT:
            return  # seen at a client: the server's latest sequence and history are not
        latest = self.latest.get(ev.node, 0)
        if seq > latest:
            self.bad.append((ev, f"{who}: SYNCEND {seq} above the server's latest sequence {latest}"))
        sent = set(syncs)
        missing = [s for s, topic, _ in self.broadcast.get(ev.node, [])
                   if since < s <= seq and s not in sent and in_subtrees(topic, subtrees)]
        if missing:
            self.bad.append((ev, f"{who}: SYNCEND {seq} covers broadcast event(s) {missing[:5]} that are in the "
                                 f"request but not among its {len(syncs)} SYNC(s)"))

    def finish(self, end_ns: int) -> list[Verdict]:
        unjudged = self.external
        if self.history is not None:
            self.bad.extend(self.history.incomplete())
            unjudged = [s for s in self.external if s not in self.history.lives.servers]
        if not self.bad:
            seen = self.history.summary() if self.history is not None else ""
            return [self.ok(f"{self.snapshots} snapshot(s), each complete up to a right SYNCEND sequence" + seen
                            + not_judged(unjudged, NOT_PROBED_HISTORY))]
        return [self.fail(f"{len(self.bad)} wrong snapshot(s); first: {self.bad[0][1]}",
                          [e.describe() for e, _ in self.bad[:5]])]


class ServerSequence(Checker):
    """Each server's BROADCAST sequences strictly increase, also across its restarts
    (E-EVENTBUS-10); gaps are allowed and counted.

    A server run as an external process has no probe. When the chaos proxy observes it, the
    BROADCASTs the proxy read from it are judged: on each connection (where the proxy reads them
    in the order the server sent them, before any rule of the file acts on them) they strictly
    increase, and every one of a later life is above every one of the lives before it (a
    connection belongs to the life it was first seen in). When it is not observed but is the
    scenario's only server and no rule may delay, reorder, duplicate or damage a message
    (``from_clients``), what each in-process client's SUB received from it is its BROADCASTs in
    the order it sent them (one connection at a time, FIFO; a client on subtrees sees a part of
    them): they must increase too, which catches a server whose counter starts again after a
    restart. Otherwise the external server is not judged, and the verdict says so."""

    name = "server-sequence"
    clause = "eventbus.server.sequence-increasing"
    kinds = frozenset({SEND, RECV, RESTART})
    roles = CLIENTS_AND_SERVERS

    def __init__(self, external: list[str] | None = None, from_clients: bool = False, **params: Any) -> None:
        super().__init__(**params)
        self.external = external or []  # servers run as processes: not judged (NOT_PROBED) ...
        self.from_clients = from_clients and len(self.external) == 1  # ... unless the clients' receipts tell
        self.last: dict[str, tuple[int, Event]] = {}  # server, or client (what it received), -> last sequence
        self.bad: list[tuple[Event, Event]] = []
        self.count = 0
        self.gaps = 0
        # external servers as the proxy read them: (server, connection) -> (last sequence, its
        # event); (server, life) -> (lowest, highest) sequence and their events
        self.lives = ConnectionLives()  # (its restarts: of every server)
        self.on_connection: dict[tuple[str, Any], tuple[int, Event]] = {}
        self.of_life: dict[tuple[str, int], tuple[tuple[int, Event], tuple[int, Event]]] = {}
        self.observed = 0

    def on_event(self, ev: Event) -> None:
        if ev.kind == RESTART:
            if ev.role == "server":
                self.lives.restarted(ev.node)
            return
        if ev.via:
            if ev.role == "server" and ev.kind == SEND and ev.msg_type == "BROADCAST":
                self._observed(ev)
            return
        if ev.role == "client":  # a receipt (a probe names no type on it): on the SUB, from the server
            if not self.from_clients or ev.kind != RECV or ev.socket.split(".", 1)[0] != "publisher":
                return
        elif ev.kind != SEND or ev.msg_type != "BROADCAST":
            return
        msg = decoded(ev)
        if msg is None or msg.name != "BROADCAST" or not isinstance(msg["sequence"], int):
            return
        self.count += 1
        seq = msg["sequence"]
        prev = self.last.get(ev.node)
        if prev is not None:
            if seq <= prev[0]:
                self.bad.append((ev, prev[1]))
            elif seq > prev[0] + 1:
                self.gaps += 1
        self.last[ev.node] = (seq, ev)

    def _observed(self, ev: Event) -> None:
        """A BROADCAST an external server sent, as the proxy read it on one connection."""
        msg = decoded(ev)
        if msg is None or msg.name != "BROADCAST" or not isinstance(msg["sequence"], int):
            return
        self.observed += 1
        seq, conn, life = msg["sequence"], (ev.node, (ev.data or {}).get("connection")), self.lives.life(ev)
        prev = self.on_connection.get(conn)
        if prev is not None and seq <= prev[0]:
            self.bad.append((ev, prev[1]))
        self.on_connection[conn] = (seq, ev)
        low, high = self.of_life.get((ev.node, life), ((seq, ev), (seq, ev)))
        self.of_life[(ev.node, life)] = (low if low[0] <= seq else (seq, ev), high if high[0] >= seq else (seq, ev))

    def _across_lives(self) -> None:
        """Every BROADCAST of a server's later life above every one of its earlier lives."""
        for (server, life), ((low, low_ev), _) in sorted(self.of_life.items(), key=lambda kv: kv[0]):
            before = [high for (s, earlier), (_, high) in self.of_life.items() if s == server and earlier < life]
            if before:
                top = max(before, key=lambda p: p[0])
                if low <= top[0]:
                    self.bad.append((low_ev, top[1]))

    def finish(self, end_ns: int) -> list[Verdict]:
        self._across_lives()
        observed = sorted(self.lives.servers)
        unjudged = [s for s in self.external if s not in observed]
        how = not_judged(unjudged, NOT_PROBED)
        if self.from_clients:
            how = f"; {self.external[0]} (external) judged as the in-process clients received its BROADCASTs"
        if observed:
            how += (f"; {', '.join(observed)} (external) judged as the proxy read its {self.observed} BROADCAST(s) "
                    f"on {len(self.on_connection)} connection(s)")
        if not self.bad:
            restarted = len(self.lives.restarts)  # (servers restarted, as before)
            across = f", across {restarted} restart(s)" if restarted else ""
            return [self.ok(f"{self.count} BROADCAST(s), strictly increasing per server{across}; {self.gaps} gap(s)"
                            + how)]
        ev, prev = self.bad[0]
        who = (f"{self.external[0]} sent {ev.node}" if ev.role == "client"
               else f"{ev.node}{' (as the proxy read it)' if ev.via else ''} sent")
        return [self.fail(f"{len(self.bad)} BROADCAST(s) not above the server's previous one; first: {who} "
                          f"{decoded(ev)['sequence']} after {decoded(prev)['sequence']}" + how,  # type: ignore[index]
                          [e.describe() for pair in self.bad[:5] for e in reversed(pair)])]
