"""Fault targets (harness/targets.py): checked when a scenario loads, resolved when the fault
fires — nodes, groups, roles, globs, any, random and the protocol's own (DCP: broker)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from harness.composition import run_sim
from harness.registry import package
from harness.scenario import ScenarioError, parse_scenario
from harness.targets import Targets

GROUPS = {"broker": ["broker"], "workers": ["workers.0", "workers.1", "workers.2"], "clients": ["clients.0"]}
ROLES = {"broker": "broker", "workers.0": "worker", "workers.1": "worker", "workers.2": "worker",
         "clients.0": "client"}


class View:
    """A hand-made run in progress."""

    def __init__(self, down: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.down = down

    def node_names(self) -> list[str]:
        return list(ROLES)

    def role_of(self, name: str) -> str:
        return ROLES[name]

    def is_running(self, name: str) -> bool:
        return name not in self.down

    def last_note(self, name: str, kind: str) -> dict[str, Any] | None:
        return None


def targets() -> Targets:
    return Targets(GROUPS, ROLES, package("dcp"))


@pytest.mark.parametrize("expr, nodes", [
    ("workers.1", ["workers.1"]),
    ("workers", ["workers.0", "workers.1", "workers.2"]),
    ("worker", ["workers.0", "workers.1", "workers.2"]),
    ("workers.[02]", ["workers.0", "workers.2"]),
    ("any", ["broker"]),
    ("any:workers", ["workers.1"]),  # the first that is running
    ("broker", ["broker"]),
])
def test_static_and_first_running_targets(expr: str, nodes: list[str]) -> None:
    t = targets()
    t.check(expr)
    assert t.resolver(View(down={"workers.0"}), random.Random(1))(expr) == nodes


def test_random_draws_a_running_node_from_the_run_seed() -> None:
    t = targets()
    draws = {n for seed in range(20) for n in t.resolver(View(down={"workers.2"}), random.Random(seed))("random:worker")}
    assert draws == {"workers.0", "workers.1"}  # never the one that is down
    same = t.resolver(View(), random.Random(7))
    again = t.resolver(View(), random.Random(7))
    assert [same("random") for _ in range(5)] == [again("random") for _ in range(5)]


def test_nothing_running_resolves_to_nothing() -> None:
    assert targets().resolver(View(down=set(ROLES)), random.Random(1))("any:workers") == []


@pytest.mark.parametrize("expr, message", [
    ("workerz", "no node, group, role or dcp target named 'workerz'; did you mean 'worker'"),
    ("any:clientz", "no node, group or role named 'clientz'"),
    ("peers.*", "no node, group, role or dcp target named 'peers.*'"),
])
def test_unknown_targets_are_refused_with_a_hint(expr: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        targets().check(expr)


SCENARIO = """\
protocol: dcp
name: targets
duration: 3s
nodes:
  broker: {role: broker, config: {heartbeat: 200ms}}
  workers: {role: worker, count: 3, config: {service: echo}}
  clients: {role: client, count: 2, config: {timeout: 500ms, max_attempts: 10}}
workload:
  - {nodes: clients, op: request, rate: 5/s, until: 2s}
faults:
  - {at: 1s, crash: FAULT, restart_after: 500ms}
check: [exactly-once]
"""


def crashed(result: Any) -> list[str]:
    from harness.trace import read_trace

    return [r["node"] for r in read_trace(result.trace_path).to_pylist() if r["kind"] == "crash"]


def test_a_random_crash_in_a_scenario_is_the_same_for_a_seed_and_varies_across_seeds(tmp_path: Any) -> None:
    s = parse_scenario(SCENARIO.replace("FAULT", "random:workers"))
    first = [crashed(run_sim(s, seed, str(tmp_path / f"{seed}"))) for seed in range(1, 7)]
    again = [crashed(run_sim(s, seed, str(tmp_path / f"again-{seed}"))) for seed in range(1, 7)]
    assert first == again and all(len(c) == 1 and c[0].startswith("workers.") for c in first)
    assert len({c[0] for c in first}) > 1


def test_the_protocol_target_names_the_running_broker(tmp_path: Any) -> None:
    r = run_sim(parse_scenario(SCENARIO.replace("FAULT", "broker")), 1, str(tmp_path))
    assert crashed(r) == ["broker"] and r.ok


def test_a_bad_target_in_a_file_names_the_line_and_field() -> None:
    with pytest.raises(ScenarioError, match=r"<string>:11: faults\[0\]\.crash: no node, group, role or dcp target named "
                                            r"'leader'"):
        parse_scenario(SCENARIO.replace("FAULT", "leader"))
