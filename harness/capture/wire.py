"""Decoding captured messages the way their receiver would, and judging them against the
document: `WireDecoder` and `ClauseTally`.

`WireDecoder.decode(message)` decodes a `WireMessage` in the chosen dialect with the decoder every
run's ``wire-conformance`` check uses (`harness.checkers.wire.FrameDecoder`): the channel from the
sender's and receiver's ZMTP socket types, a response that carries no type (Raft) correlated with
the request of the same connection. A link here is one TCP connection and a direction. When the
dialect is not strict, the message is also decoded strictly, so a capture reports both:
conformance to the document, and whether the traffic works in its dialect.

`ClauseTally` counts, per clause, the messages that conform and the ones that break it (the
clause a `DecodeError` names), with evidence; `verdicts()` gives one verdict per clause seen.
"""

from __future__ import annotations

from harness.capture.streams import WireMessage
from harness.checkers.wire import EVIDENCE, OWED_MAX, ClauseTally, Decoded, FrameDecoder, only_in
from harness.packages.base import CaptureHints

__all__ = ["EVIDENCE", "OWED_MAX", "ClauseTally", "Decoded", "WireDecoder", "only_in"]


class WireDecoder(FrameDecoder):
    def __init__(self, protocol: str, dialect: str, hints: CaptureHints) -> None:
        super().__init__(protocol, dialect, hints)

    def decode(self, wm: WireMessage) -> Decoded:
        channels = self.channels(wm.sender.socket_type, wm.receiver.socket_type)
        # the sender answers on its own side of the link; the receiver owes on the other
        return self.decode_frames(wm.frames, channels, (wm.link.id, wm.from_client),
                                  (wm.link.id, not wm.from_client))

    def forget_link(self, link_id: int) -> None:
        """Forget what either side of a connection owes (the connection is gone)."""
        self.forget((link_id, True), (link_id, False))
