"""Message rules: matching, first match wins, probabilities, effects, building from plain data."""

from __future__ import annotations

import random

import pytest

from fault_injection.rules import (
    PASS,
    Delay,
    Distribution,
    Drop,
    Duplicate,
    Match,
    Pass,
    Reorder,
    Rule,
    RuleSet,
    Verdict,
    duration_ns,
    parse_duration,
    parse_probability,
    rule_from_dict,
)


def decide(rules: RuleSet, src: str = "a", dst: str = "b", msg_type: str = "T", socket: str = "s",
           direction: str = "to_binder", endpoint: str = "tcp://b:1") -> Verdict:
    return rules.decide(src, dst, msg_type, socket, direction, random.Random(1), endpoint)


def test_no_rule_or_no_match_passes() -> None:
    assert decide(RuleSet()) is PASS
    assert decide(RuleSet([Rule(Match(src="x"), Drop())])) is PASS


def test_every_match_field_is_a_glob() -> None:
    rule = Rule(Match(src="peer-*", dst="broker", msg_type="Append*", socket="r?uter",
                      endpoint="tcp://*:5555", direction="to_connecter"), Drop())
    rules = RuleSet([rule])
    hit = dict(src="peer-3", dst="broker", msg_type="AppendEntries", socket="router",
               endpoint="tcp://broker:5555", direction="to_connecter")
    assert decide(rules, **hit).effect == "drop"
    for key, value in (("src", "client"), ("dst", "broker2"), ("msg_type", "Vote"),
                       ("socket", "dealer"), ("endpoint", "tcp://b:1"), ("direction", "to_binder")):
        assert decide(rules, **{**hit, key: value}) is PASS, key


def test_first_match_wins_and_pass_rules_shield_later_ones() -> None:
    rules = RuleSet([Rule(Match(msg_type="ping"), Pass()), Rule(Match(), Drop()), Rule(Match(), Duplicate())])
    assert decide(rules, msg_type="ping") is PASS
    v = decide(rules, msg_type="other")
    assert (v.effect, v.label) == ("drop", "drop:rule-1")


def test_effects_give_their_parameters() -> None:
    assert decide(RuleSet([Rule(Match(), Delay(("fixed", 7)), name="slow")])) == \
        Verdict("delay", "delay:slow", delay_ns=7)
    v = decide(RuleSet([Rule(Match(), Duplicate(3))]))
    assert (v.effect, v.copies) == ("duplicate", 3)
    v = decide(RuleSet([Rule(Match(), Reorder(("fixed", 9), behind_next=False))]))
    assert (v.effect, v.hold_ns, v.behind_next) == ("reorder", 9, False)


def test_probability_uses_the_given_rng_reproducibly() -> None:
    rules = RuleSet([Rule(Match(), Drop(), probability=0.3)])
    rng = random.Random(5)
    first = [rules.decide("a", "b", "T", "s", "any", rng).effect for _ in range(1000)]
    rng = random.Random(5)
    again = [rules.decide("a", "b", "T", "s", "any", rng).effect for _ in range(1000)]
    assert first == again and 250 < first.count("drop") < 350


def test_invalid_rules_are_rejected() -> None:
    with pytest.raises(ValueError, match="direction"):
        Match(direction="sideways")
    with pytest.raises(ValueError, match="probability"):
        Rule(Match(), Drop(), probability=1.5)
    with pytest.raises(ValueError, match="copies"):
        Duplicate(0)


def test_durations_probabilities_and_distributions_parse() -> None:
    assert parse_duration("250ms") == 250_000_000 and parse_duration("1.5s") == 1_500_000_000
    assert parse_duration("40us") == 40_000 and parse_duration("-50ms") == -50_000_000
    assert parse_duration(0) == 0 and parse_duration("0") == 0  # 0 is the same in every unit
    assert duration_ns(17) == 17 and duration_ns("2s") == 2_000_000_000  # Python callers: ints are ns
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("soon")
    for bare in (17, "3", 1.5):  # in files a duration carries its unit
        with pytest.raises(ValueError, match="has no unit"):
            parse_duration(bare)
    assert parse_probability("5%") == 0.05 and parse_probability(0.5) == 0.5 and parse_probability(1) == 1.0
    with pytest.raises(ValueError, match="outside"):
        parse_probability("120%")
    assert Distribution.parse("uniform(1ms, 5ms)") == Distribution("uniform", 1_000_000, 5_000_000)
    assert Distribution.parse("2ms") == Distribution("fixed", 2_000_000)
    assert Distribution.parse(("normal", "1ms", "200us")) == Distribution("normal", 1_000_000, 200_000)
    assert Distribution.parse(5) == Distribution("fixed", 5)
    for bad in ("gamma(1, 2)", ("uniform", 5, 1), ("fixed",), object()):
        with pytest.raises(ValueError):
            Distribution.parse(bad)  # type: ignore[arg-type]


