"""The strategies draw only what the space allows, and every draw is a valid scenario file."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from fault_injection.rules import parse_duration, parse_probability
from harness.explore.candidate import Candidate, Runner, fault_window, from_scenario
from harness.explore.space import space_of
from harness.explore.space import DEFAULT_EFFECTS
from harness.explore.strategies import CORRUPT_NTH, candidates, corrupt_rules, mutations
from harness.scenario import ScenarioError, load_scenario_source, parse_scenario

SCENARIO, LOCS = load_scenario_source("scenarios/dcp/explore/basic.yaml")
with open("scenarios/dcp/explore/basic.yaml") as _f:
    SCENARIO_TEXT = _f.read()
SPACE = space_of(SCENARIO, LOCS)
BASE = from_scenario(SCENARIO, 1)
RUNNER = Runner(SCENARIO)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(candidates(SCENARIO, SPACE, BASE))
def test_every_drawn_candidate_is_a_valid_scenario_within_the_bounds(cand: Candidate) -> None:
    scenario = parse_scenario(RUNNER.render(cand), "drawn.yaml")  # raises if the file is not valid
    assert scenario.duration_ns == SCENARIO.duration_ns and scenario.seeds == [cand.seed]
    corrupt = [f for f in cand.faults if "corrupt" in f.get("rule", {})]
    others = [f for f in cand.faults if f not in corrupt]
    assert corrupt == corrupt_rules(SPACE, f"{cand.seed}/{json.dumps(others, sort_keys=True)}")  # on top
    assert 1 <= len(cand.faults) - len(corrupt) <= SPACE.max_faults
    for group, count in cand.counts:
        lo, hi = SPACE.counts.get(group, (count, count))
        assert lo <= count <= hi
    last_end = SPACE.last_end_ns(SCENARIO.duration_ns)
    for item in cand.faults:
        window = fault_window(item)
        if window is None:  # a rule: one message type, an effect within its bound
            body = item["rule"]
            assert body["message"] in SPACE.messages
            effect = next(e for e in SPACE.effects if e in body)
            if "nth" in body:  # a corrupt rule may damage one early message instead of a share
                assert effect == "corrupt" and "probability" not in body and 1 <= body["nth"] <= CORRUPT_NTH
                continue
            assert parse_probability(body.get("probability", "100%")) <= SPACE.effects[effect]
            continue
        start, end = window
        assert SPACE.start_ns <= start and end is not None and end <= last_end, item  # every fault ends, in time
        assert SPACE.shortest_ns <= end - start <= SPACE.longest_ns
        if "crash" in item:
            assert parse_duration(item["restart_after"]) > 0


def test_a_partition_never_puts_a_node_of_a_group_drawn_larger_on_both_sides() -> None:
    """CI found it: with ``workers`` drawn at 3, ``workers.2`` is a node the file's own targets do
    not know, and a partition of ``workers.2`` against ``workers`` names it on both sides."""
    from harness.explore.strategies import drawn_targets
    cand = Candidate(seed=1, duration_ns=SCENARIO.duration_ns, faults=(), counts=(("workers", 3), ("clients", 1)),
                     workload=BASE.workload)
    drawn = drawn_targets(SCENARIO, cand.nodes(SCENARIO))
    assert drawn.overlap((("workers.2",), ("workers",))) == ["workers.2"]
    assert SCENARIO.targets.overlap((("workers.2",), ("workers",))) == []  # why the file's targets missed it
    assert drawn.overlap((("workers.2",), ("broker",))) == []


def test_a_drawn_workload_rate_is_a_factor_of_the_written_one_within_the_bounds() -> None:
    rates: set[float] = set()

    @settings(max_examples=40, deadline=None, database=None)
    @given(candidates(SCENARIO, SPACE, BASE))
    def collect(cand: Candidate) -> None:
        scenario = parse_scenario(RUNNER.render(cand), "drawn.yaml")
        rates.add(scenario.workload[0].rate)

    collect()
    assert rates <= {5.0, 10.0, 20.0, 40.0} and len(rates) > 1


def test_half_the_candidates_get_a_corrupt_rule_from_their_seed() -> None:
    """corrupt comes from the candidate's seed and faults, not from hypothesis, so that adding it left every
    other draw of a search as it was; the rule damages one early message or a bounded share."""
    drawn = [corrupt_rules(SPACE, seed) for seed in range(1, 601)]
    assert drawn == [corrupt_rules(SPACE, seed) for seed in range(1, 601)]  # the seed decides
    rules = [d[0]["rule"] for d in drawn if d]
    assert 250 <= len(rules) <= 350
    for body in rules:
        assert body["message"] in SPACE.messages and body["corrupt"] is True
        if "nth" in body:
            assert 1 <= body["nth"] <= CORRUPT_NTH and "probability" not in body
        else:
            assert parse_probability(body["probability"]) <= DEFAULT_EFFECTS["corrupt"]
    assert {"nth" in b for b in rules} == {True, False}
    none = space_of(parse_scenario(SCENARIO_TEXT.replace("max_faults: 3", "max_faults: 0"), "x.yaml"))
    assert not any(corrupt_rules(none, seed) for seed in range(1, 100))  # no fault at all
    no_corrupt = space_of(parse_scenario(SCENARIO_TEXT.replace("max_faults: 3", "max_faults: 3\n  effects: {drop: 5%}"),
                                         "x.yaml"))
    assert not any(corrupt_rules(no_corrupt, seed) for seed in range(1, 100))


def test_damage_names_what_a_drawn_corrupt_rule_does_and_changes_no_draw() -> None:
    """`damage: [header]` writes the kinds into the rule (corrupt: [header]); the rules are drawn
    as without it, and an unknown kind is refused with the known ones."""
    text = SCENARIO_TEXT.replace("max_faults: 3", "max_faults: 3\n  damage: [header]")
    headers = space_of(parse_scenario(text, "x.yaml"))
    assert headers.damage == ("header",) and SPACE.damage == ()
    for seed in range(1, 60):
        plain, named = corrupt_rules(SPACE, seed), corrupt_rules(headers, seed)
        assert [r["rule"]["corrupt"] for r in named] == [["header"]] * len(plain)
        assert [{**r["rule"], "corrupt": True} for r in named] == [r["rule"] for r in plain]
    with pytest.raises(ScenarioError, match="no damage 'flipp'"):
        space_of(parse_scenario(SCENARIO_TEXT.replace("max_faults: 3", "max_faults: 3\n  damage: [flipp]"), "x.yaml"))


_FILE_RULE = {"rule": {"message": "REPLY", "corrupt": True, "nth": 1}}  # a corrupt rule the file itself has
_DRAWN = {"rule": {"message": "REQUEST", "corrupt": True, "nth": 2}}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations(SCENARIO, SPACE, BASE.with_(faults=(_FILE_RULE,)))(BASE.with_(faults=(_FILE_RULE, _DRAWN))))
def test_a_guided_child_keeps_the_files_own_faults_and_at_most_one_drawn_corrupt_rule(child: Candidate) -> None:
    drawn_corrupt = [f for f in child.faults if "corrupt" in f.get("rule", {}) and f != _FILE_RULE]
    assert len(drawn_corrupt) <= 1
    parse_scenario(RUNNER.render(child), "child.yaml")


def test_the_guided_search_draws_other_corrupt_rules_for_a_child() -> None:
    """Before, a child only inherited its parent's corrupt rule (or lost it): the coverage-guided
    search never tried another message type or position for one."""
    parent = BASE.with_(faults=(_DRAWN,))
    seen: set[str] = set()

    @settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(mutations(SCENARIO, SPACE, BASE)(parent))
    def collect(child: Candidate) -> None:
        seen.update(json.dumps(f, sort_keys=True) for f in child.faults if "corrupt" in f.get("rule", {}))

    collect()
    assert len(seen - {json.dumps(_DRAWN, sort_keys=True)}) >= 3, seen
