"""Field types for wire tables.

Two kinds:

* `PackedType`: a value inside a frame, next to others (fixed-width numbers, length-prefixed
  strings, string lists, NUL-terminated strings, the rest of a frame). It has
  ``unpack(buf, pos) -> (value, pos)`` and ``pack(value) -> bytes``; fixed-width numbers also
  expose a ``struct`` format so the code generator can inline them.
* `FrameType`: a value that is a whole ZeroMQ frame (raw bytes, text, the variable-length
  ``uint`` of ZMQ Raft, MessagePack, timestamps, UUIDs, ...). It has ``decode(frame)`` and
  ``encode(value)``. Every PackedType can also stand alone as a whole frame.

Types raise `FieldError` for bad input, never anything else. ``strategy()`` returns a
hypothesis strategy of valid values (used by the property tests; hypothesis is imported lazily).
"""

from __future__ import annotations

import re
import struct
from typing import Any, Callable

import msgpack

from harness.protocols.errors import FieldError


class FrameType:
    """A value that occupies one whole frame."""

    name = "frame"
    default: Any = b""
    # Expressions the code generator may inline instead of a method call ("{b}" = the frame,
    # "{v}" = the value). None means: call decode/encode.
    inline_decode: str | None = None
    inline_encode: str | None = None

    def decode(self, b: bytes) -> Any:
        raise NotImplementedError

    def encode(self, v: Any) -> bytes:
        raise NotImplementedError

    def describe(self) -> str:
        return self.name

    def strategy(self) -> Any:
        raise NotImplementedError

    def show(self, v: Any) -> Any:
        """A JSON-friendly rendering of a value for evidence and the CLI."""
        return _show(v)


class PackedType(FrameType):
    """A value inside a frame. ``size`` is the fixed width in bytes, or None if variable."""

    size: int | None = None
    fmt: str | None = None  # struct format of a fixed-width number, e.g. ">Q"

    def unpack(self, b: bytes, p: int) -> tuple[Any, int]:
        raise NotImplementedError

    def pack(self, v: Any) -> bytes:
        raise NotImplementedError

    def decode(self, b: bytes) -> Any:
        v, p = self.unpack(b, 0)
        if p != len(b):
            raise FieldError(f"{len(b) - p} unexpected trailing byte(s) after {self.describe()}")
        return v

    def encode(self, v: Any) -> bytes:
        return self.pack(v)


def _show(v: Any) -> Any:
    if isinstance(v, bytes):
        try:
            text = v.decode("ascii")
            if text.isprintable():
                return text
        except UnicodeDecodeError:
            pass
        return "0x" + v.hex()
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if isinstance(v, (list, tuple)):
        return [_show(x) for x in v]
    if isinstance(v, dict):
        return {str(_show(k)): _show(x) for k, x in v.items()}
    if hasattr(v, "to_dict"):
        return _show(v.to_dict())
    return v


# ---- numbers ------------------------------------------------------------------------------


class UInt(PackedType):
    """Unsigned integer of 1, 2, 4 or 8 bytes in a fixed byte order."""

    default = 0

    def __init__(self, size: int, order: str = "big") -> None:
        if size not in (1, 2, 4, 8) or order not in ("big", "little"):
            raise ValueError("UInt size must be 1/2/4/8 and order big/little")
        self.size = size
        self.order = order
        self.fmt = (">" if order == "big" else "<") + {1: "B", 2: "H", 4: "I", 8: "Q"}[size]
        self._st = struct.Struct(self.fmt)
        self.name = f"uint{size * 8}" + ("" if size == 1 else ("be" if order == "big" else "le"))

    def unpack(self, b: bytes, p: int) -> tuple[int, int]:
        if p + self.size > len(b):
            raise FieldError(f"needs {self.size} byte(s), only {max(len(b) - p, 0)} left")
        return self._st.unpack_from(b, p)[0], p + self.size

    def pack(self, v: Any) -> bytes:
        if type(v) is bool or not isinstance(v, int) or not 0 <= v < (1 << (8 * self.size)):
            raise FieldError(f"{v!r} is not an unsigned {self.size * 8}-bit integer")
        return self._st.pack(v)

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        return st.integers(0, (1 << (8 * self.size)) - 1)


