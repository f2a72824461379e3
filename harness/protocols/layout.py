"""What a message's layout implies, beyond its field names (`table.fields_of`): which
fields may be absent, which hold a list of frames, what a field defaults to when encoding,
and how many frames sit at a fixed index."""

from __future__ import annotations

from typing import Any

from harness.protocols.table import Const, Message, Opt, Packed, Rep, Table, Until, When, fields_of


def optional_fields(msg: Message) -> set[str]:
    """Fields that may be absent from the message (their value is then None)."""
    out: set[str] = set()

    def walk(layout: tuple[Any, ...], inside: bool) -> None:
        for el in layout:
            if isinstance(el, (Opt, When)):
                walk(el.items, True)
            elif isinstance(el, Until) and el.max == 1:
                out.add(el.field)
            elif inside:
                out.update(fields_of(Message("", (el,))))

    walk(msg.layout, False)
    return out


def repeated_fields(msg: Message) -> set[str]:
    """Fields whose value is a list of frames (Rep, Until without max=1)."""
    out: set[str] = set()

    def walk(layout: tuple[Any, ...]) -> None:
        for el in layout:
            if isinstance(el, Rep) or (isinstance(el, Until) and el.max != 1):
                out.add(el.field)
            elif isinstance(el, (Opt, When)):
                walk(el.items)

    walk(msg.layout)
    return out


def default_of(table: Table, name: str, optional: set[str], repeated: set[str] = frozenset()) -> Any:
    """The value a field takes when an encoder is not given it."""
    fd = table.fields[name]
    if name in repeated:
        return list(fd.default) if fd.default is not None else []
    if name in optional and fd.default is None and fd.const is None:
        return None
    return fd.default_value()


def fixed_frames(layout: tuple[Any, ...]) -> int:
    """How many leading elements are one frame each at a fixed index (fields, Const, Packed)."""
    n = 0
    for el in layout:
        if not isinstance(el, (str, Const, Packed)):
            break
        n += 1
    return n
