"""How the network side names a message it only sees as frames: its type and its fields,
decoded by the protocol's codec (the proxy's classifier; field conditions of message rules in
the simulator and the proxy).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from harness.protocols import DecodeError, codec, dialects

# (frames, where, channels) -> the message type; ``where`` is (connection number, direction) when
# the caller follows conversations (the chaos proxy), so that a response is named by its request;
# ``channels`` are the names of the sockets at the two ends (without a ".N" suffix), which tell
# apart messages that have the same frames (Event BUS: a PUB to a collector, a BROADCAST from a
# publisher).
Classifier = Callable[..., str]
Where = tuple[int, str]
OPPOSITE = {"to_binder": "to_connecter", "to_connecter": "to_binder"}
ASKED_LIMIT = 20_000  # requests remembered per classifier (the oldest go first)
FieldsOf = Callable[[list[bytes]], "Mapping[str, Any] | None"]

__all__ = ["Classifier", "FieldsOf", "codec_classifier", "codec_fields", "codec_malformed"]


def codec_classifier(protocol: str, dialect: str = "strict") -> Classifier:
    """Message type names from the protocol's codec, as nodes name their sends; "" for
    frames the codec does not recognise.

    A protocol whose responses carry no type of their own (Raft: a response is told by the
    request it answers, whose id is its first frame) is followed per conversation when the
    caller says ``where`` a message goes (connection, direction): a request is remembered by
    its first frame, and a message coming back on the same connection with that first frame is
    named as its response, if it decodes as one. Without ``where``, or for a response to no
    request seen, the codec's first candidate names it, as before.

    Frames that more than one message has (the codec decodes them only on a channel) are named
    as they decode on the first of ``channels`` that decodes them, as the nodes at either end name
    them; with no channel that does, the codec's first candidate."""
    c = codec(protocol, dialect)
    answered = {m.answers for m in c.table.messages if m.answers}  # requests that have responses
    asked: dict[tuple[int, str, bytes], str] = {}  # (connection, direction, first frame) -> request

    def plain(frames: list[bytes], channels: tuple[str, ...] = ()) -> str:
        names = c.candidates(frames)  # cheap: a look-up on the identifying bytes
        if len(names) < 2:
            return names[0] if names else ""
        for channel in (*channels, None):
            try:
                return c.decode(frames, channel=channel).name
            except DecodeError:
                continue
        return names[0]

    def classify(frames: list[bytes], where: Where | None = None, channels: tuple[str, ...] = ()) -> str:
        if where is None or not answered or not frames:
            return plain(frames, channels)
        request = asked.get((where[0], OPPOSITE.get(where[1], ""), frames[0]))
        if request is not None:
            response = request + "Response"
            try:
                c.decode(frames, as_=response)
                return response
            except DecodeError:
                pass
        name = plain(frames, channels)
        if name in answered:
            if len(asked) >= ASKED_LIMIT:
                del asked[next(iter(asked))]
            asked[(where[0], where[1], frames[0])] = name
        return name

    return classify


def codec_fields(protocol: str, dialect: str = "strict") -> FieldsOf:
    """The decoded fields of a message, or None when the codec cannot decode it."""
    c = codec(protocol, dialect)

    def fields(frames: list[bytes]) -> Mapping[str, Any] | None:
        try:
            return c.decode(frames).fields
        except DecodeError:
            return None

    return fields


def codec_malformed(protocol: str) -> Callable[[list[bytes], str], bool]:
    """Whether frames are malformed for the protocol: no dialect's codec decodes them, neither
    as any message nor as ``msg_type`` (the type the sender gave it: a Raft response carries no
    type of its own and decodes only as the response it is). What the ``corrupt`` effect needs:
    a damaged message that some implementation would take for a well-formed one (a flipped byte
    inside a log entry) is not "malformed", so it is not delivered damaged."""
    codecs = [codec(protocol, d) for d in dialects(protocol)]

    def malformed(frames: list[bytes], msg_type: str = "") -> bool:
        for c in codecs:
            for as_ in (None, msg_type) if msg_type in c.messages else (None,):
                try:
                    c.decode(frames, as_=as_)
                except DecodeError:
                    continue
                return False
        return True

    return malformed
