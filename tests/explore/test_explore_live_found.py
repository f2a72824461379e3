"""A live failure that explore cannot make happen again on replay keeps its evidence: the run
that failed keeps its trace, and the explanation and the diagram show that run. Before, a live
run's trace was deleted as soon as it ended, and when none of the replays failed the explanation
named the property but held no verdict, no evidence and a diagram of a passing replay (explore
--live, search seed 91, eventbus/explore/restarts.yaml)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.explore.candidate import Runner, from_scenario
from harness.explore.driver import ExploreReport, _found_run
from harness.explore.shrink import ShrinkResult
from harness.scenario import parse_scenario

FAILS = """
protocol: dcp
name: dcp-no-pong
duration: 1500ms
nodes:
  broker: {role: broker, config: {heartbeat: 100ms, liveness: 3}, mutant: no-pong}
  workers: {role: worker, count: 1, config: {service: echo, behaviour: echo}}
check: [heartbeat-answers]
"""


@pytest.mark.live
@pytest.mark.timeout(60)
def test_the_failed_live_run_keeps_its_trace_for_the_explanation(tmp_path: Path) -> None:
    scenario = parse_scenario(FAILS, "no-pong.yaml")
    runner = Runner(scenario, {}, "live")
    cand = from_scenario(scenario, 1)
    outcome = runner.evaluate(cand)
    assert outcome.failed and outcome.result is not None and outcome.result.trace_path
    [scratch] = runner.kept
    assert outcome.result.trace_path.startswith(scratch) and os.path.exists(outcome.result.trace_path)

    report = ExploreReport("no-pong.yaml", "live")
    report.shrunk = ShrinkResult(cand, outcome, [], 1, 0.0, True)
    found = _found_run(report, outcome.failed[0], str(tmp_path), runner.kept)
    assert found is not None and found.result is not None and found.result.trace_path
    assert found.result.trace_path.startswith(str(tmp_path / "trace" / "found"))
    assert os.path.exists(found.result.trace_path)
    assert any(not v.ok and v.check == "heartbeat-answers" for v in found.result.verdicts)
    assert "failed during the search" in report.notes[-1]

    runner.discard_kept()
    assert not os.path.exists(scratch) and runner.kept == []


@pytest.mark.live
@pytest.mark.timeout(60)
def test_a_passing_live_run_keeps_nothing() -> None:
    scenario = parse_scenario(FAILS.replace(", mutant: no-pong", ""), "pongs.yaml")
    runner = Runner(scenario, {}, "live")
    assert not runner.evaluate(from_scenario(scenario, 1)).failed
    assert runner.kept == []
