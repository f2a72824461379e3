"""The shipped Dafka chaos scenarios hold on the reference nodes: a few seeds in the normal
suite, 500 in the slow suite (ZMQ_HARNESS_SLOW=1 ./scripts/test, or -m slow)."""

from __future__ import annotations

import glob

import pytest

from harness.scenario import load_scenario
from tests.sweeps import sweep

DAFKA = sorted(glob.glob("scenarios/dafka/chaos/*.yaml"))


def test_the_issue_scenarios_ship() -> None:
    names = {p.rsplit("/", 1)[1] for p in DAFKA}
    assert {"clean.yaml", "lossy.yaml", "producer-dies.yaml", "store-restart.yaml", "partition-heal.yaml",
            "two-stores-two-towers.yaml", "multi-producer.yaml"} <= names


@pytest.mark.parametrize("path", DAFKA)
def test_scenario_passes_a_few_seeds(path: str) -> None:
    sweep(path, list(range(1, 6)))


@pytest.mark.slow
@pytest.mark.parametrize("path", DAFKA)
def test_scenario_passes_500_seeds(path: str) -> None:
    sweep(path, load_scenario(path).seeds[:500])
