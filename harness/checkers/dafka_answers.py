"""Dafka: what a node owes in time, judged from what it sends: beacons and HEADs at a regular
interval (E-DAFKA-14), and the answers the document makes a duty (a STORE-HELLO for a
subscription, GET-HEADS on subscribing to a topic, a producer's DIRECT-HEAD, a store's FETCH for
a record it missed, from the first one it missed).

Bounds leave out the time a node spends paused, a crash ends what a node owed, and a clock fault
stretches an interval by what it moved the node's clock back (its timers wait for the clock).
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CLOCK, COMMAND, CRASH, RECV, SEND, START, Checker, ClockSkews, Event, Verdict
from harness.checkers.base import TAP, Pauses, tapped_from
from harness.checkers.dafka_duties import DEFAULT_WITHIN_NS, Duties, Problem
from harness.protocols.codec import Message
from harness.protocols.dafka import COMMAND_IDS, PEER

MS = 1_000_000
FACTOR = 3  # E-DAFKA-14: a gap of more than 3 x the interval breaks "a regular interval"
SLACK_MS = 1000  # scheduling stalls of a loaded host in live runs (one loop thread runs every in-process node)
# An external node may not take the file's interval settings: it is held to zeromq/dafka's
# default (E-DAFKA-14) when the file configures a shorter one.
EXTERNAL_INTERVAL_MS = 1000
STORE_HELLO_ID = COMMAND_IDS["STORE-HELLO"]
STORE_HELLO_SUB = b"\x01" + STORE_HELLO_ID
# What a role's receipts owe (a store's records, a producer's GET-HEADS), by command id.
RECEIPTS = {"store": (COMMAND_IDS["RECORD"], COMMAND_IDS["DIRECT-RECORD"]), "producer": (COMMAND_IDS["GET-HEADS"],)}


class _Gap:
    """The last send of one kind by one node in its current life, and the bound on the next."""

    __slots__ = ("last", "limit", "event")

    def __init__(self, last: int, limit: int, event: Event) -> None:
        self.last, self.limit, self.event = last, limit, event


class Intervals(Checker):
    """Every producer, store and consumer beacons to the towers at a regular interval
    (``dafka.interconnect.address-beacon``) and a producer sends HEAD at a regular interval from
    its first record on (``dafka.producer.head-interval``): no gap, in a node's life, longer than
    3 x its configured interval (E-DAFKA-14) plus 1 s for a loaded host, counting from its start (its
    first RECORD for HEAD) to its crash or the end of the run; paused time does not count.

    An external node the run observes is judged from its BEACONs as the chaos proxy read them on
    their way to the towers (per address: a process may be two nodes) and its HEADs and RECORDs as
    the tap heard them on its XPUB, from its first BEACON (RECORD) of a life on, against at least
    `EXTERNAL_INTERVAL_MS` (it may not take the file's setting)."""

    name = "intervals"
    clause = "dafka.interconnect.address-beacon"
    kinds = frozenset({SEND, *Duties.kinds})
    roles = frozenset({"producer", "store", "consumer"})

    def __init__(self, beacon_ms: dict[str, int] | None = None, head_ms: dict[str, int] | None = None,
                 factor: float = FACTOR, slack_ms: int = SLACK_MS, external: frozenset[str] = frozenset(),
                 **params: Any) -> None:
        super().__init__(**params)
        self.beacon_ms, self.head_ms = beacon_ms or {}, head_ms or {}
        # external nodes the proxy observes: BEACONs as it saw them, HEADs and RECORDs as the tap heard them
        self.external = external
        self.heard: set[str] = set()  # external nodes the tap heard
        if external:
            self.roles = self.roles | {TAP}
            self.kinds = self.kinds | {RECV}
        self.factor, self.slack = factor, slack_ms * MS
        self.pauses = Pauses()
        self.gaps: dict[tuple[str, str], _Gap] = {}  # (node, "BEACON" | "HEAD") -> the current gap
        self.stretch: dict[str, float] = {}  # node -> 1 / (1 + drift) when its clock runs slow
        self.clocks = ClockSkews()  # each node's host clock
        self.bad: list[Problem] = []
        self.sends = 0

    def _limit(self, node: str, kind: str) -> int:
        ms = (self.beacon_ms if kind.startswith("BEACON") else self.head_ms).get(node, 1000)
        if node in self.external:  # it may not take the setting: held to zeromq/dafka's default at least
            ms = max(ms, EXTERNAL_INTERVAL_MS)
        return int(self.factor * ms * MS * self.stretch.get(node, 1.0)) + self.slack

    def _close(self, node: str, kind: str, now: int) -> None:
        gap = self.gaps.pop((node, kind), None)
        if gap is None:
            return
        took = now - gap.last - self.pauses.between(node, gap.last, now)
        if took > gap.limit:
            beacon = kind.startswith("BEACON")
            clause = self.clause if beacon else "dafka.producer.head-interval"
            what = "BEACON" if beacon else kind
            self.bad.append((gap.event, f"{node} sent no {what} for {took / MS:.0f} ms (bound {gap.limit / MS:.0f} ms)"
                             + (" (seen by the chaos proxy and the tap)" if node in self.external else ""), clause))

    def _open(self, node: str, kind: str, ev: Event) -> None:
        self.gaps[(node, kind)] = _Gap(ev.time_ns, self._limit(node, kind), ev)

    def on_event(self, ev: Event) -> None:
        if ev.via or ev.role == TAP:
            self._external(ev)
            return
        if ev.kind in (CRASH, START):
            for node, kind in [k for k in self.gaps if k[0] == ev.node]:
                self._close(node, kind, ev.time_ns)
        self.pauses.on_event(ev)
        if ev.kind == START:
            self._open(ev.node, "BEACON", ev)
        elif ev.kind == CLOCK:
            self._clock(ev)
        elif ev.kind == SEND and ev.msg_type in ("BEACON", "HEAD", "RECORD"):
            kind = "BEACON" if ev.msg_type == "BEACON" else "HEAD"
            if ev.msg_type == "RECORD" and (ev.node, kind) in self.gaps:
                return  # HEADs are due from the first record of a life on
            if ev.msg_type == "RECORD" and ev.role != "producer":
                return
            self._sent(ev.node, kind, ev, counted=ev.msg_type != "RECORD")

    def _external(self, ev: Event) -> None:
        """An external node's BEACON as the proxy read it on its way to a tower (one gap per
        address: a process may be two nodes), or what the tap heard on its XPUB: every HEAD
        and RECORD it published, straight from it. A process's start is not seen, so a gap
        opens at its first BEACON (first RECORD for HEAD) of a life; its crash closes it."""
        if ev.node in self.external and ev.via and ev.kind == SEND and ev.msg_type == "BEACON":
            msg = ev.message()
            if msg is not None and msg.name == "BEACON":
                self._sent(ev.node, f"BEACON {msg['sender']}", ev)
        elif node := tapped_from(ev, self.external):
            self.heard.add(node)
            msg = ev.message()
            if msg is None or msg.name not in ("HEAD", "RECORD"):
                return
            if msg.name == "HEAD" or (node, "HEAD") not in self.gaps:  # (HEADs are due from its first RECORD on)
                self._sent(node, "HEAD", ev, counted=msg.name == "HEAD")

    def _sent(self, node: str, kind: str, ev: Event, counted: bool = True) -> None:
        """A BEACON or HEAD (``counted``) or a first RECORD: the gap before it ends, the next begins."""
        self.sends += counted
        self._close(node, kind, ev.time_ns)
        self._open(node, kind, ev)

    def _clock(self, ev: Event) -> None:
        """The simulator's clock: node time = virtual + offset + drift x virtual. A fault that
        moves it back makes the node's timers wait until it reads their time again, at its rate."""
        now, back = ev.time_ns, self.clocks.on_clock(ev)
        drift = self.clocks.drift(ev.node)
        self.stretch[ev.node] = 1.0 / (1.0 + drift) if drift < 0 else 1.0
        for (node, kind), gap in self.gaps.items():
            if node == ev.node:
                gap.last = max(gap.last, now) + int(back * self.stretch[node])
                gap.limit = self._limit(node, kind)

    def finish(self, end_ns: int) -> list[Verdict]:
        for node, kind in list(self.gaps):
            self._close(node, kind, end_ns)
        note = ""
        if self.external:
            note = (f"; external nodes ({', '.join(sorted(self.external))}) held to at least "
                    f"{EXTERNAL_INTERVAL_MS} ms intervals, their BEACONs as the proxy saw them, their HEADs as "
                    "the tap heard them")
            if self.external - self.heard:
                note += f"; the tap heard nothing of {', '.join(sorted(self.external - self.heard))}"
        if self.bad:
            v = self.first_problem(self.bad, "interval(s) too long")
            v.detail += note
            return [v]
        return [self.ok(f"{self.sends} BEACON/HEAD(s), none late{note}")]


class Answers(Checker):
    """The answers the document makes a duty, each within ``within_ms`` (default 1000) of the
    moment it is owed, paused time left out: a store sends STORE-HELLO on ``L`` + the address of
    each STORE-HELLO subscription its XPUB receives (``dafka.store.hello-on-subscription``); a
    consumer sends GET-HEADS for each topic it subscribes to, in each life
    (``dafka.consumer.get-heads-on-subscribe``); a producer that has published in its life
    answers each GET-HEADS for its topic with a DIRECT-HEAD to the requestor
    (``dafka.producer.direct-head-reply``, E-DAFKA-15); a store that receives a record above one
    it never received FETCHes the first missed one (``dafka.fetch.on-gap``) and never FETCHes
    from a record it received in that life (``dafka.fetch.first-missed-and-count``).

    An external node the run observes is judged from what the chaos proxy handed it and read
    from it, and what the tap heard it publish, with ``external_slack_ms`` (default 1000) more
    time: the subscriptions its XPUB got, the GET-HEADS and records it received, its answers.
    Not judged of it: a consumer's GET-HEADS (its start is not seen), and a store's FETCH from a
    record it received (the proxy hands a record on before the store reads it)."""

    name = "answers"
    clause = "dafka.store.hello-on-subscription"
    kinds = frozenset({SEND, RECV, COMMAND, *Duties.kinds})
    roles = frozenset({"producer", "store", "consumer"})

    def __init__(self, topics: dict[str, list[str]] | None = None, within_ms: int | None = None,
                 external: dict[str, str] | None = None, external_slack_ms: int = SLACK_MS, **params: Any) -> None:
        super().__init__(**params)
        self.config_topics = topics or {}
        within = DEFAULT_WITHIN_NS if within_ms is None else int(within_ms) * MS
        self.duties = Duties(within)
        # observed external nodes (name -> role): their duties as the proxy and the tap saw them,
        # with more time (a receipt's time is when the proxy handed it on, a send's when it read it)
        self.external = external or {}
        self.ext_duties = Duties(within + external_slack_ms * MS)
        if self.external:
            self.roles = self.roles | {TAP}
        self.topics: dict[str, list[str]] = {}  # consumer -> topics of its life
        self.published: dict[str, str] = {}  # producer -> the topic it published on in its life
        self.address: dict[str, set[str]] = {}  # store -> its addresses (beacons; a process may be two nodes)
        self.held: dict[tuple[str, str, str], set[int]] = {}  # (store, topic, partition) -> offsets ever received
        self.low: dict[tuple[str, str, str], int] = {}  # ... -> the lowest offset never received
        self.life_held: dict[tuple[str, str, str], set[int]] = {}  # ... received in its current life
        self.fetched: dict[tuple[str, str, str], list[tuple[int, int]]] = {}  # FETCH ranges of its life
        self.bad: list[Problem] = []

    def _of(self, node: str) -> Duties:
        return self.ext_duties if node in self.external else self.duties

    def on_event(self, ev: Event) -> None:
        if ev.role == TAP:  # what an external node published, straight from its XPUB: its send
            node = tapped_from(ev, self.external)
            msg = ev.message() if node else None
            if node and msg is not None:
                self._sent(Event(ev.time_ns, node, self.external[node], SEND, "xpub", ev.frames, msg.name,
                                 codec=ev.codec), msg)
            return
        if ev.via and ev.node not in self.external:
            return
        if ev.kind in Duties.kinds:
            self.duties.on_event(ev)
            self.ext_duties.on_event(ev)
            if ev.kind in (CRASH, START):
                self._new_life(ev)
            return
        if ev.kind == COMMAND:
            d = ev.data or {}
            if ev.role == "consumer" and d.get("op") == "subscribe" and d.get("topic") is not None:
                self._subscribed(ev, str(d["topic"]))
            return
        frames = ev.frames or []
        if ev.kind == RECV and len(frames) == 1 and frames[0][:2] == STORE_HELLO_SUB and ev.role == "store":
            consumer = frames[0][2:].decode("utf-8", "surrogateescape")
            if consumer:
                self._of(ev.node).owe(ev.node, ("STORE-HELLO", consumer), ev,
                                      f"owed a STORE-HELLO to {consumer[:8]}..", "dafka.store.hello-on-subscription")
            return
        if ev.kind == SEND:
            msg = ev.message()
            if msg is not None:
                self._sent(ev, msg)
        elif frames and frames[0][:1] in RECEIPTS.get(ev.role, ()):
            msg = ev.decoded(channel=PEER)  # as its peer SUB reads it
            if msg is not None:
                self._received(ev, msg)

    def _new_life(self, ev: Event) -> None:
        node = ev.node
        self.published.pop(node, None)
        for key in [k for k in self.life_held if k[0] == node]:
            del self.life_held[key]
        for key in [k for k in self.fetched if k[0] == node]:
            del self.fetched[key]
        if ev.kind == START and ev.role == "consumer":
            self.topics[node] = []
            for t in self.config_topics.get(node, []):
                self._subscribed(ev, t)

    def _subscribed(self, ev: Event, topic: str) -> None:
        topics = self.topics.setdefault(ev.node, [])
        if topic not in topics:
            topics.append(topic)
            self.duties.owe(ev.node, ("GET-HEADS", topic), ev, f"owed a GET-HEADS for {topic!r}",
                            "dafka.consumer.get-heads-on-subscribe")

    def _sent(self, ev: Event, msg: Message) -> None:
        name = msg.name
        duties = self._of(ev.node)
        if name == "BEACON":
            self.address.setdefault(ev.node, set()).add(str(msg["sender"]))
        elif name in ("STORE-HELLO", "GET-HEADS", "DIRECT-HEAD"):
            duties.discharge(ev.node, (name, msg["topic"]), ev.time_ns)
        elif name == "RECORD" and ev.role == "producer":
            self.published.setdefault(ev.node, msg["subject"])
        elif name == "FETCH" and ev.role == "store":
            key = (ev.node, msg["subject"], msg["topic"])
            first, upto = msg["sequence"], msg["sequence"] + msg["count"]
            # (an external store may not have read yet what the proxy handed on: not judged of it)
            if first in self.life_held.get(key, ()) and ev.node not in self.external:
                self.bad.append((ev, f"{ev.node} FETCHed {msg['topic'][:8]}.. from {first}, which it received",
                                 "dafka.fetch.first-missed-and-count"))
            self.fetched.setdefault(key, []).append((first, upto))
            for k in [k for k in duties.owed.get(ev.node, {}) if k[:3] == ("FETCH",) + key[1:]]:
                if first <= k[3] < upto:
                    duties.discharge(ev.node, k, ev.time_ns)

    def _received(self, ev: Event, msg: Message) -> None:
        name = msg.name
        if name == "GET-HEADS" and ev.role == "producer" and self.published.get(ev.node) == msg["topic"]:
            self._of(ev.node).owe(ev.node, ("DIRECT-HEAD", msg["address"]), ev,
                            f"owed a DIRECT-HEAD to {msg['address'][:8]}..", "dafka.producer.direct-head-reply")
        elif ev.role == "store" and (name == "RECORD" and msg["topic"] == msg["subject"] or
                                     name == "DIRECT-RECORD" and msg["topic"] in self.address.get(ev.node, ())):
            self._stored(ev, (ev.node, msg["subject"], msg["address"]), msg["sequence"])

    def _stored(self, ev: Event, key: tuple[str, str, str], offset: int) -> None:
        duties = self._of(ev.node)
        held = self.held.setdefault(key, set())
        held.add(offset)
        self.life_held.setdefault(key, set()).add(offset)
        duties.discharge(ev.node, ("FETCH",) + key[1:] + (offset,), ev.time_ns)
        missed = self.low.get(key, 0)
        while missed in held:
            missed += 1
        self.low[key] = missed
        if missed >= offset or duties.owes(ev.node, ("FETCH",) + key[1:] + (missed,)):
            return
        if any(a <= missed < b for a, b in self.fetched.get(key, ())):
            return  # asked for already in this life
        duties.owe(ev.node, ("FETCH",) + key[1:] + (missed,), ev,
                        f"owed a FETCH of {key[2][:8]}.. from offset {missed} (got {offset})", "dafka.fetch.on-gap")

    def finish(self, end_ns: int) -> list[Verdict]:
        bad = self.bad + self.duties.finish(end_ns) + self.ext_duties.finish(end_ns)
        note = ""
        if self.external:
            note = (f"; of external nodes ({', '.join(sorted(self.external))}), {self.ext_duties.met} judged as the "
                    f"proxy and the tap saw them, within {self.ext_duties.within // MS} ms")
            roles = set(self.external.values())
            unjudged = (["a consumer's GET-HEADS (its start is not seen)"] if "consumer" in roles else []) + (
                ["a store's FETCH from a record it received (the proxy hands a record on before the store reads it)"]
                if "store" in roles else [])
            if unjudged:
                note += "; not judged: " + ", ".join(unjudged)
        if bad:
            v = self.first_problem(bad, "missing or wrong answer(s)")
            v.detail += note
            return [v]
        return [self.ok(f"{self.duties.met + self.ext_duties.met} answer(s) owed, each given in time{note}")]


class ProducerClaims(Checker):
    """What a producer's RECORDs and HEADs claim about its partition: a HEAD's sequence is the
    offset of the last record it published on that partition (``dafka.producer.head-sequence``,
    E-DAFKA-16), and the address of its RECORDs and HEADs is the identifier its beacons announce
    in the same life (``dafka.partition.name-is-producer-uuid``, E-DAFKA-12).

    An external producer the run observes is judged from the RECORDs and HEADs the tap heard on
    its XPUB (one connection: in the order it published them) and the BEACONs the chaos proxy
    saw; a HEAD is judged only once the tap heard a RECORD of its partition in that life (the tap
    may connect after the first ones)."""

    name = "producer-claims"
    clause = "dafka.producer.head-sequence"
    kinds = frozenset({SEND, CRASH, START})
    roles = frozenset({"producer"})

    def __init__(self, external: frozenset[str] = frozenset(), **params: Any) -> None:
        super().__init__(**params)
        self.external = external  # observed external producers
        if external:
            self.roles = self.roles | {TAP}
            self.kinds = self.kinds | {RECV}
        self.last: dict[tuple[str, str], int] = {}  # (producer, partition) -> last offset published in its life
        self.announced: dict[str, set[str]] = {}  # producer -> identifiers its beacons announced in its life
        self.claims: dict[str, list[tuple[Event, str]]] = {}  # producer -> (RECORD/HEAD, address) of its life
        self.bad: list[Problem] = []
        self.heads = 0

    def _judge(self, node: str) -> None:
        announced = self.announced.pop(node, set())
        for ev, address in self.claims.pop(node, []):
            if announced and address not in announced:
                self.bad.append((ev, f"{node} published as {address[:8]}.. but its beacons announce "
                                     f"{', '.join(sorted(a[:8] + '..' for a in announced))}",
                                 "dafka.partition.name-is-producer-uuid"))

    def on_event(self, ev: Event) -> None:
        node, tapped = ev.node, False
        if ev.role == TAP:  # what an external producer published, straight from its XPUB
            heard_from = tapped_from(ev, self.external)
            if heard_from is None:
                return
            node, tapped = heard_from, True
        elif ev.via:
            if ev.node not in self.external or ev.msg_type != "BEACON":
                return  # (its RECORDs and HEADs: as the tap heard them, in order)
        if ev.kind in (CRASH, START):
            self._judge(node)
            for key in [k for k in self.last if k[0] == node]:
                del self.last[key]
            return
        if not tapped and ev.msg_type not in ("BEACON", "RECORD", "HEAD"):
            return
        msg = ev.message()
        if msg is None or msg.name not in ("BEACON", "RECORD", "HEAD"):
            return
        if msg.name == "BEACON":
            self.announced.setdefault(node, set()).add(str(msg["sender"]))
            return
        claims = self.claims.setdefault(node, [])
        if not claims or claims[-1][1] != msg["address"]:  # one claim per change of address is enough
            claims.append((ev, msg["address"]))
        key = (node, msg["address"])
        if msg.name == "RECORD":
            self.last[key] = msg["sequence"]
        elif msg.name == "HEAD" and (not tapped or key in self.last):
            self.heads += 1
            if msg["sequence"] != self.last.get(key, -1):
                self.bad.append((ev, f"{node} sent HEAD {msg['sequence']} with its last record at "
                                     f"{self.last.get(key, 'none')}", self.clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        for node in list(self.claims):
            self._judge(node)
        note = (f"; external producers ({', '.join(sorted(self.external))}) as the tap heard them and the proxy saw "
                "their BEACONs" if self.external else "")
        if self.bad:
            v = self.first_problem(self.bad, "false claim(s)")
            v.detail += note
            return [v]
        return [self.ok(f"{self.heads} HEAD(s) at the last published offset, addresses as announced{note}")]


class HelloReply(Checker):
    """A consumer subscribed to a topic answers each STORE-HELLO addressed to it with a
    CONSUMER-HELLO to that store (topic: the store's address), within ``within_ms`` (default
    1000) of receiving it, paused time left out (``dafka.consumer.hello-reply``, a SHOULD: a
    scenario that names this check says its consumers answer). A consumer subscribed to no topic
    owes nothing (it must not answer: ``dafka.consumer.no-hello-without-subscription``), nor does
    one that has not beaconed its address yet in its life; a crash ends what it owed. Its
    topics: its ``topics`` setting and what it was told to subscribe to in its life."""

    name = "hello-reply"
    clause = "dafka.consumer.hello-reply"
    level = "SHOULD"
    kinds = frozenset({SEND, RECV, COMMAND, *Duties.kinds})
    roles = frozenset({"consumer"})

    def __init__(self, topics: dict[str, list[str]] | None = None, within_ms: int | None = None,
                 **params: Any) -> None:
        super().__init__(**params)
        self.config_topics = topics or {}
        self.duties = Duties(DEFAULT_WITHIN_NS if within_ms is None else int(within_ms) * MS)
        self.subscribed: dict[str, bool] = {}  # consumer -> subscribed to a topic in its life
        self.address: dict[str, str] = {}  # consumer -> the address its beacons announce in its life

    def on_event(self, ev: Event) -> None:
        if ev.via:
            return  # an external node seen by the proxy: a partial view (harness.live_observe), not judged
        node = ev.node
        if ev.kind in Duties.kinds:
            self.duties.on_event(ev)
            if ev.kind in (CRASH, START):
                self.address.pop(node, None)
                self.subscribed[node] = ev.kind == START and bool(self.config_topics.get(node))
        elif ev.kind == COMMAND:
            d = ev.data or {}
            if d.get("op") == "subscribe" and d.get("topic") is not None:
                self.subscribed[node] = True
        elif ev.kind == SEND and ev.msg_type in ("", "BEACON", "CONSUMER-HELLO"):
            msg = ev.message()
            if msg is not None and msg.name == "BEACON":
                self.address.setdefault(node, str(msg["sender"]))
            elif msg is not None and msg.name == "CONSUMER-HELLO":
                self.duties.discharge(node, msg["topic"], ev.time_ns)
        elif ev.kind == RECV and ev.frames and ev.frames[0][:1] == STORE_HELLO_ID and self.subscribed.get(node):
            msg = ev.decoded(channel=PEER)
            if msg is not None and msg.name == "STORE-HELLO" and msg["topic"] == self.address.get(node):
                self.duties.owe(node, msg["address"], ev, f"owed a CONSUMER-HELLO to {msg['address'][:8]}..",
                                self.clause)

    def finish(self, end_ns: int) -> list[Verdict]:
        bad = self.duties.finish(end_ns)
        if bad:
            return [self.first_problem(bad, "STORE-HELLO(s) not answered")]
        return [self.ok(f"{self.duties.met} STORE-HELLO(s) answered, each in time")]
