"""What the user reads: faults in words, the explanation, and the space-time diagram drawn from a
real trace (every message an arrow, lost ones crossed, crashes marked, evidence ringed)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from harness.checkers.base import Verdict
from harness.composition import run_sim
from harness.explore.candidate import Property
from harness.explore.diagram import lamport_svg, write_page
from harness.explore.explain import describe_fault, explain
from harness.scenario import parse_scenario

SVG = "{http://www.w3.org/2000/svg}"

RUN = """\
protocol: dcp
name: diagram
duration: 1500ms
nodes:
  broker: {role: broker, config: {heartbeat: 250ms, liveness: 3}}
  workers: {role: worker, count: 2, config: {service: echo}}
  clients: {role: client, config: {timeout: 300ms, max_attempts: 10}}
workload:
  - {nodes: clients, op: request, rate: 10/s, limit: 3}
faults:
  - rule: {message: REPLY, drop: 30%}
  - {at: 500ms, crash: workers.0, restart_after: 300ms}
  - {from: 200ms, until: 400ms, partition: [[workers.1], [rest]]}
  - {from: 900ms, until: 1000ms, pause: broker}
"""


def test_each_fault_kind_in_words() -> None:
    assert describe_fault({"at": "1s", "crash": "workers.0", "restart_after": "200ms"}) == \
        "at 1s: crash workers.0, restarted 200ms later"
    assert describe_fault({"from": "1s", "until": "2s", "pause": "broker"}) == "from 1s to 2s: pause broker"
    assert describe_fault({"from": "1s", "until": "2s", "partition": [["broker"], ["rest"]], "one_way": True}) == \
        "from 1s to 2s: one-way partition (first side cannot reach the second) [broker] | [rest]"
    assert describe_fault({"from": "1s", "until": "2s", "slow_link": ["a", "b"], "latency": "fixed(5ms)"}) == \
        "from 1s to 2s: slow link a <-> b, latency fixed(5ms)"
    assert describe_fault({"at": "0s", "clock_skew": "broker", "offset": "-5ms"}) == "at 0s: clock of broker off by -5ms"
    assert describe_fault({"rule": {"message": "REPLY", "to": "clients.0", "drop": True, "probability": "5%"}}) == \
        "all run long: drop 5% of the REPLY messages to clients.0"
    assert describe_fault({"rule": {"message": "PING", "delay": "fixed(20ms)"}}) == \
        "all run long: delay (fixed(20ms)) 100% of the PING messages"


def test_the_explanation_names_the_property_its_clause_the_faults_and_the_evidence() -> None:
    verdict = Verdict("exactly-once", "dcp.client.retry", False, "1 problem(s): request c-1 was answered 2 times",
                      [{"time_ms": 12.5, "node": "clients.0", "kind": "deliver", "message": "reply",
                        "data": {"id": "c-1"}}])
    ex = explain(protocol="dcp", scenario_file="out/x.yaml", source="in.yaml",
                 prop=Property("exactly-once", "dcp.client.retry"), verdict=verdict, seed=4,
                 faults=[{"at": "1s", "crash": "broker", "restart_after": "500ms"}],
                 mutants={"clients": ("duplicate-delivery", "dcp.client.track-by-metadata")},
                 topology=["broker", "workers.0", "clients.0"], duration_ns=2_000_000_000,
                 replay="zmq-harness run out/x.yaml --seed 4", history=["faults: 3 -> 1"], found_by="found")
    text = ex.to_markdown()
    assert text.startswith("# exactly-once fails in 1 fault(s), seed 4\n")
    for part in ("clause `dcp.client.retry`", "SHOULD: \"Clients SHOULD keep track", "answered 2 times",
                 "`zmq-harness run out/x.yaml --seed 4`", "runs the mutant `duplicate-delivery`",
                 "at 1s: crash broker, restarted 500ms later", "12.5 ms clients.0 deliver reply", "faults: 3 -> 1"):
        assert part in text, part
    assert "<code>dcp.client.retry</code>" in ex.to_html() and "<h2>Faults</h2>" in ex.to_html()


def test_the_diagram_draws_messages_losses_faults_and_the_evidence(tmp_path: Path) -> None:
    scenario = parse_scenario(RUN, "diagram.yaml")
    result = run_sim(scenario, 1, str(tmp_path))
    assert result.trace_path is not None
    evidence = [{"time_ms": 500.0, "node": "workers.0", "kind": "crash"}]
    svg, note = lamport_svg(result.trace_path, scenario.node_names, {n: scenario.role_of(n) for n in scenario.node_names},
                            evidence, {"broker": "mutant: x"}, "fails: something")
    root = ET.fromstring(svg)  # well-formed SVG
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert texts[:2] == ["broker", "broker"] and "mutant: x" in texts
    arrows = [ln for ln in root.iter(f"{SVG}line") if ln.get("marker-end")]
    assert len(arrows) == result.stats["delivered"]  # one arrow per delivered message
    assert texts.count("\u2715") == sum(result.stats["dropped"].values())  # one cross per lost message
    assert "\u2716" in texts and "E1" in texts and "fails: something" in texts  # the crash, ringed as evidence
    assert any("partition" in t for t in texts) and any("heal" in t for t in texts)
    assert note.endswith(" messages") and not note.startswith("showing")
    page = tmp_path / "page.html"
    write_page(str(page), "title", "<h1>title</h1>", svg, note)
    assert page.read_text().count("<svg") == 1


def test_a_long_run_shows_the_messages_nearest_the_evidence(tmp_path: Path, monkeypatch) -> None:
    import harness.explore.diagram as diagram

    monkeypatch.setattr(diagram, "MAX_MESSAGES", 10)
    scenario = parse_scenario(RUN, "diagram.yaml")
    result = run_sim(scenario, 1, str(tmp_path))
    svg, note = lamport_svg(result.trace_path or "", scenario.node_names, {}, [
        {"time_ms": 500.0, "node": "workers.0", "kind": "crash"}])
    assert note.startswith("showing 10 of ") and ET.fromstring(svg) is not None
