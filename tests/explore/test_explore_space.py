"""The exploration space: defaults taken from the scenario, the 'explore:' section read over
them, and a broken section named by file, line and field."""

from __future__ import annotations

import textwrap

import pytest

from harness.explore.space import DEFAULT_EFFECTS, DEFAULT_KINDS, space_of
from harness.scenario import ScenarioError, parse_scenario
from harness.yamlsrc import loads

BASE = """\
protocol: dcp
name: t
duration: 3s
nodes:
  broker: {role: broker, config: {heartbeat: 100ms}}
  workers: {role: worker, count: 2, config: {service: echo}}
  clients: {role: client, count: 3}
"""


def space(extra: str = ""):
    text = BASE + textwrap.dedent(extra)
    _, locs = loads(text, "x.yaml")
    return space_of(parse_scenario(text, "x.yaml"), locs)


def error_of(extra: str) -> str:
    with pytest.raises(ScenarioError) as e:
        space(extra)
    return str(e.value)


def test_without_a_section_every_group_and_kind_is_in_with_safe_bounds() -> None:
    s = space()
    assert s.kinds == DEFAULT_KINDS and "clock_skew" not in s.kinds
    assert s.targets == ("broker", "workers", "clients")  # the dcp target 'broker' is the group already
    assert s.messages == ("REGISTER", "PING", "PONG", "REQUEST", "REPLY", "RECONNECT")
    assert s.effects == DEFAULT_EFFECTS and max(s.effects.values()) <= 0.2
    assert s.quiet_ns == 1_000_000_000 and s.last_end_ns(3_000_000_000) == 2_000_000_000
    assert s.shortest_ns == 50_000_000 and s.longest_ns == 500_000_000
    assert s.counts == {} and s.rate == (1.0, 1.0) and s.max_faults == 3


def test_the_section_overrides_the_defaults() -> None:
    s = space("""\
        explore:
          max_faults: 2
          kinds: [crash, rule, clock_skew]
          targets: [workers, "random:clients"]
          messages: [REPLY]
          effects: {duplicate: 30%}
          latency: 10ms
          skew: 40ms
          from: 200ms
          quiet: 1500ms
          shortest: 20ms
          longest: 700ms
          counts: {workers: [1, 4]}
          rate: [50%, 2]
        """)
    assert s.max_faults == 2 and s.kinds == ("crash", "rule", "clock_skew")
    assert s.targets == ("workers", "random:clients") and s.messages == ("REPLY",)
    assert s.effects == {"duplicate": 0.3} and s.probabilities("duplicate") == [0.01, 0.02, 0.05, 0.1, 0.2, 0.3]
    assert (s.latency_ns, s.skew_ns, s.start_ns, s.quiet_ns) == (10_000_000, 40_000_000, 200_000_000, 1_500_000_000)
    assert (s.shortest_ns, s.longest_ns) == (20_000_000, 700_000_000)
    assert s.counts == {"workers": (1, 4)} and s.rates() == [0.5, 1.0, 2.0]


def test_a_runtime_without_a_fault_kind_leaves_it_out() -> None:
    text = BASE + "explore: {kinds: [crash, pause, clock_skew, rule]}\n"
    s = space_of(parse_scenario(text, "x.yaml"), None, frozenset({"crash", "restart", "pause"}))
    assert s.kinds == ("crash", "pause")


@pytest.mark.parametrize("extra,expected", [
    ("explore: {kinds: [crash, explode]}", "x.yaml:8: explore.kinds: no fault kind 'explode'"),
    ("explore: {targets: [workerz]}", "x.yaml:8: explore.targets[0]: no node, group, role or dcp target named "
                                      "'workerz'; did you mean 'worker'?"),
    ("explore: {messages: [REPLAY]}", "explore.messages: no message 'REPLAY'"),
    ("explore: {effects: {drop: 0%}}", "explore.effects: drop: a highest probability of 0 leaves the effect out"),
    ("explore: {effects: {mangle: 5%}}", "explore.effects: no rule effect 'mangle'"),
    ("explore: {longest: 2}", "explore.longest: the duration 2 has no unit"),
    ("explore: {shortest: 1s, longest: 500ms}", "explore.longest: must not be shorter than 'shortest'"),
    ("explore: {quiet: 3s}", "explore.quiet: leaves no room for a fault"),
    ("explore: {counts: {broker: [1, 2]}}", "explore.counts.broker: group 'broker' is one node (no count)"),
    ("explore: {counts: {workers: [3, 1]}}", "explore.counts.workers: most is below fewest"),
    ("explore: {rate: [2, 1]}", "explore.rate: the highest factor is below the lowest"),
    ("explore: {max_fault: 2}", "explore.max_fault: unknown field; did you mean 'max_faults'?"),
])
def test_a_broken_section_is_named_by_file_line_and_field(extra: str, expected: str) -> None:
    assert expected in error_of(extra + "\n")


def test_run_ignores_the_section_and_explore_reads_it() -> None:
    scenario = parse_scenario(BASE + "explore: {max_faults: 1}\n", "x.yaml")
    assert scenario.raw["explore"] == {"max_faults": 1}
