"""PPPP checks a scenario opts into (never among the package's default checks): each judges
what only some implementations the document allows do, so a scenario or exploration file that
names it in ``check:`` says its nodes claim it.

- ``implicit-heartbeat`` judges the MUST ``pppp.heartbeat.implicit`` ("Any other traffic counts
  as implicit heartbeat") for nodes that act on a disconnection only in the ways the document
  names: a subscriber SUBSCRIBEs again to a channel it holds only when it considers the
  publisher disconnected (E-PPPP-10 lets a subscriber SUBSCRIBE at any time, so the document
  alone does not forbid other re-SUBSCRIBEs), and a publisher sends every message it publishes
  to each subscriber it is talking to, in order (an overloaded publisher that drops sends would
  look the same).
- ``resend-prefer-last`` (SHOULD), ``backlog-sync`` and ``custom-reply`` (MAY features): see
  their docstrings.
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CLOCK, CRASH, DELIVER, NOTE, RECV, RESTART, SEND, Event, Verdict
from harness.checkers.pppp_common import PUBLISHER, SUBSCRIBER, PpppCheck, inside, message, peer_of
from harness.checkers.pppp import _span
from harness.checkers.pppp_publisher import Ledger, ResendNacked, SubView

BOTH = frozenset({PUBLISHER, SUBSCRIBER})


class _Talk:
    """A subscriber the publisher is talking to, as the publisher's traffic shows."""

    __slots__ = ("prefixes", "heard", "expected")

    def __init__(self, now: int) -> None:
        self.prefixes: list[bytes] = []
        self.heard = now
        self.expected: dict[bytes, dict[int, Event]] = {}  # channel -> numbers owed a first send -> published at

    def matches(self, channel: bytes) -> bool:
        return any(channel.startswith(p) for p in self.prefixes)


