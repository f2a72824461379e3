"""The shipped DCP scenarios hold on the reference nodes: a handful of seeds in the normal
suite, the full 200 in the slow suite (ZMQ_HARNESS_SLOW=1 ./scripts/test, or -m slow)."""

from __future__ import annotations

import glob

import pytest

from harness.composition import run_sim
from harness.scenario import load_scenario
from tests.sweeps import sweep

DCP = sorted(glob.glob("scenarios/dcp/*.yaml"))


@pytest.mark.parametrize("path", DCP)
def test_scenario_passes_a_few_seeds(path: str) -> None:
    sweep(path, list(range(1, 11)))


@pytest.mark.slow
@pytest.mark.parametrize("path", DCP)
def test_scenario_passes_200_seeds(path: str) -> None:
    sweep(path, load_scenario(path).seeds[:200])


def test_faults_really_happen() -> None:
    """The fault scenarios are not vacuous: their faults show in the statistics and checks."""
    lossy = run_sim(load_scenario("scenarios/dcp/lossy.yaml"), 1)
    assert sum(lossy.stats["dropped"].values()) > 20
    part = run_sim(load_scenario("scenarios/dcp/partition-heal.yaml"), 1)
    # what the cut clients send is lost on the cut links, or, queued while the new connection a
    # silence made waits for the heal, when they connect anew after the next silence
    dropped = part.stats["dropped"]
    assert dropped.get("partition", 0) > 10 and dropped.get("partition", 0) + dropped.get("disconnect", 0) > 100
    crash = run_sim(load_scenario("scenarios/dcp/worker-crash.yaml"), 1)
    expiry = [v for v in crash.verdicts if v.check == "worker-expiry"][0]
    assert expiry.ok and expiry.detail.startswith("1 dead worker")


def test_two_workload_items_on_the_same_clients_give_distinct_request_ids() -> None:
    # Operations are numbered per node across workload items: ids made from the number must not
    # repeat (they did, and the reference client refused the second 'clients.0-0').
    from harness.composition import workload_streams

    scenario = load_scenario("scenarios/dcp/explore/services.yaml")
    ids = [cmd["id"] for stream in workload_streams(scenario, 1) for _, node, cmd in stream if node == "clients.0"]
    assert len(ids) > 10 and len(ids) == len(set(ids))
    result = run_sim(scenario, 1)
    assert result.ok, [v.detail for v in result.failed]
