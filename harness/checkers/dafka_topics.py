"""Dafka: the topic frame of every command a node sends, against the rule of its
``dafka.wire.topic-*`` clause (`harness.protocols.dafka.TOPIC_RULES`, E-DAFKA-05 to -08, -18,
-20), and the subjects of its CONSUMER-HELLOs.

A topic frame decodes whatever it holds; what makes it right is whom it names. The rules need
what the run shows of the other nodes (which addresses are partitions, which nodes FETCHed or
asked for heads, which are stores), gathered from every node's sends and receives, so a
message whose topic is not yet known to be right is judged at the end of the run, against all
that the run showed. A node is never judged for naming an address or topic the run never
revealed to the harness unless the run revealed that address as something else (a partition
named where a requestor is due, a consumer where a store is due).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from harness.checkers.base import COMMAND, RECV, SEND, START, TAP, Checker, Event, Verdict, tapped_from
from harness.checkers.external import not_judged
from harness.protocols.codec import Message
from harness.protocols.dafka import COMMAND_IDS, PEER, TOPIC_RULES

DIRECT_HEAD_SUBJECT = "dafka.store.direct-head-per-partition"
HELLOS = ("STORE-HELLO", "CONSUMER-HELLO")
BY_SUBJECT = frozenset(COMMAND_IDS[n] for n in ("RECORD", "HEAD"))  # on the topic of their subject
# The commands whose receipt can teach a partition, a requestor, a topic or a store.
LEARNED_IDS = frozenset(COMMAND_IDS[n] for n in ("RECORD", "HEAD", "DIRECT-RECORD", "DIRECT-HEAD", "FETCH",
                                                 "GET-HEADS", "CONSUMER-HELLO", "STORE-HELLO"))
ANY_ID = frozenset(COMMAND_IDS.values())

TAPPED: dict[str, Any] = {"tapped": True}  # the data of a send as the tap heard it


class _Seen:
    """What the run has shown: partitions per topic, requestors, stores and consumers, topics."""

    def __init__(self, roles: dict[str, str], topics: dict[str, list[str]]) -> None:
        self.roles = roles
        self.partitions: dict[str, set[str]] = {}  # topic -> partition addresses
        self.fetchers: set[str] = set()  # FETCH address fields
        self.head_requests: set[tuple[str, str]] = set()  # (requestor, topic) of GET-HEADS / CONSUMER-HELLO
        self.requestors: set[str] = set()
        self.stores: set[str] = set()  # addresses known to be stores'
        self.consumers: set[str] = set()  # addresses known to be consumers' (STORE-HELLO topics due)
        self.topics: set[str] = {t for ts in topics.values() for t in ts}

    def learn(self, ev: Event, msg: Message) -> None:
        name = msg.name
        if name in ("RECORD", "HEAD", "DIRECT-RECORD", "DIRECT-HEAD"):
            self.partitions.setdefault(msg["subject"], set()).add(msg["address"])
            self.topics.add(msg["subject"])
        elif name == "FETCH":
            self.fetchers.add(msg["address"])
        elif name == "GET-HEADS":
            self.head_requests.add((msg["address"], msg["topic"]))
            self.requestors.add(msg["address"])
        elif name == "CONSUMER-HELLO":
            self.requestors.add(msg["address"])
            self.consumers.add(msg["address"])
            self.topics.update(msg["subjects"])
            for t in msg["subjects"]:
                self.head_requests.add((msg["address"], t))
        elif name == "STORE-HELLO":
            self.stores.add(msg["address"])
        elif name == "BEACON":
            role = self.roles.get(ev.node, "")
            (self.stores if role == "store" else self.consumers if role == "consumer" else set()).add(msg["sender"])

    def addresses(self) -> set[str]:
        """Every node address the run showed (stores, consumers, requestors, fetchers, partitions)."""
        return self.stores | self.consumers | self.requestors | self.fetchers | \
            {a for s in self.partitions.values() for a in s}

    def others(self, role: str) -> set[str]:
        """Addresses the run showed to belong to nodes that are not of ``role``."""
        parts = {a for s in self.partitions.values() for a in s}
        return {"store": self.consumers | parts, "consumer": self.stores | parts}[role] - \
            ({"store": self.stores, "consumer": self.consumers}[role])


# The rule of each command: (message, what the run showed) -> None when it is right, else what is
# wrong. A message that is not right yet is judged again at the end of the run.
Rule = Callable[[Message, _Seen], "str | None"]


def _partition(msg: Message, seen: _Seen) -> str | None:
    if msg["topic"] in seen.partitions.get(msg["subject"], ()):
        return None
    return f"topic {msg['topic']!r} is no partition of {msg['subject']!r}"


def _fetcher(msg: Message, seen: _Seen) -> str | None:
    return None if msg["topic"] in seen.fetchers else f"topic {msg['topic']!r} is not the address of a FETCH's sender"


def _head_requestor(msg: Message, seen: _Seen) -> str | None:
    if msg["topic"] in seen.requestors:
        return None
    return f"topic {msg['topic']!r} is not the address of a GET-HEADS or CONSUMER-HELLO sender"


def _named_topic(msg: Message, seen: _Seen) -> str | None:
    return None if msg["topic"] in seen.topics else f"topic {msg['topic']!r} is no topic of the run"


def _addressed(role: str) -> Rule:
    """The hellos: never known right before the end (an address may turn out to be another role's)."""

    def rule(msg: Message, seen: _Seen) -> str | None:
        if msg["topic"] in seen.others(role):
            return f"topic {msg['topic']!r} is the address of a node that is no {role}"
        return None
    return rule


RULES: dict[str, Rule] = {
    "ACK": _partition, "FETCH": _partition, "DIRECT-RECORD": _fetcher, "DIRECT-HEAD": _head_requestor,
    "GET-HEADS": _named_topic, "STORE-HELLO": _addressed("consumer"), "CONSUMER-HELLO": _addressed("store"),
}


class TopicFrames(Checker):
    """Every command a producer, store or consumer sends is published on the topic its
    ``dafka.wire.topic-*`` clause names: RECORD and HEAD on the topic name (their subject),
    ACK and FETCH on a partition of their subject, DIRECT-RECORD on the address of a node that
    FETCHed, DIRECT-HEAD on the address of a node that asked for heads (GET-HEADS or
    CONSUMER-HELLO; a store's for a topic that node asked for), GET-HEADS on a topic of the run,
    STORE-HELLO on no store's or partition's address, CONSUMER-HELLO on no consumer's or
    partition's address.

    With ``external_producers``, the RECORDs and HEADs they send are judged as the harness's
    nodes receive them (a store subscribes to every RECORD and HEAD, whatever its topic): the
    topic frame is the subject the message names, a rule that needs nothing else of the run.
    Only without a ``corrupt`` rule (the package does not pass them then): a damaged copy would
    be blamed on its sender.

    With ``tapped``, every command those external nodes publish is judged as their send, as the
    tap (`reference_nodes.dafka.tap`, role ``tap``) hears it on their XPUB, straight from the
    node and subscribed to everything: also what no node subscribes to, so never arrives
    anywhere (an ACK on the topic name, a message whose first frame is no topic frame)."""

    name = "topic-frames"
    clause = "dafka.wire.topic-frame"
    kinds = frozenset({SEND, RECV, COMMAND})
    roles = frozenset({"producer", "store", "consumer", TAP})

    def __init__(self, roles: dict[str, str] | None = None, topics: dict[str, list[str]] | None = None,
                 external_producers: frozenset[str] = frozenset(), tapped: frozenset[str] = frozenset(),
                 **params: Any) -> None:
        super().__init__(**params)
        self.external_producers = external_producers
        self.tapped = tapped
        self.heard: set[str] = set()  # tapped nodes the tap heard (one that binds elsewhere is not)
        self.sent: set[bytes] = set()  # RECORDs and HEADs probed nodes sent, and those judged as received
        self.seen = _Seen(roles or {}, topics or {})
        self.pending: list[tuple[Event, Message]] = []
        self.known: set[tuple[bytes, ...]] = set()  # first two frames of every message read already
        self.bad: list[tuple[Event, str, str]] = []
        self.judged = 0

    def on_event(self, ev: Event) -> None:
        if ev.kind == COMMAND:
            d = ev.data or {}
            if d.get("op") in ("subscribe", "produce") and d.get("topic") is not None:
                self.seen.topics.add(str(d["topic"]))
            return
        if not ev.frames:
            return
        if ev.role == TAP:
            if tapped_from(ev, self.tapped):
                self._tapped(ev)
            return
        if self.external_producers and ev.frames[0][:1] in BY_SUBJECT and not ev.via:
            self._by_subject(ev)
        if ev.kind == RECV:
            # Only a received message that no probed node sent (an external node's, a damaged one)
            # teaches anything new: the frames of every message sent or read so far are skipped.
            key = tuple(ev.frames[:2])
            if ev.frames[0][:1] not in LEARNED_IDS or key in self.known:
                return
            self.known.add(key)
        elif ev.frames[0][:1] in LEARNED_IDS:
            self.known.add(tuple(ev.frames[:2]))
        # what a node receives is read as its peer SUB reads it (a notification, a tower's message
        # or a damaged frame is not a command); its beacons only from what it sends
        msg = ev.message() if ev.kind == SEND else ev.decoded(channel=PEER)
        if msg is None:
            return
        self.seen.learn(ev, msg)
        if ev.kind != SEND or msg.name not in TOPIC_RULES or ev.via:
            return  # (an external node seen by the proxy teaches, but a partial view judges no one)
        self.judged += 1
        if msg.name in ("RECORD", "HEAD"):
            if msg["topic"] != msg["subject"]:
                self._fail(ev, msg, f"topic {msg['topic']!r} is not its subject {msg['subject']!r}")
            return
        if msg.name in HELLOS or RULES[msg.name](msg, self.seen) is not None or (
                msg.name == "DIRECT-HEAD" and ev.role == "store"
                and (msg["topic"], msg["subject"]) not in self.seen.head_requests):
            self.pending.append((ev, msg))

    def _named_otherwise(self, msg: Message) -> bool:
        """The topic names what the run showed to be no node its clause names: a topic name, or
        the address of a store, a consumer or (where a requestor is due) a partition."""
        seen, topic = self.seen, msg["topic"]
        if topic in seen.topics or topic in seen.stores:
            return True
        if msg.name in ("ACK", "FETCH"):
            return topic in seen.consumers or topic in seen.requestors or topic in seen.fetchers
        if msg.name in ("DIRECT-RECORD", "DIRECT-HEAD"):
            return any(topic in parts for parts in seen.partitions.values())
        if msg.name == "GET-HEADS":  # G + a topic name: a node's address (its own, say) is none
            return topic in seen.addresses()
        return msg.name in HELLOS  # (their rules already name only what the run showed)

    def _tapped(self, ev: Event) -> None:
        """What the tap heard on external node ``ev.socket``'s XPUB: that node's send."""
        frames = ev.frames or []
        self.heard.add(ev.socket)
        if frames[0][:1] not in ANY_ID:
            self.judged += 1
            self.bad.append((ev, f"{ev.socket} published a message whose first frame ({frames[0][:12]!r}...) starts "
                                 "with no command id: it is no topic frame", self.clause))
            return
        self.on_event(dataclasses.replace(ev, kind=SEND, node=ev.socket, role=self.seen.roles.get(ev.socket, ""),
                                          socket="xpub", data=TAPPED, _msg=None, _decoded=None))

    def _by_subject(self, ev: Event) -> None:
        """A RECORD or HEAD: a probed node's send is remembered (its own rule judges it below);
        one received that no probed node sent is an external producer's, judged once here."""
        key = b"".join(ev.frames or [])
        if ev.kind == SEND:
            self.sent.add(key)
            return
        msg = ev.decoded(channel=PEER) if ev.kind == RECV and key not in self.sent else None
        if msg is None or msg.name not in ("RECORD", "HEAD"):
            return
        self.sent.add(key)
        self.judged += 1
        if msg["topic"] != msg["subject"]:
            self.bad.append((ev, f"{ev.node} received {msg.name} from {msg['address']!r}, an external producer, "
                                 f"with topic {msg['topic']!r}, not its subject {msg['subject']!r}",
                             TOPIC_RULES[msg.name].clause))

    def _fail(self, ev: Event, msg: Message, what: str, clause: str | None = None) -> None:
        self.bad.append((ev, f"{ev.node} sent {msg.name} with {what}", clause or TOPIC_RULES[msg.name].clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        for ev, msg in self.pending:
            what = RULES[msg.name](msg, self.seen)
            if ev.data is TAPPED:
                # the harness does not see all a tapped node received (nor what the tap missed
                # while it connected): it is judged only for naming what the run showed to be
                # something else
                if what is not None and self._named_otherwise(msg):
                    self._fail(ev, msg, what)
            elif what is not None:
                self._fail(ev, msg, what)
            elif msg.name == "DIRECT-HEAD" and ev.role == "store" \
                    and (msg["topic"], msg["subject"]) not in self.seen.head_requests:
                self._fail(ev, msg, f"the head of {msg['subject']!r}, which {msg['topic']!r} did not ask for",
                           DIRECT_HEAD_SUBJECT)
        unheard = self.tapped - self.heard
        as_received = " but the RECORDs and HEADs of producers, as received" if unheard & self.external_producers else ""
        unseen = not_judged(f"the topics of what they send (nothing heard on their XPUB){as_received}", unheard)
        if self.bad:
            verdict = self.first_problem(self.bad, "command(s) on the wrong topic")
            verdict.detail += unseen
            return [verdict]
        return [self.ok(f"{self.judged} command(s) on the topics their clauses name{unseen}")]


class HelloSubjects(Checker):
    """A consumer's CONSUMER-HELLO lists topics (``dafka.consumer.hello-subjects``), and a
    consumer subscribed to no topic sends none (``dafka.consumer.no-hello-without-subscription``).
    Its topics: its ``topics`` setting and the topics it was told to subscribe to in this life.
    An external consumer's CONSUMER-HELLOs are judged as the nodes the harness runs receive them
    (one that no probed consumer sent): one without topics breaks one clause or the other,
    whatever the consumer subscribed to."""

    name = "hello-subjects"
    clause = "dafka.consumer.hello-subjects"
    kinds = frozenset({SEND, RECV, COMMAND, START})
    roles = frozenset({"consumer", "store", "producer"})

    def __init__(self, topics: dict[str, list[str]] | None = None, external: frozenset[str] = frozenset(),
                 **params: Any) -> None:
        super().__init__(**params)
        self.external = external  # external consumers: judge the CONSUMER-HELLOs received from them
        if not external:
            self.kinds, self.roles = frozenset({SEND, COMMAND, START}), frozenset({"consumer"})  # (no receipts)
        self.sent: set[bytes] = set()  # the frames of the CONSUMER-HELLOs probed consumers sent
        self.config_topics = topics or {}
        self.topics: dict[str, set[str]] = {}
        self.bad: list[tuple[Event, str, str]] = []
        self.hellos = 0

    def on_event(self, ev: Event) -> None:
        if ev.via or (ev.role != "consumer" and ev.kind != RECV):
            return  # (an external node seen by the proxy: a partial view, harness.live_observe, not judged)
        d = ev.data or {}
        if ev.kind == START:
            self.topics[ev.node] = set(self.config_topics.get(ev.node, []))
        elif ev.kind == COMMAND and d.get("op") == "subscribe" and d.get("topic") is not None:
            self.topics.setdefault(ev.node, set()).add(str(d["topic"]))
        elif ev.kind == RECV and self.external and ev.frames and ev.frames[0][:1] == b"W":
            self._received(ev)
        elif ev.kind == SEND and ev.role == "consumer" and ev.msg_type in ("", "CONSUMER-HELLO"):
            msg = ev.message()
            if msg is None or msg.name != "CONSUMER-HELLO":
                return
            self.hellos += 1
            if self.external:
                self.sent.add(b"".join(ev.frames or []))
            if msg["subjects"]:
                return
            if self.topics.get(ev.node):
                self.bad.append((ev, f"{ev.node} sent a CONSUMER-HELLO without topics, subscribed to "
                                     f"{sorted(self.topics[ev.node])}", self.clause))
            else:
                self.bad.append((ev, f"{ev.node} sent a CONSUMER-HELLO while subscribed to no topic",
                                 "dafka.consumer.no-hello-without-subscription"))

    def _received(self, ev: Event) -> None:
        """A CONSUMER-HELLO a probed node received that no probed consumer sent: an external one's."""
        msg = ev.decoded(channel=PEER)
        if msg is None or msg.name != "CONSUMER-HELLO" or b"".join(ev.frames or []) in self.sent:
            return
        self.hellos += 1
        self.sent.add(b"".join(ev.frames or []))  # (judged once, whoever else receives it)
        if not msg["subjects"]:
            self.bad.append((ev, f"{ev.node} received a CONSUMER-HELLO without topics from {msg['address']!r}, an "
                                 "external consumer (whether or not it subscribed, it breaks "
                                 "dafka.consumer.hello-subjects or dafka.consumer.no-hello-without-subscription)",
                             self.clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        if self.bad:
            return [self.first_problem(self.bad, "CONSUMER-HELLO problem(s)")]
        return [self.ok(f"{self.hellos} CONSUMER-HELLO(s), each listing topics")]

