"""The latency model and the network bookkeeping."""

from __future__ import annotations

import random

import pytest

from fault_injection.rules import Distribution
from harness.sim import DEFAULT_LATENCY, LatencyModel
from harness.sim.network import Network
from harness.sim.slots import NodeSlot


def _samples(spec, n: int = 2000) -> list[int]:  # type: ignore[no-untyped-def]
    dist = Distribution.parse(spec)
    rng = random.Random(1)
    return [dist.sample(rng) for _ in range(n)]


def test_distributions_give_non_negative_ints_in_range() -> None:
    assert set(_samples(("fixed", 5))) == {5}
    u = _samples(("uniform", 200_000, 800_000))
    assert all(isinstance(x, int) and 200_000 <= x < 800_000 for x in u)
    assert 450_000 < sum(u) / len(u) < 550_000
    n = _samples(("normal", 100, 200))
    assert min(n) == 0 and all(isinstance(x, int) for x in n)  # clipped at 0
    e = _samples(("exponential", 1_000, 500))
    assert min(e) >= 500 and 1_300 < sum(e) / len(e) < 1_700


def test_latency_model_resolution_order() -> None:
    model = LatencyModel(("fixed", 1), links={
        ("a", "b"): ("fixed", 2),
        ("b", "a"): ("fixed", 3),
        ("c", "d"): ("fixed", 4),
        ("x*", "*"): ("fixed", 5),
    })
    assert model.resolve("a", "b").params == (2,)
    assert model.resolve("b", "a").params == (3,)  # its own entry
    assert model.resolve("d", "c").params == (4,)  # reverse of a one-sided entry
    assert model.resolve("x1", "q").params == (5,) and model.resolve("q", "x1").params == (5,)
    assert model.resolve("p", "q").params == (1,)
    assert LatencyModel().default == Distribution.parse(DEFAULT_LATENCY)


def test_each_link_has_its_own_seeded_generator() -> None:
    def draws(traffic_on_other_link: bool) -> list[int]:
        net = Network(9, LatencyModel())
        if traffic_on_other_link:
            other = net.link("c", "d")
            for _ in range(10):
                other.sample(other.rng)
        link = net.link("a", "b")
        return [link.sample(link.rng) for _ in range(5)]

    assert draws(False) == draws(True)


def test_slow_link_override_updates_existing_links_in_place() -> None:
    net = Network(1, LatencyModel(("fixed", 1)))
    link = net.link("a", "b")
    lid = net.slow("a", "*", ("fixed", 100))
    assert link.sample(link.rng) == 100 and net.link("b", "a").sample(link.rng) == 1
    net.restore(lid)
    assert link.sample(link.rng) == 1


def test_partition_argument_errors() -> None:
    net = Network(1, LatencyModel())
    with pytest.raises(ValueError, match="at least two groups"):
        net.partition([["a"]], one_way=False)
    with pytest.raises(ValueError, match="exactly two groups"):
        net.partition([["a"], ["b"], ["c"]], one_way=True)


def test_clock_conversion_round_trips() -> None:
    slot = NodeSlot("n", lambda ctx: None, "r", {}, "reference", 0)  # type: ignore[arg-type, return-value]
    for offset, drift in ((0, 0.0), (5_000, 0.0), (-7_000, 0.25), (123, -0.5), (0, 1e-6)):
        slot.offset, slot.drift, slot.skewed = offset, drift, True
        for target in (0, 1, 999_999, 10**12 + 7):
            v = slot.runtime_time(target)
            assert slot.node_time(v) >= target and slot.node_time(v - 1) < target
