"""Event BUS — micro-toolkit's Clone-pattern protocol (../shared/specs/eventbus.md), wire table.

Frames are given as the application hands them to its socket. The ROUTER identity that the
bus's snapshot and collector sockets prepend is the transport's envelope and not part of a
message ("This extra frame is not shown in the commands").

=============  =====================================================  ============
message        frames                                                 channel
=============  =====================================================  ============
SYNCSTART      "SYNCSTART", subtrees, sequence                        snapshot
SYNC           "SYNC", topic, sequence, producer, timestamp, uuid,    snapshot
               data
SYNCEND        "SYNCEND", subtrees, sequence                          snapshot
BROADCAST      topic, sequence, producer, timestamp, uuid, data       publisher
PUB            topic, sequence, producer, timestamp, uuid, data       collector
=============  =====================================================  ============

BROADCAST and PUB have the same frames and no command frame (frame 0 is the event topic), so
only the socket tells them apart: decode with ``channel="publisher"`` / ``"collector"`` or
``as_=``; without either the codec reports the ambiguity.

Strict (the document with docs/errata.md): SYNCSTART has three frames although the
text says two (E-EVENTBUS-01). A sequence is 8 bytes big-endian; in SYNCSTART 0 means "no
filter" (E-EVENTBUS-02). The subtree specification is an empty frame (all topics) or subtrees
joined by ';', each a slash and one or more segments each followed by a slash ('/topic/',
'/a/b/'); empty items are malformed (E-EVENTBUS-05). A segment holds no '/', ';' and, here,
no ',' either: E-EVENTBUS-05 allows ',' in a segment, but then '/a/,/b/' would be one valid
strict subtree and the deployed bus's ',' separator could not be reported as the conformance
finding that E-EVENTBUS-05 itself announces. Strings are UTF-8; the timestamp is the RFC 3339
profile of ISO-8601 (seconds and zone required), the UUID version-4 text, the data exactly one
MessagePack value (E-EVENTBUS-14).

Dialect ``eventbus:micro-toolkit`` (INTEROP.md; the Node.js implementation): sequences are
ASCII decimal strings and a publisher without a sequence sends ``null`` (decoded as None);
subtrees are separated by ',' and are plain topic prefixes (the client sends its handler keys,
e.g. '/examples'), so an item is any non-empty text without ','. SYNCSTART has three frames and
SYNCEND carries the bus's latest sequence: the same layouts as strict.
"""

from __future__ import annotations

import re
from typing import Any

from harness.protocols.errors import FieldError
from harness.protocols.table import Const, Field, Message, Packed, Table
from harness.protocols.types import Decimal, Joined, MsgPack, Text, Timestamp, UInt, UUIDText

PROTOCOL = "eventbus"
DIALECT = "eventbus:micro-toolkit"

GRAMMAR = "eventbus.wire.grammar"
SEQUENCE = "eventbus.wire.sequence-format"
SUBTREE = "eventbus.wire.subtree-format"

SUBTREE_ITEM = r"/(?:[^/;,]+/)+\Z"  # a slash, then segments each ending in a slash


# ---- field types --------------------------------------------------------------------------
# Local versions of types.py types (reported to the lead; move them there, then delete these):
# * Timestamp accepts forms E-EVENTBUS-14 rules out (no seconds, no zone, "+0100"), matches
#   with ``$`` (a trailing "\n" passes) and ``\d`` (non-ASCII digits pass), and its strategy()
#   writes years below 1000 without zero padding ("5-01-01T..."), which it then rejects.
# * UUIDText matches with ``$``: a trailing "\n" passes.


# Field ranges are in the pattern; only the day of the month needs a look at the calendar.
_RFC3339 = re.compile(
    r"([0-9]{4})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)"
    r"(?:\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
)
_MONTH_DAYS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


class IsoTimestamp(Timestamp):
    """ISO-8601 extended date and time with seconds and a zone designator: the RFC 3339 profile
    (``2017-05-04T10:20:30.123Z``, ``2017-05-04T12:20:30+02:00``); fraction optional, up to 9
    digits; second 60 allowed (leap second); the exact string is kept (E-EVENTBUS-14)."""

    name = "rfc3339"

    def decode(self, b: bytes) -> str:
        try:
            s = b.decode("ascii")
        except UnicodeDecodeError:
            raise FieldError(f"{bytes(b[:40])!r} is not an ISO-8601 date-time (non-ASCII bytes)") from None
        self._check(s)
        return s

    def _check(self, s: str) -> None:  # type: ignore[override]
        m = _RFC3339.fullmatch(s)
        if m is None:
            raise FieldError(f"{s[:40]!r} is not an ISO-8601 date-time with seconds and zone (RFC 3339)")
        y, mo, d = m.groups()
        d = int(d)
        if d > 28:
            mo = int(mo)
            y = int(y)
            if d > _MONTH_DAYS[mo] or (mo == 2 and d == 29 and not (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0))):
                raise FieldError(f"{s[:40]!r} has no such day")

    def strategy(self) -> Any:
        from hypothesis import strategies as st

        zones = st.sampled_from(["Z", "+00:00", "+02:00", "-05:30", "+23:59"])
        fracs = st.sampled_from(["", ".1", ".123", ".123456", ".123456789"])
        return st.builds(
            lambda d, f, z: f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:"
            f"{d.second:02d}{f}{z}",
            st.datetimes(), fracs, zones,
        )


