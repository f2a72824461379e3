"""wire-conformance on PPPP: a plain run catches the shipped wire-format mutants of publisher
and subscriber and passes the reference."""

from __future__ import annotations

import pytest

from reference_nodes.pppp.mutants import MUTANTS
from tests.checkers.wire_helpers import broken, explore_file, run, wire

BASIC = explore_file("pppp")


def test_reference_nodes_conform() -> None:
    (v,) = wire(run(BASIC))
    assert v.ok and v.clause == "pppp.wire.grammar"


@pytest.mark.parametrize("role,mutant,sender", [("publisher", "short-sequence", "publisher"),
                                                ("subscriber", "subscriber-short-sequence", "subs.")])
def test_a_short_sequence_breaks_the_sequence_format(role: str, mutant: str, sender: str) -> None:
    bad = broken(run(BASIC, **{role: MUTANTS[mutant][1]}))
    v = bad["pppp.wire.sequence-format"]
    assert list(bad) == ["pppp.wire.sequence-format"]
    assert v.evidence[0]["node"].startswith(sender) and "needs 8 byte(s)" in v.evidence[0]["error"]


def test_a_single_number_nack_breaks_the_range_format() -> None:
    """NACKs only follow a loss: the run drops a tenth of the PUBLISHes."""
    lossy = BASIC.replace("explore:", "faults:\n  - rule: {message: PUBLISH, drop: 10%}\nexplore:")
    assert wire(run(lossy))[0].ok
    bad = broken(run(lossy, subscriber=MUTANTS["single-number-nack"][1]))
    assert "pppp.wire.nack-range-format" in bad
