"""Deliberately broken PPPP nodes: each breaks one clause and is otherwise the reference node.

The checkers (harness/checkers/pppp*.py) and the conformance suites are tested against these:
a check or suite that passes a mutant has a hole. Each class overrides the least it can; its
docstring names the clause it breaks.

``MUTANTS`` maps a mutant's name to ``(role, factory, clause id)``. ``ALSO_BREAKS`` lists the
mutants whose change honestly breaks a second clause too, with the reason.
"""

from __future__ import annotations

from typing import Any

from harness.node import Action, NodeContext
from harness.protocols import DecodeError
from reference_nodes.pppp.publisher import Publisher, Sub
from reference_nodes.pppp.subscriber import Conversation, Subscriber

NEVER = 1 << 60

# ---- publisher -----------------------------------------------------------------------------


class IgnoresNacksPublisher(Publisher):
    """Breaks ``pppp.publisher.resend-nacked``: never answers a NACK (the numbers stay kept, so a
    resend on silence may still bring one of them, much later)."""

    def answer_nacks(self, sub: Sub, channel: bytes, seqs: list[int], now: int, out: list[Action]) -> None:
        return None


class RenumbersResendsPublisher(Publisher):
    """Breaks ``pppp.publisher.resend-nacked``: answers a NACK by publishing the payload again as
    a new message (a new number) and forgets the NACKed number."""

    def answer_nacks(self, sub: Sub, channel: bytes, seqs: list[int], now: int, out: list[Action]) -> None:
        pending = sub.pending.get(channel, {})
        payloads = [self.held.get(channel, {}).get(s) for s in seqs]
        for s in seqs:
            pending.pop(s, None)
        self._unref(channel, seqs, out)
        for p in payloads:
            if p is not None:
                self.publish(channel, p, now, out)


class ReleasesOnFirstAckPublisher(Publisher):
    """Breaks ``pppp.publisher.preserve-until-acked``: lets a message go as soon as one
    subscriber acknowledged it."""

    def _unref(self, channel: bytes, seqs: list[int], out: list[Action]) -> None:
        refs = self.refs.get(channel, {})
        gone = [s for s in seqs if refs.pop(s, None) is not None]
        if gone:
            self.release(channel, gone, out)


class NoResendOnSilencePublisher(Publisher):
    """Breaks ``pppp.publisher.resend-on-silence`` (SHOULD): never resends on silence, so a lost
    last message is never recovered."""

    def _resend_on_silence(self, sub: Sub, now: int, out: list[Action]) -> None:
        sub.silence_from = now


class ResendsFirstPublisher(Publisher):
    """Breaks ``pppp.publisher.resend-prefer-last`` (SHOULD): on silence resends the lowest
    unacknowledged message instead of the last (it still honours the implicit NACK)."""

    def pick_on_silence(self, pending: dict[int, None]) -> int:
        return next(iter(pending))


class IgnoresImplicitNackPublisher(ResendsFirstPublisher):
    """Breaks ``pppp.publisher.implicit-nack``: resends the lowest unacknowledged message on
    silence and then takes the reply's number as all it needs to know, so the numbers between
    the reply and the last message are never resent."""

    def implicit_nacks(self, sub: Sub, channel: bytes, h: int) -> tuple[int, int] | None:
        sub.resent.pop(channel, None)
        return None


class NoHeartbeatPublisher(Publisher):
    """Breaks ``pppp.heartbeat.interval``: never sends a HEARTBEAT (it keeps its clock as if it
    had)."""

    def send_heartbeat(self, sub: Sub, now: int, out: list[Action]) -> None:
        sub.last_sent, sub.last_hb = now, True


class SlowFirstHeartbeatPublisher(Publisher):
    """Breaks ``pppp.heartbeat.first-idle``: its first heartbeat after other traffic comes after
    the idle time, not the shorter first idle time."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.timing.first_idle = self.timing.idle


class SlowHeartbeatPublisher(Publisher):
    """Breaks ``pppp.heartbeat.interval``: after a heartbeat, the next one comes after twice the
    idle time."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.timing.idle *= 2  # disconnect detection keeps the agreed time (computed before)


