"""Candidates: the file as written is one, its rendering is an ordinary scenario file that
means the same, and the differential runner keeps only failures the reference nodes do not
share."""

from __future__ import annotations

import pytest

from harness.composition import run_sim
from harness.explore.candidate import Candidate, Differential, Property, Runner, dump_yaml, fmt_duration, \
    from_scenario
from harness.scenario import load_scenario, parse_scenario


@pytest.mark.parametrize("path", ["scenarios/dcp/worker-crash.yaml", "scenarios/dcp/lossy.yaml",
                                  "scenarios/dafka/chaos/store-restart.yaml", "scenarios/dcp/explore/services.yaml"])
def test_the_file_as_written_renders_to_a_file_that_means_the_same(path: str) -> None:
    scenario = load_scenario(path)
    again = parse_scenario(Runner(scenario).render(from_scenario(scenario, 5)), "rendered.yaml")
    assert again.seeds == [5] and again.duration_ns == scenario.duration_ns
    assert again.node_names == scenario.node_names
    assert [(g.role, g.config, g.start_ns) for g in again.groups.values()] == [
        (g.role, g.config, g.start_ns) for g in scenario.groups.values()]
    assert again.faults == scenario.faults and again.rules.rules == scenario.rules.rules
    assert again.workload == scenario.workload and again.checks == scenario.checks
    assert again.latency == scenario.latency and "explore" not in again.raw


def test_rendering_writes_the_candidate_and_names_its_mutants() -> None:
    scenario = load_scenario("scenarios/dcp/explore/basic.yaml")
    cand = from_scenario(scenario, 3).with_(duration_ns=1_500_000_000, counts=(("workers", 1), ("clients", 2)),
                                            faults=({"at": "1s", "crash": "workers.0", "restart_after": "200ms"},),
                                            workload=({**scenario.raw["workload"][0], "until": "1s"},))
    text = Runner(scenario, {"broker": "no-queue"}).render(cand, "first line\nsecond line")
    assert text.startswith("# first line\n# second line\nprotocol: dcp\n")
    assert "  broker: {role: broker, config: {heartbeat: 100ms, liveness: 3}, mutant: no-queue}\n" in text
    assert "  - {at: 1s, crash: workers.0, restart_after: 200ms}\n" in text
    rendered = parse_scenario(text, "x.yaml")
    assert rendered.groups["broker"].mutant == "no-queue" and rendered.groups["broker"].implementation == "mutant:no-queue"
    assert rendered.node_names == ["broker", "workers.0", "clients.0", "clients.1"]
    plain = Runner(scenario, {"broker": "no-queue"}, reference_only=True).render(cand)
    assert "mutant" not in plain


def test_a_rule_reads_as_people_write_it() -> None:
    text = dump_yaml({"faults": [{"rule": {"message": "REPLY", "to": "clients.*", "drop": True, "probability": "5%"}}],
                      "check": ["exactly-once"]})
    assert text == "faults:\n  - rule: {message: REPLY, to: clients.*, drop: true, probability: 5%}\ncheck: [exactly-once]\n"


@pytest.mark.parametrize("ns,text", [(0, "0s"), (3_000_000_000, "3s"), (1_500_000_000, "1500ms"), (40_000, "40us"),
                                     (1234, "1234ns")])
def test_durations_are_written_with_their_unit(ns: int, text: str) -> None:
    assert fmt_duration(ns) == text


def test_a_run_reports_its_failed_properties_in_verdict_order_and_its_coverage() -> None:
    scenario = load_scenario("scenarios/dcp/explore/basic.yaml")
    runner = Runner(scenario, {"broker": "alters-metadata"}, coverage=True)
    cand = from_scenario(scenario, 1).with_(duration_ns=1_500_000_000, workload=(
        {**scenario.raw["workload"][0], "until": "500ms"},))
    outcome = runner.evaluate(cand)
    assert outcome.failed[:2] == (Property("exactly-once", "dcp.client.retry"),
                                  Property("metadata-unchanged", "dcp.worker.metadata-copied"))
    assert ("broker", "send", "REQUEST", 8) in outcome.features or any(
        f[:3] == ("broker", "send", "REQUEST") for f in outcome.features)
    assert runner.runs == 1 and runner.evaluate(cand) is outcome and runner.runs == 1  # remembered


def test_differential_keeps_a_failure_only_when_the_reference_passes_that_schedule() -> None:
    scenario = load_scenario("scenarios/dcp/explore/basic.yaml")
    # Every request and reply lost for the whole run: the reference fails exactly-once too.
    hopeless = from_scenario(scenario, 1).with_(faults=({"rule": {"message": "REQUEST", "drop": True}},))
    diff = Differential(Runner(scenario, {"clients": "duplicate-delivery"}))
    outcome = diff.evaluate(hopeless)
    assert Property("exactly-once", "dcp.client.retry") in outcome.reference_failed
    assert Property("exactly-once", "dcp.client.retry") not in outcome.failed
    assert diff.reference_failures == 1 and diff.runs == 2
    assert Differential(Runner(scenario)).reference is None  # no mutant: nothing to compare with


def test_an_invalid_candidate_never_runs() -> None:
    scenario = load_scenario("scenarios/dcp/explore/basic.yaml")
    runner = Runner(scenario)
    bad = from_scenario(scenario, 1).with_(counts=(("workers", 1), ("clients", 3)),
                                           faults=({"at": "1s", "crash": "workers.1", "restart_after": "100ms"},))
    outcome = runner.evaluate(bad)
    assert "workers.1" in outcome.invalid and not outcome.failed and runner.runs == 0


def test_the_same_candidate_runs_the_same_way() -> None:
    scenario = load_scenario("scenarios/dcp/explore/basic.yaml")
    cand: Candidate = from_scenario(scenario, 9)
    direct = run_sim(parse_scenario(Runner(scenario).render(cand), "x.yaml"), 9)
    assert Runner(scenario).evaluate(cand).result.verdicts == direct.verdicts  # type: ignore[union-attr]
