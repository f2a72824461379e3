"""Hypothesis strategies derived from wire tables: valid messages of any table, and mutations
of their frames. Used by the property tests and available to fuzzing conformance cases."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from harness.protocols.codec import optional_fields, repeated_fields
from harness.protocols.table import Const, Message, Opt, Packed, Rep, Table, Until, When, fields_of
from harness.protocols.types import Raw


def _value(table: Table, name: str) -> st.SearchStrategy:
    fd = table.fields[name]
    if fd.const is not None:
        return st.just(fd.const)
    if fd.choices is not None:
        return st.sampled_from(list(fd.choices))
    return fd.type.strategy()


def _element_strategy(table: Table, name: str, el: Any) -> st.SearchStrategy:
    if isinstance(el, Rep):
        return st.lists(_value(table, el.field), min_size=el.min, max_size=4)
    if isinstance(el, Until):
        item = _value(table, el.field)
        t = table.fields[el.field].type
        if not (isinstance(t, Raw) and t.non_empty):
            # Values that would encode to an empty frame read as the delimiter.
            item = item.filter(lambda v, t=t: len(t.encode(v)) > 0)
        if el.max == 1:
            return st.none() | item
        return st.lists(item, max_size=el.max or 4)
    return _value(table, name)


def message_fields(table: Table, msg: Message) -> st.SearchStrategy[dict[str, Any]]:
    """Field dicts that encode to a valid message."""

    @st.composite
    def build(draw: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        absent = False  # once an optional group is left out, everything after it is too

        def walk(layout: tuple[Any, ...]) -> None:
            nonlocal absent
            for el in layout:
                if isinstance(el, str):
                    out[el] = None if absent else draw(_element_strategy(table, el, el))
                elif isinstance(el, Packed):
                    for p in el.parts:
                        if isinstance(p, str):
                            out[p] = None if absent else draw(_value(table, p))
                elif isinstance(el, Const):
                    continue
                elif isinstance(el, (Rep, Until)):
                    if absent:
                        out[el.field] = None if isinstance(el, Until) and el.max == 1 else []
                        if isinstance(el, Rep):
                            out[el.field] = None
                    else:
                        out[el.field] = draw(_element_strategy(table, el.field, el))
                elif isinstance(el, Opt):
                    if not absent and not draw(st.booleans()):
                        absent = True
                    walk(el.items)
                elif isinstance(el, When):
                    was = absent
                    if out.get(el.field) not in el.values:
                        absent = True
                    walk(el.items)
                    absent = was
        walk(msg.layout)
        return out

    return build()


def frames_of(table: Table, msg: Message) -> st.SearchStrategy[list[bytes]]:
    from harness.protocols import codec

    c = codec(table.protocol, table.dialect)
    return message_fields(table, msg).map(lambda f: c.encode(msg.name, f))


@st.composite
def mutated(draw: Any, frames: list[bytes]) -> list[bytes]:
    """A valid message with one to three structural or byte-level mutations."""
    out = [bytes(f) for f in frames]
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "truncate", "extend", "drop", "dup", "insert", "empty", "swap"]))
        if not out:
            out.append(draw(st.binary(max_size=8)))
            continue
        i = draw(st.integers(0, len(out) - 1))
        f = out[i]
        if op == "flip" and f:
            j = draw(st.integers(0, len(f) - 1))
            out[i] = f[:j] + bytes([f[j] ^ draw(st.integers(1, 255))]) + f[j + 1 :]
        elif op == "truncate" and f:
            out[i] = f[: draw(st.integers(0, len(f) - 1))]
        elif op == "extend":
            out[i] = f + draw(st.binary(min_size=1, max_size=8))
        elif op == "drop":
            del out[i]
        elif op == "dup":
            out.insert(i, f)
        elif op == "insert":
            out.insert(i, draw(st.binary(max_size=12)))
        elif op == "empty":
            out[i] = b""
        elif op == "swap" and len(out) > 1:
            j = draw(st.integers(0, len(out) - 1))
            out[i], out[j] = out[j], out[i]
    return out


__all__ = ["message_fields", "frames_of", "mutated", "fields_of", "optional_fields", "repeated_fields"]