class NeverStopsPublisher(Publisher):
    """Breaks ``pppp.publisher.stop-to-disconnected`` (SHOULD): never counts a subscriber as
    disconnected and heartbeats it forever."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.timing.dead_after = NEVER


class TalksFirstPublisher(Publisher):
    """Breaks ``pppp.conversation.subscribe-first``: a peer that sends anything at all becomes a
    subscriber it heartbeats, SUBSCRIBE or not."""

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        if len(frames) >= 2 and frames[0] not in self.subs:
            self.subs[frames[0]] = Sub(frames[0], now)
            self.routes.clear()
        return super().receive(socket, frames, now)


class OnlyHeartbeatsCountPublisher(Publisher):
    """Breaks ``pppp.heartbeat.implicit``: takes only HEARTBEATs (and SUBSCRIBE) as a sign of
    life, so a subscriber that talks with other messages is counted as disconnected."""

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        self.heartbeat_in = frames[1:] == [b"\x03"]
        return super().receive(socket, frames, now)

    def _heard(self, sub: Sub, now: int, out: list[Action]) -> None:
        if self.heartbeat_in:
            super()._heard(sub, now, out)


class ShortSequencePublisher(Publisher):
    """Breaks ``pppp.wire.sequence-format``: writes PUBLISH numbers as 4 bytes, not 8."""

    def _send(self, sub: Sub, frames: list[bytes], msg_type: str, meta: dict[str, Any] | None, now: int, *,
              heartbeat: bool = False, out: list[Action]) -> None:
        if msg_type == "PUBLISH":
            frames = [frames[0], frames[1][4:], *frames[2:]]
        super()._send(sub, frames, msg_type, meta, now, heartbeat=heartbeat, out=out)


class NumbersFromZeroPublisher(Publisher):
    """Breaks ``pppp.publisher.sequence-consecutive``: the first message of a channel is number 0."""

    FIRST_SEQ = 0


class CrashOnMalformedPublisher(Publisher):
    """Breaks ``pppp.wire.grammar`` (drop malformed input and keep running, E-PPPP-05): raises on
    the first message that does not decode."""

    def malformed(self, socket: str, frames: list[bytes], err: DecodeError) -> list[Action]:
        raise RuntimeError(f"publisher crashed on malformed input: {err}")


class NoReplayPublisher(Publisher):
    """Breaks ``pppp.conversation.sync-optional`` (MAY, so no run fails on it): no SYNC at all;
    a re-SUBSCRIBE gets only new messages (the subscriber still NACKs the gap it sees)."""

    def _replay(self, sub: Sub, prefix: bytes, now: int, out: list[Action]) -> None:
        return None


class NoCustomReplyPublisher(Publisher):
    """Breaks ``pppp.custom.reply-optional`` (MAY, so no run fails on it): never publishes a
    reply to CUSTOM."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.reply_channel = None


# ---- subscriber ----------------------------------------------------------------------------


class NoDedupSubscriber(Subscriber):
    """Breaks ``pppp.subscriber.exactly-once``: hands a duplicate to the application again."""

    def on_duplicate(self, channel: bytes, seq: int, payload: list[bytes], conv: Conversation, now: int,
                     out: list[Action]) -> None:
        conv.ack = True
        self.deliver(channel, seq, payload, now, out)


class LateAckSubscriber(Subscriber):
    """Breaks ``pppp.subscriber.ack-within-first-idle``: ACK/NACKs twice the first idle time
    after a PUBLISH."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.ack_delay = 2 * self.timing.first_idle


class NeverAcksSubscriber(Subscriber):
    """Breaks ``pppp.subscriber.ack-every-message``: never sends an ACK/NACK."""

    def send_acks(self, now: int, out: list[Action]) -> None:
        self.ack_at = None
        for conv in self.conv.values():
            conv.ack = False


class NoNackSubscriber(Subscriber):
    """Breaks ``pppp.subscriber.ack-highest``: never NACKs, so its ACK acknowledges the numbers
    it never received (E-PPPP-04) and the publisher lets them go."""

    def nack_ranges(self, conv: Conversation) -> list[tuple[int, int]]:
        return []


class IgnoresDuplicatesSubscriber(Subscriber):
    """Breaks ``pppp.subscriber.ack-duplicates``: does not ACK/NACK a message it already has."""

    def on_duplicate(self, channel: bytes, seq: int, payload: list[bytes], conv: Conversation, now: int,
                     out: list[Action]) -> None:
        return None


class NoHeartbeatSubscriber(Subscriber):
    """Breaks ``pppp.heartbeat.interval``: never sends a HEARTBEAT (it keeps its clock as if it
    had)."""

    def send_heartbeat(self, now: int, out: list[Action]) -> None:
        self.last_sent, self.last_hb = now, True


class SlowFirstHeartbeatSubscriber(Subscriber):
    """Breaks ``pppp.heartbeat.first-idle``: its first heartbeat after other traffic comes after
    the idle time, not the shorter first idle time."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.timing.first_idle = self.timing.idle


