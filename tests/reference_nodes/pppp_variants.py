"""PPPP nodes that behave differently from the reference in ways the document and the errata
allow: checkers (tests/checkers/test_pppp_checkers.py) and conformance suites
(tests/conformance/test_pppp_suites.py) must raise no alarm for any of them."""

from __future__ import annotations

from typing import Any

from harness.node import Action
from reference_nodes.pppp.publisher import Publisher, Sub
from reference_nodes.pppp.subscriber import Subscriber


class ImmediateAckSubscriber(Subscriber):
    """ACK/NACKs every PUBLISH at once (the document: "Not every message needs to be ACK/NACKed
    individually" -- but it may be)."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.ack_delay = 0


class InOrderSubscriber(Subscriber):
    """Delivers each channel in number order, holding back what arrives above a gap (the order
    is the application's choice)."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.held: dict[bytes, dict[int, list[bytes]]] = {}
        self.next_due: dict[bytes, int] = {}

    def deliver(self, channel: bytes, seq: int, payload: list[bytes], now: int, out: list[Action]) -> None:
        conv = self.conv.get(channel)
        low = min([r[0] for r in conv.missing], default=None) if conv is not None else None
        held = self.held.setdefault(channel, {})
        held[seq] = payload
        for s in sorted(held):
            if low is not None and s > low:
                break
            super().deliver(channel, s, held.pop(s), now, out)


class Multiple5Publisher(Publisher):
    """Acts on silence at 5 x the interval, the other end of "usually 3-5"."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.timing.dead_after = 5 * self.timing.idle
        self.timing.silence_after = 5 * self.timing.first_idle


class Multiple5Subscriber(Subscriber):
    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.timing.dead_after = 5 * self.timing.idle


class LazyResendPublisher(Publisher):
    """Answers NACKs half a first idle time later instead of at once."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.asked: list[tuple[int, bytes, bytes, int]] = []

    def answer_nacks(self, sub: Sub, channel: bytes, seqs: list[int], now: int, out: list[Action]) -> None:
        self.asked.extend((now + self.timing.first_idle // 2, sub.identity, channel, s) for s in seqs)

    def handle_timer(self, now: int) -> list[Action]:
        out = super().handle_timer(now)
        due = [a for a in self.asked if a[0] <= now]
        self.asked = [a for a in self.asked if a[0] > now]
        for _, ident, channel, s in due:
            if ident in self.subs:
                self._resend(self.subs[ident], channel, s, now, out)
        return out

    def get_timer(self) -> int | None:
        t = super().get_timer()
        first = min((a[0] for a in self.asked), default=None)
        return first if t is None or (first is not None and first < t) else t


class FullDumpPublisher(Publisher):
    """Syncs a returning subscriber by a full state dump (empty: the state is the stream), so it
    drops a disconnected subscriber's backlog at once (E-PPPP-16) and replays nothing."""

    def _tick(self, sub: Sub, now: int, out: list[Action]) -> None:
        was_live = sub.live
        super()._tick(sub, now, out)
        if was_live and not sub.live:
            for channel, pending in sub.pending.items():
                if pending:
                    self._unref(channel, list(pending), out)
                    pending.clear()

    def _replay(self, sub: Sub, prefix: bytes, now: int, out: list[Action]) -> None:
        return None
