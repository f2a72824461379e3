"""What a compiled decoder calls when bytes do not fit, and the `DecodeError` it raises.

The generated decoders (`harness.protocols.codegen`) check a frame with one comparison or one
``struct.unpack``; only when that fails do they call the helpers here, which re-walk the
layout with the field types to name the exact field, byte and clause. Inside a compiled
decoder every failure is a `FieldError`; it leaves the decoder as the `DecodeError` that
`decode_error` builds, naming message, field, frame and clause.

`CODEC_BUGS` are the exceptions Python raises when the codec itself, or a field type of a
table, is wrong — never peer bytes, for which field types raise only `FieldError`. A compiled
decoder (and the dispatcher's search) reports them as ``DecodeError(internal=True)`` via
`internal_error`, so that decoding still raises nothing but `DecodeError` and a node drops the
message, while the property tests fail on the flag.
"""

from __future__ import annotations

import struct
from typing import Any, Sequence

from harness.protocols.errors import DecodeError, FieldError
from harness.protocols.table import Lit, Table

CODEC_BUGS: tuple[type[Exception], ...] = (
    ArithmeticError, AttributeError, LookupError, RuntimeError, TypeError, ValueError, struct.error,
)


class StructureError(FieldError):
    """A frame is missing or extra: the message's own clause applies, not the field's."""


def frames_error(n: int, need: int, names: Sequence[str], exact: bool) -> None:
    if n < need:
        raise StructureError(f"missing (the message has {n} frame(s), needs {'exactly' if exact else 'at least'} {need})",
                             field=names[n])
    raise StructureError(f"{n - need} unexpected extra frame(s) (needs exactly {need})", field="")


def lit_error(lit: Lit, b: bytes, off: int, frame: int | None = None) -> None:
    got = bytes(b[off : off + len(lit.value)])
    e = FieldError(f"expected {lit.value!r} at byte {off}, got {got!r}", clause=lit.clause, field=lit.name)
    e.frame = frame
    raise e


def const_error(c: Any, b: bytes, frame: int) -> None:
    e = FieldError(f"expected frame {c.value!r}, got {bytes(b[:40])!r}", clause=c.clause, field=c.name)
    e.frame = frame
    raise e


def packed_diagnose(parts: list[tuple[str, Any, Any]], b: bytes, frame: int | None = None) -> None:
    """Slow path for a packed frame whose fast check failed: find and name the bad part."""
    try:
        packed_walk(parts, b)
    except FieldError as e:
        e.frame = frame
        raise


def packed_walk(parts: list[tuple[str, Any, Any]], b: bytes) -> None:
    """Walk a packed frame part by part; raise the FieldError of the first part that is wrong."""
    p = 0
    name = ""
    for name, part, fd in parts:
        if isinstance(part, Lit):
            if bytes(b[p : p + len(part.value)]) != part.value:
                lit_error(part, b, p, None)
            p += len(part.value)
        else:
            try:
                v, p = part.unpack(b, p)
            except FieldError as e:
                raise FieldError(e.reason, e.clause, field=name) from None
            if fd is not None and fd.const is not None and v != fd.const:
                raise FieldError(f"must be {fd.const!r}, got {v!r}", fd.clause, field=name)
            if fd is not None and fd.choices is not None and v not in fd.choices:
                raise FieldError(f"must be one of {tuple(fd.choices)!r}, got {v!r}", fd.clause, field=name)
    if p != len(b):
        raise FieldError(f"{len(b) - p} unexpected trailing byte(s) in the frame", field=name)
    raise FieldError("frame does not match its layout", field=name)


def decode_error(table: Table, message: str, field: str | None, frame: int | None, e: FieldError) -> DecodeError:
    """The DecodeError of a FieldError raised while decoding ``message``: the raiser's field,
    frame and clause when it knows them, else the field's clause, else the message's."""
    if e.frame is not None:
        frame = e.frame
    if e.field is not None:
        field = e.field or None
    if e.clause:
        clause = e.clause
    elif field and field in table.fields and not isinstance(e, StructureError) and table.fields[field].clause:
        clause = table.fields[field].clause
    else:
        spec = table.message(message)
        clause = spec.clause or table.grammar_clause
    err = DecodeError(table.protocol, table.dialect, message, field, e.reason, clause, frame=frame)
    err.structural = isinstance(e, StructureError)  # wrong frame count, not wrong content
    return err


def internal_error(table: Table, message: str | None, e: BaseException) -> DecodeError:
    """The DecodeError of a codec bug (one of CODEC_BUGS) met while decoding."""
    return DecodeError(table.protocol, table.dialect, message, None, f"internal codec error: {type(e).__name__}: {e}",
                       table.grammar_clause, internal=True)
