"""Dafka invariants, checked from what crosses the sockets and what the applications see."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import (
    COMMAND, CRASH, DELIVER, NOTE, RECV, RESTART, SEND, START, TAP, Checker, Event, Verdict, tapped_from,
)
from harness.checkers.external import not_judged

PRODUCER, STORE, CONSUMER = frozenset({"producer"}), frozenset({"store"}), frozenset({"consumer"})


class Offsets(Checker):
    """Per partition, offsets start at 0 and each RECORD's offset is the previous one plus 1.
    Judged on what the producers the harness runs publish. An external producer's RECORDs, seen
    by the chaos proxy only while someone subscribes (a PUB socket sends the others nowhere), are
    judged as the tap (``tapped``: the run has one) hears them on its XPUB, in the order it
    published them: each the previous one plus 1 from the first it heard in a life (the tap may
    connect after the first records, so where its offsets start is not judged)."""

    name = "offsets"
    clause = "dafka.record.offset-increments"
    kinds = frozenset({SEND})
    roles = PRODUCER
    capture_note = ("a capture misses the RECORDs a producer published while nobody subscribed (a PUB socket "
                    "sends them nowhere), so its first offset and its gaps cannot be judged from the wire")

    def __init__(self, external: frozenset[str] = frozenset(), tapped: bool = False, **params: Any) -> None:
        super().__init__(**params)
        self.external = external  # external producers
        self.tapped = tapped and bool(external)
        if self.tapped:
            self.roles = self.roles | {TAP}
            self.kinds = frozenset({SEND, RECV, CRASH})
        self.next: dict[str, int] = {}
        self.heard: dict[tuple[str, str], int] = {}  # (external producer, partition) -> next offset the tap awaits
        self.bad: list[tuple[Event, str, str]] = []
        self.records = 0
        self.tapped_records = 0

    def on_event(self, ev: Event) -> None:
        if self.tapped and ev.kind != SEND:
            self._tap(ev)
            return
        if ev.msg_type != "RECORD" or ev.via:
            return
        msg = ev.message()
        if msg is None:
            return
        self.records += 1
        part, seq = msg["address"], msg["sequence"]
        want = self.next.get(part, 0)
        if seq != want:
            clause = "dafka.record.offset-starts-at-zero" if part not in self.next else self.clause
            self.bad.append((ev, clause, f"partition {part}: offset {seq} where {want} was due"))
        self.next[part] = seq + 1

    def _tap(self, ev: Event) -> None:
        if ev.kind == CRASH:  # a new life: it may start a new partition, or go on
            for key in [k for k in self.heard if k[0] == ev.node]:
                del self.heard[key]
            return
        node = tapped_from(ev, self.external)
        msg = ev.message() if node else None
        if msg is None or msg.name != "RECORD":
            return
        self.tapped_records += 1
        key = (node, msg["address"])
        want, seq = self.heard.get(key), msg["sequence"]
        if want is not None and seq != want:
            self.bad.append((ev, self.clause, f"{node} published offset {seq} of partition {key[1]} where "
                                              f"{want} was due (heard by the tap)"))
        self.heard[key] = seq + 1

    def finish(self, end_ns: int) -> list[Verdict]:
        unseen = (f"; {self.tapped_records} RECORD(s) of external producers as the tap heard them, from the first "
                  "it heard (where their offsets start: not judged)" if self.tapped
                  else not_judged("the offsets of what they publish", self.external))
        if not self.bad:
            return [self.ok(f"{self.records} record(s) over {len(self.next)} partition(s), offsets 0, 1, 2, ...{unseen}")]
        ev, clause, what = self.bad[0]
        return [self.fail(f"{len(self.bad)} offset error(s); first: {what}{unseen}",
                          [e.describe() for e, _, _ in self.bad[:5]], clause=clause)]


class ConsumerOrder(Checker):
    """Each consumer application sees each partition's records in offset order, without gaps
    from its starting offset, and without duplicates. An external consumer's application is not
    seen: not judged."""

    name = "consumer-order"
    clause = "dafka.record.offset-increments"
    kinds = frozenset({DELIVER, NOTE})
    roles = CONSUMER

    def __init__(self, external: frozenset[str] = frozenset(), **params: Any) -> None:
        super().__init__(**params)
        self.external = external  # external consumers
        self.start: dict[tuple[str, str], int] = {}
        self.next: dict[tuple[str, str], int] = {}
        self.bad: list[tuple[Event, str]] = []
        self.delivered = 0

    def on_event(self, ev: Event) -> None:
        d = ev.data or {}
        if ev.kind == NOTE and ev.msg_type == "partition-start":
            self.start[(ev.node, str(d.get("partition")))] = int(d.get("offset", 0))
            return
        if ev.kind != DELIVER or ev.msg_type != "record":
            return
        self.delivered += 1
        key = (ev.node, str(d.get("partition")))
        offset = int(d.get("offset", -1))
        want = self.next.get(key, self.start.get(key, 0))
        if offset != want:
            kind = "duplicate" if offset < want else "gap"
            self.bad.append((ev, f"{ev.node} got offset {offset} of partition {key[1]} where {want} was due ({kind})"))
        self.next[key] = max(want, offset + 1)

    def finish(self, end_ns: int) -> list[Verdict]:
        unseen = not_judged("what their applications get", self.external)
        if not self.bad:
            return [self.ok(f"{self.delivered} record(s) delivered in order, no gaps, no duplicates{unseen}")]
        return [self.fail(f"{len(self.bad)} problem(s); first: {self.bad[0][1]}{unseen}",
                          [e.describe() for e, _ in self.bad[:5]])]


class CompleteDelivery(Checker):
    """By the end of the run every consumer has received every record produced on its topics
    (from its starting offset on) that is still to be had: a partition whose producer crashed
    (a restarted producer may start a new partition, E-DAFKA-21) can serve only the records a
    store received; a record that died with its producer before it reached any store (or this
    consumer) is lost, as the document allows.

    What was produced is learnt from the producers' sends and from the RECORDs and HEADs the
    nodes the harness runs receive, so an external producer's records are owed too (a partition
    seen only so is orphaned when an external producer crashes). An external consumer's
    application is not seen: what it gets is not judged.

    A run is finite: with ``in_flight_ms`` (the package gives it to a file whose faults may lose
    messages: three rounds of HEAD interval plus FETCH retry), a record first produced less than
    that before the end may still be on its way, its RECORD lost and its gap not yet fetched, and
    so may every record a consumer had not yet got when the last fault that may hold up its
    messages ended (a partition or slow link between it and another node, a pause or crash of
    either: ``healed_ns``), if that was less than it before the end.
    Such a record is counted apart, not owed. A fault-free file owes every record, but to a consumer
    that joined late (a ``start`` in the file) or came back from a crash less than ``catch_up_ms``
    before the end (the same three rounds, in any file): it may still be finding the producers and
    fetching."""

    name = "complete-delivery"
    clause = "dafka.fetch.on-gap"
    kinds = frozenset({SEND, RECV, DELIVER, NOTE, COMMAND, CRASH, START})

    def __init__(self, topics: dict[str, list[str]] | None = None, external_consumers: frozenset[str] = frozenset(),
                 external_producers: frozenset[str] = frozenset(), corrupts: bool = False, in_flight_ms: int = 0,
                 healed_ns: dict[str, int] | None = None, catch_up_ms: int = 0,
                 late_starters: frozenset[str] = frozenset(), **params: Any) -> None:
        super().__init__(**params)
        # a consumer that joined late (``late_starters``: a ``start`` in the file) or came back
        # from a crash less than this before the end may still be catching up; one there from
        # the start is judged whatever the run's length
        self.catch_up_ns = int(catch_up_ms) * 1_000_000
        self.late_starters = late_starters
        self.came_back: set[str] = set()  # consumers that crashed (their next life starts late)
        self.began: dict[str, int] = {}  # consumer -> when its current (late) life started
        self.in_flight_ns = int(in_flight_ms) * 1_000_000
        # consumer -> when the last fault that may hold up its messages ended (`touched_until_ns`)
        self.healed_ns = healed_ns or {}
        self.produced_at: dict[tuple[str, str, int], int] = {}  # (topic, partition, offset) -> first seen
        self.external_consumers = external_consumers
        # external producers whose records are learnt from receipts (not when a rule corrupts messages:
        # a damaged copy could claim offsets or partitions nobody published)
        self.external_producers = frozenset() if corrupts else external_producers
        self.unlearnt = external_producers if corrupts else frozenset()
        self.topics = {c: t for c, t in (topics or {}).items() if c not in external_consumers}  # consumer -> topics
        self.produced: dict[tuple[str, str], int] = {}  # (topic, partition) -> next offset
        self.got: dict[tuple[str, str, str], set[int]] = {}
        self.start: dict[tuple[str, str], int] = {}
        self.owner: dict[tuple[str, str], str] = {}  # (topic, partition) -> the producer node publishing it
        self.orphaned: set[tuple[str, str]] = set()  # partitions whose producer crashed since it last published
        self.stored: dict[tuple[str, str], set[int]] = {}  # offsets some store received

    def on_event(self, ev: Event) -> None:
        d = ev.data or {}
        if ev.kind == SEND and ev.role == "producer" and ev.msg_type == "RECORD" and not ev.via:
            msg = ev.message()
            if msg is not None:
                key = (msg["subject"], msg["address"])
                self.produced[key] = max(self.produced.get(key, 0), msg["sequence"] + 1)
                self.produced_at.setdefault((*key, msg["sequence"]), ev.time_ns)
                self.owner[key] = ev.node
                self.orphaned.discard(key)  # (a producer that kept its partition across a restart)
        elif ev.kind == CRASH and ev.role == "producer":
            seen_only = ev.node in self.external_producers  # partitions known only from receipts
            self.orphaned.update(k for k, node in self.owner.items() if node == ev.node or (seen_only and not node))
        elif ev.kind == RECV and not ev.via and (ev.role == "store" or self.external_producers):
            msg = ev.message()  # (a receive names no type: the probe leaves decoding to the checkers)
            if msg is None:
                return
            if ev.role == "store" and msg.name in ("RECORD", "DIRECT-RECORD"):
                self.stored.setdefault((msg["subject"], msg["address"]), set()).add(msg["sequence"])
            key = (msg["subject"], msg["address"]) if msg.name in ("RECORD", "HEAD") else None
            if key is not None and self.external_producers and not self.owner.get(key):
                self.produced[key] = max(self.produced.get(key, 0), msg["sequence"] + 1)  # (an external one's)
                self.produced_at.setdefault((*key, msg["sequence"]), ev.time_ns)
                self.owner[key] = ""
        elif ev.kind == START and ev.role == "consumer":
            if ev.node in self.late_starters or ev.node in self.came_back:
                self.began[ev.node] = ev.time_ns
        elif ev.kind == CRASH and ev.role == "consumer":
            self.came_back.add(ev.node)
        elif ev.kind == COMMAND and ev.role == "consumer" and d.get("op") == "subscribe" and not ev.via:
            self.topics.setdefault(ev.node, []).append(str(d.get("topic")))
        elif ev.kind == NOTE and ev.role == "consumer" and ev.msg_type == "partition-start":
            self.start[(ev.node, str(d.get("partition")))] = int(d.get("offset", 0))
        elif ev.kind == DELIVER and ev.role == "consumer" and ev.msg_type == "record":
            self.got.setdefault((ev.node, str(d.get("topic")), str(d.get("partition"))), set()).add(int(d["offset"]))

    @staticmethod
    def _to_be_had(first: int, n: int, held: set[int]) -> set[int]:
        """The offsets of an orphaned partition a consumer that starts at ``first`` can still get:
        only what a store holds (or it got), and only up to the first offset nobody holds. A
        consumer delivers without gaps (``consumer-order``), so past a record that died with its
        producer it waits for good, and the records after it are not owed."""
        owed = set()
        for offset in range(first, n):
            if offset not in held:
                break
            owed.add(offset)
        return owed

    def finish(self, end_ns: int) -> list[Verdict]:
        missing = []
        total = blocked = in_flight = catching_up = 0
        horizon = end_ns - self.in_flight_ns if self.in_flight_ns else None
        for consumer, topics in self.topics.items():
            late_start = consumer in self.began and self.began[consumer] >= end_ns - self.catch_up_ns
            for (topic, part), n in self.produced.items():
                if topic not in topics:
                    continue
                first = self.start.get((consumer, part), 0)
                got = self.got.get((consumer, topic, part), set())
                want = set(range(first, n))
                if (topic, part) in self.orphaned:
                    held = self.stored.get((topic, part), set()) | got
                    want = self._to_be_had(first, n, held)
                    blocked += len((held & set(range(first, n))) - want - got)
                lacking = want - got
                if late_start:  # (it began too late to have caught up: nothing it lacks is owed yet)
                    catching_up += len(lacking)
                    want, lacking = want - lacking, set()
                elif horizon is not None:
                    # (an offset produced at an unknown time, seen only in a HEAD, is owed)
                    # (repair starts when the record is produced, or when the faults are over)
                    healed = self.healed_ns.get(consumer, 0)
                    late = {o for o in lacking if max(self.produced_at.get((topic, part, o), -1), healed) >= horizon}
                    in_flight += len(late)
                    want, lacking = want - late, lacking - late
                total += len(want)
                if lacking:
                    missing.append(f"{consumer} lacks {len(lacking)} of {topic}/{part[:8]}.. "
                                   f"(offsets {min(lacking)}..{max(lacking)})")
        unseen = (not_judged("what their applications get", self.external_consumers)
                  + not_judged("what they published (a corrupt rule may forge what is received)", self.unlearnt))
        if blocked:
            unseen += (f"; {blocked} stored record(s) not owed: each behind a record of its partition that died "
                       "with its producer, which an in-order consumer waits for")
        if catching_up:
            unseen += (f"; {catching_up} (consumer, record) deliveries not owed: their consumer started less than "
                       f"{self.catch_up_ns // 1_000_000} ms before the end, still catching up")
        if in_flight:
            unseen += (f"; {in_flight} (consumer, record) deliveries not owed: still in flight when the run ended "
                       f"(produced, or its faults over, less than {self.in_flight_ns // 1_000_000} ms before it, on "
                       f"a lossy file)")
        if not missing:
            return [self.ok(f"{total} (consumer, record) deliveries all made{unseen}")]
        return [self.fail(f"{len(missing)} consumer/partition pair(s) incomplete: " + "; ".join(missing[:4]) + unseen)]


class AckedRetrievable(Checker):
    """Every record a store ACKed is still held by that store at the end of the run, also
    after the store restarted (its storage is durable). What a store holds is its own status
    report: an external store is not judged. The report comes a moment before the end (live:
    300 ms), so what a store ACKed after its last report is not judged (counted)."""

    name = "acked-retrievable"
    clause = "dafka.producer.keep-until-ack"
    kinds = frozenset({SEND, DELIVER, RESTART})
    roles = STORE

    def __init__(self, external: frozenset[str] = frozenset(), **params: Any) -> None:
        super().__init__(**params)
        self.external = external  # external stores
        self.acked: dict[tuple[str, str], int] = {}  # (store node, partition) -> highest acked offset
        self.status: dict[str, dict[str, Any]] = {}
        self.acked_at_status: dict[str, dict[str, int]] = {}  # store -> partition -> highest ACK when it reported
        self.restarts: dict[str, int] = {}

    def on_event(self, ev: Event) -> None:
        if ev.kind == RESTART:
            self.restarts[ev.node] = self.restarts.get(ev.node, 0) + 1
        elif ev.kind == SEND and ev.msg_type == "ACK" and ev.node not in self.external:
            msg = ev.message()
            if msg is not None:
                key = (ev.node, msg["topic"])  # ACK's topic is the partition (producer address)
                self.acked[key] = max(self.acked.get(key, -1), msg["sequence"])
        elif ev.kind == DELIVER and ev.msg_type == "store-status":
            self.status[ev.node] = ev.data or {}
            self.acked_at_status[ev.node] = {p: a for (s, p), a in self.acked.items() if s == ev.node}

    def finish(self, end_ns: int) -> list[Verdict]:
        problems = []
        after = 0  # (store, partition) pairs with ACKs sent after the store's last status
        for (store, part), last in self.acked.items():
            st = self.status.get(store)
            if st is None:
                problems.append(f"{store} gave no status at the end (down?)")
                continue
            acked = self.acked_at_status[store].get(part, -1)
            after += acked < last
            if acked < 0:
                continue  # every ACK of the partition came after the report
            held = {k.rsplit("/", 1)[1]: v for k, v in (st.get("partitions") or {}).items()}
            prefix = (held.get(part) or {}).get("prefix", -1)
            # prefix_end is the first offset NOT held contiguously from 0 (or the last held).
            if prefix is None or prefix < acked:
                problems.append(f"{store} ACKed {part[:8]}.. up to {acked} but holds only up to {prefix}"
                                + (f" after {self.restarts[store]} restart(s)" if store in self.restarts else ""))
        unseen = not_judged("what they hold of what they ACKed", self.external)
        if after:
            unseen += f"; {after} (store, partition) pair(s) ACKed more after the store's last status, not judged"
        if problems:
            return [self.fail("; ".join(problems[:4]) + unseen)]
        restarted = sum(1 for s, _ in self.acked if s in self.restarts)
        return [self.ok(f"{len(self.acked)} (store, partition) ACK range(s) still held"
                        + (f", {restarted} across a restart" if restarted else "") + unseen)]


class KeepUntilAck(Checker):
    """A producer keeps every record until a store ACKed it: its release notes come after an
    ACK, and a FETCH for records no store has ACKed yet is answered with all of them (what a
    producer that dropped them early could not do). An ACK counts from when a store sent it or
    the producer received it (an external store's ACKs are seen so). An external producer's
    releases are its own affair (no message shows them) and its answers to FETCH are not judged:
    the chaos proxy sees a FETCH and the answers on two connections, in no reliable order."""

    name = "keep-until-ack"
    clause = "dafka.producer.keep-until-ack"
    kinds = frozenset({SEND, RECV, NOTE})

    def __init__(self, external: frozenset[str] = frozenset(), **params: Any) -> None:
        super().__init__(**params)
        self.external = external  # external producers
        self.acked: dict[str, int] = {}  # partition -> highest offset any store ACKed
        self.last: dict[str, int] = {}  # partition -> highest offset its producer published
        self.owed: dict[str, tuple[Event, str, set[int]]] = {}  # producer -> (FETCH, partition, offsets)
        self.bad: list[tuple[Event, str]] = []
        self.releases = 0
        self.fetches = 0

    def _settle(self, node: str) -> None:
        owed = self.owed.pop(node, None)
        if owed and owed[2]:
            ev, part, missing = owed
            self.bad.append((ev, f"{node} left offsets {sorted(missing)[:5]} of {part[:8]}.. unanswered, "
                                 f"though no store had ACKed them (ACKed up to {self.acked.get(part, -1)})"))

    def on_event(self, ev: Event) -> None:
        if ev.role == "producer" and ev.kind in (SEND, RECV) and not ev.via:
            msg = ev.message()
            if msg is None:
                return
            if ev.kind == RECV and msg.name == "ACK":
                self._ack(msg)
            elif ev.kind == SEND and msg.name == "RECORD":
                self.last[msg["address"]] = max(self.last.get(msg["address"], -1), msg["sequence"])
            elif ev.kind == SEND and msg.name == "DIRECT-RECORD" and ev.node in self.owed:
                self.owed[ev.node][2].discard(msg["sequence"])
            elif ev.kind == RECV and msg.name == "FETCH":
                self._settle(ev.node)  # the previous FETCH's answers were all sent by now
                part = msg["topic"]
                first = max(msg["sequence"], self.acked.get(part, -1) + 1)
                upto = min(msg["sequence"] + msg["count"] - 1, self.last.get(part, -1))
                if first <= upto:
                    self.fetches += 1
                    self.owed[ev.node] = (ev, part, set(range(first, upto + 1)))
        elif ev.kind == SEND and ev.role == "store" and ev.msg_type == "ACK":
            msg = ev.message()
            if msg is not None:
                self._ack(msg)
        elif ev.kind == NOTE and ev.role == "producer" and ev.msg_type == "records-released":
            d = ev.data or {}
            self.releases += 1
            part, upto = str(d.get("partition")), int(d.get("upto", -1))
            if upto > self.acked.get(part, -1):
                self.bad.append((ev, f"{ev.node} released up to {upto} of {part[:8]}.. with ACKs only up to "
                                     f"{self.acked.get(part, -1)}"))

    def _ack(self, msg: Any) -> None:
        self.acked[msg["topic"]] = max(self.acked.get(msg["topic"], -1), msg["sequence"])  # (topic: the partition)

    def finish(self, end_ns: int) -> list[Verdict]:
        for node in list(self.owed):
            self._settle(node)
        unseen = not_judged("their releases and their answers to FETCH", self.external)
        if not self.bad:
            return [self.ok(f"{self.releases} release(s) covered by ACKs; {self.fetches} FETCH(es) for un-ACKed "
                            f"records answered in full{unseen}")]
        return [self.fail(f"{len(self.bad)} problem(s); first: {self.bad[0][1]}{unseen}",
                          [e.describe() for e, _ in self.bad[:5]])]


class FetchAscending(Checker):
    """The DIRECT-RECORDs a node sends in answer to FETCHes come in ascending offset order. An
    external producer or store the run observes is judged from what the chaos proxy saw: the
    FETCHes it handed on to the node and, on each connection, the DIRECT-RECORDs the node sent
    there (the order within a connection is the node's). The proxy hands a FETCH on before the
    node reads it and reads an answer after the node sent it, so the answers to the next FETCH
    may follow on the connection before the proxy reads them: a step down (offset o after p) is
    a new FETCH's answers unless the wire rules that out. It does when a connection shows more
    steps down than FETCHes (of that partition and requestor) were handed on to the node, less
    one, by then; or when one FETCH alone can be the request of both answers, the only one
    handed on before the proxy read each whose range (sequence, count) holds its offset (a node
    answers one FETCH at a time, in one ascending run, as the rule for the nodes the harness runs
    reads it). Of one the run does not observe, the verdict names the order of its answers as
    not judged."""

    name = "fetch-ascending"
    clause = "dafka.fetch.ascending-order"
    kinds = frozenset({SEND, RECV})
    roles = frozenset({"producer", "store"})
    capture_note = ("on the wire a new FETCH can arrive before the node has read it and finished answering the "
                    "previous one, so a capture would see a correct node's answers as out of order")

    def __init__(self, external: frozenset[str] = frozenset(), observed: bool = False, **params: Any) -> None:
        super().__init__(**params)
        self.external = external  # external producers and stores
        self.observed = observed  # whether the proxy reports their traffic
        self.last: dict[tuple[str, str, str], int] = {}
        # (external node, requestor, partition) -> the FETCHes handed on to it: (when, first offset, count)
        self.fetched: dict[tuple[str, str, str], list[tuple[int, int, int]]] = {}
        # (external node, requestor, partition, connection) -> the last answer there (offset, when read)
        # and the steps down there so far
        self.streams: dict[tuple[str, str, str, int], tuple[int, int, int]] = {}
        self.bad: list[tuple[Event, str]] = []
        self.answers = 0
        self.observed_answers = 0

    def on_event(self, ev: Event) -> None:
        if ev.msg_type not in ("", "FETCH", "DIRECT-RECORD"):
            return
        if ev.via:
            if self.observed:
                self._observed(ev)
            return
        msg = ev.message()
        if msg is None:
            return
        if ev.kind == RECV and msg.name == "FETCH":
            # A new FETCH starts a new ascending run towards its requester.
            self.last.pop((ev.node, msg["address"], msg["topic"]), None)
        elif ev.kind == SEND and msg.name == "DIRECT-RECORD":
            self.answers += 1
            key = (ev.node, msg["topic"], msg["address"])
            prev = self.last.get(key)
            if prev is not None and msg["sequence"] <= prev:
                self.bad.append((ev, f"{ev.node} sent offset {msg['sequence']} after {prev} to {msg['topic'][:8]}.."))
            self.last[key] = msg["sequence"]

    def _observed(self, ev: Event) -> None:
        """An external node's FETCH as the proxy handed it on, or its answer as the proxy read it."""
        msg = ev.message()
        if msg is None:
            return
        if ev.kind == RECV and msg.name == "FETCH":
            self.fetched.setdefault((ev.node, msg["address"], msg["topic"]), []).append(
                (ev.time_ns, msg["sequence"], msg["count"]))
        elif ev.kind == SEND and msg.name == "DIRECT-RECORD":
            self.answers += 1
            self.observed_answers += 1
            key = (ev.node, msg["topic"], msg["address"])
            stream = (*key, int((ev.data or {}).get("connection", -1)))
            offset, before = msg["sequence"], self.streams.get(stream)
            if before is None or offset > before[0]:
                self.streams[stream] = (offset, ev.time_ns, before[2] if before else 0)
                return
            prev, read, steps = before
            steps += 1
            self.streams[stream] = (offset, ev.time_ns, steps)
            asked = self.fetched.get(key, [])  # (all handed on before now: events come in time order)
            for_prev = [f for f in asked if f[0] <= read and f[1] <= prev < f[1] + f[2]]
            for_this = [f for f in asked if f[1] <= offset < f[1] + f[2]]
            what = (f"{ev.node} sent offset {offset} after {prev} to {msg['topic'][:8]}.. (seen by the proxy on one "
                    "connection)")
            if steps + 1 > len(asked):  # each step down starts the answers to another FETCH
                self.bad.append((ev, f"{what}: {steps} step(s) down there, and only {len(asked)} FETCH(es) of that "
                                     f"partition handed on to it"))
            elif len(for_prev) == 1 and for_this == for_prev:
                at, first, count = for_prev[0]
                self.bad.append((ev, f"{what}: both answers to the one FETCH of offsets {first}-{first + count - 1} "
                                     f"handed on to it (at {at / 1e6:.1f} ms)"))

    def finish(self, end_ns: int) -> list[Verdict]:
        unseen = "" if self.observed else not_judged("the order of their answers to FETCH", self.external)
        of_external = (f" ({self.observed_answers} of them by external nodes, as the chaos proxy saw them)"
                       if self.observed_answers else "")
        if not self.bad:
            return [self.ok(f"{self.answers} DIRECT-RECORD(s), ascending within each FETCH{of_external}{unseen}")]
        return [self.fail(f"{len(self.bad)} out-of-order answer(s); first: {self.bad[0][1]}{unseen}",
                          [e.describe() for e, _ in self.bad[:5]])]
