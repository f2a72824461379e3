"""PPPP invariants, checked from what crosses the sockets and what the applications see.

Subscriber-side properties live here, the publisher's in `harness.checkers.pppp_publisher`;
``ALL`` lists every PPPP checker (the package turns each into a check of the same name).
docs/pppp.md says what each one guarantees and which mutant proves it can fail.
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CLOCK, CRASH, DELIVER, NOTE, PAUSE, RECV, RESTART, RESUME, SEND, STALL, Event, Verdict
from harness.checkers.pppp_common import (
    PUBLISHER, SUBSCRIBER, Gaps, PpppCheck, covered, inside, message, peer_of,
)
from harness.protocols.pppp import ranges_without
from harness.checkers.pppp_publisher import (
    PreserveUntilAcked, PublisherHeartbeats, ResendNacked, SequenceNumbers, StopToDisconnected,
)

BOTH = frozenset({PUBLISHER, SUBSCRIBER})
# A number published less than this many idle times before the end of a lossy run may still be on
# its way: a lost PUBLISH is NACKed once the publisher's next heartbeat shows the gap, and a
# heartbeat may be lost too.
IN_FLIGHT_IDLES = 3
SUB = frozenset({SUBSCRIBER})


class ExactlyOnce(PpppCheck):
    """Every subscriber's application receives every message of its channels exactly once:
    never a number twice (also across crashes of the subscriber), and by the end of the run every
    number of a channel from the first one the subscriber received on it up to the last one
    published. A subscriber the publisher dropped for good (Note ``subscriber-dropped``, or
    silent for longer than 5 x idle + grace) is owed only what comes after its return; a
    subscriber that is down at the end is judged on duplicates only. A channel a subscriber
    subscribed to but never received anything of, although messages were published on it after
    the publisher had its SUBSCRIBE, is a failure too. With ``sync: full-dump`` (a publisher that
    syncs a returning subscriber by a state dump, E-PPPP-16) a silence of 3 x idle already
    starts anew what the subscriber is owed.

    External nodes (E-PPPP-20): what an external subscriber delivers is not on the wire, so it is
    judged only on what the publisher's probe shows, that the publisher sent it something of each
    channel it subscribed to (``pppp.publisher.preserve-until-acked``); the verdict names it. With
    an external publisher, the highest number of a channel is the highest any subscriber received,
    a subscriber's own silence (its sends) stands for the publisher's hearing of it, and a number
    an in-process subscriber never got proves the publisher did not resend what it NACKed
    (``pppp.publisher.resend-nacked``).

    A run is finite: where the file's faults may lose messages (``lossy``), a number first
    published less than ``IN_FLIGHT_IDLES`` idle times (plus the tolerance) before the end may
    still be on its way back, its PUBLISH lost and its gap not yet NACKed at the publisher's next
    heartbeat. Such a number is in flight: counted apart, not owed. A fault-free run owes every
    number; give a lossy file a ``settle`` to judge its last numbers too."""

    name = "exactly-once"
    clause = "pppp.subscriber.exactly-once"
    unseen = "what it delivers is not on the wire"
    unseen_observed = unseen
    judged_roles = frozenset({SUBSCRIBER})  # the publisher's part is judged from the subscribers' side
    kinds = frozenset({SEND, RECV, DELIVER, NOTE, CRASH, RESTART})
    roles = BOTH

    def __init__(self, sync: str = "backlog", lossy: bool = False, **params: Any) -> None:
        super().__init__(**params)
        if sync not in ("backlog", "full-dump"):
            raise ValueError(f"sync must be backlog or full-dump, got {sync!r}")
        self.lossy = lossy
        self.forget_after = self.must_drop + self.grace if sync == "backlog" else self.may_drop
        self.got: dict[tuple[str, bytes], dict[int, Event]] = {}
        self.start: dict[tuple[str, bytes], int] = {}  # (subscriber, channel) -> first number of its epoch
        self.top: dict[bytes, int] = {}  # channel -> highest number published
        self.first_seen: dict[tuple[bytes, int], int] = {}  # (channel, number) -> when it was first published
        self.subscribed: dict[str, list[tuple[bytes, int]]] = {}  # subscriber -> (prefix, publisher got it at)
        self.heard: dict[str, int] = {}  # subscriber -> last time the publisher heard from it
        self.up: dict[str, bool] = {}
        self.bad: list[tuple[str, list[Event], str]] = []
        self.sent: set[tuple[str, bytes]] = set()  # (subscriber, channel) the publisher sent a PUBLISH of
        self.probed: set[str] = set()  # subscribers whose own events a probe reports
        self.publisher_external = PUBLISHER in self.external.values()
        self.spoke: dict[str, int] = {}  # subscriber -> its last send (an external publisher's hearing)

    def on_event(self, ev: Event) -> None:
        if ev.role == PUBLISHER:
            self._publisher(ev)
            return
        if self.observed_event(ev):
            return  # an external subscriber's messages: what it delivers is still not on the wire
        if ev.kind not in (CRASH, RESTART):  # the live runtime reports these of an external process too
            self.probed.add(ev.node)
        if ev.kind == SEND and self.publisher_external:
            last = self.spoke.get(ev.node)
            if last is not None and ev.time_ns - last >= self.forget_after:
                self._new_epoch(ev.node)  # the publisher may have dropped it for good meanwhile
            self.spoke[ev.node] = ev.time_ns
        elif ev.kind == DELIVER and ev.msg_type == "message" and ev.data:
            key = (ev.node, bytes(ev.data["channel"]))
            seq = int(ev.data["seq"])
            seen = self.got.setdefault(key, {})
            if seq in seen:
                self.bad.append((f"{ev.node} delivered {key[1]!r} #{seq} twice", [seen[seq], ev], self.clause))
            else:
                seen[seq] = ev
        elif ev.kind == RECV:
            msg = message(ev)
            if msg is not None and msg.name == "PUBLISH":
                self.start.setdefault((ev.node, msg["channel"]), msg["sequence"])
                if self.publisher_external:  # the wire shows this number was published
                    self._published(msg["channel"], msg["sequence"], ev.time_ns)
        elif ev.kind in (CRASH, RESTART):
            self.up[ev.node] = ev.kind == RESTART

    def _publisher(self, ev: Event) -> None:
        if ev.kind == DELIVER and ev.msg_type == "published" and ev.data:
            self._published(bytes(ev.data["channel"]), int(ev.data["seq"]), ev.time_ns)
        elif ev.kind == NOTE and ev.msg_type == "subscriber-dropped" and ev.data:
            self._new_epoch(_name(ev.data.get("subscriber")))
        elif ev.kind in (SEND, RECV):
            msg = message(ev)
            if msg is None:
                return
            sub = _name(peer_of(ev))
            if ev.kind == SEND and msg.name == "PUBLISH":
                self._published(msg["channel"], msg["sequence"], ev.time_ns)
                self.sent.add((sub, msg["channel"]))
            elif ev.kind == RECV:
                last = self.heard.get(sub)
                if last is not None and ev.time_ns - last >= self.forget_after:
                    self._new_epoch(sub)  # it may have been dropped for good meanwhile
                self.heard[sub] = ev.time_ns
                if msg.name == "SUBSCRIBE":
                    self.subscribed.setdefault(sub, []).append((msg["channel"], ev.time_ns))

    def _published(self, channel: bytes, seq: int, t: int) -> None:
        self.first_seen.setdefault((channel, seq), t)
        if seq > self.top.get(channel, 0):
            self.top[channel] = seq

    def _new_epoch(self, sub: str) -> None:
        for key in [k for k in self.start if k[0] == sub]:
            del self.start[key]  # owed from the first number it receives after its return
        self.subscribed.pop(sub, None)

    def finish(self, end_ns: int) -> list[Verdict]:
        judged = in_flight = 0
        horizon = end_ns - IN_FLIGHT_IDLES * self.idle - self.tol if self.lossy else end_ns
        for (sub, channel), first in self.start.items():
            if not self.up.get(sub, True):
                continue  # down at the end: it cannot deliver
            judged += 1
            got = self.got.get((sub, channel), {})
            missing = [s for s in range(first, self.top.get(channel, 0) + 1) if s not in got]
            late = {s for s in missing if self.first_seen.get((channel, s), -1) >= horizon}
            in_flight += len(late)
            missing = [s for s in missing if s not in late]
            if missing:
                # an in-process (reference) subscriber NACKs what it lacks: with an external
                # publisher, a gap proves the publisher did not resend
                clause = "pppp.publisher.resend-nacked" if self.publisher_external else self.clause
                self.bad.append((f"{sub} never delivered {channel!r} #{_span(missing)} (owed from #{first} to "
                                 f"#{self.top.get(channel, 0)})", [], clause))
        for sub, subs in self.subscribed.items():
            if not self.up.get(sub, True):
                continue
            # a subscriber no probe reports (external): what the publisher sent it, not what it received
            external = sub not in self.probed
            for channel, top in self.top.items():
                if (sub, channel) in (self.sent if external else self.start):
                    continue
                for prefix, at in subs:
                    late = [s for s in range(1, top + 1) if self.first_seen.get((channel, s), -1) > at]
                    if channel.startswith(prefix) and late and external:
                        self.bad.append((f"the publisher sent {sub} nothing of {channel!r} although it subscribed "
                                         f"{prefix!r} (#{late[0]} was published after its SUBSCRIBE)", [],
                                         "pppp.publisher.preserve-until-acked"))
                        break
                    if channel.startswith(prefix) and late:
                        self.bad.append((f"{sub} subscribed {prefix!r} but never received anything of {channel!r} "
                                         f"(#{late[0]} was published after its SUBSCRIBE)", [], self.clause))
                        break
        delivered = sum(len(v) for v in self.got.values())
        flying = (f"; {in_flight} number(s) not owed: still in flight when the run ended (first published less "
                  f"than {IN_FLIGHT_IDLES} idle times before it, on a lossy file)") if in_flight else ""
        return self.done(self.bad, f"{delivered} deliveries, no duplicate; {judged} subscriber channel(s) complete"
                         f"{flying}")


class AckTiming(PpppCheck):
    """A subscriber ACK/NACKs every PUBLISH it receives, duplicates included, with an ACK/NACK
    of the channel whose number is at least the message's, sent within ``first_idle`` (plus the
    tolerance) of receiving it (E-PPPP-14), time spent paused not counted. A crash of the
    subscriber cancels what it owed. A
    duplicate covered late or never fails ``pppp.subscriber.ack-duplicates``, another message
    covered late ``ack-within-first-idle`` and never ``ack-every-message``."""

    name = "ack-timing"
    clause = "pppp.subscriber.ack-within-first-idle"
    kinds = frozenset({SEND, RECV, CRASH, PAUSE, RESUME, STALL, CLOCK})
    roles = SUB
    timed = True

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.open: dict[tuple[str, bytes], list[tuple[int, int, bool, Event]]] = {}  # (t, seq, duplicate, ev)
        self.seen: set[tuple[str, bytes, int]] = set()
        self.late: list[tuple[str, list[Event], str]] = []
        self.overdue: dict[tuple[str, bytes], list[tuple[int, int, bool, Event]]] = {}
        self.received = 0

    def _active(self, node: str, t: int) -> int:
        """The node's clock without the time it spent paused (its credit is never cleared here)."""
        return t - self.credit(node, t)

    def on_event(self, ev: Event) -> None:
        if self.of_peer(ev) or self.paused_for(ev):
            return
        if ev.kind == CRASH:
            for key in [k for k in self.open if k[0] == ev.node]:
                del self.open[key]
            for key in [k for k in self.overdue if k[0] == ev.node]:
                self._never(key)
            return
        msg = message(ev)
        if msg is None:
            return
        if ev.kind == RECV and msg.name == "PUBLISH":
            key = (ev.node, msg["channel"])
            self._expire(key, ev.time_ns)
            dup = (ev.node, msg["channel"], msg["sequence"]) in self.seen
            self.seen.add((ev.node, msg["channel"], msg["sequence"]))
            self.open.setdefault(key, []).append((self._active(ev.node, ev.time_ns), msg["sequence"], dup, ev))
            self.received += 1
        elif ev.kind == SEND and msg.name == "ACK":
            key = (ev.node, msg["channel"])
            self._expire(key, ev.time_ns)
            h = msg["sequence"]
            self.open[key] = [o for o in self.open.get(key, []) if o[1] > h]
            still = []
            active = self._active(ev.node, ev.time_ns)
            for o in self.overdue.get(key, []):
                if o[1] <= h and active - o[0] <= self.first_idle + self.tol_for(ev.node):
                    continue  # in time after all: a stall credited since it fell overdue (live)
                if o[1] <= h:
                    what, clause = ("the duplicate ", "pppp.subscriber.ack-duplicates") if o[2] else ("", self.clause)
                    self.late.append((f"{ev.node} ACKed {what}{key[1]!r} #{o[1]} {(ev.time_ns - o[3].time_ns) / 1e6:.1f} ms "
                                      f"after receiving it (first idle time {self.first_idle / 1e6:g} ms)", [o[3], ev],
                                      clause))
                else:
                    still.append(o)
            self.overdue[key] = still

    def forget_peer(self, peer: str) -> None:  # an external subscriber's ACKs wait in its DEALER now
        for table in (self.open, self.overdue):
            for key in [k for k in table if self.observed_node(k[0])]:
                del table[key]

    def _expire(self, key: tuple[str, bytes], now: int) -> None:
        limit = self.first_idle + self.tol_for(key[0])
        now = self._active(key[0], now)
        opened = self.open.get(key)
        if opened and opened[0][0] + limit < now:
            self.overdue.setdefault(key, []).extend(o for o in opened if o[0] + limit < now)
            self.open[key] = [o for o in opened if o[0] + limit >= now]

    def _never(self, key: tuple[str, bytes]) -> None:
        for t, seq, dup, ev in self.overdue.pop(key, []):
            clause = "pppp.subscriber.ack-duplicates" if dup else "pppp.subscriber.ack-every-message"
            what = "duplicate " if dup else ""
            self.late.append((f"{key[0]} never ACK/NACKed the {what}{key[1]!r} #{seq} it received at "
                              f"{ev.time_ns / 1e6:.1f} ms", [ev], clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        self.healed(end_ns, final=True)
        for key in list(self.open):
            self._expire(key, end_ns)
        for key in list(self.overdue):
            self._never(key)
        self.late.sort(key=lambda p: p[1][0].time_ns if p[1] else 0)
        return self.done(self.late, f"{self.received} PUBLISH received, each ACK/NACKed within the first idle time")


class AckHighest(PpppCheck):
    """Each ACK/NACK a subscriber sends is true (E-PPPP-04): its number is the highest it
    received on the channel in this conversation (or, at most, the highest it ever received),
    never lower than an earlier one of the conversation; every NACK range lies below it; and
    every number between the first one of the conversation and the ACK's that the subscriber
    never received is inside a NACK range (an ACK acknowledges whatever it does not NACK). A
    SUBSCRIBE covering the channel, or a crash, starts a new conversation."""

    name = "ack-highest"
    clause = "pppp.subscriber.ack-highest"
    kinds = frozenset({SEND, RECV, CRASH})
    roles = SUB
    observed_note = "; an ACK below a number handed on to it is not judged (it may not have read it yet)"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.conv: dict[tuple[str, bytes], Gaps] = {}
        self.last_h: dict[tuple[str, bytes], int] = {}
        self.ever: dict[tuple[str, bytes], set[int]] = {}
        self.highest_ever: dict[tuple[str, bytes], int] = {}
        self.bad: list[tuple[str, list[Event], str]] = []
        self.acks = 0

    def on_event(self, ev: Event) -> None:
        if ev.kind == CRASH:
            self._restart(ev.node, b"")
            return
        msg = message(ev)
        if msg is None:
            return
        if ev.kind == RECV and msg.name == "PUBLISH":
            key, seq = (ev.node, msg["channel"]), msg["sequence"]
            gaps = self.conv.get(key)
            if gaps is None:
                self.conv[key] = Gaps(seq)
            else:
                gaps.add(seq)
            self.ever.setdefault(key, set()).add(seq)
            if seq > self.highest_ever.get(key, 0):
                self.highest_ever[key] = seq
        elif ev.kind == SEND and msg.name == "SUBSCRIBE":
            self._restart(ev.node, msg["channel"])
        elif ev.kind == SEND and msg.name == "ACK":
            self.acks += 1
            self._ack(ev, (ev.node, msg["channel"]), msg["sequence"], list(msg["nacks"]))

    def _restart(self, node: str, prefix: bytes) -> None:
        for key in [k for k in self.conv if k[0] == node and k[1].startswith(prefix)]:
            del self.conv[key]
            self.last_h.pop(key, None)

    def _ack(self, ev: Event, key: tuple[str, bytes], h: int, ranges: list[Any]) -> None:
        gaps = self.conv.get(key)
        conv_high = gaps.highest if gaps is not None else 0
        c = key[1]
        # (an external subscriber's receipts are when the proxy handed a message on: it may
        # not have read the highest one yet when it sent this ACK)
        if h < conv_high and not self.observed_event(ev):
            self.bad.append((f"{key[0]} ACKed {c!r} #{h}, but the highest it received in this conversation is "
                             f"#{conv_high}", [ev], self.clause))
        elif h > self.highest_ever.get(key, 0):
            self.bad.append((f"{key[0]} ACKed {c!r} #{h}, which it never received (highest "
                             f"#{self.highest_ever.get(key, 0)})", [ev], self.clause))
        if h < self.last_h.get(key, 0):
            self.bad.append((f"{key[0]} ACKed {c!r} #{h} after #{self.last_h[key]} in the same conversation",
                             [ev], self.clause))
        self.last_h[key] = max(h, self.last_h.get(key, 0))
        for first, last in ranges:
            if last >= h:
                self.bad.append((f"{key[0]} NACKed {c!r} #{first}-#{last}, not below its ACK #{h}", [ev], self.clause))
                break
        if gaps is not None:
            ever = self.ever.get(key, set())
            need = [(f, last) for f, last in gaps.below(h)]
            need = [r for r in _without(need, ever)]
            hole = covered(need, ranges)
            if hole is not None:
                self.bad.append((f"{key[0]} ACKed {c!r} #{h} without NACKing #{hole[0]}-#{hole[1]}, which it "
                                 f"never received", [ev], self.clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.done(self.bad, f"{self.acks} ACK/NACK(s), each naming the highest number received and every gap")


class Resubscribe(PpppCheck):
    """A subscriber that hears nothing from the publisher for 5 x idle (plus the tolerance)
    has sent SUBSCRIBE again, for every channel it holds, by then (E-PPPP-10, E-PPPP-12): once
    per such silence. Time the subscriber spent paused does not count (a stopped process
    detects nothing; explore found the false alarm: a pause that began before the deadline)."""

    name = "resubscribe"
    clause = "pppp.subscriber.resubscribe"
    kinds = frozenset({SEND, RECV, CRASH, RESTART, PAUSE, RESUME, STALL, CLOCK})
    roles = SUB
    timed = True

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.heard: dict[str, int] = {}  # last message from the publisher (or the start of the incarnation)
        self.judged: set[str] = set()  # its silence since then was judged: wait for the publisher
        self.held: dict[str, dict[bytes, None]] = {}
        self.subscribes: dict[str, list[tuple[int, bytes]]] = {}
        self.bad: list[tuple[str, list[Event], str]] = []
        self.silences = 0

    def forget_peer(self, peer: str) -> None:  # an external subscriber's SUBSCRIBE waits in its DEALER now
        self.judged.update(n for n in self.heard if self.observed_node(n))

    def on_event(self, ev: Event) -> None:
        node = ev.node
        if self.of_peer(ev) or self.paused_for(ev):
            return
        if ev.kind == CRASH:
            self._judge(node, ev.time_ns)
            self.heard.pop(node, None)
            self.held.pop(node, None)
            self.judged.discard(node)
            return
        if ev.kind == RESTART:
            return
        msg = message(ev)
        if msg is None:
            return
        if ev.kind == SEND:
            if node not in self.heard:
                self.heard[node] = ev.time_ns  # the first message of the incarnation starts the clock
                self.clear_credit(node, ev.time_ns)
            self._judge(node, ev.time_ns)
            if msg.name == "SUBSCRIBE":
                self.held.setdefault(node, {})[msg["channel"]] = None
                self.subscribes.setdefault(node, []).append((ev.time_ns, msg["channel"]))
        elif ev.kind == RECV and node in self.heard:
            self._judge(node, ev.time_ns)
            self.heard[node] = ev.time_ns
            self.clear_credit(node, ev.time_ns)
            self.judged.discard(node)

    def _judge(self, node: str, now: int) -> None:
        """Judge the silence that began at the last message heard, once its deadline has passed."""
        start = self.heard.get(node)
        if start is None or node in self.judged:
            return
        deadline = start + self.must_drop + self.credit(node, now) + self.slack_for(node)  # paused time moves it
        if now <= deadline:
            return
        self.silences += 1
        sent = {c for t, c in self.subscribes.get(node, []) if start < t <= deadline}
        missing = [c for c in self.held.get(node, {}) if c not in sent]
        if missing:
            self.bad.append((f"{node} heard nothing from the publisher from {start / 1e6:.1f} ms and had not "
                             f"SUBSCRIBEd {', '.join(repr(c) for c in missing)} again by {deadline / 1e6:.1f} ms",
                             [], self.clause))
        self.judged.add(node)  # one re-SUBSCRIBE per silence is what the clause asks
        self.subscribes[node] = [(t, c) for t, c in self.subscribes.get(node, []) if t > deadline]

    def finish(self, end_ns: int) -> list[Verdict]:
        self.healed(end_ns, final=True)
        for node in list(self.heard):
            self._judge(node, end_ns)
        return self.done(self.bad, f"{self.silences} publisher silence(s), each answered by SUBSCRIBE in time")


class SubscriberHeartbeats(PpppCheck):
    """A subscriber's next message to the publisher comes within ``first_idle`` of its last
    message other than HEARTBEAT and within ``idle`` of a HEARTBEAT (plus the tolerance), from
    its first message to the end of the run or its crash (E-PPPP-14). Time it spent paused
    does not count: a stopped process keeps no deadline."""

    name = "subscriber-heartbeats"
    clause = "pppp.heartbeat.interval"
    kinds = frozenset({SEND, CRASH, PAUSE, RESUME, STALL, CLOCK})
    roles = SUB
    timed = True

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.last: dict[str, tuple[Event, bool]] = {}
        self.bad: list[tuple[str, list[Event], str]] = []
        self.sent = 0

    def forget_peer(self, peer: str) -> None:  # an external subscriber's messages wait in its DEALER now
        for node in [n for n in self.last if self.observed_node(n)]:
            del self.last[node]

    def on_event(self, ev: Event) -> None:
        if self.of_peer(ev) or self.paused_for(ev):
            return
        if ev.kind == CRASH:
            self.last.pop(ev.node, None)
            return
        msg = message(ev)
        if msg is None:
            return
        self.sent += 1
        self._judge(ev.node, ev.time_ns, ev)
        self.last[ev.node] = (ev, msg.name == "HEARTBEAT")
        self.clear_credit(ev.node, ev.time_ns)

    def _judge(self, node: str, now: int, ev: Event | None) -> None:
        prev = self.last.get(node)
        if prev is None:
            return
        before, was_hb = prev
        allowed = self.idle if was_hb else self.first_idle
        if now - before.time_ns > allowed + self.tol_for(node) + self.credit(node, now):  # not while paused
            clause = "pppp.heartbeat.interval" if was_hb else "pppp.heartbeat.first-idle"
            what = "a HEARTBEAT" if was_hb else f"its {before.msg_type or 'message'}"
            self.bad.append((f"{node} sent nothing for {(now - before.time_ns) / 1e6:.1f} ms after {what} at "
                             f"{before.time_ns / 1e6:.1f} ms (due within {allowed / 1e6:g} ms)",
                             [before] + ([ev] if ev else []), clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        self.healed(end_ns, final=True)
        for node in list(self.last):
            self._judge(node, end_ns, None)
        return self.done(self.bad, f"{self.sent} message(s) from subscribers, never a silence beyond the idle times")


class SubscribeFirst(PpppCheck):
    """Nothing before SUBSCRIBE (E-PPPP-10): each incarnation of a subscriber sends SUBSCRIBE
    first, and the publisher sends a subscriber nothing before it received that subscriber's
    first SUBSCRIBE."""

    name = "subscribe-first"
    clause = "pppp.conversation.subscribe-first"
    kinds = frozenset({SEND, RECV, CRASH})
    roles = BOTH

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.started: set[str] = set()
        self.incarnations = 0
        self.subscribed: set[bytes] = set()
        self.bad: list[tuple[str, list[Event], str]] = []

    def on_event(self, ev: Event) -> None:
        if ev.kind == CRASH:  # the next incarnation starts a new conversation
            self.started.discard(ev.node)
            return
        msg = message(ev)
        if msg is None:
            return
        if ev.role == SUBSCRIBER and ev.kind == SEND and ev.node not in self.started:
            self.started.add(ev.node)
            self.incarnations += 1
            if msg.name != "SUBSCRIBE":
                self.bad.append((f"{ev.node} sent {msg.name} before SUBSCRIBE", [ev], self.clause))
        elif ev.role == PUBLISHER and ev.kind == RECV and msg.name == "SUBSCRIBE":
            self.subscribed.add(peer_of(ev))
        elif ev.role == PUBLISHER and ev.kind == SEND and peer_of(ev) not in self.subscribed:
            self.bad.append((f"the publisher sent {msg.name} to {peer_of(ev)!r}, which had not subscribed", [ev],
                             self.clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.done(self.bad, f"{self.incarnations} subscriber incarnation(s) and the publisher: SUBSCRIBE came "
                                   "first")


def _name(identity: Any) -> str:
    if isinstance(identity, bytes):
        return identity.decode("utf-8", "backslashreplace")
    return str(identity)


def _span(seqs: list[int]) -> str:
    return str(seqs[0]) if len(seqs) == 1 else f"{seqs[0]}..#{seqs[-1]} ({len(seqs)} numbers)"


def _without(ranges: list[tuple[int, int]], have: set[int]) -> list[tuple[int, int]]:
    """The ranges with every number of ``have`` cut out."""
    return [(f, last) for first, last2 in ranges for f, last in ranges_without(first, last2, have)]


ALL = (ExactlyOnce, PreserveUntilAcked, ResendNacked, SequenceNumbers, SubscribeFirst, SubscriberHeartbeats,
       PublisherHeartbeats, Resubscribe, StopToDisconnected, AckTiming, AckHighest)

__all__ = ["ALL", *(c.__name__ for c in ALL), "inside"]