class SlowHeartbeatSubscriber(Subscriber):
    """Breaks ``pppp.heartbeat.interval``: after a heartbeat, the next one comes after twice the
    idle time."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.timing.idle *= 2  # disconnect detection keeps the agreed time (computed before)


class OnlyHeartbeatsCountSubscriber(Subscriber):
    """Breaks ``pppp.heartbeat.implicit``: takes only HEARTBEATs as a sign of the publisher's
    life, so a publisher that only publishes is given up and SUBSCRIBEd to again."""

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        heard = self.last_heard
        out = super().receive(socket, frames, now)
        if frames != [b"\x03"]:
            self.last_heard = heard
        return out


class ShortSequenceSubscriber(Subscriber):
    """Breaks ``pppp.wire.sequence-format``: writes the ACK's number as 4 bytes, not 8."""

    def _send(self, frames: list[bytes], msg_type: str, meta: dict[str, Any] | None, now: int, out: list[Action],
              heartbeat: bool = False) -> None:
        if msg_type == "ACK":
            frames = [frames[0], frames[1][4:], *frames[2:]]
        super()._send(frames, msg_type, meta, now, out, heartbeat)


class SingleNumberNackSubscriber(Subscriber):
    """Breaks ``pppp.wire.nack-range-format``: NACKs a single missing number as one 8-byte
    frame instead of a 16-byte range."""

    def _send(self, frames: list[bytes], msg_type: str, meta: dict[str, Any] | None, now: int, out: list[Action],
              heartbeat: bool = False) -> None:
        if msg_type == "ACK":
            frames = frames[:2] + [f[:8] if f[:8] == f[8:] else f for f in frames[2:]]
        super()._send(frames, msg_type, meta, now, out, heartbeat)


class NoResubscribeSubscriber(Subscriber):
    """Breaks ``pppp.subscriber.resubscribe``: notices that the publisher is gone and does
    nothing about it."""

    def on_publisher_lost(self, now: int, out: list[Action]) -> None:
        return None


class ResubscribesOneSubscriber(Subscriber):
    """Breaks ``pppp.subscriber.resubscribe``: after losing the publisher it SUBSCRIBEs again to
    its first channel only (E-PPPP-10: every channel it holds)."""

    def on_publisher_lost(self, now: int, out: list[Action]) -> None:
        held, self.channels = self.channels, self.channels[:1]
        try:
            self.subscribe_all(now, out)
        finally:
            self.channels = held


class HeartbeatFirstSubscriber(Subscriber):
    """Breaks ``pppp.conversation.subscribe-first``: says HEARTBEAT before its SUBSCRIBE, at start
    and on each new connection (a process that gives a publisher up before it is reachable drops
    what it queued for the first one)."""

    def open_conversation(self, now: int, out: list[Action]) -> None:
        self.send_heartbeat(now, out)
        super().open_conversation(now, out)


class CrashOnMalformedSubscriber(Subscriber):
    """Breaks ``pppp.wire.grammar`` (drop malformed input and keep running, E-PPPP-05): raises on
    the first message that does not decode."""

    def malformed(self, socket: str, frames: list[bytes], err: DecodeError) -> list[Action]:
        raise RuntimeError(f"subscriber crashed on malformed input: {err}")


