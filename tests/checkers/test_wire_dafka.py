"""wire-conformance on Dafka: a plain run catches the shipped wire-format mutants of the
producer and passes the reference in both dialects (the tower's forwarded subscriptions on its
XSUB are no protocol messages and are not judged)."""

from __future__ import annotations

import pytest

from reference_nodes.dafka.mutants import MUTANTS
from tests.checkers.wire_helpers import broken, explore_file, run, wire

BASIC = explore_file("dafka")


@pytest.mark.parametrize("dialect", ["strict", "dafka:zproto"])
def test_reference_nodes_conform_in_each_dialect(dialect: str) -> None:
    (v,) = wire(run(BASIC, dialect=dialect))
    assert v.ok and v.clause == "dafka.wire.grammar"


@pytest.mark.parametrize("mutant,clause", [("wrong-signature", "dafka.wire.signature"),
                                           ("wrong-version", "dafka.wire.version"),
                                           ("split-content", "dafka.wire.single-frame-content")])
def test_a_producer_with_a_wire_format_fault_breaks_its_clause(mutant: str, clause: str) -> None:
    bad = broken(run(BASIC, producer=MUTANTS[mutant][1]))
    assert clause in bad, {c: v.detail for c, v in bad.items()}
    assert {e["node"] for v in bad.values() for e in v.evidence} == {"producer"}


def test_damaged_messages_on_the_way_make_no_sender_malformed() -> None:
    """Corruption happens between the sockets: the probe sees what each node handed its
    socket, and the tower discards a damaged BEACON instead of passing it on."""
    corrupt = BASIC.replace("explore:", "faults:\n  - rule: {to: tower, corrupt: 20%}\nexplore:")
    (v,) = wire(run(corrupt))
    assert v.ok, v.detail