_UUID_V4 = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-4[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}")


class UUIDv4Text(UUIDText):
    """`UUIDText` (version 4) that rejects a trailing newline; one regex on the valid path."""

    def __init__(self) -> None:
        super().__init__(4)

    def _check(self, s: str) -> None:
        if _UUID_V4.fullmatch(s) is None:
            super()._check(s)  # names what is wrong (format, version or variant) ...
            raise FieldError(f"{s[:40]!r} is not a UUID (8-4-4-4-12 hex digits)")  # ... or a trailing "\n"


def _subtree_strategy() -> Any:
    """Subtrees as SUBTREE_ITEM describes them, built directly (from_regex is ten times slower)."""
    from hypothesis import strategies as st

    segment = st.text(st.characters(blacklist_characters="/;,", blacklist_categories=("Cs",)), min_size=1, max_size=6)
    return st.lists(segment, min_size=1, max_size=3).map(lambda segs: "/" + "".join(s + "/" for s in segs))


# ---- the table ----------------------------------------------------------------------------

FIELDS = {
    "subtrees": Field(
        Joined(";", SUBTREE_ITEM, "a subtree '/segment/.../' (slash, segments each ending in a slash)",
               item_strategy=lambda: _subtree_strategy()),
        clause=SUBTREE,
        doc="subtree specification: [] (empty frame) for everything, else subtrees joined by ';'",
    ),
    "sequence": Field(
        UInt(8), clause=SEQUENCE,
        doc="sequence number, 8 bytes big-endian; in SYNCSTART the filter (0 = no filter), in "
            "SYNCEND the highest SYNC sequence sent, or the server's latest without SYNCs (E-EVENTBUS-08)",
    ),
    "topic": Field(Text(), clause=GRAMMAR, doc="event topic (UTF-8)"),
    "producer": Field(Text(), clause=GRAMMAR, doc="event producer unique id (UTF-8)"),
    "timestamp": Field(IsoTimestamp(), clause="eventbus.wire.timestamp-iso8601",
                       doc="event producer timestamp, ISO-8601 (RFC 3339 profile) text, kept as the exact string"),
    "uuid": Field(UUIDv4Text(), clause="eventbus.wire.uuid-v4", doc="event UUID, RFC 4122 version 4, as text"),
    "data": Field(MsgPack(), clause="eventbus.wire.data-msgpack",
                  doc="event data: exactly one MessagePack value, no trailing bytes, never empty (E-EVENTBUS-14)"),
}


def _messages(seq: Any) -> tuple[Message, ...]:
    """``seq`` is the sequence element: ``Packed("sequence")`` (fixed-width fast path) or
    ``"sequence"`` (a whole-frame type, the dialect's decimal text)."""

    def cmd(name: bytes) -> Const:
        return Const(name, "command", GRAMMAR)

    event = ("topic", seq, "producer", "timestamp", "uuid", "data")
    return (
        Message("SYNCSTART", (cmd(b"SYNCSTART"), "subtrees", seq), channels=("snapshot",),
                clause="eventbus.wire.syncstart-frames",
                doc="client -> bus: request a snapshot of the subtrees, events above the sequence"),
        Message("SYNC", (cmd(b"SYNC"),) + event, channels=("snapshot",), clause=GRAMMAR,
                doc="bus -> client: one event of the snapshot"),
        Message("SYNCEND", (cmd(b"SYNCEND"), "subtrees", seq), channels=("snapshot",), clause=GRAMMAR,
                doc="bus -> client: end of the snapshot"),
        Message("BROADCAST", event, channels=("publisher",), clause=GRAMMAR,
                doc="bus -> subscribers (PUB socket): an event; frame 0 is the topic"),
        Message("PUB", event, channels=("collector",), clause=GRAMMAR,
                doc="client -> bus (collector): a new event; frame 0 is the topic"),
    )


STRICT = Table(PROTOCOL, "strict", FIELDS, _messages(Packed("sequence")), grammar_clause=GRAMMAR,
               doc="eventbus.md with docs/errata.md")

MICRO_TOOLKIT = STRICT.derive(
    DIALECT,
    fields={
        "sequence": Field(
            Decimal(null_word="null"), clause=SEQUENCE,
            doc="sequence number as ASCII decimal text; 'null' (None) from a publisher without one",
        ),
        "subtrees": Field(
            Joined(","), clause=SUBTREE,
            doc="subtree prefixes joined by ',' (any non-empty text without ','); empty frame = everything",
        ),
    },
    messages=_messages("sequence"),
    notes=(
        "sequence numbers are ASCII decimal strings; a publisher without a sequence sends 'null'",
        "subtrees are separated by ',' and are plain topic prefixes (no slash format)",
        "SYNCEND carries the bus's latest sequence, not the highest SYNC sent (same frames)",
        "SYNCSTART has exactly three frames (as in strict)",
        "the bus decodes and re-encodes event data and timestamp: compare values, not bytes",
        "the snapshot socket answers only DEALERs with a printable identity (transport, not codec)",
        "no heartbeats",
    ),
)

TABLES = {"strict": STRICT, DIALECT: MICRO_TOOLKIT}
