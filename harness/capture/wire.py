"""Decoding captured messages the way their receiver would, and judging them against the
document: `WireDecoder` and `ClauseTally`.

`WireDecoder.decode(message)` decodes a `WireMessage` in the chosen dialect. The channel comes
from the protocol's `CaptureHints` (sender and receiver socket types); a response that carries
no type (Raft) is decoded as the response to the request its sender received on the same link
with the id the response repeats (``CaptureHints.correlation_frame``; else the oldest it has not
answered yet), and some responses may come several times for one request (``repeats``). When the dialect is not strict, the
message is also decoded strictly, so a run reports both: conformance to the document, and
whether the traffic works in its dialect.

`ClauseTally` counts, per clause, the messages that conform and the ones that break it (the
clause a `DecodeError` names), with evidence; `verdicts()` gives one verdict per clause seen.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from harness.capture.streams import WireMessage
from harness.checkers.base import Verdict
from harness.packages.base import CaptureHints
from harness.protocols import Codec, ConformanceError, DecodeError, codec
from harness.protocols.codec import Message

EVIDENCE = 8  # failing messages kept per clause


@dataclass
class Decoded:
    message: Message | None  # in the chosen dialect; None when it does not decode
    error: DecodeError | None  # why it does not (in the chosen dialect)
    strict_error: DecodeError | None  # strict decoding's error, when the dialect is not strict


OWED_MAX = 4096  # answers a link may owe at once; the oldest is forgotten past it


class WireDecoder:
    def __init__(self, protocol: str, dialect: str, hints: CaptureHints) -> None:
        self.codec: Codec = codec(protocol, dialect)
        self.strict: Codec | None = codec(protocol) if dialect != "strict" else None
        self.channels = hints.channels
        table = self.codec.table
        self.answers = {m.answers: m.name for m in table.messages if m.answers}  # request -> response
        self.key_frame = hints.correlation_frame
        self.repeats = hints.repeats
        # (link id, responder is the client side) -> (response, the request's id frame) it owes,
        # oldest first; bounded, as a response that repeats stays owed
        self._owed: dict[tuple[int, bool], deque[tuple[str, bytes | None]]] = {}

    def decode(self, wm: WireMessage) -> Decoded:
        frames = wm.frames
        hinted = self.channels.get((wm.sender.socket_type, wm.receiver.socket_type))
        # one socket pair may carry several channels (an Event BUS client's DEALERs reach the
        # snapshot and the collector ROUTERs): tried in order, the first that decodes wins
        channels: tuple[str | None, ...] = (hinted,) if hinted is None or isinstance(hinted, str) else tuple(hinted)
        channel = channels[0]
        owed = self._owed.get((wm.link.id, wm.from_client))
        msg, err = None, None
        if owed:
            msg, err, entry = self._as_response(frames, owed)
            if msg is not None and entry[0] not in self.repeats:
                owed.remove(entry)
        for ch in channels if msg is None else ():
            try:
                msg = self.codec.decode(frames, channel=ch)
                err, channel = None, ch
                break
            except DecodeError as e:
                if err is None:
                    err = e
        strict_err = None
        if self.strict is not None:
            strict_err = self._strict(frames, msg, channel)
        if msg is not None:
            response = self.answers.get(msg.name)
            if response is not None:  # the receiver owes an answer on this link
                owes = self._owed.setdefault((wm.link.id, not wm.from_client), deque(maxlen=OWED_MAX))
                owes.append((response, self._key(frames)))
        return Decoded(msg, err, strict_err)

    def forget(self, link_id: int) -> None:
        self._owed.pop((link_id, True), None)
        self._owed.pop((link_id, False), None)

    def _key(self, frames: list[bytes]) -> bytes | None:
        k = self.key_frame
        return frames[k] if k is not None and k < len(frames) else None

    def _as_response(self, frames: list[bytes], owed: deque[tuple[str, bytes | None]]
                     ) -> tuple[Message | None, DecodeError | None, tuple[str, bytes | None]]:
        """Decode as one of the owed responses: the one whose request id it repeats when the
        protocol has ids (the latest request with that id), else the oldest first (a peer may
        answer out of order); the error is the first candidate's when none fits."""
        if self.key_frame is not None:
            key = self._key(frames)
            candidates = [e for e in reversed(owed) if e[1] == key]
        else:
            candidates = list(owed)
        first_err: DecodeError | None = None
        tried: set[str] = set()
        for entry in candidates:
            if entry[0] in tried:
                continue
            tried.add(entry[0])
            try:
                return self.codec.decode(frames, as_=entry[0]), None, entry
            except DecodeError as e:
                first_err = first_err or e
        return None, first_err, ("", None)

    def _strict(self, frames: list[bytes], msg: Message | None, channel: str | None) -> DecodeError | None:
        assert self.strict is not None
        try:
            if msg is not None:
                self.strict.decode(frames, as_=msg.name)
            else:
                self.strict.decode(frames, channel=channel)
        except DecodeError as e:
            return e
        return None


@dataclass
class _Clause:
    passed: int = 0
    failed: int = 0
    evidence: list[dict[str, Any]] = field(default_factory=list)
    first: str = ""


class ClauseTally:
    """Per clause: conforming messages and violations (a message that does not decode in strict
    mode breaks the clause its error names; one that decodes conforms to the grammar clause)."""

    def __init__(self, grammar_clause: str, check: str = "wire-conformance") -> None:
        self.grammar = grammar_clause
        self.check = check
        self.clauses: dict[str, _Clause] = {}

    def conform(self) -> None:
        self.clauses.setdefault(self.grammar, _Clause()).passed += 1

    def violate(self, err: DecodeError, evidence: dict[str, Any]) -> None:
        c = self.clauses.setdefault(err.clause or self.grammar, _Clause())
        c.failed += 1
        if not c.first:
            c.first = str(err)
        if len(c.evidence) < EVIDENCE:
            c.evidence.append(evidence)

    def verdicts(self) -> list[Verdict]:
        out = []
        for clause in sorted(self.clauses, key=lambda k: (k != self.grammar, k)):
            c = self.clauses[clause]
            if c.failed:
                out.append(Verdict(self.check, clause, False, f"{c.failed} message(s) break it; first: {c.first}",
                                   c.evidence))
            else:
                out.append(Verdict(self.check, clause, True, f"{c.passed} message(s) decoded strictly, all conform"))
        return out


def only_in(err: DecodeError) -> str:
    """', valid only in dialect X' for a conformance error, else ''."""
    return f" (valid only in {', '.join(err.dialects)})" if isinstance(err, ConformanceError) else ""