class ImplicitHeartbeat(PpppCheck):
    """Any traffic counts as a heartbeat (``pppp.heartbeat.implicit``), so neither side takes a
    peer it heard from within one ``idle`` for disconnected (the document lets a peer do so
    after "some multiple (usually 3-5)" of it without a message):

    - a subscriber SUBSCRIBEs again to a channel it already SUBSCRIBEd in this life only when it
      has heard nothing from the publisher for at least ``idle`` (the reference: 3 x idle);
    - the publisher sends each new message of a channel to every subscriber it is talking to
      (one that SUBSCRIBEd to a matching prefix since the publisher's start, and sent something
      within ``idle`` before the message was published) before it sends that subscriber a later
      number of the channel. A silence of 3 x idle ends the conversation until the next
      SUBSCRIBE (the publisher may count the subscriber as disconnected then).

    Opt-in: see the module docstring for what an implementation claims by naming it."""

    name = "implicit-heartbeat"
    clause = "pppp.heartbeat.implicit"
    kinds = frozenset({SEND, RECV, DELIVER, CRASH, RESTART, CLOCK})
    roles = BOTH

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.held: dict[str, set[bytes]] = {}  # subscriber -> channels SUBSCRIBEd in this life
        self.last_in: dict[str, int] = {}  # subscriber -> its last receive in this life
        self.talks: dict[bytes, _Talk] = {}  # the publisher's view, by routing id
        self.seen: set[tuple[bytes, int]] = set()  # numbers published so far
        self.bad: list[tuple[str, list[Event], str]] = []
        self.resubscribes = 0
        self.expected = 0

    def on_event(self, ev: Event) -> None:
        if self.clock_event(ev):
            return
        if ev.role == SUBSCRIBER:
            self._subscriber(ev)
        elif ev.kind in (CRASH, RESTART):
            self.talks.clear()  # a new publisher life talks to nobody before a SUBSCRIBE
        elif ev.kind == DELIVER:
            if ev.msg_type == "published" and ev.data:
                self._published(bytes(ev.data["channel"]), int(ev.data["seq"]), ev)
        else:
            self._publisher(ev)

    def _subscriber(self, ev: Event) -> None:
        node = ev.node
        if ev.kind in (CRASH, RESTART):
            self.held.pop(node, None)
            self.last_in.pop(node, None)
            if self.peer_crash(ev) is not None:  # an external publisher's sends to it vanish now
                self.talks.pop(node.encode(), None)
            return
        if ev.kind == RECV:
            if message(ev) is not None:  # a malformed message is dropped unheard (E-PPPP-05)
                self.last_in[node] = ev.time_ns
            return
        msg = message(ev) if ev.kind == SEND and ev.msg_type == "SUBSCRIBE" else None
        if msg is None or msg.name != "SUBSCRIBE":
            return
        held = self.held.setdefault(node, set())
        heard = self.last_in.get(node)
        if msg["channel"] in held:
            self.resubscribes += 1
            # (its own clock counts too: one that jumped forward may count the publisher lost sooner)
            if heard is not None and ev.time_ns - heard < self.idle \
                    and self._clocks.elapsed(node, heard, ev.time_ns) < self.idle:
                self.bad.append((f"{node} SUBSCRIBEd to {msg['channel']!r} again {(ev.time_ns - heard) / 1e6:.1f} ms "
                                 f"after it last heard from the publisher (a live publisher: any traffic counts as a "
                                 f"heartbeat)", [ev], self.clause))
        held.add(msg["channel"])

    def _publisher(self, ev: Event) -> None:
        msg = message(ev)
        if msg is None:
            return
        ident = peer_of(ev)
        talk = self.talks.get(ident)
        if ev.kind == RECV:
            if talk is not None and self.silent_long(ev.node, talk.heard, ev.time_ns):
                del self.talks[ident]  # it may count as disconnected: the conversation is over
                talk = None
            if msg.name == "SUBSCRIBE":
                talk = talk or self.talks.setdefault(ident, _Talk(ev.time_ns))
                talk.prefixes.append(msg["channel"])
            if talk is not None:
                talk.heard = ev.time_ns
                if msg.name == "ACK":  # what it acknowledges it has: nothing is owed it any more
                    owed = talk.expected.get(msg["channel"], {})
                    for s in [s for s in owed if s <= msg["sequence"] and not inside(s, msg["nacks"])]:
                        del owed[s]
            return
        if msg.name != "PUBLISH":
            return
        c, s = msg["channel"], msg["sequence"]
        self._published(c, s, ev)
        if talk is None:
            return
        owed = talk.expected.get(c)
        if not owed:
            return
        owed.pop(s, None)
        skipped = [n for n in owed if n < s]
        if skipped:
            first = owed[skipped[0]]
            self.bad.append((f"the publisher sent {ident!r} {c!r} #{s} but never #{skipped[0]}, published "
                             f"{(ev.time_ns - first.time_ns) / 1e6:.1f} ms before, when it had heard from {ident!r} "
                             f"within {self.idle / 1e6:g} ms", [first, ev], self.clause))
            for n in skipped:
                del owed[n]  # one failure per gap

    def _published(self, channel: bytes, seq: int, ev: Event) -> None:
        """A number seen for the first time: owed a first send to every subscriber talked to."""
        if (channel, seq) in self.seen:
            return
        self.seen.add((channel, seq))
        for talk in self.talks.values():
            if talk.matches(channel) and ev.time_ns - talk.heard < self.idle:
                talk.expected.setdefault(channel, {})[seq] = ev
                self.expected += 1

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.done(self.bad, f"{self.resubscribes} re-SUBSCRIBE(s) and {self.expected} message(s) owed to "
                                   "subscribers heard from within idle: no live peer taken for disconnected")


