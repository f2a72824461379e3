"""The shipped exploration scenarios hold on the reference nodes as written (one seed here, two more in
tests/test_determinism.py without verdicts; 100 in
the slow suite); that they hold under the schedules explore draws is the bench's and the slow
every-mutant test's business."""

from __future__ import annotations

import glob

import pytest

from harness.scenario import load_scenario
from tests.sweeps import sweep

EXPLORE = sorted(glob.glob("scenarios/*/explore/*.yaml"))


@pytest.mark.parametrize("path", EXPLORE)
def test_exploration_scenario_passes_a_few_seeds(path: str) -> None:
    sweep(path, [1])


@pytest.mark.slow
@pytest.mark.parametrize("path", EXPLORE)
def test_exploration_scenario_passes_100_seeds(path: str) -> None:
    sweep(path, load_scenario(path).seeds[:1] + list(range(2, 101)))
