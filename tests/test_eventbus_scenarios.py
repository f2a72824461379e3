"""The shipped Event BUS chaos scenarios hold on the reference nodes: a few seeds in the normal
suite, 500 in the slow suite (ZMQ_HARNESS_SLOW=1 ./scripts/test, or -m slow)."""

from __future__ import annotations

import glob

import pytest

from harness.scenario import load_scenario
from tests.sweeps import sweep

EVENTBUS = sorted(glob.glob("scenarios/eventbus/chaos/*.yaml"))
FEW = {"hundred-clients": [1, 2]}  # the big one costs a second a seed


def stem(path: str) -> str:
    return path.rsplit("/", 1)[1].removesuffix(".yaml")


def test_the_issue_scenarios_ship() -> None:
    assert {"lossy", "client-crash-late-join", "server-restart", "failover", "partition-heal",
            "hundred-clients"} <= {stem(p) for p in EVENTBUS}


@pytest.mark.parametrize("path", EVENTBUS, ids=stem)
def test_scenario_passes_a_few_seeds(path: str) -> None:
    sweep(path, FEW.get(stem(path), [1, 2, 3, 4]))


@pytest.mark.slow
@pytest.mark.parametrize("path", EVENTBUS, ids=stem)
def test_scenario_passes_500_seeds(path: str) -> None:
    sweep(path, load_scenario(path).seeds[:500])