class BacklogSync(PpppCheck):
    """A publisher that syncs by backlog (``pppp.conversation.sync-optional``: SYNC is a MAY,
    and backlog replay one of its kinds, E-PPPP-08) answers a SUBSCRIBE for a prefix the
    subscriber already holds by sending again every number of the prefix's channels that it owes
    the subscriber and the subscriber has not acknowledged, before any number published after
    the SUBSCRIBE and within ``idle`` (plus the tolerance) of it: SYNC comes before PUBLISH in
    the conversation. A number acknowledged meanwhile is no longer owed. Not judged: a return
    after a silence of 3 x idle + grace (the backlog may be dropped, E-PPPP-16). A crash of the
    publisher cancels the replays it was due to send, not what it owes; time it was paused or
    stalled does not count."""

    name = "backlog-sync"
    clause = "pppp.conversation.sync-optional"
    level = "MAY"
    kinds = frozenset({SEND, RECV, DELIVER, NOTE, CRASH, CLOCK}) | PpppCheck.LIFE
    roles = frozenset({PUBLISHER})
    timed = True
    observed_note = "; a number it sends before the replay ends is not judged (when it was published is not certain)"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.ledger = Ledger(self)
        # (subscriber, channel) -> (the SUBSCRIBE, numbers still to be replayed)
        self.replay: dict[tuple[bytes, bytes], tuple[Event, set[int]]] = {}
        self.bad: list[tuple[str, list[Event], str]] = []
        self.syncs = 0

    def forget_peer(self, peer: str) -> None:  # a replay to it now vanishes in the publisher's ROUTER
        for key in [k for k in self.replay if k[0] == peer.encode()]:
            del self.replay[key]

    def on_event(self, ev: Event) -> None:
        if self.of_peer(ev) or self.clock_event(ev) or self.held(ev):
            return
        if ev.kind == CRASH:
            self.replay.clear()
            return
        self._expire(ev.time_ns)
        ident = peer_of(ev) if ev.kind in (SEND, RECV) else b""
        before = self.ledger.subs.get(ident)
        held = [p for p, _ in before.prefixes] if before is not None else []
        silent = ev.time_ns - before.heard if before is not None else 0
        msg, sub = self.ledger.feed(ev)
        if msg is None or sub is None:
            return
        if ev.kind == RECV and msg.name == "SUBSCRIBE" and msg["channel"] in held and silent < self.may_drop + self.grace:
            self.syncs += 1
            for channel, owed in sub.owed.items():
                if channel.startswith(msg["channel"]) and owed:
                    self.replay[(ident, channel)] = (ev, set(owed))
        elif ev.kind == RECV and msg.name == "ACK":
            self.ledger.acknowledge(sub, msg)
            key = (ident, msg["channel"])
            if key in self.replay:  # what it acknowledged is not owed any more
                left = self.replay[key][1]
                left.intersection_update(sub.owed.get(msg["channel"], {}))
                if not left:
                    del self.replay[key]
        elif ev.kind == SEND and msg.name == "PUBLISH":
            key = (ident, msg["channel"])
            got = self.replay.get(key)
            if got is None:
                return
            subscribe, left = got
            s = msg["sequence"]
            left.discard(s)
            # (an external publisher's: when the proxy read it, and when it handed the SUBSCRIBE
            # on, bound neither when it published it nor when it took the SUBSCRIBE in)
            if left and not self.observed_event(ev) \
                    and self.ledger.first_seen.get((msg["channel"], s), 0) > subscribe.time_ns:
                self._fail(key, f"sent {ident!r} {msg['channel']!r} #{s}, published after its SUBSCRIBE", ev)
            if not left:
                del self.replay[key]

    def _fail(self, key: tuple[bytes, bytes], why: str, ev: Event | None) -> None:
        subscribe, left = self.replay.pop(key)
        self.bad.append((f"{why}, before replaying #{_span(sorted(left))} it had not acknowledged (SUBSCRIBE again at "
                         f"{subscribe.time_ns / 1e6:.1f} ms)", [subscribe] + ([ev] if ev else []), self.clause))

    def _expire(self, now: int) -> None:
        for key, (subscribe, _) in list(self.replay.items()):
            bound = self.idle + self.tol_for(subscribe.node)
            held = self.due_after(subscribe.node, subscribe.time_ns, bound)
            if held is not None and now > held:
                self._fail(key, f"no backlog replay to {key[0]!r} within {bound / 1e6:g} ms", None)

    def finish(self, end_ns: int) -> list[Verdict]:
        self._expire(end_ns)
        return self.done(self.bad, f"{self.syncs} SUBSCRIBE(s) for a held prefix, each answered by its backlog first")