class VarUInt(FrameType):
    """ZMQ Raft ``uint``: least significant byte first, 1..max_bytes bytes, whole frame.

    Encoders write the fewest bytes (0 is one 0x00 byte). ``empty_is_none`` gives the
    zmq-raft 0.7 ``nuint``: an empty frame means null.
    """

    default = 0

    def __init__(self, max_bytes: int = 8, min_bytes: int = 1, empty_is_none: bool = False) -> None:
        self.max_bytes = max_bytes
        self.min_bytes = min_bytes
        self.empty_is_none = empty_is_none
        self.name = "nuint" if empty_is_none else ("uint" if max_bytes == 8 else f"uint(1-{max_bytes})")
        if empty_is_none:
            self.default = None

    def decode(self, b: bytes) -> int | None:
        n = len(b)
        if n == 0 and self.empty_is_none:
            return None
        if n < self.min_bytes or n > self.max_bytes:
            raise FieldError(f"{self.name} must be {self.min_bytes}-{self.max_bytes} bytes, got {n}")
        return int.from_bytes(b, "little")

    def encode(self, v: Any) -> bytes:
        if v is None and self.empty_is_none:
            return b""
        if type(v) is bool or not isinstance(v, int) or v < 0:
            raise FieldError(f"{v!r} is not an unsigned integer")
        n = max((v.bit_length() + 7) // 8, 1, self.min_bytes)
        if n > self.max_bytes:
            raise FieldError(f"{v} does not fit in {self.max_bytes} bytes")
        return v.to_bytes(n, "little")

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        s = st.integers(0, (1 << (8 * self.max_bytes)) - 1)
        return st.none() | s if self.empty_is_none else s


class Bool(FrameType):
    """ZMQ Raft ``bool``: true = at least one byte and the first is not 0; false otherwise.
    Encoded as 0x01 / an empty frame."""

    name = "bool"
    default = False

    def decode(self, b: bytes) -> bool:
        return len(b) > 0 and b[0] != 0

    def encode(self, v: Any) -> bytes:
        if not isinstance(v, bool):
            raise FieldError(f"{v!r} is not a boolean")
        return b"\x01" if v else b""

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        return st.booleans()


# ---- bytes and text -----------------------------------------------------------------------


class Raw(FrameType):
    """A frame of raw bytes."""

    name = "bytes"
    inline_decode = "{b}"
    inline_encode = "{v}"

    def __init__(self, non_empty: bool = False, size: int | None = None) -> None:
        self.non_empty = non_empty
        self.fixed = size
        if size is not None:
            self.name = f"bytes[{size}]"
            self.default = bytes(size)
            self.inline_decode = None
            self.inline_encode = None
        elif non_empty:
            self.name = "bytes(non-empty)"
            self.default = b"\x00"
            self.inline_decode = None
            self.inline_encode = None

    def decode(self, b: bytes) -> bytes:
        if self.fixed is not None and len(b) != self.fixed:
            raise FieldError(f"must be exactly {self.fixed} bytes, got {len(b)}")
        if self.non_empty and not b:
            raise FieldError("must not be empty")
        return bytes(b)

    def encode(self, v: Any) -> bytes:
        if not isinstance(v, (bytes, bytearray, memoryview)):
            raise FieldError(f"{type(v).__name__} is not bytes")
        return self.decode(bytes(v))

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        if self.fixed is not None:
            return st.binary(min_size=self.fixed, max_size=self.fixed)
        return st.binary(min_size=1 if self.non_empty else 0, max_size=64)


def _text_decode(b: bytes, any_bytes: bool) -> str:
    if any_bytes:
        return b.decode("utf-8", "surrogateescape")
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FieldError(f"not valid UTF-8 at byte {e.start}") from None


def _text_encode(v: Any, any_bytes: bool) -> bytes:
    if not isinstance(v, str):
        raise FieldError(f"{type(v).__name__} is not a string")
    try:
        return v.encode("utf-8", "surrogateescape" if any_bytes else "strict")
    except UnicodeEncodeError as e:
        raise FieldError(f"cannot be encoded as UTF-8 at character {e.start}") from None


def _text_strategy(any_bytes: bool, min_size: int = 0, max_size: int = 40) -> Any:
    from hypothesis import strategies as st

    if any_bytes:
        return st.binary(min_size=min_size, max_size=max_size).map(
            lambda b: b.decode("utf-8", "surrogateescape")
        )
    return st.text(min_size=min_size, max_size=max_size).filter(
        lambda s: len(s.encode("utf-8", "surrogatepass")) <= max_size * 4
        and not any(0xD800 <= ord(c) <= 0xDFFF for c in s)
    )


class Text(FrameType):
    """A whole frame of UTF-8 text. ``any_bytes`` keeps arbitrary bytes losslessly (decoded
    with surrogateescape) for fields whose document allows any byte."""

    default = ""

    def __init__(self, any_bytes: bool = False, non_empty: bool = False) -> None:
        self.any_bytes = any_bytes
        self.non_empty = non_empty
        self.name = "string" + ("(any bytes)" if any_bytes else "") + ("(non-empty)" if non_empty else "")
        if any_bytes and not non_empty:
            self.inline_decode = '{b}.decode("utf-8", "surrogateescape")'
            self.inline_encode = '{v}.encode("utf-8", "surrogateescape")'
        if non_empty:
            self.default = "x"

    def decode(self, b: bytes) -> str:
        if self.non_empty and not b:
            raise FieldError("must not be empty")
        return _text_decode(b, self.any_bytes)

    def encode(self, v: Any) -> bytes:
        b = _text_encode(v, self.any_bytes)
        if self.non_empty and not b:
            raise FieldError("must not be empty")
        return b

    def strategy(self) -> Any:
        return _text_strategy(self.any_bytes, 1 if self.non_empty else 0)


class Str(PackedType):
    """Length-prefixed string inside a frame (prefix of 1, 2 or 4 bytes)."""

    default = ""

    def __init__(self, prefix: int = 1, order: str = "big", any_bytes: bool = True) -> None:
        self.prefix = UInt(prefix, order)
        self.any_bytes = any_bytes
        self.max_len = (1 << (8 * prefix)) - 1
        self.name = f"string{prefix * 8}" if prefix != 1 else "string"
        if prefix == 4:
            self.name = "longstr"

    def unpack(self, b: bytes, p: int) -> tuple[str, int]:
        n, p = self.prefix.unpack(b, p)
        if p + n > len(b):
            raise FieldError(f"length prefix says {n} byte(s), only {len(b) - p} left")
        return _text_decode(b[p : p + n], self.any_bytes), p + n

    def pack(self, v: Any) -> bytes:
        raw = _text_encode(v, self.any_bytes)
        if len(raw) > self.max_len:
            raise FieldError(f"{len(raw)} bytes do not fit a {self.prefix.size}-byte length")
        return self.prefix.pack(len(raw)) + raw

    def strategy(self) -> Any:
        return _text_strategy(self.any_bytes, 0, min(self.max_len, 40))


class StrList(PackedType):
    """A count (``count`` bytes) followed by that many length-prefixed strings."""

    default: Any = ()

    def __init__(self, count: int = 4, item: Str | None = None, order: str = "big") -> None:
        self.count = UInt(count, order)
        self.item = item or Str(4, order)
        self.name = "strings"
        self.default = []

    def unpack(self, b: bytes, p: int) -> tuple[list[str], int]:
        n, p = self.count.unpack(b, p)
        # Each item needs at least its length prefix: refuse absurd counts before looping.
        if n * self.item.prefix.size > len(b) - p:
            raise FieldError(f"count says {n} string(s), but only {len(b) - p} byte(s) left")
        out = []
        for _ in range(n):
            v, p = self.item.unpack(b, p)
            out.append(v)
        return out, p

    def pack(self, v: Any) -> bytes:
        if not isinstance(v, (list, tuple)):
            raise FieldError(f"{type(v).__name__} is not a list of strings")
        return self.count.pack(len(v)) + b"".join(self.item.pack(x) for x in v)

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        return st.lists(self.item.strategy(), max_size=5)


class CStr(PackedType):
    """NUL-terminated string inside a frame (the zproto topic)."""

    name = "cstring"
    default = ""

    def __init__(self, any_bytes: bool = True) -> None:
        self.any_bytes = any_bytes

    def unpack(self, b: bytes, p: int) -> tuple[str, int]:
        end = b.find(b"\x00", p)
        if end < 0:
            raise FieldError("no NUL terminator")
        return _text_decode(b[p:end], self.any_bytes), end + 1

    def pack(self, v: Any) -> bytes:
        raw = _text_encode(v, self.any_bytes)
        if b"\x00" in raw:
            raise FieldError("must not contain a NUL byte")
        return raw + b"\x00"

    def strategy(self) -> Any:
        return _text_strategy(self.any_bytes).filter(lambda s: "\x00" not in s)


class Rest(PackedType):
    """The rest of the frame (must be the last part of a packed frame)."""

    default = ""

    def __init__(self, text: bool = True, any_bytes: bool = True) -> None:
        self.text = text
        self.any_bytes = any_bytes
        self.name = "rest-of-frame" + (" text" if text else " bytes")
        if not text:
            self.default = b""

    def unpack(self, b: bytes, p: int) -> tuple[Any, int]:
        raw = b[p:]
        return (_text_decode(raw, self.any_bytes) if self.text else bytes(raw)), len(b)

    def pack(self, v: Any) -> bytes:
        if self.text:
            return _text_encode(v, self.any_bytes)
        if not isinstance(v, (bytes, bytearray)):
            raise FieldError(f"{type(v).__name__} is not bytes")
        return bytes(v)

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        return _text_strategy(self.any_bytes) if self.text else st.binary(max_size=40)


# ---- structured values --------------------------------------------------------------------


class MsgPack(FrameType):
    """A whole frame holding one MessagePack value (ZMQ Raft's ``json``, Event BUS data)."""

    name = "msgpack"
    default = None

    def decode(self, b: bytes) -> Any:
        if not b:
            raise FieldError("empty frame is not a MessagePack value")
        try:
            # Limits bounded by the frame size: a hostile length prefix cannot make it allocate.
            n = len(b)
            return msgpack.unpackb(
                b, raw=False, strict_map_key=False, use_list=True,
                max_str_len=n, max_bin_len=n, max_array_len=n, max_map_len=n, max_ext_len=n,
            )
        except msgpack.ExtraData:
            raise FieldError("trailing bytes after the MessagePack value") from None
        except (ValueError, TypeError, msgpack.UnpackException, RecursionError) as e:
            raise FieldError(f"not a valid MessagePack value ({type(e).__name__})") from None

    def encode(self, v: Any) -> bytes:
        try:
            return msgpack.packb(v, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as e:
            raise FieldError(f"cannot be MessagePack-encoded: {e}") from None

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        scalars = (
            st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
            | st.floats(allow_nan=False) | _text_strategy(False) | st.binary(max_size=20)
        )
        return st.recursive(
            scalars,
            lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text_strategy(False, 0, 8), inner, max_size=4),
            max_leaves=10,
        )


_ISO8601 = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?$"
)


