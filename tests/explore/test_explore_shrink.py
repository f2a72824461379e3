"""The shrinker: delta debugging and the scenario-aware reductions reach the smallest candidate
that still fails the same property, within their budget. A stand-in runner decides failure
by a rule over the candidate (no simulation), so the minimum is known exactly."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

from fault_injection.rules import parse_duration
from harness.explore.candidate import Candidate, Outcome, Property, Runner, from_scenario
from harness.explore.shrink import Shrinker, cut, ddmin, magnitudes, narrowings, smallest
from harness.scenario import load_scenario, parse_scenario

SCENARIO = load_scenario("scenarios/dcp/explore/basic.yaml")
PROP = Property("exactly-once", "dcp.client.retry")
OTHER = Property("worker-expiry", "dcp.heartbeat.worker-ping")


@dataclass
class RuleRunner:
    """Fails PROP when ``rule(candidate)`` holds; counts a run per new candidate."""

    rule: Callable[[Candidate], bool]
    runs: int = 0
    seen: dict[str, bool] = field(default_factory=dict)
    render: Runner = field(default_factory=lambda: Runner(SCENARIO))

    def evaluate(self, cand: Candidate, fresh: bool = False) -> Outcome:
        text = self.render.render(cand)
        parse_scenario(text, "candidate.yaml")  # every reduction must stay a valid file
        if text not in self.seen:
            self.runs += 1
            self.seen[text] = self.rule(cand)
        return Outcome(failed=(PROP,) if self.seen[text] else (OTHER,))


def crash(target: str, at: str = "1234ms", after: str = "480ms") -> dict[str, Any]:
    return {"at": at, "crash": target, "restart_after": after}


def start() -> Candidate:
    base = from_scenario(SCENARIO, 7)
    faults = (crash("workers"), {"rule": {"message": "REPLY", "drop": True, "probability": "5%"}},
              {"from": "300ms", "until": "900ms", "pause": "broker"}, crash("clients.1", "555ms"))
    return base.with_(faults=faults, counts=(("workers", 3), ("clients", 3)))


def needs_a_worker_crash_of_200ms(cand: Candidate) -> bool:
    """The 'bug': a crash naming workers (any of them) restarted 200 ms or more later, two
    clients, at least 3 operations per client and a run of 1.5 s or more."""
    crashes = [f for f in cand.faults if str(f.get("crash", "")).startswith("workers")
               and parse_duration(f["restart_after"]) >= 200_000_000]
    limit = cand.workload[0].get("limit", 99) if cand.workload else 0
    return bool(crashes) and dict(cand.counts)["clients"] >= 2 and limit >= 3 and cand.duration_ns >= 1_500_000_000


def test_shrinking_reaches_the_known_minimum() -> None:
    runner = RuleRunner(needs_a_worker_crash_of_200ms)
    result = Shrinker(runner, SCENARIO, PROP, runs=400).shrink(start())  # type: ignore[arg-type]
    cand = result.candidate
    assert result.complete and result.outcome.fails(PROP)
    assert cand.faults == (crash("workers.0", "1200ms", "200ms"),)  # one fault, one node, round time, shortest
    assert dict(cand.counts) == {"workers": 1, "clients": 2}
    assert cand.duration_ns == 1_500_000_000
    assert cand.workload[0]["limit"] == 3
    assert cand.seed == 7  # never changes
    kinds = " ".join(s.what for s in result.steps)
    # The run cannot end before the crash's restart (a file refuses that), so the duration comes
    # down in two steps: to the restart, then further once the restart is sooner.
    assert "faults: 4 -> 1" in kinds and "duration: 3s -> " in kinds and "restart after" in kinds
    assert result.runs < 120


def test_a_shorter_run_keeps_the_quiet_stretch_after_its_last_fault_and_last_node_start() -> None:
    """A property that fails however short the run (a client that never had the time to
    synchronise) is not a fault's doing: the run keeps the file's quiet stretch after its last
    fault and its late joiners' start, never less (explore once cut an Event BUS run whose late
    client joins at 3 s down to 100 ms: 'late never synchronised', no fault left)."""
    always = RuleRunner(lambda c: True)
    quiet = 1_000_000_000
    cand = Shrinker(always, SCENARIO, PROP, runs=300, quiet_ns=quiet).shrink(start()).candidate  # type: ignore[arg-type]
    assert cand.faults == () and cand.duration_ns == quiet  # nothing left to recover from
    late = load_scenario("scenarios/eventbus/explore/basic.yaml")  # its client 'late' starts at 3 s
    base = from_scenario(late, 1).with_(faults=({"from": "1s", "until": "1400ms", "pause": "bus"},))
    eb_runner = RuleRunner(lambda c: bool(c.faults), render=Runner(late))
    cand = Shrinker(eb_runner, late, PROP, runs=300, quiet_ns=quiet).shrink(base).candidate  # type: ignore[arg-type]
    assert cand.duration_ns == 3_000_000_000 + quiet
    crash_late = base.with_(faults=({"at": "3500ms", "crash": "bus", "restart_after": "500ms"},))
    cand = Shrinker(eb_runner, late, PROP, runs=300, quiet_ns=quiet).shrink(crash_late).candidate  # type: ignore[arg-type]
    assert cand.duration_ns == 3_600_000_000 + quiet  # (its restart shrunk to the shortest, 100 ms)


def reply_rule_over_10_to_30(cand: Candidate) -> bool:
    """The 'bug': a REPLY rule acting on (at least) the REPLYs number 10 to 30, at any share."""
    for item in cand.faults:
        rule = item.get("rule") or {}
        if rule.get("message") == "REPLY":
            nth = rule.get("nth")
            if nth is None:
                return True
            if isinstance(nth, str) and "-" in nth:
                first, last = map(int, nth.split("-"))
                return first <= 10 and last >= 30
    return False


def test_a_rule_narrowed_to_a_long_range_keeps_its_share() -> None:
    """Narrowed to 21 messages, the 5% drop stays 5%: at 100% it would drop every one of them, a
    far harsher fault than the space allows (one at a handful of positions may go to 100%)."""
    result = Shrinker(RuleRunner(reply_rule_over_10_to_30), SCENARIO, PROP, runs=400).shrink(start())  # type: ignore[arg-type]
    (rule,) = [f["rule"] for f in result.candidate.faults]
    assert rule["nth"] == "10-30" and rule["probability"] == "5%", rule


def test_a_reduction_that_fails_another_property_is_not_kept() -> None:
    runner = RuleRunner(lambda c: len(c.faults) >= 2)  # fewer faults fail OTHER only
    result = Shrinker(runner, SCENARIO, PROP, runs=300).shrink(start())  # type: ignore[arg-type]
    assert len(result.candidate.faults) == 2


def test_the_budget_stops_shrinking_with_the_smallest_so_far() -> None:
    runner = RuleRunner(needs_a_worker_crash_of_200ms)
    result = Shrinker(runner, SCENARIO, PROP, runs=6).shrink(start())  # type: ignore[arg-type]
    assert not result.complete and result.runs <= 6 + 1
    assert needs_a_worker_crash_of_200ms(result.candidate) and len(result.candidate.faults) < 4


def test_ddmin_finds_a_one_minimal_subset() -> None:
    calls: list[list[int]] = []

    def fails(sub: list[int]) -> bool:
        calls.append(sub)
        return 3 in sub and 7 in sub

    assert ddmin(list(range(10)), fails) == [3, 7]
    assert ddmin([1, 2], lambda sub: True) == []  # the empty list is tried first
    assert len(calls) < 40


@pytest.mark.parametrize("lo,hi,step,threshold,expected", [(1, 100, 1, 37, 37), (100, 3000, 100, 1450, 1500),
                                                          (1, 10, 1, 1, 1), (5, 5, 1, 5, 5), (1, 9, 1, 9, 9)])
def test_smallest_finds_the_threshold_by_binary_search(lo: int, hi: int, step: int, threshold: int,
                                                       expected: int) -> None:
    tried: list[int] = []

    def fails(v: int) -> bool:
        tried.append(v)
        return v >= threshold

    assert smallest(lo, hi, step, fails) == expected
    assert len(tried) <= 2 + (hi - lo).bit_length()


def test_cut_keeps_the_quiet_stretch_after_the_workload_and_drops_what_starts_later() -> None:
    cand = start()  # workload 200ms..2s in a 3s run: 1s of quiet after the last operation
    short = cut(cand, 1_500_000_000)
    assert short.workload[0]["until"] == "500ms" and short.duration_ns == 1_500_000_000
    # The crash of workers at 1234ms restarts at 1714ms: after a 1.5s run, so a file would refuse it;
    # with a settle time that covers its restart it stays.
    assert [f.get("crash") or f.get("pause") or "rule" for f in short.faults] == ["rule", "broker", "clients.1"]
    settled = cut(cand, 1_500_000_000, settle_ns=500_000_000)
    assert [f.get("crash") or f.get("pause") or "rule" for f in settled.faults] == ["workers", "rule", "broker",
                                                                                     "clients.1"]
    shorter = cut(cand, 1_000_000_000, settle_ns=100_000_000)  # clients.1 restarts at 1035ms
    assert shorter.workload == () and [f.get("at") for f in shorter.faults if "crash" in f] == ["555ms"]


def test_narrowings_and_magnitudes_of_each_fault_kind() -> None:
    cand = start()
    names = [what for what, _ in narrowings(SCENARIO, cand, crash("workers"))]
    assert names == ["crash workers -> workers.0", "crash workers -> workers.1", "crash workers -> workers.2",
                     "at 1234ms -> 1200ms"]
    assert [w for w, _ in narrowings(SCENARIO, cand, crash("random:clients", at="1s"))] == [
        "crash random:clients -> clients.0", "crash random:clients -> clients.1", "crash random:clients -> clients.2"]
    assert list(narrowings(SCENARIO, cand, crash("broker", at="1s"))) == []
    part = {"from": "250ms", "until": "750ms", "partition": [["workers"], ["rest"]]}
    moved = dict(narrowings(SCENARIO, cand, part))["from 250ms -> 200ms"]
    assert moved["until"] == "700ms"  # the window keeps its length
    (prob,) = magnitudes({"rule": {"message": "REPLY", "drop": True, "probability": "20%"}})
    assert [prob.show(k) for k in range(prob.value + 1)] == ["1%", "2%", "5%", "10%", "20%"]
    assert prob.set({"rule": {"message": "REPLY", "drop": True, "probability": "20%"}}, 0)["rule"]["probability"] == "1%"
    lengths = magnitudes(part)
    assert [m.name for m in lengths] == ["length"] and lengths[0].set(part, 100_000_000)["until"] == "350ms"
    link = {"from": "1s", "until": "2s", "slow_link": ["broker", "workers.0"], "latency": "fixed(40ms)"}
    assert [m.name for m in magnitudes(link)] == ["length", "latency"]
    skew = {"at": "1s", "clock_skew": "broker", "offset": "-80ms"}
    (off,) = magnitudes(skew)
    assert off.set(skew, 5_000_000)["offset"] == "-5ms"


def test_a_rule_is_narrowed_to_the_messages_that_matter() -> None:
    from fault_injection.rules import parse_nth

    def reply_37_lost(cand: Candidate) -> bool:
        for f in cand.faults:
            body = f.get("rule", {})
            if body.get("message") == "REPLY" and ("nth" not in body or 37 in parse_nth(body["nth"])):
                return True
        return False

    runner = RuleRunner(reply_37_lost)
    result = Shrinker(runner, SCENARIO, PROP, runs=300).shrink(start())  # type: ignore[arg-type]
    assert result.candidate.faults == ({"rule": {"message": "REPLY", "drop": True, "nth": 37}},)
    assert any("only the REPLY message(s) number 37" in s.what for s in result.steps)


def test_a_narrowed_target_stays_narrowed_when_the_time_is_rounded_next() -> None:
    runner = RuleRunner(lambda c: any("crash" in f for f in c.faults))
    result = Shrinker(runner, SCENARIO, PROP, runs=300).shrink(start())  # type: ignore[arg-type]
    assert result.candidate.faults == (crash("workers.0", "1200ms", "10ms"),)
    assert [s.what for s in result.steps].count("fault 1: crash workers -> workers.0") == 1