class CustomReply(PpppCheck):
    """A publisher that replies to CUSTOM (``pppp.custom.reply-optional``: "The publisher may or
    may not publish a reply", a MAY, E-PPPP-17) publishes a new message, on ``reply_channel``
    when the scenario's publisher names one, within ``first_idle`` (plus the tolerance, and the
    time the publisher was paused or stalled) of each CUSTOM it receives. A crash of the
    publisher cancels what it owed."""

    name = "custom-reply"
    clause = "pppp.custom.reply-optional"
    level = "MAY"
    kinds = frozenset({SEND, RECV, DELIVER, CRASH}) | PpppCheck.LIFE
    roles = frozenset({PUBLISHER})
    timed = True

    def __init__(self, reply_channel: bytes | None = None, **params: Any) -> None:
        super().__init__(**params)
        self.reply_channel = reply_channel
        self.waiting: list[Event] = []  # CUSTOMs not answered yet, oldest first
        self.seen: set[tuple[bytes, int]] = set()
        self.bad: list[tuple[str, list[Event], str]] = []
        self.customs = 0

    def on_event(self, ev: Event) -> None:
        if self.held(ev):
            return
        if ev.kind == CRASH:
            self.waiting.clear()
            return
        self._expire(ev.time_ns)
        if ev.kind == DELIVER:
            if ev.msg_type == "published" and ev.data:
                self._published(bytes(ev.data["channel"]), int(ev.data["seq"]))
            return
        msg = message(ev)
        if msg is None:
            return
        if ev.kind == RECV and msg.name == "CUSTOM":
            self.customs += 1
            self.waiting.append(ev)
        elif ev.kind == SEND and msg.name == "PUBLISH":
            self._published(msg["channel"], msg["sequence"])

    def _published(self, channel: bytes, seq: int) -> None:
        if (channel, seq) in self.seen:
            return
        self.seen.add((channel, seq))
        if self.waiting and (self.reply_channel is None or channel == self.reply_channel):
            self.waiting.pop(0)  # a new message: the reply to the oldest CUSTOM waiting

    def _expire(self, now: int) -> None:
        while self.waiting:
            ev = self.waiting[0]  # the oldest is due first (the slack is one node's, the publisher's)
            bound = self.first_idle + self.tol_for(ev.node)
            held = self.due_after(ev.node, ev.time_ns, bound)
            if held is None or now <= held:
                return
            self.waiting.pop(0)
            where = f" on {self.reply_channel!r}" if self.reply_channel is not None else ""
            self.bad.append((f"no message published{where} within {bound / 1e6:g} ms of the "
                             f"CUSTOM from {peer_of(ev)!r} at {ev.time_ns / 1e6:.1f} ms", [ev], self.clause))

    def finish(self, end_ns: int) -> list[Verdict]:
        self._expire(end_ns)
        return self.done(self.bad, f"{self.customs} CUSTOM(s), each answered by a new message")


class ResendPreferLast(ResendNacked):
    """A resend on silence (as ``resend-nacked`` tells it from the other resends: a number sent
    to the subscriber before, answering no NACK, no backlog replay) picks, per channel, the last
    number the subscriber has not acknowledged (``pppp.publisher.resend-prefer-last``, a SHOULD:
    "a message, preferably the last, for that subscriber should be resend"), or one that more
    subscribers have not acknowledged than that last one ("can be picked to cover the largest
    number of subscribers")."""

    name = "resend-prefer-last"
    clause = "pppp.publisher.resend-prefer-last"
    level = "SHOULD"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.picks: list[tuple[str, list[Event], str]] = []
        self.resends = 0

    def resent_on_silence(self, ev: Event, ident: bytes, sub: SubView, channel: bytes, seq: int) -> None:
        self.resends += 1
        owed = sub.owed.get(channel)
        if not owed:
            return
        last = max(owed)
        if seq == last or self._owing(channel, seq) > self._owing(channel, last):
            return
        self.picks.append((f"resent {channel!r} #{seq} to {ident!r} on silence, not the last it had not acknowledged "
                           f"(#{last}), which as many subscribers lack", [ev], self.clause))

    def _owing(self, channel: bytes, seq: int) -> int:
        return sum(1 for sub in self.ledger.subs.values() if seq in sub.owed.get(channel, {}))

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.done(self.picks, f"{self.resends} resend(s) on silence, each of the last unacknowledged number")


OPT_IN = (ImplicitHeartbeat, BacklogSync, CustomReply, ResendPreferLast)
