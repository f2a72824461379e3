"""The shipped PPPP chaos scenarios hold on the reference nodes: a few seeds in the normal suite,
500 in the slow suite (ZMQ_HARNESS_SLOW=1 ./scripts/test, or -m slow); one also over real
sockets."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest

from harness.composition import run_live
from harness.scenario import load_scenario
from tests.sweeps import sweep

PPPP = sorted(glob.glob("scenarios/pppp/chaos/*.yaml"))
# Fifty subscribers take about a second a seed: fewer of them in the normal suite.
SEEDS = {"scenarios/pppp/chaos/fifty-subscribers.yaml": [1]}


def test_the_issue_scenarios_ship() -> None:
    names = {p.rsplit("/", 1)[1] for p in PPPP}
    assert {"lossy.yaml", "subscriber-restart.yaml", "late-join.yaml", "publisher-restart.yaml",
            "partition-heal.yaml", "fifty-subscribers.yaml", "restart-live.yaml"} <= names
    assert load_scenario("scenarios/pppp/chaos/fifty-subscribers.yaml").groups["subs"].count == 50


@pytest.mark.parametrize("path", PPPP)
def test_scenario_passes_a_few_seeds(path: str) -> None:
    sweep(path, SEEDS.get(path, [1, 2, 3]))


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("path", PPPP)
def test_scenario_passes_500_seeds(path: str) -> None:
    sweep(path, load_scenario(path).seeds[:500])


@pytest.mark.live
@pytest.mark.timeout(120)
def test_the_restart_scenario_passes_live(tmp_path: Path) -> None:
    r = run_live(load_scenario("scenarios/pppp/chaos/restart-live.yaml"), 1, str(tmp_path))
    assert r.ok, [v.to_dict() for v in r.failed]
    once = next(v for v in r.verdicts if v.check == "exactly-once")
    assert int(once.detail.split()[0]) > 200  # deliveries, over real sockets
    incarnations = next(v for v in r.verdicts if v.check == "subscribe-first")
    assert incarnations.detail.startswith("5 subscriber incarnation")  # subs.0 came back