def test_rules_from_plain_data() -> None:
    rules = RuleSet.from_dicts([
        {"message": "AppendEntries", "direction": "any", "drop": "5%"},
        {"from": "client*", "to": "broker", "delay": "uniform(1ms, 20ms)", "probability": 0.5},
        {"match": {"type": "RECORD"}, "duplicate": 2},
        {"reorder": {"window": "10ms", "behind_next": False}, "name": "shuffle"},
        {"socket": "pub", "pass": True},
        {"drop": True},
    ])
    r = rules.rules
    assert (r[0].match.msg_type, r[0].effect, r[0].probability) == ("AppendEntries", Drop(), 0.05)
    assert (r[1].match.src, r[1].match.dst, r[1].probability) == ("client*", "broker", 0.5)
    assert r[1].effect == Delay("uniform(1ms, 20ms)")
    assert r[2].effect == Duplicate(2) and r[2].match.msg_type == "RECORD"
    assert r[3].effect == Reorder("10ms", behind_next=False) and r[3].name == "shuffle"
    assert r[4].effect == Pass() and r[5].probability == 1.0
    assert [x.name for x in r] == ["rule-0", "rule-1", "rule-2", "shuffle", "rule-4", "rule-5"]


@pytest.mark.parametrize("item, message", [
    ({"message": "X"}, "no effect"),
    ({"drop": True, "delay": "1ms"}, "more than one effect"),
    ({"drop": True, "colour": "red"}, "unknown key 'colour'"),
    ({"delay": "later"}, "rule 0: delay: not a duration"),
    ({"drop": "lots"}, "rule 0: drop:"),
    ({"drop": True, "direction": "up"}, "rule 0: direction: direction 'up' is not one of"),
    ({"from": 3, "drop": True}, "'from' must be a string"),
])
def test_bad_rule_data_names_the_problem(item, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        rule_from_dict(item)


# ---- picking messages by count (nth) and by decoded field --------------------------------------


def test_nth_picks_positions_among_the_messages_the_rule_matched() -> None:
    rules = RuleSet([Rule(Match(msg_type="PING"), Drop(), nth=frozenset({3})),
                     Rule(Match(msg_type="REQ"), Drop(), nth=frozenset(range(1, 3)))])
    pings = [decide(rules, msg_type="PING").effect for _ in range(5)]
    assert pings == ["pass", "pass", "drop", "pass", "pass"], "only the third PING"
    assert decide(rules, msg_type="OTHER") is PASS
    assert [decide(rules, msg_type="REQ").effect for _ in range(4)] == ["drop", "drop", "pass", "pass"]
    fresh = rules.fresh()
    assert [decide(fresh, msg_type="PING").effect for _ in range(3)] == ["pass", "pass", "drop"], "counts per run"


def test_fields_match_decoded_values_as_text() -> None:
    rules = RuleSet([Rule(Match(msg_type="REQUEST", fields=(("service", "ec*"),)), Drop()),
                     Rule(Match(fields=(("data", "b?"),)), Duplicate())])
    assert rules.needs_fields

    def d(fields: dict[str, object] | None, msg_type: str = "REQUEST") -> str:
        return decide_with(rules, msg_type, lambda: fields).effect

    assert d({"service": b"echo"}) == "drop"
    assert d({"service": "other"}) == "pass"
    assert d({"service": "other", "data": [b"a1", b"b2"]}) == "duplicate", "any element of a list"
    assert d({"service": 7}) == "pass" and d(None) == "pass", "undecodable: no field rule matches"
    assert decide(rules, msg_type="REQUEST") is PASS, "without a decoder, field rules never match"
    calls: list[int] = []
    plain = RuleSet([Rule(Match(msg_type="X"), Drop()), Rule(Match(fields=(("a", "1"),)), Drop())])
    assert decide_with(plain, "X", lambda: calls.append(1) or {}).effect == "drop"
    assert calls == [], "fields are decoded only when a rule needs them"


def decide_with(rules: RuleSet, msg_type: str, fields: object) -> Verdict:
    return rules.decide("a", "b", msg_type, "s", "to_binder", random.Random(1), "tcp://b:1", fields)  # type: ignore[arg-type]


def test_nth_and_fields_from_plain_data() -> None:
    rule = rule_from_dict({"message": "REQUEST", "fields": {"service": "echo"}, "nth": "2-3", "drop": True})
    assert rule.nth == frozenset({2, 3}) and rule.match.fields == (("service", "echo"),)
    assert rule_from_dict({"nth": [1, 4], "drop": True}).nth == frozenset({1, 4})
    for bad, where in (({"nth": 0, "drop": True}, "from 1"), ({"nth": "5-2", "drop": True}, "backwards"),
                       ({"nth": "x", "drop": True}, "position"), ({"fields": [], "drop": True}, "maps field")):
        with pytest.raises(ValueError, match=where):
            rule_from_dict(bad)