class Timestamp(FrameType):
    """ISO-8601 date-time as text (``2017-06-30T11:12:13.123Z``); kept as the exact string."""

    name = "iso8601"
    default = "1970-01-01T00:00:00.000Z"

    def decode(self, b: bytes) -> str:
        s = _text_decode(b, False)
        self._check(s)
        return s

    def encode(self, v: Any) -> bytes:
        if not isinstance(v, str):
            raise FieldError(f"{type(v).__name__} is not an ISO-8601 string")
        self._check(v)
        return v.encode("ascii")

    @staticmethod
    def _check(s: str) -> None:
        m = _ISO8601.match(s)
        if not m:
            raise FieldError(f"{s[:40]!r} is not an ISO-8601 date-time")
        mo, d, h, mi = int(s[5:7]), int(s[8:10]), int(s[11:13]), int(s[14:16])
        if not (1 <= mo <= 12 and 1 <= d <= 31 and h <= 23 and mi <= 59):
            raise FieldError(f"{s[:40]!r} has an out-of-range date or time")

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        return st.datetimes().map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z")


_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class UUIDText(FrameType):
    """An RFC 4122 UUID as text, 8-4-4-4-12 hex digits; ``version=4`` also checks the
    version nibble and the variant bits."""

    default = "00000000-0000-4000-8000-000000000000"

    def __init__(self, version: int | None = 4) -> None:
        self.version = version
        self.name = f"uuid-v{version}" if version else "uuid"

    def decode(self, b: bytes) -> str:
        s = _text_decode(b, False)
        self._check(s)
        return s

    def encode(self, v: Any) -> bytes:
        if not isinstance(v, str):
            raise FieldError(f"{type(v).__name__} is not a UUID string")
        self._check(v)
        return v.encode("ascii")

    def _check(self, s: str) -> None:
        if not _UUID.match(s):
            raise FieldError(f"{s[:40]!r} is not a UUID (8-4-4-4-12 hex digits)")
        if self.version is not None:
            if int(s[14], 16) != self.version:
                raise FieldError(f"{s!r} is not a version-{self.version} UUID")
            if s[19].lower() not in "89ab":
                raise FieldError(f"{s!r} does not have the RFC 4122 variant")

    def strategy(self) -> Any:

        from hypothesis import strategies as st

        return st.uuids(version=self.version).map(str) if self.version else st.uuids().map(str)

    @staticmethod
    def from_rng(rng: Any) -> str:
        """A v4 UUID drawn from an injected random.Random (nodes must not use uuid4())."""
        import uuid

        return str(uuid.UUID(int=rng.getrandbits(128), version=4))


