"""The ``corrupt`` rule effect in simulation: the matched message arrives damaged (malformed for
the codec), the trace says what was done, the same seed gives the same bytes, and every
crash-on-malformed mutant of every protocol fails ``no-node-errors`` where the reference nodes
pass (they discard what does not decode)."""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.composition import run_sim
from harness.protocols import PROTOCOLS
from harness.registry import package
from harness.scenario import Scenario, parse_scenario, with_mutants
from harness.trace import read_trace

CORRUPT_TO = "1-3"  # the first three messages towards the role's nodes arrive damaged


def scenario_with(protocol: str, rule: dict[str, Any]) -> Scenario:
    """The protocol's exploration scenario as written, with one more rule."""
    path = f"scenarios/{protocol}/explore/basic.yaml"
    with open(path) as f:
        raw = yaml.safe_load(f)
    raw.pop("explore", None)
    raw.setdefault("faults", []).append({"rule": rule})
    return parse_scenario(yaml.safe_dump(raw, sort_keys=False), path)


def nodes_of(scenario: Scenario, role: str) -> str:
    """A glob naming the nodes of the first group of ``role`` (a rule's ``to``)."""
    names = [g.name if g.count is None else f"{g.name}.*" for g in scenario.groups.values() if g.role == role]
    return names[0]


def crash_mutants() -> list[tuple[str, str, str]]:
    out = []
    for protocol in PROTOCOLS:
        mutants = importlib.import_module(f"reference_nodes.{protocol}.mutants")
        for name in sorted(getattr(mutants, "CRASHES", ())):
            out.append((protocol, name, package(protocol).mutants[name][0]))
    return out


CRASH_MUTANTS = crash_mutants()


def test_every_protocol_but_dafka_ships_crash_mutants() -> None:
    assert {p for p, _, _ in CRASH_MUTANTS} == {"dcp", "eventbus", "pppp", "raft"}


@pytest.mark.parametrize("protocol,name,role", CRASH_MUTANTS)
def test_a_crash_on_malformed_mutant_fails_where_the_reference_passes(protocol: str, name: str, role: str) -> None:
    base = scenario_with(protocol, {"to": "*", "corrupt": True})  # only to learn the groups
    scenario = scenario_with(protocol, {"to": nodes_of(base, role), "corrupt": True, "nth": CORRUPT_TO})
    reference = run_sim(scenario, 1)
    assert not reference.failed, [(v.check, v.detail) for v in reference.failed]
    mutant = run_sim(with_mutants(scenario, {role: name}), 1)
    assert "no-node-errors" in {v.check for v in mutant.failed}


def test_the_trace_shows_the_damage_and_the_damaged_bytes(tmp_path: Path) -> None:
    scenario = scenario_with("dcp", {"message": "REQUEST", "to": "broker", "corrupt": "truncate", "nth": 2})
    result = run_sim(scenario, 3, str(tmp_path))
    assert not result.failed
    trace = read_trace(result.trace_path).to_pylist()
    rows = [r for r in trace if r["fault"] == "corrupt:rule-0"]
    fault, recv = [r for r in rows if r["kind"] == "fault"], [r for r in rows if r["kind"] == "recv"]
    assert len(fault) == 1 and fault[0]["detail"].startswith("frame ") and "truncated" in fault[0]["detail"]
    assert len(recv) == 1 and recv[0]["node"] == "broker" and recv[0]["msg_id"] == fault[0]["msg_id"]
    sent = [r for r in trace if r["kind"] == "send" and r["msg_id"] == fault[0]["msg_id"]]
    assert sent and sent[0]["frames"] != recv[0]["frames"]  # the send row keeps the bytes as sent
    discards = [r for r in trace if r["kind"] == "discard" and r["node"] == "broker"]
    assert discards, "the reference broker discards the damaged REQUEST"


def test_same_seed_same_bytes_with_corrupt_rules(tmp_path: Path) -> None:
    scenario = scenario_with("pppp", {"corrupt": "3%"})
    digests = []
    for run in ("a", "b", "c"):
        result = run_sim(scenario, 5 if run != "c" else 6, str(tmp_path / run))
        assert result.trace_path
        digests.append(hashlib.sha256(Path(result.trace_path).read_bytes()).hexdigest())
        details = [r["detail"] for r in read_trace(result.trace_path).to_pylist()
                   if r["fault"] == "corrupt:rule-0" and r["kind"] == "fault"]
        assert details
    assert digests[0] == digests[1] != digests[2]
