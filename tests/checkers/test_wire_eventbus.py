"""wire-conformance on the Event BUS: a plain run catches the shipped wire-format mutants of
server and client on the clause each breaks and passes the reference in both dialects."""

from __future__ import annotations

import pytest

from reference_nodes.eventbus.mutants import MUTANTS
from tests.checkers.wire_helpers import broken, explore_file, run, wire

BASIC = explore_file("eventbus")
# the same, 1.5 s long: a server mutant that breaks every message makes the clients resync often
SHORT = BASIC.replace("duration: 5500ms", "duration: 1500ms").replace("until: 3s", "until: 1s").replace(
    "start: 3s", "start: 1s")


@pytest.mark.parametrize("dialect", ["strict", "eventbus:micro-toolkit"])
def test_reference_nodes_conform_in_each_dialect(dialect: str) -> None:
    (v,) = wire(run(BASIC, dialect=dialect))
    assert v.ok and v.clause == "eventbus.wire.grammar"


@pytest.mark.parametrize("role,mutant,clause", [
    ("server", "server-no-zone", "eventbus.wire.timestamp-iso8601"),
    ("server", "trailing-data", "eventbus.wire.data-msgpack"),
    # a client's PUB travels on a DEALER that also carries SYNCSTART: the error of the channel
    # that identified the message (collector) is the one reported, not "unknown SYNCSTART"
    ("client", "client-uuid-v1", "eventbus.wire.uuid-v4"),
    ("client", "raw-data", "eventbus.wire.data-msgpack"),
    ("client", "two-frame-syncstart", "eventbus.wire.syncstart-frames"),
])
def test_a_wire_format_mutant_breaks_its_clause(role: str, mutant: str, clause: str) -> None:
    assert MUTANTS[mutant][2] == clause
    bad = broken(run(SHORT, **{role: MUTANTS[mutant][1]}))
    assert list(bad) == [clause], {c: v.detail for c, v in bad.items()}
    assert bad[clause].evidence[0]["node"].startswith("bus" if role == "server" else ("clients", "late"))


@pytest.mark.parametrize("dialect", ["strict", "eventbus:micro-toolkit"])
def test_each_dialect_is_judged_by_its_own_sequence_format(dialect: str) -> None:
    """The mutant writes its sequences in the other dialect's form (ASCII decimal in strict,
    8 bytes in micro-toolkit): wrong in either run, and a strict run says where it is right."""
    bad = broken(run(SHORT, dialect=dialect, server=MUTANTS["server-sequence-format"][1]))
    error = bad["eventbus.wire.sequence-format"].evidence[0]["error"]
    assert ("valid only in dialect eventbus:micro-toolkit" in error) == (dialect == "strict"), error
