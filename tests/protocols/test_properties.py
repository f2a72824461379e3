"""Properties every wire table must have, for every protocol, dialect and message:

* round trip: decode(encode(fields)) gives back exactly the message;
* robustness: arbitrary and mutated frames decode to a message or raise DecodeError — never
  another exception, never a codec-internal error;
* every clause id a table names exists in the protocol's catalogue.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.protocols import PROTOCOLS, DecodeError, codec, catalogue, tables
from harness.protocols.strategies import frames_of, message_fields, mutated
from harness.protocols.table import Const, Lit, Opt, Packed, When

def _available(protocol: str) -> bool:
    try:
        tables(protocol)
        return True
    except ModuleNotFoundError:
        return False


CASES = [
    (p, d, m.name)
    for p in PROTOCOLS
    if _available(p)
    for d, t in tables(p).items()
    for m in t.messages
]
TABLE_IDS = [(p, d) for p in PROTOCOLS if _available(p) for d in tables(p)]
# 186 property tests: 30 examples each by default (about a minute in all), 300 in the slow run
# (ZMQ_HARNESS_SLOW=1), where the long search belongs.
EXAMPLES = 300 if os.environ.get("ZMQ_HARNESS_SLOW") else 30
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("protocol,dialect,name", CASES)
@SETTINGS
@given(data=st.data())
def test_round_trip(protocol: str, dialect: str, name: str, data: st.DataObject) -> None:
    table = tables(protocol)[dialect]
    c = codec(protocol, dialect)
    fields = data.draw(message_fields(table, table.message(name)))
    frames = c.encode(name, fields)
    assert all(type(f) is bytes for f in frames)
    channel_free = c.decode(frames, as_=name)
    assert channel_free.name == name
    assert c.decoder(name)(frames) == channel_free  # the compiled function gives the same message
    assert channel_free.fields == c.complete(name, fields)
    # Re-encoding the decoded message gives the same bytes.
    assert c.encode(name, channel_free.fields) == frames
    # Identification without naming the message: either the right message, or (for messages
    # that only context tells apart) an ambiguity error; never a different message silently.
    try:
        found = c.decode(frames, channel=(table.message(name).channels or (None,))[0])
        assert found.name == name or found.fields == channel_free.fields
    except DecodeError as e:
        assert not e.internal
        assert "cannot tell" in e.reason or "ambiguous" in e.reason, e


def _assert_only_decode_error(c, frames) -> None:
    try:
        c.decode(frames)
    except DecodeError as e:
        assert not e.internal, f"codec bug on {frames!r}: {e}"
        assert e.protocol == c.protocol and e.clause and e.reason
        str(e)


@pytest.mark.parametrize("protocol,dialect", TABLE_IDS)
@SETTINGS
@given(frames=st.lists(st.binary(max_size=24), max_size=10))
def test_arbitrary_frames_never_crash(protocol: str, dialect: str, frames: list[bytes]) -> None:
    _assert_only_decode_error(codec(protocol, dialect), frames)


@pytest.mark.parametrize("protocol,dialect,name", CASES)
@SETTINGS
@given(data=st.data())
def test_mutated_frames_never_crash(protocol: str, dialect: str, name: str, data: st.DataObject) -> None:
    table = tables(protocol)[dialect]
    c = codec(protocol, dialect)
    frames = data.draw(frames_of(table, table.message(name)))
    bad = data.draw(mutated(frames))
    _assert_only_decode_error(c, bad)
    for as_ in (name, None):
        try:
            c.decode(bad, as_=as_)
        except DecodeError as e:
            assert not e.internal, e


def _clauses_named(table) -> set[str]:
    out = {table.grammar_clause}
    out.update(fd.clause for fd in table.fields.values() if fd.clause)
    def walk(layout):
        for el in layout:
            if isinstance(el, Const) and el.clause:
                out.add(el.clause)
            elif isinstance(el, Packed):
                out.update(p.clause for p in el.parts if isinstance(p, Lit) and p.clause)
            elif isinstance(el, (Opt, When)):
                walk(el.items)
    for m in table.messages:
        if m.clause:
            out.add(m.clause)
        walk(m.layout)
    return out


@pytest.mark.parametrize("protocol,dialect", TABLE_IDS)
def test_every_named_clause_exists(protocol: str, dialect: str) -> None:
    cat = catalogue(protocol)
    missing = sorted(c for c in _clauses_named(tables(protocol)[dialect]) if c not in cat)
    assert not missing, f"{protocol} table names clauses missing from the catalogue: {missing}"
