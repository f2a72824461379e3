"""The shipped DCP scenarios hold on the reference nodes: a handful of seeds in the normal
suite, the full 200 in the slow suite (ZMQ_HARNESS_SLOW=1 ./scripts/test, or -m slow)."""

from __future__ import annotations

import glob

import pytest

from harness.composition import run_sim
from harness.scenario import load_scenario

DCP = sorted(glob.glob("scenarios/dcp/*.yaml"))


def _sweep(path: str, seeds: list[int]) -> None:
    scenario = load_scenario(path)
    failures = []
    for seed in seeds:
        r = run_sim(scenario, seed)
        if not r.ok:
            failures.append((seed, [f"{v.check}: {v.detail}" for v in r.failed]))
    assert not failures, f"{path}: failing seeds (replay with zmq-harness run {path} --seed N): {failures[:3]}"


@pytest.mark.parametrize("path", DCP)
def test_scenario_passes_a_few_seeds(path: str) -> None:
    _sweep(path, list(range(1, 11)))


@pytest.mark.slow
@pytest.mark.parametrize("path", DCP)
def test_scenario_passes_200_seeds(path: str) -> None:
    _sweep(path, load_scenario(path).seeds[:200])


def test_faults_really_happen() -> None:
    """The fault scenarios are not vacuous: their faults show in the statistics and checks."""
    lossy = run_sim(load_scenario("scenarios/dcp/lossy.yaml"), 1)
    assert sum(lossy.stats["dropped"].values()) > 20
    part = run_sim(load_scenario("scenarios/dcp/partition-heal.yaml"), 1)
    assert part.stats["dropped"].get("partition", 0) > 20
    crash = run_sim(load_scenario("scenarios/dcp/worker-crash.yaml"), 1)
    expiry = [v for v in crash.verdicts if v.check == "worker-expiry"][0]
    assert expiry.ok and expiry.detail.startswith("1 dead worker")
