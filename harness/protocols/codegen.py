"""The compile step: a message's layout turned into two specialised Python functions.

For each message of a `Table`, `compile_message` generates the source of a decoder
(``dec(frames) -> Message``) and an encoder (``enc(fields) -> frames``) and ``exec``-s it
once, so the per-message cost is close to hand-written ``struct`` code while nothing is
written by hand per message. Frames are checked with one comparison or one ``struct.unpack``
where the layout allows; a failed check calls the slow diagnosis in
`harness.protocols.decode_failures`, which names the exact field.

A compiled decoder raises only `DecodeError`: a `FieldError` becomes the error naming message,
field, frame and clause; a codec bug (`CODEC_BUGS`) becomes ``DecodeError(internal=True)``.
A compiled encoder raises `FieldError` (or what Python raises for a value of the wrong type);
`Codec.encode` turns both into `EncodeError`. Which decoder a message's frames go to is
`harness.protocols.dispatch`'s business.
"""

from __future__ import annotations

import struct
from functools import partial
from typing import Any, Callable, Sequence

from harness.protocols.decode_failures import (
    CODEC_BUGS, StructureError, const_error, decode_error, frames_error, internal_error, lit_error,
    packed_diagnose,
)
from harness.protocols.errors import FieldError
from harness.protocols.layout import default_of, fixed_frames, optional_fields, repeated_fields
from harness.protocols.message import Message, new_message
from harness.protocols.table import (
    Const, Element, Field, Lit, Message as MessageSpec, Opt, Packed, Rep, Table, Until, When, fields_of,
)
from harness.protocols.types import PackedType, Raw, Str, UInt

Decoder = Callable[[Sequence[bytes]], Message]
Encoder = Callable[[dict[str, Any]], list[bytes]]


def compile_message(table: Table, msg: MessageSpec) -> tuple[Decoder, Encoder, str]:
    """The compiled decoder and encoder of one message of ``table``, and their source."""
    ns: dict[str, Any] = {
        "FieldError": FieldError, "_M": Message, "_new": new_message,
        "_derr": partial(decode_error, table), "_internal": partial(internal_error, table),
        "_CODEC_BUGS": CODEC_BUGS,
        "_frames_error": frames_error, "_const_error": const_error, "_lit_error": lit_error,
        "_packed_diagnose": packed_diagnose, "_StructureError": StructureError,
        "_struct_error": struct.error,
    }
    comp = MessageCompiler(table, msg, ns)
    source = comp.decoder_source() + "\n" + comp.encoder_source()
    code = compile(source, f"<{table.protocol}:{table.dialect}:{msg.name}>", "exec")
    exec(code, ns)  # noqa: S102 - source generated from the table, not from input
    return ns["dec"], ns["enc"], source


class _Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 0

    def add(self, line: str) -> None:
        self.lines.append("    " * self.level + line)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class MessageCompiler:
    """Generates the source of the decode and encode functions of one message; constants the
    source refers to are put in ``ns``, the namespace it will be executed in."""

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
        static = fixed_frames(layout)
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
        g.add("except _CODEC_BUGS as e:")
        g.add(f"    raise _internal({self.msg.name!r}, e) from e")
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
        static = fixed_frames(layout)
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
