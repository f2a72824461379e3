"""Compile a wire `Table` into encode / decode / validate functions.

Each message's layout is turned into the source of two specialised Python functions (decode
and encode) and `exec`-ed once per table, so the per-message cost is close to hand-written
``struct`` code while nothing is written by hand per message. Error paths stay generic: a
failed fast path re-walks the layout with the field types to name the exact field.

Decoding never raises anything but `DecodeError`: field types raise `FieldError`, which the
generated code turns into a `DecodeError` naming message, field, frame and clause; any other
exception would be a codec bug and is reported as a `DecodeError` with ``internal=True``.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Iterable, Sequence

from harness.protocols.errors import ConformanceError, DecodeError, EncodeError, FieldError
from harness.protocols.table import (
    Const, Element, Field, Lit, Message as MessageSpec, Opt, Packed, Rep, Table, Until, When,
    fields_of,
)
from harness.protocols.types import PackedType, Raw, Str, UInt


class Message(tuple):
    """A decoded (or to-be-encoded) message: its name and its field values.

    A tuple underneath so the generated decoders build it at C speed; ``msg["field"]`` reads
    a field, ``msg.name`` / ``msg.fields`` the parts.
    """

    __slots__ = ()

    def __new__(cls, name: str, fields: dict[str, Any]) -> "Message":
        return tuple.__new__(cls, (name, fields))

    @property
    def name(self) -> str:
        return tuple.__getitem__(self, 0)

    @property
    def fields(self) -> dict[str, Any]:
        return tuple.__getitem__(self, 1)

    def __getitem__(self, key: str) -> Any:  # type: ignore[override]
        return tuple.__getitem__(self, 1)[key]

    def get(self, key: str, default: Any = None) -> Any:
        return tuple.__getitem__(self, 1).get(key, default)

    def __repr__(self) -> str:
        return f"Message({self.name!r}, {self.fields!r})"


_new_message = tuple.__new__


class _StructureError(FieldError):
    """A frame is missing or extra: the message's own clause applies, not the field's."""


def _frames_error(n: int, need: int, names: Sequence[str], exact: bool) -> None:
    if n < need:
        raise _StructureError(f"missing (the message has {n} frame(s), needs {'exactly' if exact else 'at least'} {need})",
                              field=names[n])
    raise _StructureError(f"{n - need} unexpected extra frame(s) (needs exactly {need})", field="")


def _lit_error(lit: Lit, b: bytes, off: int, frame: int | None = None) -> None:
    got = bytes(b[off : off + len(lit.value)])
    e = FieldError(f"expected {lit.value!r} at byte {off}, got {got!r}", clause=lit.clause, field=lit.name)
    e.frame = frame
    raise e


def _const_error(c: Const, b: bytes, frame: int) -> None:
    e = FieldError(f"expected frame {c.value!r}, got {bytes(b[:40])!r}", clause=c.clause, field=c.name)
    e.frame = frame
    raise e


def _packed_diagnose(parts: list[tuple[str, Any, Any]], b: bytes, frame: int | None = None) -> None:
    """Slow path for a packed frame whose fast check failed: find and name the bad part."""
    try:
        _packed_walk(parts, b)
    except FieldError as e:
        e.frame = frame
        raise


def _packed_walk(parts: list[tuple[str, Any, Any]], b: bytes) -> None:
    p = 0
    name = ""
    for name, part, fd in parts:
        if isinstance(part, Lit):
            if bytes(b[p : p + len(part.value)]) != part.value:
                _lit_error(part, b, p, None)
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


class _Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 0

    def add(self, line: str) -> None:
        self.lines.append("    " * self.level + line)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class _Compiler:
    """Generates the decode and encode functions of one message."""

    def __init__(self, table: Table, msg: MessageSpec, ns: dict[str, Any]) -> None:
        self.table = table
        self.msg = msg
        self.ns = ns
        self.k = 0  # counter for unique constant names

    def const(self, value: Any, prefix: str = "K") -> str:
        self.k += 1
        name = f"{prefix}{self.k}"
        self.ns[name] = value
        return name

    def ftype(self, name: str) -> Any:
        return self.table.fields[name].type

    # ---- decode ----------------------------------------------------------------------------

    def decoder_source(self) -> str:
        g = _Lines()
        g.add("def dec(fr):")
        g.level += 1
        g.add("n = len(fr)")
        g.add("cur = None")
        g.add("fi = None")
        g.add("try:")
        g.level += 1
        layout = self.msg.layout
        static = 0
        for el in layout:
            if isinstance(el, (str, Const, Packed)):
                static += 1
            else:
                break
        exact = static == len(layout)
        names = [self._element_name(el) for el in layout[:static]]
        names_c = self.const(names + [""] * 1)
        if exact:
            g.add(f"if n != {static}: _frames_error(n, {static}, {names_c}, True)")
        elif static:
            g.add(f"if n < {static}: _frames_error(n, {static}, {names_c}, False)")
        for idx, el in enumerate(layout[:static]):
            self.dec_element(g, el, str(idx))
        if not exact:
            g.add(f"i = {static}")
            for el in layout[static:]:
                self.dec_dynamic(g, el)
            if not isinstance(layout[-1], Rep):  # a trailing Rep has taken every frame
                g.add("if i != n:")
                g.add("    fi = i")
                g.add("    raise FieldError(f'{n - i} unexpected extra frame(s)', field='')")
        fields = fields_of(self.msg)
        g.add(f"return _new(_M, ({self.msg.name!r}, {{" + ", ".join(f"{f!r}: v_{f}" for f in fields) + "}))")
        g.level -= 1
        g.add("except FieldError as e:")
        g.add(f"    raise _derr({self.msg.name!r}, cur, fi, e) from None")
        return g.text()

    def _element_name(self, el: Element) -> str:
        if isinstance(el, str):
            return el
        if isinstance(el, Const):
            return el.name
        if isinstance(el, Packed):
            for p in el.parts:
                if isinstance(p, str):
                    return p
            return el.parts[0].name if el.parts else "frame"
        return ""

    def dec_dynamic(self, g: _Lines, el: Element) -> None:
        """Decode an element whose frame index is only known at run time (variable ``i``)."""
        if isinstance(el, (str, Const, Packed)):
            name = self._element_name(el)
            g.add("if i >= n:")
            g.add("    fi = i")
            g.add(f"    raise _StructureError('missing frame', field={name!r})")
            self.dec_element(g, el, "i")
            g.add("i += 1")
        elif isinstance(el, Opt):
            g.add("if i < n:")
            g.level += 1
            for sub in el.items:
                self.dec_dynamic(g, sub)
            g.level -= 1
            absent = fields_of(MessageSpec("", el.items))
            if absent:
                g.add("else:")
                g.add("    " + "; ".join(f"v_{f} = None" for f in absent))
        elif isinstance(el, Rep):
            t = self.ftype(el.field)
            g.add(f"cur = {el.field!r}")
            if el.min:
                g.add(f"if n - i < {el.min}:")
                g.add("    fi = n")
                g.add(f"    raise FieldError('needs at least {el.min} frame(s)')")
            if t.inline_decode == "{b}":
                g.add(f"v_{el.field} = list(fr[i:])")
            else:
                tc = self.const(t, "T")
                g.add(f"v_{el.field} = []")
                g.add(f"for fi in range(i, n): v_{el.field}.append({tc}.decode(fr[fi]))")
            g.add("i = n")
        elif isinstance(el, Until):
            t = self.ftype(el.field)
            tc = self.const(t, "T")
            v = f"v_{el.field}"
            raw = isinstance(t, Raw) and t.fixed is None
            missing = f"raise FieldError('missing the empty delimiter frame after {el.field}')"
            g.add(f"cur = {el.field!r}")
            if el.max == 1:
                # At most one frame, then the delimiter (DCP's client address): no loop.
                g.add("if i >= n:")
                g.add(f"    fi = i; {missing}")
                g.add("x = fr[i]")
                g.add("if x:")
                g.add("    fi = i")
                g.add(f"    {v} = x" if raw else f"    {v} = {tc}.decode(x)")
                g.add("    i += 1")
                g.add("    if i >= n:")
                g.add(f"        fi = i; {missing}")
                g.add("    if fr[i]:")
                g.add(f"        fi = i; raise FieldError('expected an empty delimiter frame after one {el.field} frame')")
                g.add("else:")
                g.add(f"    {v} = None")
                g.add("i += 1")
            else:
                g.add(f"{v} = []")
                g.add("while True:")
                g.level += 1
                g.add("if i >= n:")
                g.add(f"    fi = i; {missing}")
                g.add("x = fr[i]")
                g.add("i += 1")
                g.add("if not x: break")
                if raw:
                    g.add(f"{v}.append(x)")  # non-empty by construction
                else:
                    g.add("fi = i - 1")
                    g.add(f"{v}.append({tc}.decode(x))")
                    if el.max:
                        g.add(f"if len({v}) > {el.max}: raise FieldError('more than {el.max} frame(s)')")
                g.level -= 1
            self.constraints(g, el.field)
        elif isinstance(el, When):
            vals = self.const(el.values, "W")
            g.add(f"if v_{el.field} in {vals}:")
            g.level += 1
            for sub in el.items:
                self.dec_dynamic(g, sub)
            g.add("pass")
            g.level -= 1
            absent = fields_of(MessageSpec("", el.items))
            if absent:
                g.add("else:")
                g.add("    " + "; ".join(f"v_{f} = None" for f in absent))
        else:
            raise TypeError(f"unknown layout element {el!r}")

    def dec_element(self, g: _Lines, el: Element, idx: str) -> None:
        fx = f"fr[{idx}]"
        if isinstance(el, str):
            t = self.ftype(el)
            fd = self.table.fields[el]
            if t.inline_decode and fd.const is None and fd.choices is None:
                # Inline conversions cannot fail (a FrameType contract): no error bookkeeping.
                g.add(f"v_{el} = " + t.inline_decode.format(b=fx))
                return
            g.add(f"cur = {el!r}")
            g.add(f"fi = {idx}")
            if t.inline_decode:
                g.add(f"v_{el} = " + t.inline_decode.format(b=fx))
            else:
                g.add(f"v_{el} = {self.const(t, 'T')}.decode({fx})")
            self.constraints(g, el)
        elif isinstance(el, Const):
            c = self.const(el, "C")
            bc = self.const(el.value, "B")
            g.add(f"if {fx} != {bc}: _const_error({c}, {fx}, {idx})")
        elif isinstance(el, Packed):
            if self._fold_prefix(self._packed_parts(el)) is None or not self._all_fixed(el):
                g.add(f"fi = {idx}")
            self.dec_packed(g, el, fx, idx)
        else:
            raise TypeError(f"{el!r} cannot be decoded at a fixed position")

    def constraints(self, g: _Lines, name: str) -> None:
        fd: Field = self.table.fields[name]
        if fd.const is not None:
            c = self.const(fd.const)
            g.add(f"if v_{name} != {c}: raise FieldError(f'must be {{{c}!r}}, got {{v_{name}!r}}', field={name!r})")
        if fd.choices is not None:
            c = self.const(tuple(fd.choices))
            g.add(f"if v_{name} not in {c}: raise FieldError(f'must be one of {{{c}!r}}, got {{v_{name}!r}}', field={name!r})")

    def _packed_parts(self, el: Packed) -> list[tuple[str, Any, Field | None]]:
        return [(p.name, p, None) if isinstance(p, Lit) else (p, self.ftype(p), self.table.fields[p]) for p in el.parts]

    def _all_fixed(self, el: Packed) -> bool:
        return all(isinstance(p, Lit) or getattr(self.ftype(p), "fmt", None) is not None for p in el.parts)

    @staticmethod
    def _fold_prefix(parts: list[tuple[str, Any, Field | None]]) -> bytes | None:
        """The exact bytes of a prefix made only of literals and constant numbers, else None."""
        out = b""
        for _, p, fd in parts:
            if isinstance(p, Lit):
                out += p.value
            elif fd is not None and fd.const is not None and p.fmt is not None:
                out += struct.pack(p.fmt, fd.const)
            else:
                return None
        return out or None

    def dec_packed(self, g: _Lines, el: Packed, fx: str, idx: str) -> None:
        parts: list[tuple[str, Any, Field | None]] = []
        for p in el.parts:
            if isinstance(p, Lit):
                parts.append((p.name, p, None))
            else:
                t = self.ftype(p)
                if not isinstance(t, PackedType):
                    raise TypeError(f"{self.table.protocol} {self.msg.name}: field {p!r} ({t.name}) cannot be packed")
                parts.append((p, t, self.table.fields[p]))
        pc = self.const(parts, "P")
        whole = self._fold_prefix(parts) if all(isinstance(p, Lit) or p.fmt is not None for _, p, _ in parts) else None
        if whole is not None:
            # The whole frame is a signature/id/version: one comparison (it implies the length).
            g.add(f"if {fx} != {self.const(whole, 'B')}: _packed_diagnose({pc}, {fx}, {idx})")
            for name, p, fd in parts:
                if fd is not None:
                    g.add(f"v_{name} = {self.const(fd.const)}")
            return
        if all(not isinstance(p, Lit) and p.fmt is not None for _, p, _ in parts) and not any(
                fd is not None and (fd.const is not None or fd.choices is not None) for _, _, fd in parts) \
                and len({p.fmt[0] for _, p, _ in parts}) == 1:
            # Only fixed-width numbers in one byte order: struct.unpack checks the length itself;
            # the slow diagnosis runs only when it fails.
            st = self.const(struct.Struct(parts[0][1].fmt[0] + "".join(p.fmt[1:] for _, p, _ in parts)), "S")
            names = ", ".join(f"v_{n}" for n, _, _ in parts)
            g.add("try:")
            g.add(f"    {names}, = {st}.unpack({fx})")
            g.add("except _struct_error:")
            g.add(f"    _packed_diagnose({pc}, {fx}, {idx})")
            return
        g.add(f"b = {fx}")
        g.add("L = len(b)")
        # Fixed prefix: literals and fixed-width numbers, checked and unpacked with one struct.
        off = 0
        j = 0
        while j < len(parts) and (isinstance(parts[j][1], Lit) or parts[j][1].fmt is not None):
            j += 1
        prefix = [(n, p) for n, p, _ in parts[:j]]
        size = sum(len(p.value) if isinstance(p, Lit) else p.size for _, p in prefix)
        rest = [(n, p) for n, p, _ in parts[j:]]
        if not rest:
            g.add(f"if L != {size}: _packed_diagnose({pc}, b, fi)")
        elif size:
            g.add(f"if L < {size}: _packed_diagnose({pc}, b, fi)")
        folded = self._fold_prefix(parts[:j])
        if folded is not None:
            # Signature, id and constant fields (a version) in one comparison.
            fc = self.const(folded, "B")
            g.add(f"if b[0:{size}] != {fc}: _packed_diagnose({pc}, b, fi)" if rest else f"if b != {fc}: _packed_diagnose({pc}, b, fi)")
            for name, p, fd in parts[:j]:
                if fd is not None:
                    g.add(f"v_{name} = {self.const(fd.const)}")
            off = size
            prefix = []
        if prefix:
            # Literals are compared directly; numbers unpacked per byte order.
            for name, p in prefix:
                if isinstance(p, Lit):
                    lc = self.const(p, "C")
                    g.add(f"if b[{off}:{off + len(p.value)}] != {lc}.value: _lit_error({lc}, b, {off}, fi)")
                    off += len(p.value)
                else:
                    st = self.const(struct.Struct(p.fmt), "S")
                    g.add(f"cur = {name!r}")
                    g.add(f"v_{name} = {st}.unpack_from(b, {off})[0]")
                    self.constraints(g, name)
                    off += p.size
        if rest:
            g.add(f"p = {off}")
            last = rest[-1][0]
            for name, p in rest:
                if isinstance(p, Lit):
                    lc = self.const(p, "C")
                    g.add(f"if b[p:p + {len(p.value)}] != {lc}.value: _lit_error({lc}, b, p, fi)")
                    g.add(f"p += {len(p.value)}")
                    continue
                g.add(f"cur = {name!r}")
                if isinstance(p, Str) and p.prefix.size == 1 and p.any_bytes:
                    # The hot case (Dafka strings): inlined.
                    g.add("if p >= L: raise FieldError('missing length byte')")
                    g.add("k = b[p]")
                    g.add("p += 1")
                    g.add("if p + k > L: raise FieldError(f'length byte says {k} byte(s), only {L - p} left')")
                    g.add(f"v_{name} = b[p:p + k].decode('utf-8', 'surrogateescape')")
                    g.add("p += k")
                elif isinstance(p, UInt):
                    st = self.const(struct.Struct(p.fmt), "S")
                    g.add(f"if p + {p.size} > L: raise FieldError(f'needs {p.size} byte(s), only {{L - p}} left')")
                    g.add(f"v_{name} = {st}.unpack_from(b, p)[0]")
                    g.add(f"p += {p.size}")
                else:
                    g.add(f"v_{name}, p = {self.const(p, 'T')}.unpack(b, p)")
                self.constraints(g, name)
            g.add(f"if p != L: raise FieldError(f'{{L - p}} unexpected trailing byte(s) in the frame', field={last!r})")

    # ---- encode ----------------------------------------------------------------------------

    def encoder_source(self) -> str:
        g = _Lines()
        g.add("def enc(f):")
        g.level += 1
        optional = optional_fields(self.msg)
        repeated = repeated_fields(self.msg)
        for name in fields_of(self.msg):
            d = default_of(self.table, name, optional, repeated)
            if isinstance(d, list):
                d = tuple(d)
            g.add(f"v_{name} = f.get({name!r}, {self.const(d, 'D')})")
        layout = self.msg.layout
        static = 0
        for el in layout:
            if isinstance(el, (str, Const, Packed)):
                static += 1
            else:
                break
        exprs = [self.enc_expr(el) for el in layout[:static]]
        g.add("out = [" + ", ".join(exprs) + "]")
        for el in layout[static:]:
            self.enc_dynamic(g, el)
        g.add("return out")
        return g.text()

    def enc_expr(self, el: Element) -> str:
        if isinstance(el, str):
            t = self.ftype(el)
            if t.inline_encode:
                return t.inline_encode.format(v=f"v_{el}")
            return f"{self.const(t, 'T')}.encode(v_{el})"
        if isinstance(el, Const):
            return self.const(el.value, "B")
        if isinstance(el, Packed):
            pieces: list[str] = []
            run_fmt = ">"
            run_args: list[str] = []

            def close_run() -> None:
                nonlocal run_fmt, run_args
                if run_args:
                    st = self.const(struct.Struct(run_fmt), "S")
                    pieces.append(f"{st}.pack({', '.join(run_args)})")
                run_fmt, run_args = ">", []

            for p in el.parts:
                if isinstance(p, Lit):
                    run_fmt += f"{len(p.value)}s"
                    run_args.append(self.const(p.value, "B"))
                    continue
                t = self.ftype(p)
                if t.fmt is not None and t.fmt[0] == ">":
                    run_fmt += t.fmt[1:]
                    run_args.append(f"v_{p}")
                else:
                    close_run()
                    pieces.append(f"{self.const(t, 'T')}.pack(v_{p})")
            close_run()
            expr = pieces[0] if len(pieces) == 1 else "b''.join((" + ", ".join(pieces) + ",))"
            consts = [(p, self.table.fields[p].const) for p in el.parts if isinstance(p, str)]
            if consts and all(c is not None for _, c in consts):
                # Only literals and constant fields (a versioned header): precomputed bytes
                # unless the caller deliberately sends another value.
                folded = self._fold_prefix([(p, p if isinstance(p, Lit) else self.ftype(p),
                                             None if isinstance(p, Lit) else self.table.fields[p]) for p in el.parts])
                if folded is not None:
                    cond = " and ".join(f"v_{n} == {self.const(c)}" for n, c in consts)
                    return f"({self.const(folded, 'B')} if {cond} else {expr})"
            return expr
        raise TypeError(f"{el!r} cannot be encoded at a fixed position")

    def enc_dynamic(self, g: _Lines, el: Element) -> None:
        if isinstance(el, (str, Const, Packed)):
            g.add(f"out.append({self.enc_expr(el)})")
        elif isinstance(el, Opt):
            first = fields_of(MessageSpec("", el.items))
            if not first:
                raise TypeError("an Opt group needs at least one field")
            g.add(f"if v_{first[0]} is not None:")
            g.level += 1
            for sub in el.items:
                self.enc_dynamic(g, sub)
            g.add("pass")
            g.level -= 1
        elif isinstance(el, Rep):
            t = self.ftype(el.field)
            if t.inline_encode == "{v}":
                g.add(f"out.extend(v_{el.field})")
            else:
                g.add(f"out.extend([{self.const(t, 'T')}.encode(x) for x in v_{el.field}])")
        elif isinstance(el, Until):
            t = self.const(self.ftype(el.field), "T")
            raw = isinstance(self.ftype(el.field), Raw) and self.ftype(el.field).fixed is None
            if el.max == 1:
                g.add(f"if v_{el.field} is not None:")
                g.add(f"    x = v_{el.field}" if raw else f"    x = {t}.encode(v_{el.field})")
                g.add(f"    if not x: raise FieldError('an empty {el.field} would read as the delimiter', field={el.field!r})")
                g.add("    out.append(x)")
            elif raw:
                g.add(f"if not all(v_{el.field}): raise FieldError('an empty {el.field} item would read as the delimiter', field={el.field!r})")
                g.add(f"out.extend(v_{el.field})")
            else:
                g.add(f"for x in v_{el.field}:")
                g.add(f"    x = {t}.encode(x)")
                g.add(f"    if not x: raise FieldError('an empty {el.field} item would read as the delimiter', field={el.field!r})")
                g.add("    out.append(x)")
            g.add("out.append(b'')")
        elif isinstance(el, When):
            g.add(f"if v_{el.field} in {self.const(el.values, 'W')}:")
            g.level += 1
            for sub in el.items:
                self.enc_dynamic(g, sub)
            g.add("pass")
            g.level -= 1
        else:
            raise TypeError(f"unknown layout element {el!r}")


def optional_fields(msg: MessageSpec) -> set[str]:
    """Fields that may be absent from the message (their value is then None)."""
    out: set[str] = set()

    def walk(layout: tuple[Any, ...], inside: bool) -> None:
        for el in layout:
            if isinstance(el, (Opt, When)):
                walk(el.items, True)
            elif isinstance(el, Until) and el.max == 1:
                out.add(el.field)
            elif inside:
                out.update(fields_of(MessageSpec("", (el,))))

    walk(msg.layout, False)
    return out


def repeated_fields(msg: MessageSpec) -> set[str]:
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
    fd = table.fields[name]
    if name in repeated:
        return list(fd.default) if fd.default is not None else []
    if name in optional and fd.default is None and fd.const is None:
        return None
    return fd.default_value()


class Codec:
    """Encode / decode / validate for one table (one protocol in one dialect)."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.protocol = table.protocol
        self.dialect = table.dialect
        self.alternatives: list[Codec] = []  # dialect codecs consulted when strict decoding fails
        self._decoders: dict[str, Callable[[Sequence[bytes]], Message]] = {}
        self._encoders: dict[str, Callable[[dict[str, Any]], list[bytes]]] = {}
        self.sources: dict[str, str] = {}
        for msg in table.messages:
            self._compile(msg)
        self._build_dispatch()
        self._compile_entry()

    # ---- compilation ---------------------------------------------------------------------

    def _derr(self, message: str, field: str | None, frame: int | None, e: FieldError) -> DecodeError:
        if e.frame is not None:
            frame = e.frame
        if e.field is not None:
            field = e.field or None
        if e.clause:
            clause = e.clause
        elif field and field in self.table.fields and not isinstance(e, _StructureError) and self.table.fields[field].clause:
            clause = self.table.fields[field].clause
        else:
            spec = self.table.message(message)
            clause = spec.clause or self.table.grammar_clause
        err = DecodeError(self.protocol, self.dialect, message, field, e.reason, clause, frame=frame)
        err.structural = isinstance(e, _StructureError)  # wrong frame count, not wrong content
        return err

    def _compile(self, msg: MessageSpec) -> None:
        ns: dict[str, Any] = {
            "FieldError": FieldError, "_M": Message, "_new": _new_message, "_derr": self._derr,
            "_frames_error": _frames_error, "_const_error": _const_error, "_lit_error": _lit_error,
            "_packed_diagnose": _packed_diagnose, "_StructureError": _StructureError,
            "_struct_error": struct.error,
        }
        comp = _Compiler(self.table, msg, ns)
        dsrc = comp.decoder_source()
        esrc = comp.encoder_source()
        self.sources[msg.name] = dsrc + "\n" + esrc
        code = compile(dsrc + "\n" + esrc, f"<{self.protocol}:{self.dialect}:{msg.name}>", "exec")
        exec(code, ns)  # noqa: S102 - source generated from the table above, not from input
        self._decoders[msg.name] = ns["dec"]
        self._encoders[msg.name] = ns["enc"]

    def _build_dispatch(self) -> None:
        """Index messages by the literal bytes that identify them.

        A message's keys are its literals at fixed places before any variable part: whole
        ``Const`` frames and ``Lit`` parts at fixed byte offsets. Each message is indexed at
        the key location that best separates the table's messages (most distinct values: the
        command id, not a shared signature); messages without keys are the fallback.
        """
        all_keys = {m.name: list(self._keys(m)) for m in self.table.messages}
        values: dict[tuple[int, int, int | None], set[bytes]] = {}
        for keys in all_keys.values():
            for loc, value in keys:
                values.setdefault(loc, set()).add(value)
        keyed: dict[tuple[int, int, int | None], dict[bytes, list[str]]] = {}
        self._fallback: list[str] = []
        for msg in self.table.messages:
            keys = all_keys[msg.name]
            if not keys:
                self._fallback.append(msg.name)
                continue
            loc, value = max(keys, key=lambda kv: (len(values[kv[0]]), -kv[0][0], -kv[0][1]))
            keyed.setdefault(loc, {}).setdefault(value, []).append(msg.name)
        self._locations = sorted(keyed.items(), key=lambda kv: (-len(kv[1]), kv[0][0], kv[0][1]))
        # The fast path: the main location's keys that name exactly one message, when no
        # keyless message could also match (those need the full candidate search).
        self._channels = {m.name: m.channels for m in self.table.messages}
        self._fast = self._fast_path(None)
        all_channels = dict.fromkeys(c for m in self.table.messages for c in m.channels)
        self._fast_ch = {c: self._fast_path(c) for c in all_channels}

    def _fast_path(self, channel: str | None) -> tuple[Any, ...] | None:
        """(frame, offset, length, key -> decoder, keys with several candidates, the one keyless
        decoder or None) for messages on ``channel`` (None: all)."""
        if not self._locations:
            keyless = [m for m in self._fallback if channel is None or self._on_channel(m, channel)]
            return (0, 0, 0, {}, self._decoders[keyless[0]]) if len(keyless) == 1 else None
        (fi, off, ln), index = self._locations[0]
        names = {k: [m for m in v if channel is None or self._on_channel(m, channel)] for k, v in index.items()}
        # key -> decoder; None for keys that need the full search (several candidates, or a key
        # that exists but not on this channel): `index.get(key, single)` is then the whole dispatch.
        direct: dict[bytes, Any] = {k: (self._decoders[v[0]] if len(v) == 1 else None) for k, v in names.items()}
        # Keys at other locations would need the full search: only then no keyless shortcut.
        keyless = [m for m in self._fallback if channel is None or self._on_channel(m, channel)]
        single = self._decoders[keyless[0]] if len(keyless) == 1 and len(self._locations) == 1 else None
        return (fi, off, ln, direct, single)

    def _keys(self, msg: MessageSpec) -> Iterable[tuple[tuple[int, int, int | None], bytes]]:
        for idx, el in enumerate(msg.layout):
            if isinstance(el, Const):
                yield (idx, 0, None), el.value
            elif isinstance(el, Packed):
                off = 0
                for p in el.parts:
                    if isinstance(p, Lit):
                        yield (idx, off, len(p.value)), p.value
                        off += len(p.value)
                    else:
                        t = self.table.fields[p].type
                        if getattr(t, "size", None) is None:
                            break
                        off += t.size
            elif not isinstance(el, str):
                return

    # ---- public API ----------------------------------------------------------------------

    @property
    def messages(self) -> list[str]:
        return [m.name for m in self.table.messages]

    def candidates(self, frames: Sequence[bytes], channel: str | None = None) -> list[str]:
        """Names of the messages these frames could be, most specific first."""
        n = len(frames)
        found: list[str] = []
        for (fi, off, ln), index in self._locations:
            if fi >= n:
                continue
            f = frames[fi]
            key = bytes(f) if ln is None else bytes(f[off : off + ln])
            names = index.get(key)
            if names:
                found.extend(names)
        if channel is not None:
            found = [m for m in found if self._on_channel(m, channel)]
        if found:
            return found  # a command id matched: keyless layouts are not tried behind it
        fallback = self._fallback
        if channel is not None:
            fallback = [m for m in fallback if self._on_channel(m, channel)]
        return list(fallback)

    def _on_channel(self, name: str, channel: str) -> bool:
        channels = self._channels[name]
        return not channels or channel in channels

    def _compile_entry(self) -> None:
        """Replace ``decode`` on this instance with a function generated for this table: the
        command-id dispatch of the common case (no message name, no channel given) with its
        constants inlined; everything else goes to the general method."""
        general = self._decode_general
        if self._fast is None:
            self.decode = general  # type: ignore[method-assign]
            return
        fi, off, ln, index, single = self._fast
        key = f"f[{fi}]" if ln is None else f"f[{fi}][{off}:{off + ln}]"
        # Per channel: the same key location, that channel's messages only.
        by_channel = {c: (t[3], t[4]) for c, t in self._fast_ch.items() if t is not None}
        src = (
            "def decode(f, *, as_=None, channel=None):\n"
            "    if as_ is None:\n"
            "        if channel is None:\n"
            "            index, single = INDEX, SINGLE\n"
            "        else:\n"
            "            t = CHANNELS.get(channel)\n"
            "            if t is None:\n"
            "                return GENERAL(f, as_=as_, channel=channel)\n"
            "            index, single = t\n"
            f"        dec = index.get({key}, single) if len(f) > {fi} else single\n"
            "        if dec is not None:\n"
            "            try:\n"
            "                return dec(f)\n"
            "            except Exception:\n"
            "                pass  # the general path reports it (and consults dialects)\n"
            "    return GENERAL(f, as_=as_, channel=channel)\n"
        )
        ns: dict[str, Any] = {"INDEX": index, "SINGLE": single, "GENERAL": general, "CHANNELS": by_channel}
        exec(compile(src, f"<{self.protocol}:{self.dialect}:decode>", "exec"), ns)  # noqa: S102
        self.decode = ns["decode"]  # type: ignore[method-assign]

    def decode(self, frames: Sequence[bytes], *, as_: str | None = None, channel: str | None = None) -> Message:
        """Decode one multipart message; raise DecodeError (ConformanceError in strict mode for
        bytes only a dialect allows) and nothing else. (Each instance replaces this with a
        generated equivalent; see _compile_entry.)"""
        return self._decode_general(frames, as_=as_, channel=channel)

    def _decode_general(self, frames: Sequence[bytes], *, as_: str | None = None,
                        channel: str | None = None) -> Message:
        if as_ is not None:
            dec = self._decoders.get(as_)
            if dec is not None:
                try:
                    return dec(frames)
                except Exception:
                    pass  # the slow path below reports it (and consults dialects)
        fast = self._fast if channel is None else self._fast_ch.get(channel)
        if as_ is None and fast is not None:
            # Hot path: one dictionary look-up on the command id, then the generated decoder;
            # a message with no id at all goes straight to the one keyless layout, if any.
            fi, off, ln, index, single = fast
            if len(frames) > fi:
                f = frames[fi]
                dec = index.get(f if ln is None else f[off : off + ln], single)
            else:
                dec = single
            if dec is not None:
                try:
                    return dec(frames)
                except DecodeError:
                    pass  # the slow path below reports it (and consults dialects)
                except Exception:
                    pass
        try:
            return self._decode(frames, as_, channel)
        except DecodeError as e:
            if self.alternatives:
                accepted: list[str] = []
                decoded: Message | None = None
                for alt in self.alternatives:
                    try:
                        m = alt._decode(frames, as_, channel)
                    except DecodeError:
                        continue
                    accepted.append(alt.dialect)
                    decoded = decoded or m
                if decoded is not None:
                    raise ConformanceError(e, accepted, decoded) from None
            raise

    def _decode(self, frames: Sequence[bytes], as_: str | None, channel: str | None) -> Message:
        try:
            if as_ is not None:
                dec = self._decoders.get(as_)
                if dec is None:
                    raise DecodeError(self.protocol, self.dialect, as_, None, f"no message named {as_!r}",
                                      self.table.grammar_clause)
                return dec(frames)
            names = self.candidates(frames, channel)
            if not names:
                raise DecodeError(self.protocol, self.dialect, None, None, self._unknown_reason(frames),
                                  self.table.unknown_clause or self.table.grammar_clause)
            if len(names) > 1 and self._ambiguous(names):
                raise DecodeError(
                    self.protocol, self.dialect, None, None,
                    f"cannot tell {' / '.join(names)} apart without knowing the socket or direction;"
                    " name the message (as_=..., --as) or the channel",
                    self.table.grammar_clause,
                )
            errors: list[DecodeError] = []
            for name in names:
                try:
                    return self._decoders[name](frames)
                except DecodeError as e:
                    errors.append(e)
            # A command id matched but nothing decoded. Keyless layouts may not succeed behind it,
            # but their errors count when choosing which failure to report.
            for name in self._fallback:
                if name not in names and (channel is None or self._on_channel(name, channel)):
                    try:
                        self._decoders[name](frames)
                    except DecodeError as e:
                        errors.append(e)
            # Report the candidate whose frame count fitted (its error is about content).
            fitting = [e for e in errors if not getattr(e, "structural", False)]
            raise (fitting or errors)[0]
        except DecodeError:
            raise
        except Exception as e:  # a codec bug: still only DecodeError leaves the codec
            raise DecodeError(self.protocol, self.dialect, as_, None, f"internal codec error: {type(e).__name__}: {e}",
                              self.table.grammar_clause, internal=True) from e

    def _ambiguous(self, names: list[str]) -> bool:
        # Keyless messages that all could match are ambiguous; a keyed one wins over fallbacks.
        keyed = [n for n in names if n not in self._fallback]
        return not keyed and len(names) > 1

    def _unknown_reason(self, frames: Sequence[bytes]) -> str:
        if not frames:
            return "no frames"
        known = []
        for (fi, off, ln), index in self._locations:
            where = f"frame {fi}" + ("" if ln is None else f" bytes {off}..{off + ln - 1}")
            if fi < len(frames):
                f = frames[fi]
                got = repr(bytes(f) if ln is None else bytes(f[off : off + ln]))
            else:
                got = f"missing (only {len(frames)} frame(s))"
            known.append(f"{where} = {got}, expected one of {sorted(index)!r}")
        return "unknown message: " + "; ".join(known) if known else "unknown message"

    def decoder(self, name: str) -> Callable[[Sequence[bytes]], Message]:
        """The compiled decode function of one message, for callers that know what they hold (a
        response to their own request, a socket that carries one message type). It raises only
        DecodeError for malformed input; it does not consult dialects."""
        return self._decoders[name]

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
        except Exception as e:
            self._diagnose_encode(name, fields)
            raise EncodeError(self.protocol, self.dialect, name, None, f"{type(e).__name__}: {e}") from None

    def _diagnose_encode(self, name: str, fields: dict[str, Any]) -> None:
        optional = optional_fields(self.table.message(name))
        for fname in fields_of(self.table.message(name)):
            if fname not in fields:
                continue
            if fields[fname] is None and fname not in optional:
                try:
                    self.table.fields[fname].type.encode(None)  # some types have a null (nuint, "null")
                except Exception:
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
                except Exception as e:
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

    def show(self, msg: Message) -> dict[str, Any]:
        """A JSON-friendly view of a decoded message (for evidence and the CLI)."""
        out: dict[str, Any] = {}
        for k, v in msg.fields.items():
            out[k] = self.table.fields[k].type.show(v) if k in self.table.fields else v
        return out