class Decimal(FrameType):
    """An unsigned integer as ASCII decimal text; ``null_word`` (e.g. "null") means None."""

    default = 0

    def __init__(self, null_word: str | None = None, max_value: int = (1 << 64) - 1) -> None:
        self.null_word = null_word
        self.max_value = max_value
        self.name = "decimal" + (f" or {null_word}" if null_word else "")

    def decode(self, b: bytes) -> int | None:
        if self.null_word is not None and b == self.null_word.encode():
            return None
        if not b or len(b) > 20 or not b.isdigit():
            raise FieldError(f"{bytes(b[:24])!r} is not an unsigned decimal number")
        if len(b) > 1 and b[0:1] == b"0":
            raise FieldError(f"{bytes(b)!r} has a leading zero")
        v = int(b)
        if v > self.max_value:
            raise FieldError(f"{v} is larger than {self.max_value}")
        return v

    def encode(self, v: Any) -> bytes:
        if v is None and self.null_word is not None:
            return self.null_word.encode()
        if type(v) is bool or not isinstance(v, int) or not 0 <= v <= self.max_value:
            raise FieldError(f"{v!r} is not an unsigned integer up to {self.max_value}")
        return str(v).encode("ascii")

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        s = st.integers(0, self.max_value)
        return st.none() | s if self.null_word is not None else s


