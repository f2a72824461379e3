"""The shipped Raft chaos scenarios hold on the reference nodes: two seeds each in the normal
suite, 1,000 in the slow suite (ZMQ_HARNESS_SLOW=1 ./scripts/test, or -m slow)."""

from __future__ import annotations

import glob

import pytest

from harness.composition import run_sim
from harness.scenario import load_scenario
from tests.sweeps import sweep

RAFT = sorted(glob.glob("scenarios/raft/chaos/*.yaml"))


def test_the_scenarios_are_shipped() -> None:
    names = {p.rsplit("/", 1)[1] for p in RAFT}
    assert {"leader-crash.yaml", "rolling-restarts.yaml", "partitions.yaml", "one-way.yaml", "lossy.yaml",
            "clock-pauses.yaml", "snapshot-install.yaml", "five-peers-everything.yaml"} <= names


@pytest.mark.parametrize("path", RAFT)
def test_scenario_passes_a_few_seeds(path: str) -> None:
    sweep(path, [1, 2])


@pytest.mark.slow
@pytest.mark.timeout(4 * 3600)
@pytest.mark.parametrize("path", RAFT)
def test_scenario_passes_1000_seeds(path: str) -> None:
    sweep(path, load_scenario(path).seeds[:1000])


def test_faults_really_happen() -> None:
    """The scenarios are not vacuous: leaders change, messages are lost, snapshots are installed."""
    crash = run_sim(load_scenario("scenarios/raft/chaos/leader-crash.yaml"), 2)
    elections = next(v for v in crash.verdicts if v.check == "election-safety")
    assert elections.ok and int(elections.detail.split()[0]) >= 2
    lossy = run_sim(load_scenario("scenarios/raft/chaos/lossy.yaml"), 1)
    assert sum(lossy.stats["dropped"].values()) > 30
    part = run_sim(load_scenario("scenarios/raft/chaos/partitions.yaml"), 1)
    assert part.stats["dropped"].get("partition", 0) > 50
