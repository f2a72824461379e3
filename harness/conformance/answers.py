"""Which response a scripted peer received, for protocols whose responses carry no type of
their own (Raft: a RequestVoteResponse is told from an AppendEntriesResponse only by the request
it answers, ``Message.answers`` in the codec's table)."""

from __future__ import annotations

from typing import Any


class Answers:
    """What arrives at a peer decodes as the answer to the request the peer sent with the same
    first frame (its message or request id), else as the answer to the peer's last request, so
    a response with a wrong id still decodes and fails on the id."""

    def __init__(self, codec: Any) -> None:
        self.answer_of = {m.answers: m.name for m in codec.table.messages if m.answers}
        self.asked: dict[str, dict[bytes, str]] = {}
        self.last: dict[str, str] = {}

    def sent(self, peer: str, message: str | None, frames: list[bytes]) -> None:
        answer = self.answer_of.get(message or "")
        if answer is not None and frames:
            self.asked.setdefault(peer, {})[bytes(frames[0])] = answer
            self.last[peer] = answer

    def name(self, peer: str, frames: list[bytes]) -> str | None:
        """The response to decode ``frames`` as, or None (the peer asked nothing: decode as usual)."""
        if peer not in self.last or not frames:
            return None
        return self.asked[peer].get(bytes(frames[0]), self.last[peer])
