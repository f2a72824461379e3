"""wire-conformance on DCP: a plain run catches the shipped wire-format mutants (each on the
clause it breaks, with evidence naming the sender) and passes the reference in both dialects."""

from __future__ import annotations

import pytest

from reference_nodes.dcp import mutants
from tests.checkers.wire_helpers import broken, explore_file, run, wire

BASIC = explore_file("dcp")


@pytest.mark.parametrize("dialect", ["strict", "dcp:dagbox"])
def test_reference_nodes_conform_in_each_dialect(dialect: str) -> None:
    (v,) = wire(run(BASIC, dialect=dialect))
    assert v.ok and v.clause == "dcp.wire.grammar" and "all conform" in v.detail


def test_a_broker_with_the_wrong_version_breaks_the_version_clause() -> None:
    bad = broken(run(BASIC, broker=mutants.MUTANTS["wrong-version"][1]))
    v = bad["dcp.wire.version"]
    assert list(bad) == ["dcp.wire.version"]
    first = v.evidence[0]
    assert first["node"] == "broker" and first["message"] and first["frames"] and "must be 1, got 2" in first["error"]


@pytest.mark.parametrize("role,mutant", [("broker", "pong-payload"), ("worker", "ping-payload")])
def test_a_heartbeat_with_a_payload_breaks_header_only(role: str, mutant: str) -> None:
    bad = broken(run(BASIC, **{role: mutants.MUTANTS[mutant][1]}))
    assert "dcp.heartbeat.header-only" in bad
    assert all(e["node"].startswith(role) for e in bad["dcp.heartbeat.header-only"].evidence)


def test_only_the_sender_is_judged() -> None:
    """A client that sends the wrong version is blamed; the broker that reads its requests
    (and must survive them) is not."""
    bad = broken(run(BASIC, client=mutants.MUTANTS["client-wrong-version"][1]))
    assert {e["node"].split(".")[0] for v in bad.values() for e in v.evidence} == {"clients"}
