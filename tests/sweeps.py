"""Running a shipped scenario over many seeds, for the scenario tests of every protocol."""

from __future__ import annotations

from harness.composition import run_sim
from harness.scenario import load_scenario


def sweep(path: str, seeds: list[int]) -> None:
    """Every seed holds; a failure lists the first failing seeds and how to replay one."""
    scenario = load_scenario(path)
    failures = []
    for seed in seeds:
        r = run_sim(scenario, seed)
        if not r.ok:
            failures.append((seed, [f"{v.check}: {v.detail}" for v in r.failed]))
    assert not failures, f"{path}: failing seeds (replay with zmq-harness run {path} --seed N): {failures[:3]}"
