"""How the network side names a message it only sees as frames: its type and its fields,
decoded by the protocol's codec (the proxy's classifier; field conditions of message rules in
the simulator and the proxy).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from harness.protocols import DecodeError, codec, dialects

Classifier = Callable[[list[bytes]], str]
FieldsOf = Callable[[list[bytes]], "Mapping[str, Any] | None"]

__all__ = ["Classifier", "FieldsOf", "codec_classifier", "codec_fields", "codec_malformed"]


def codec_classifier(protocol: str, dialect: str = "strict") -> Classifier:
    """Message type names from the protocol's codec, as nodes name their sends; "" for
    frames the codec does not recognise."""
    c = codec(protocol, dialect)

    def classify(frames: list[bytes]) -> str:
        names = c.candidates(frames)  # cheap: a look-up on the identifying bytes
        if len(names) < 2:
            return names[0] if names else ""
        try:
            return c.decode(frames).name
        except DecodeError:
            return names[0]

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
