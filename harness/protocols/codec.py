"""The codec of one wire `Table`: encode / decode / validate, built from the table alone.

Three steps, three modules:

* `harness.protocols.codegen` compiles each message into a specialised decode and encode
  function (the speed path; `Codec.decoder` / `Codec.encoder` hand them out);
* `harness.protocols.dispatch` is the one dispatcher every decode goes through: it picks the
  compiled decoder of a message from its bytes (or its name), and otherwise searches the
  candidates, reports the most telling error and consults the deployed dialects;
* this module puts them together and checks what callers ask to encode.

Decoding never raises anything but `DecodeError`: field types raise `FieldError`, which the
compiled decoders turn into a `DecodeError` naming message, field, frame and clause; an
exception of a codec bug is reported as a `DecodeError` with ``internal=True``
(`harness.protocols.decode_failures`).
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Sequence

from harness.protocols.codegen import Decoder, Encoder, compile_message
from harness.protocols.dispatch import Dispatcher
from harness.protocols.errors import DecodeError, EncodeError, FieldError
from harness.protocols.layout import default_of, optional_fields, repeated_fields
from harness.protocols.message import Message
from harness.protocols.table import Table, fields_of

__all__ = ["Codec", "Message", "default_of", "optional_fields", "repeated_fields"]

# What Python raises when a compiled encoder meets a value of the wrong type or range that no
# field type checked (struct.pack, str.encode, b"".join, iteration); the types raise FieldError.
WRONG_VALUE_ERRORS: tuple[type[Exception], ...] = (
    ArithmeticError, AttributeError, LookupError, TypeError, ValueError, struct.error,
)


class Codec:
    """Encode / decode / validate for one table (one protocol in one dialect)."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.protocol = table.protocol
        self.dialect = table.dialect
        self.alternatives: list[Codec] = []  # dialect codecs consulted when strict decoding fails
        self._decoders: dict[str, Decoder] = {}
        self._encoders: dict[str, Encoder] = {}
        self.sources: dict[str, str] = {}  # message -> the generated source of its functions
        for msg in table.messages:
            self._decoders[msg.name], self._encoders[msg.name], self.sources[msg.name] = compile_message(table, msg)
        self._dispatcher = Dispatcher(self, self._decoders)
        # The generated dispatcher itself, not a method calling it: decode is the hot path.
        self.decode = self._dispatcher.decode  # type: ignore[method-assign]

    # ---- decoding ------------------------------------------------------------------------

    def decode(self, frames: Sequence[bytes], *, as_: str | None = None, channel: str | None = None) -> Message:
        """Decode one multipart message; raise DecodeError (ConformanceError in strict mode for
        bytes only a dialect allows) and nothing else. ``as_`` names the message, ``channel``
        the socket or direction it arrived on (for layouts only that tells apart).

        Each instance's ``decode`` is the table's generated dispatcher
        (`harness.protocols.dispatch`); this method only documents it."""
        return self._dispatcher.decode(frames, as_=as_, channel=channel)

    def decoder(self, name: str) -> Callable[[Sequence[bytes]], Message]:
        """The compiled decode function of one message, for callers that know what they hold (a
        response to their own request, a socket that carries one message type). It raises only
        DecodeError for malformed input; it does not consult dialects."""
        return self._decoders[name]

    def candidates(self, frames: Sequence[bytes], channel: str | None = None) -> list[str]:
        """Names of the messages these frames could be, most specific first."""
        return self._dispatcher.candidates(frames, channel)

    @property
    def messages(self) -> list[str]:
        return [m.name for m in self.table.messages]

    # ---- encoding ------------------------------------------------------------------------

    def encoder(self, name: str) -> Callable[[dict[str, Any]], list[bytes]]:
        """The raw encode function of one message (hot paths); it does not check constraints."""
        return self._encoders[name]

    def encode(self, name: str | Message, fields: dict[str, Any] | None = None, **kw: Any) -> list[bytes]:
        """Encode a message; missing fields take their defaults. Raises EncodeError."""
        if isinstance(name, Message):
            name, fields = name.name, name.fields
        fields = dict(fields or {}, **kw)
        enc = self._encoders.get(name)
        if enc is None:
            raise EncodeError(self.protocol, self.dialect, name, None, "no such message")
        unknown = set(fields) - set(fields_of(self.table.message(name)))
        if unknown:
            raise EncodeError(self.protocol, self.dialect, name, sorted(unknown)[0],
                              f"not a field of {name} (fields: {', '.join(fields_of(self.table.message(name)))})")
        try:
            out = enc(fields)
            for x in out:
                if x.__class__ is not bytes:
                    raise FieldError(f"a frame would be {type(x).__name__}, not bytes")
            return out
        except FieldError as e:
            if e.field is None:
                self._diagnose_encode(name, fields)
            raise EncodeError(self.protocol, self.dialect, name, e.field or None, e.reason) from None
        except WRONG_VALUE_ERRORS as e:
            self._diagnose_encode(name, fields)
            raise EncodeError(self.protocol, self.dialect, name, None, f"{type(e).__name__}: {e}") from None

    def _diagnose_encode(self, name: str, fields: dict[str, Any]) -> None:
        """Encode the given fields one by one; raise the EncodeError naming the first bad one."""
        optional = optional_fields(self.table.message(name))
        for fname in fields_of(self.table.message(name)):
            if fname not in fields:
                continue
            if fields[fname] is None and fname not in optional:
                try:
                    self.table.fields[fname].type.encode(None)  # some types have a null (nuint, "null")
                except (FieldError, *WRONG_VALUE_ERRORS):
                    raise EncodeError(self.protocol, self.dialect, name, fname, "is required (got None)") from None
            fd = self.table.fields[fname]
            value = fields[fname]
            repeated = fname in repeated_fields(self.table.message(name))
            if repeated and not isinstance(value, (list, tuple)):
                raise EncodeError(self.protocol, self.dialect, name, fname, f"must be a list, not {type(value).__name__}")
            values = value if repeated else [value]
            for v in values:
                if v is None:
                    continue
                try:
                    fd.type.encode(v)
                except FieldError as e:
                    raise EncodeError(self.protocol, self.dialect, name, fname, e.reason) from None
                except WRONG_VALUE_ERRORS as e:
                    raise EncodeError(self.protocol, self.dialect, name, fname, f"{type(e).__name__}: {e}") from None

    def complete(self, name: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
        """All fields of the message, with defaults for those not given."""
        spec = self.table.message(name)
        optional, repeated = optional_fields(spec), repeated_fields(spec)
        given = fields or {}
        return {f: given[f] if f in given else default_of(self.table, f, optional, repeated) for f in fields_of(spec)}

    def validate(self, name: str, fields: dict[str, Any]) -> Message:
        """Check that the fields form a valid message (types, constraints, round trip).

        Returns the message as the peer would decode it; raises EncodeError otherwise.
        """
        frames = self.encode(name, fields)
        try:
            return self.decode(frames, as_=name)
        except DecodeError as e:
            raise EncodeError(self.protocol, self.dialect, name, e.field, e.reason) from None

    # ---- display -------------------------------------------------------------------------

    def show(self, msg: Message) -> dict[str, Any]:
        """A JSON-friendly view of a decoded message (for evidence and the CLI)."""
        out: dict[str, Any] = {}
        for k, v in msg.fields.items():
            out[k] = self.table.fields[k].type.show(v) if k in self.table.fields else v
        return out
