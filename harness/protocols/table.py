"""The declarative wire table: messages, frame layouts, fields and their types.

A protocol module declares one `Table` per dialect (``strict`` = the document plus
docs/errata.md; others = a deployed implementation, see INTEROP.md). `harness.protocols.codec`
compiles a table into encode / decode / validate functions; nothing is hand-written per message.

Layout elements (a message's ``layout`` is a tuple of them, in frame order):

* ``"field"`` — one whole frame holding the field (its type must be a FrameType).
* ``Const(b"...", name)`` — one frame that must hold exactly these bytes.
* ``Packed(part, ...)`` — one frame made of parts: ``Lit(b"...")`` literals and field names
  whose types are PackedTypes (fixed numbers, length-prefixed strings, ...). The parts must
  fill the frame exactly.
* ``Opt(element, ...)`` — trailing frames that are present together or not at all; absent
  fields decode as None, and encoding stops at the first group whose first field is None.
* ``Rep("field", min=0)`` — all remaining frames, each one value of the field's type (a list).
* ``Until("field", max=None)`` — frames up to an empty delimiter frame (consumed). With
  ``max=1`` the value is a single optional item (None when absent), otherwise a list.
* ``When("field", values, element, ...)`` — elements present only when the (already decoded)
  field has one of ``values``.

Each field is declared once per table (a field name has one type everywhere) with `Field`:
type, default, the clause its errors name, and optional constraints (``const``, ``choices``).
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass, field, replace
from typing import Any, Union

from harness.protocols.types import FrameType, PackedType


@dataclass(frozen=True)
class Lit:
    """Literal bytes inside a packed frame (a signature, a command id)."""

    value: bytes
    name: str = "id"
    clause: str = ""


@dataclass(frozen=True)
class Const:
    """A frame that must hold exactly these bytes (a delimiter, a command name)."""

    value: bytes
    name: str
    clause: str = ""


@dataclass(frozen=True)
class Packed:
    parts: tuple[Union[Lit, str], ...]

    def __init__(self, *parts: Union[Lit, str]) -> None:
        object.__setattr__(self, "parts", tuple(parts))


@dataclass(frozen=True)
class Opt:
    items: tuple[Any, ...]

    def __init__(self, *items: Any) -> None:
        object.__setattr__(self, "items", tuple(items))


@dataclass(frozen=True)
class Rep:
    field: str
    min: int = 0


@dataclass(frozen=True)
class Until:
    field: str
    max: int | None = None


@dataclass(frozen=True)
class When:
    field: str
    values: tuple[Any, ...]
    items: tuple[Any, ...]

    def __init__(self, field: str, values: Any, *items: Any) -> None:
        object.__setattr__(self, "field", field)
        object.__setattr__(self, "values", tuple(values) if isinstance(values, (list, tuple, set, frozenset)) else (values,))
        object.__setattr__(self, "items", tuple(items))


Element = Union[str, Const, Packed, Opt, Rep, Until, When]


@dataclass(frozen=True)
class Field:
    type: FrameType
    clause: str = ""  # clause named by decode errors of this field (default: the table's)
    doc: str = ""
    const: Any = None  # decoded value must equal this (e.g. a version)
    choices: tuple[Any, ...] | None = None  # decoded value must be one of these
    default: Any = None  # encoding default when a field is not given (None: the type's)

    def default_value(self) -> Any:
        if self.const is not None:
            return self.const
        if self.default is not None:
            return self.default
        d = self.type.default
        return list(d) if isinstance(d, (list, tuple)) else d


@dataclass(frozen=True)
class Message:
    name: str  # upper-case with hyphens, as the document names it: "DIRECT-RECORD"
    layout: tuple[Element, ...]
    doc: str = ""
    channels: tuple[str, ...] = ()  # where it travels ("to-broker", "snapshot", ...); () = any
    clause: str = ""  # clause for errors about the message as a whole (frame count, ...)
    answers: str = ""  # for responses identified by correlation: the request's name


@dataclass(frozen=True)
class Table:
    protocol: str
    dialect: str  # "strict" or "<protocol>:<implementation>"
    fields: dict[str, Field]
    messages: tuple[Message, ...]
    grammar_clause: str  # clause of last resort for malformed input
    doc: str = ""
    unknown_clause: str = ""  # clause for bytes no message of the table matches (default: grammar)
    notes: tuple[str, ...] = field(default_factory=tuple)  # how this dialect differs

    def __post_init__(self) -> None:
        names = set()
        for m in self.messages:
            if m.name in names:
                raise ValueError(f"{self.protocol}: duplicate message {m.name}")
            names.add(m.name)
            for f in _fields_of(m.layout):
                if f not in self.fields:
                    raise ValueError(f"{self.protocol} {m.name}: field {f!r} is not declared")
                if not f.isidentifier() or keyword.iskeyword(f):
                    raise ValueError(f"{self.protocol}: field name {f!r} must be an identifier")
        for name, fd in self.fields.items():
            if not isinstance(fd, Field):
                raise TypeError(f"{self.protocol}: field {name!r} must be declared with Field(...)")

    def message(self, name: str) -> Message:
        for m in self.messages:
            if m.name == name:
                return m
        raise KeyError(f"{self.protocol} has no message {name!r}")

    def derive(
        self,
        dialect: str,
        *,
        fields: dict[str, Field] | None = None,
        messages: tuple[Message, ...] = (),
        drop: tuple[str, ...] = (),
        notes: tuple[str, ...] = (),
    ) -> "Table":
        """A dialect: this table with some fields retyped and some messages replaced/added."""
        new_fields = dict(self.fields)
        new_fields.update(fields or {})
        by_name = {m.name: m for m in self.messages if m.name not in drop}
        for m in messages:
            by_name[m.name] = m
        return replace(self, dialect=dialect, fields=new_fields, messages=tuple(by_name.values()), notes=notes)


def _fields_of(layout: tuple[Any, ...]) -> list[str]:
    out: list[str] = []
    for el in layout:
        if isinstance(el, str):
            out.append(el)
        elif isinstance(el, Packed):
            out.extend(p for p in el.parts if isinstance(p, str))
        elif isinstance(el, Opt):
            out.extend(_fields_of(el.items))
        elif isinstance(el, (Rep, Until)):
            out.append(el.field)
        elif isinstance(el, When):
            out.extend(_fields_of(el.items))
    return out


def fields_of(message: Message) -> list[str]:
    """The message's field names in layout order."""
    return _fields_of(message.layout)


def is_packed_type(t: FrameType) -> bool:
    return isinstance(t, PackedType)
