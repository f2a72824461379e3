"""PPPP invariants of the publisher, from what it sends and receives on its ROUTER (the routing
id names the subscriber) and what it tells its application (``published``) and the trace
(``released``, ``subscriber-dropped``)."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CLOCK, CRASH, DELIVER, NOTE, PAUSE, RECV, RESTART, RESUME, SEND, STALL, Event, Verdict
from harness.checkers.pppp_common import PUBLISHER, PpppCheck, inside, message, peer_of
from harness.protocols.codec import Message

PUB = frozenset({PUBLISHER})


class SubView:
    """What a publisher owes one subscriber, as its traffic shows."""

    __slots__ = ("prefixes", "owed", "sent", "heard", "live_since", "subscribed_at")

    def __init__(self, now: int) -> None:
        self.prefixes: list[tuple[bytes, int]] = []  # (prefix, when the publisher got the SUBSCRIBE)
        self.owed: dict[bytes, dict[int, None]] = {}  # channel -> numbers owed and not acknowledged
        self.sent: dict[bytes, set[int]] = {}  # channel -> numbers sent to it
        self.heard = now
        self.live_since = now  # start of the current stretch without a silence of 3 x idle
        self.subscribed_at = now


class Ledger:
    """Per subscriber, the numbers the publisher owes it: every number of a matching channel
    first seen (published) after the publisher got the SUBSCRIBE, until an ACK/NACK acknowledges
    it (E-PPPP-04) or the subscriber is dropped for good (Note ``subscriber-dropped``, or a
    silence longer than 5 x idle + grace)."""

    def __init__(self, check: PpppCheck) -> None:
        self.check = check
        self.subs: dict[bytes, SubView] = {}
        self.first_seen: dict[tuple[bytes, int], int] = {}
        self.top: dict[bytes, int] = {}

    def published(self, channel: bytes, seq: int, t: int) -> bool:
        """Record a number; True when it is new."""
        if (channel, seq) in self.first_seen:
            return False
        self.first_seen[(channel, seq)] = t
        if seq > self.top.get(channel, 0):
            self.top[channel] = seq
        for sub in self.subs.values():
            if any(channel.startswith(p) for p, _ in sub.prefixes):
                sub.owed.setdefault(channel, {})[seq] = None
        return True

    def heard(self, ident: bytes, t: int, node: str = "") -> SubView | None:
        """The subscriber ``ident`` was heard at ``t`` by the publisher ``node``."""
        sub = self.subs.get(ident)
        if sub is None:
            return None
        gap = t - sub.heard
        if gap > self.check.must_drop + self.check.grace:
            del self.subs[ident]  # it may have been dropped for good meanwhile
            return None
        if self.check.silent_long(node, sub.heard, t):
            sub.live_since = t
        sub.heard = t
        return sub

    def subscribe(self, ident: bytes, prefix: bytes, t: int, node: str = "") -> SubView:
        sub = self.heard(ident, t, node) or self.subs.setdefault(ident, SubView(t))
        sub.prefixes.append((prefix, t))
        sub.subscribed_at = t
        return sub

    def acknowledge(self, sub: SubView, msg: Message) -> None:
        owed = sub.owed.get(msg["channel"])
        if owed:
            h, ranges = msg["sequence"], msg["nacks"]
            for s in [s for s in owed if s <= h and not inside(s, ranges)]:
                del owed[s]

    def drop(self, ident: bytes) -> None:
        self.subs.pop(ident, None)

    def feed(self, ev: Event) -> tuple[Message | None, SubView | None]:
        """Update from one publisher event; the message (if any) and the subscriber it concerns."""
        if ev.kind == DELIVER and ev.msg_type == "published" and ev.data:
            self.published(bytes(ev.data["channel"]), int(ev.data["seq"]), ev.time_ns)
            return None, None
        if ev.kind == NOTE and ev.msg_type == "subscriber-dropped" and ev.data:
            self.drop(bytes(ev.data.get("subscriber", b"")))
            return None, None
        if ev.kind not in (SEND, RECV):
            return None, None
        msg = message(ev)
        if msg is None:
            return None, None
        ident = peer_of(ev)
        if ev.kind == SEND:
            sub = self.subs.get(ident)
            if msg.name == "PUBLISH":
                self.published(msg["channel"], msg["sequence"], ev.time_ns)
            return msg, sub
        if msg.name == "SUBSCRIBE":
            return msg, self.subscribe(ident, msg["channel"], ev.time_ns, ev.node)
        sub = self.heard(ident, ev.time_ns, ev.node)
        if sub is not None and msg.name == "ACK":
            return msg, sub  # the caller acknowledges after it looked at the NACKs
        return msg, sub


class SequenceNumbers(PpppCheck):
    """Per channel the publisher numbers new messages 1, 2, 3, ... (as its application is told,
    ``published``), never sends number 0, and a number always carries the same payload: a
    resend keeps its number and its payload (E-PPPP-02)."""

    name = "sequence-numbers"
    clause = "pppp.publisher.sequence-consecutive"
    kinds = frozenset({SEND, DELIVER})
    roles = PUB
    observed_note = "; the numbering its application is told is not on the wire: never #0, one payload per number"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.next: dict[bytes, int] = {}
        self.payload: dict[tuple[bytes, int], tuple[bytes, ...]] = {}
        self.bad: list[tuple[str, list[Event], str]] = []

    def on_event(self, ev: Event) -> None:
        if ev.kind == DELIVER:
            if ev.msg_type == "published" and ev.data:
                c, seq = bytes(ev.data["channel"]), int(ev.data["seq"])
                want = self.next.get(c, 1)
                if seq != want:
                    self.bad.append((f"published {c!r} #{seq} where #{want} was due", [ev], self.clause))
                self.next[c] = seq + 1
            return
        msg = message(ev)
        if msg is None or msg.name != "PUBLISH":
            return
        key = (msg["channel"], msg["sequence"])
        if key[1] == 0:
            self.bad.append((f"sent {key[0]!r} #0 (numbers start at 1)", [ev], self.clause))
        payload = tuple(msg["payload"])
        first = self.payload.setdefault(key, payload)
        if first != payload:
            self.bad.append((f"sent {key[0]!r} #{key[1]} with another payload than before", [ev], self.clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.done(self.bad, f"{len(self.payload)} number(s) over {len(self.next) or 'the'} channel(s): "
                                   "1, 2, 3, ..., each with one payload")


class PreserveUntilAcked(PpppCheck):
    """The publisher lets no message go (Note ``released``) while a live subscriber it is owed
    to has not acknowledged it (E-PPPP-16); live: the publisher heard from it within 3 x idle.
    Publishers that do not report releases are judged on the NACKs they answer instead
    (``resend-nacked``)."""

    name = "preserve-until-acked"
    clause = "pppp.publisher.preserve-until-acked"
    kinds = frozenset({SEND, RECV, DELIVER, NOTE, CLOCK})
    roles = PUB
    unseen_observed = "what it releases is not on the wire; resend-nacked judges the NACKs it answers"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.ledger = Ledger(self)
        self.bad: list[tuple[str, list[Event], str]] = []
        self.released = 0

    def on_event(self, ev: Event) -> None:
        if self.clock_event(ev):
            return
        if ev.kind == NOTE and ev.msg_type == "released" and ev.data:
            channel = bytes(ev.data["channel"])
            for seq in ev.data.get("seqs", []):
                self.released += 1
                for ident, sub in self.ledger.subs.items():
                    if seq in sub.owed.get(channel, {}) and not self.silent_long(ev.node, sub.heard, ev.time_ns):
                        self.bad.append((f"released {channel!r} #{seq} while {ident!r} (heard "
                                         f"{(ev.time_ns - sub.heard) / 1e6:.1f} ms before) had not acknowledged it",
                                         [ev], self.clause))
                        break
            return
        msg, sub = self.ledger.feed(ev)
        if msg is not None and sub is not None and ev.kind == RECV and msg.name == "ACK":
            self.ledger.acknowledge(sub, msg)

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.done(self.bad, f"{self.released} message(s) released, each acknowledged by every live subscriber")


class ResendNacked(PpppCheck):
    """Every number a live subscriber NACKs that the publisher owes it is sent to it again, with
    that number (and, `sequence-numbers`, its payload), within ``idle`` (plus the tolerance) of
    the ACK/NACK (E-PPPP-03). After a resend on silence of k with last published L, the reply's
    h also NACKs (max(k, h), L] (E-PPPP-15, clause ``pppp.publisher.implicit-nack``). Owed
    numbers published before the subscriber's last silence of 3 x idle are not judged (a
    publisher that syncs by full state dump may have dropped them, E-PPPP-16), nor are
    obligations to a subscriber that falls silent for 3 x idle before they are due. Time the
    publisher spent paused or stalled after the ACK/NACK does not count."""

    name = "resend-nacked"
    clause = "pppp.publisher.resend-nacked"
    kinds = frozenset({SEND, RECV, DELIVER, NOTE, CRASH, CLOCK}) | PpppCheck.LIFE
    roles = PUB
    timed = True

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.ledger = Ledger(self)
        # (subscriber, channel, number) -> (deadline, the ACK event, clause)
        self.due: dict[tuple[bytes, bytes, int], tuple[int, Event, str]] = {}
        self.on_silence: dict[tuple[bytes, bytes], tuple[int, int]] = {}
        # (subscriber, channel) -> what its last ACK/NACK asked for but is not judged (published
        # before the subscriber's last long silence): a resend of one of those answers the ACK,
        # it is no resend on silence (explore found the false alarm: such an answer was taken for
        # one, and the next ACK for an implicit NACK of what had been resent already)
        self.unjudged: dict[tuple[bytes, bytes], set[int]] = {}
        self.bad: list[tuple[str, list[Event], str]] = []
        self.asked = 0

    def forget_peer(self, peer: str) -> None:  # a resend to it now vanishes in the publisher's ROUTER
        for table in (self.due, self.on_silence):
            for key in [k for k in table if k[0] == peer.encode()]:
                del table[key]

    def on_event(self, ev: Event) -> None:
        if self.of_peer(ev) or self.clock_event(ev) or self.held(ev):
            return
        if ev.kind == CRASH:
            self.due.clear()  # a crashed publisher owes nothing until it talks again
            self.on_silence.clear()
            self.unjudged.clear()
            return
        self._expire(ev.time_ns)
        msg, sub = self.ledger.feed(ev)
        if msg is None or sub is None:
            return
        ident = peer_of(ev)
        if ev.kind == SEND and msg.name == "PUBLISH":
            c, s = msg["channel"], msg["sequence"]
            sent = sub.sent.setdefault(c, set())
            answer = self.due.pop((ident, c, s), None) is not None or s in self.unjudged.get((ident, c), ())
            if not answer and s in sent and ev.time_ns > sub.subscribed_at:
                # a resend on silence (E-PPPP-15), with the last number published by then: the
                # proxy may read a publisher's sends to two subscribers in another order than it
                # sent them, so for an external one the last it sent this subscriber
                last = max(sent) if self.observed_event(ev) else self.ledger.top.get(c, s)
                self.on_silence[(ident, c)] = (s, last)
                self.resent_on_silence(ev, ident, sub, c, s)
            sent.add(s)
        elif ev.kind == RECV and msg.name == "ACK":
            self._ack(ev, ident, sub, msg)
            self.ledger.acknowledge(sub, msg)

    def resent_on_silence(self, ev: Event, ident: bytes, sub: SubView, channel: bytes, seq: int) -> None:
        """A resend on silence of ``seq`` (for checks that judge which number it picks)."""

    def _ack(self, ev: Event, ident: bytes, sub: Any, msg: Message) -> None:
        c, h, ranges = msg["channel"], msg["sequence"], list(msg["nacks"])
        owed = sub.owed.get(c, {})
        for s in [s for s in self.due if s[0] == ident and s[1] == c]:
            if s[2] <= h and not inside(s[2], ranges):
                del self.due[s]  # it arrived after all
        implicit = self.on_silence.pop((ident, c), None)
        deadline = ev.time_ns + self.idle + self.tol_for(ev.node)
        unjudged = self.unjudged[(ident, c)] = set()  # this ACK is what the subscriber asks for now
        for s in owed:
            if inside(s, ranges):
                clause = self.clause
            elif implicit is not None and max(implicit[0], h) < s <= implicit[1]:
                clause = "pppp.publisher.implicit-nack"
            else:
                continue
            if self.ledger.first_seen.get((c, s), 0) < sub.live_since:
                unjudged.add(s)
                continue
            self.asked += 1
            self.due.setdefault((ident, c, s), (deadline, ev, clause))

    def _expire(self, now: int) -> None:
        for key, (deadline, ack, clause) in list(self.due.items()):
            if deadline >= now:
                continue
            bound = deadline - ack.time_ns
            held = self.due_after(ack.node, ack.time_ns, bound)
            if held is None or held >= now:
                continue  # the publisher was paused meanwhile: its deadline moved
            del self.due[key]
            sub = self.ledger.subs.get(key[0])
            if sub is None or self.silent_long(ack.node, sub.heard, held):
                continue  # gone, or silent long enough to count as disconnected
            what = "implicitly NACKed" if clause != self.clause else "NACKed"
            paused = f" (and {(held - deadline) / 1e6:g} ms it was paused)" if held > deadline else ""
            self.bad.append((f"{key[0]!r} {what} {key[1]!r} #{key[2]} at {ack.time_ns / 1e6:.1f} ms; not resent "
                             f"within {bound / 1e6:g} ms{paused}", [ack], clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        self._expire(end_ns)
        return self.done(self.bad, f"{self.asked} NACKed number(s), each resent in time")


class StopToDisconnected(PpppCheck):
    """The publisher sends nothing to a subscriber it has not heard from for 5 x idle (plus
    the tolerance) until it hears from it again (E-PPPP-12; the clause is a SHOULD, so the check
    runs only where a file names it). Time the
    publisher spent paused does not count: a stopped process detects nothing, and on resuming
    may send what was waiting before it looks at the time (explore found the false alarm, a
    publisher paused for 1 s on `pppp/explore/outages.yaml`)."""

    name = "stop-to-disconnected"
    clause = "pppp.publisher.stop-to-disconnected"
    level = "SHOULD"  # opt-in: a publisher that goes on sending to a silent subscriber breaks no MUST
    kinds = frozenset({SEND, RECV, PAUSE, RESUME, STALL, CRASH, RESTART, CLOCK})
    roles = PUB
    timed = True

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.heard: dict[bytes, tuple[int, int]] = {}  # ident -> (when, the publisher's pause credit then)
        self.bad: list[tuple[str, list[Event], str]] = []
        self.sent = 0

    def on_event(self, ev: Event) -> None:
        if self.paused_for(ev) or ev.kind in (CRASH, RESTART):
            return
        ident = peer_of(ev)
        if ev.kind == RECV:
            self.heard[ident] = (ev.time_ns, self.credit(ev.node, ev.time_ns))
            return
        self.sent += 1
        last = self.heard.get(ident)
        if last is None:
            return
        heard, credit = last
        paused = self.credit(ev.node, ev.time_ns) - credit
        if ev.time_ns > heard + self.must_drop + paused + self.slack_for(ev.node):
            self.bad.append((f"sent {ev.msg_type or 'a message'} to {ident!r} {(ev.time_ns - heard) / 1e6:.1f} ms "
                             f"after last hearing from it ({paused / 1e6:g} ms of it paused; disconnected after "
                             f"{self.must_drop / 1e6:g} ms at most)", [ev], self.clause))
            self.heard[ident] = (ev.time_ns, self.credit(ev.node, ev.time_ns))  # one failure per silence

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.done(self.bad, f"{self.sent} message(s) sent, none to a subscriber silent beyond 5 x idle")


class PublisherHeartbeats(PpppCheck):
    """To each subscriber it is in a conversation with, the publisher's next message comes
    within ``first_idle`` of its last message other than HEARTBEAT and within ``idle`` of a
    HEARTBEAT (plus the tolerance), from the first message after the subscriber's SUBSCRIBE on
    (E-PPPP-14). Excused once the publisher may consider the subscriber disconnected (nothing
    from it for 3 x idle); a crash of the publisher ends every obligation until the next
    SUBSCRIBE. A SUBSCRIBE starts the conversation afresh (a restarted subscriber is a new
    conversation: what was due to the old one is not owed to it), and time the publisher spent
    paused does not count."""

    name = "publisher-heartbeats"
    clause = "pppp.heartbeat.interval"
    kinds = frozenset({SEND, RECV, CRASH, PAUSE, RESUME, STALL, CLOCK})
    roles = PUB
    timed = True

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.talking: set[bytes] = set()
        self.last: dict[bytes, tuple[Event, bool, int]] = {}  # ident -> (message, a HEARTBEAT?, pause credit then)
        self.heard: dict[bytes, int] = {}
        self.excused: set[bytes] = set()
        self.bad: list[tuple[str, list[Event], str]] = []
        self.sent = 0

    def forget_peer(self, peer: str) -> None:  # what the publisher sends it now vanishes in its ROUTER
        self.talking.discard(peer.encode())
        self.last.pop(peer.encode(), None)

    def on_event(self, ev: Event) -> None:
        if self.of_peer(ev) or self.paused_for(ev):
            return
        if ev.kind == CRASH:
            self.talking.clear()
            self.last.clear()
            return
        msg = message(ev)
        if msg is None:
            return
        ident = peer_of(ev)
        self._judge(ident, ev.time_ns, ev if ev.kind == SEND else None)
        if ev.kind == RECV:
            heard = self.heard.get(ident)
            due = self._deadline(ident)
            if heard is not None and due is not None and self.silent_long(ev.node, heard, due) \
                    and self.silent_long(ev.node, heard, ev.time_ns):
                self.excused.add(ident)
            self.heard[ident] = ev.time_ns
            if msg.name == "SUBSCRIBE":
                self.talking.add(ident)
                self.last.pop(ident, None)  # a new conversation: due from the first message after it
        elif ident in self.talking:
            self.sent += 1
            self.last[ident] = (ev, msg.name == "HEARTBEAT", self.credit(ev.node, ev.time_ns))
            self.excused.discard(ident)

    def _deadline(self, ident: bytes, now: int | None = None) -> int | None:
        prev = self.last.get(ident)
        if prev is None:
            return None
        paused = self.credit(prev[0].node, now) - prev[2] if now is not None else 0  # paused since that message
        return prev[0].time_ns + (self.idle if prev[1] else self.first_idle) + self.tol_for(prev[0].node) + paused

    def _judge(self, ident: bytes, now: int, ev: Event | None) -> None:
        due = self._deadline(ident, now)
        if due is None or now <= due:
            return
        before, was_hb, _ = self.last.pop(ident)
        heard = self.heard.get(ident, 0)
        if ident in self.excused or self.silent_long(before.node, heard, due):
            self.excused.discard(ident)
            return  # it may have counted the subscriber as disconnected by then
        clause = "pppp.heartbeat.interval" if was_hb else "pppp.heartbeat.first-idle"
        self.bad.append((f"sent nothing to {ident!r} for {(now - before.time_ns) / 1e6:.1f} ms after "
                         f"{'a HEARTBEAT' if was_hb else 'its ' + (before.msg_type or 'message')} at "
                         f"{before.time_ns / 1e6:.1f} ms (due within "
                         f"{(due - before.time_ns - self.tol_for(before.node)) / 1e6:g} ms)",
                         [before] + ([ev] if ev else []), clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        for ident in list(self.last):
            self._judge(ident, end_ns, None)
        return self.done(self.bad, f"{self.sent} message(s) to subscribers, never a silence beyond the idle times")