_MUTANTS: list[tuple[str, str, Any, str]] = [
    ("ignores-nacks", "publisher", IgnoresNacksPublisher, "pppp.publisher.resend-nacked"),
    ("renumbers-resends", "publisher", RenumbersResendsPublisher, "pppp.publisher.resend-nacked"),
    ("releases-on-first-ack", "publisher", ReleasesOnFirstAckPublisher, "pppp.publisher.preserve-until-acked"),
    ("no-resend-on-silence", "publisher", NoResendOnSilencePublisher, "pppp.publisher.resend-on-silence"),
    ("resends-first", "publisher", ResendsFirstPublisher, "pppp.publisher.resend-prefer-last"),
    ("ignores-implicit-nack", "publisher", IgnoresImplicitNackPublisher, "pppp.publisher.implicit-nack"),
    ("publisher-no-heartbeat", "publisher", NoHeartbeatPublisher, "pppp.heartbeat.interval"),
    ("publisher-slow-first-heartbeat", "publisher", SlowFirstHeartbeatPublisher, "pppp.heartbeat.first-idle"),
    ("publisher-slow-heartbeat", "publisher", SlowHeartbeatPublisher, "pppp.heartbeat.interval"),
    ("never-stops", "publisher", NeverStopsPublisher, "pppp.publisher.stop-to-disconnected"),
    ("talks-first", "publisher", TalksFirstPublisher, "pppp.conversation.subscribe-first"),
    ("only-heartbeats-count", "publisher", OnlyHeartbeatsCountPublisher, "pppp.heartbeat.implicit"),
    ("short-sequence", "publisher", ShortSequencePublisher, "pppp.wire.sequence-format"),
    ("numbers-from-zero", "publisher", NumbersFromZeroPublisher, "pppp.publisher.sequence-consecutive"),
    ("publisher-crash-on-malformed", "publisher", CrashOnMalformedPublisher, "pppp.wire.grammar"),
    ("no-replay", "publisher", NoReplayPublisher, "pppp.conversation.sync-optional"),
    ("no-custom-reply", "publisher", NoCustomReplyPublisher, "pppp.custom.reply-optional"),
    ("no-dedup", "subscriber", NoDedupSubscriber, "pppp.subscriber.exactly-once"),
    ("late-ack", "subscriber", LateAckSubscriber, "pppp.subscriber.ack-within-first-idle"),
    ("never-acks", "subscriber", NeverAcksSubscriber, "pppp.subscriber.ack-every-message"),
    ("no-nack", "subscriber", NoNackSubscriber, "pppp.subscriber.ack-highest"),
    ("ignores-duplicates", "subscriber", IgnoresDuplicatesSubscriber, "pppp.subscriber.ack-duplicates"),
    ("subscriber-no-heartbeat", "subscriber", NoHeartbeatSubscriber, "pppp.heartbeat.interval"),
    ("subscriber-slow-first-heartbeat", "subscriber", SlowFirstHeartbeatSubscriber, "pppp.heartbeat.first-idle"),
    ("subscriber-slow-heartbeat", "subscriber", SlowHeartbeatSubscriber, "pppp.heartbeat.interval"),
    ("subscriber-only-heartbeats-count", "subscriber", OnlyHeartbeatsCountSubscriber, "pppp.heartbeat.implicit"),
    ("subscriber-short-sequence", "subscriber", ShortSequenceSubscriber, "pppp.wire.sequence-format"),
    ("single-number-nack", "subscriber", SingleNumberNackSubscriber, "pppp.wire.nack-range-format"),
    ("no-resubscribe", "subscriber", NoResubscribeSubscriber, "pppp.subscriber.resubscribe"),
    ("resubscribes-one", "subscriber", ResubscribesOneSubscriber, "pppp.subscriber.resubscribe"),
    ("heartbeat-first", "subscriber", HeartbeatFirstSubscriber, "pppp.conversation.subscribe-first"),
    ("subscriber-crash-on-malformed", "subscriber", CrashOnMalformedSubscriber, "pppp.wire.grammar"),
]

MUTANTS: dict[str, tuple[str, Any, str]] = {name: (role, cls, clause) for name, role, cls, clause in _MUTANTS}
for _name, (_role, _cls, _clause) in MUTANTS.items():
    _cls.implementation = f"mutant:{_name}"

# Mutants that die (raise) on the input that breaks their clause. A conformance suite reports a
# crash of the implementation as its own robustness failure (harness.robustness, MUST),
# whichever step was waiting, so that is the verdict these get.
CRASHES: frozenset[str] = frozenset({"publisher-crash-on-malformed", "subscriber-crash-on-malformed"})

_NO_FIRST = "a node that never heartbeats also misses the first heartbeat, due first_idle after other traffic"
ALSO_BREAKS: dict[str, dict[str, str]] = {
    "never-acks": {"pppp.subscriber.ack-within-first-idle": "an ACK/NACK that never comes does not come in time "
                                                            "either",
                   "pppp.subscriber.ack-duplicates": "nor for a duplicate"},
    "renumbers-resends": {"pppp.publisher.preserve-until-acked": "the NACKed message is no longer kept under its "
                                                                 "number, so another subscriber's NACK of it cannot "
                                                                 "be answered"},
    "publisher-no-heartbeat": {"pppp.heartbeat.first-idle": _NO_FIRST},
    "subscriber-no-heartbeat": {"pppp.heartbeat.first-idle": _NO_FIRST},
    "ignores-implicit-nack": {"pppp.publisher.resend-prefer-last": "it resends the lowest message on silence, "
                                                                   "which is what makes the implicit NACK matter"},
}