class Joined(FrameType):
    """A list of strings joined by a separator in one text frame; "" is the empty list."""

    default: Any = ()

    def __init__(self, sep: str, item_pattern: str | None = None, pattern_doc: str = "",
                 item_strategy: Callable[[], Any] | None = None) -> None:
        self.sep = sep
        self.item_re = re.compile(item_pattern) if item_pattern else None
        # hypothesis's from_regex is correct but slow (a second per hundred lists); a table can
        # give a builder of the same items (checked against the pattern when drawn)
        self.item_strategy = item_strategy
        self.pattern_doc = pattern_doc
        self.name = f"list joined by {sep!r}"
        self.default = []

    def decode(self, b: bytes) -> list[str]:
        s = _text_decode(b, False)
        if s == "":
            return []
        items = s.split(self.sep)
        for it in items:
            self._check(it)
        return items

    def encode(self, v: Any) -> bytes:
        if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
            raise FieldError(f"{v!r} is not a list of strings")
        for it in v:
            if self.sep in it:
                raise FieldError(f"item {it!r} contains the separator {self.sep!r}")
            self._check(it)
        return self.sep.join(v).encode("utf-8")

    def _check(self, it: str) -> None:
        if self.item_re is not None and not self.item_re.match(it):
            raise FieldError(f"item {it[:40]!r} is not {self.pattern_doc or self.item_re.pattern}")
        if self.item_re is None and it == "":
            raise FieldError("empty item")

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        if self.item_strategy is not None:
            item = self.item_strategy().filter(lambda s: self._matches(s))
        else:
            item = st.from_regex(self.item_re, fullmatch=True) if self.item_re else st.text(
                st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=10
            )
        return st.lists(item.filter(lambda s: self.sep not in s), max_size=4)

    def _matches(self, it: str) -> bool:
        return self.item_re is None or self.item_re.match(it) is not None
