"""The Dafka run checks that judge what a node does (harness/checkers/dafka_topics.py,
dafka_links.py, dafka_answers.py): each catches the mutants (reference_nodes/dafka/mutants.py)
of its clauses in a plain simulated run, on the clause the mutant breaks, and passes the
reference nodes, also through pauses, clock skew and drift, crashes and restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.composition import RunResult, run_sim
from harness.scenario import parse_scenario
from reference_nodes.dafka.mutants import MUTANTS

BASIC = Path("scenarios/dafka/explore/basic.yaml")
LOSSY = Path("scenarios/dafka/chaos/lossy.yaml")
STORE_RESTART = Path("scenarios/dafka/chaos/store-restart.yaml")
# topics that prefix one another, and a consumer without a topic
TOPICS = Path("scenarios/dafka/explore/topics.yaml")
# basic.yaml with 10% of RECORDs lost (stores FETCH), and with every kind of node fault
DROPS = BASIC.read_text().replace("check:", "faults:\n  - rule: {message: RECORD, drop: 10%}\ncheck:")
FAULTS = BASIC.read_text().replace("check:", """faults:
  - {from: 1s, until: 1800ms, pause: store}
  - {from: 600ms, until: 2200ms, pause: producer}
  - {at: 1s, clock_skew: early, offset: -1s, drift: -0.5}
  - {at: 2s, clock_skew: producer, offset: -800ms, drift: -0.3}
  - {at: 3500ms, crash: early, restart_after: 300ms}
  - {at: 3s, crash: store, restart_after: 200ms}
  - {at: 1200ms, crash: late, restart_after: 2s}
check:""")
# the deployed dialect: the topic travels in the one frame with the body
ZPROTO = BASIC.read_text().replace("protocol: dafka\n", 'protocol: dafka\ndialect: "dafka:zproto"\n')
NEW_CHECKS = ("topic-frames", "hello-subjects", "subscriptions", "tower-links", "intervals", "answers",
              "producer-claims")


def run(text: str, name: str, seed: int = 1, **factories) -> RunResult:
    return run_sim(parse_scenario(text, name), seed, factories=factories)


def failing(result: RunResult) -> dict[str, str]:
    return {v.check: v.clause for v in result.verdicts if not v.ok}


# (mutant, node it replaces, scenario text, check that must fail)
CASES = [
    ("record-by-address", "producer", BASIC, "topic-frames"),
    ("record-by-address", "producer", ZPROTO, "topic-frames"),
    ("no-hello-subscription", "store", ZPROTO, "subscriptions"),
    ("head-by-partition", "producer", BASIC, "topic-frames"),
    ("direct-record-by-sender", "producer", LOSSY, "topic-frames"),
    ("direct-head-by-sender", "producer", BASIC, "topic-frames"),
    ("ack-by-topic", "store", BASIC, "topic-frames"),
    ("store-hello-to-itself", "store", BASIC, "topic-frames"),
    ("fetch-by-requestor", "store", STORE_RESTART, "topic-frames"),
    ("heads-by-address", "late", BASIC, "topic-frames"),
    ("consumer-hello-to-itself", "early", BASIC, "topic-frames"),
    ("empty-hello", "early", BASIC, "hello-subjects"),
    ("hello-without-subscription", "idle", TOPICS, "hello-subjects"),
    ("heads-by-prefix", "store", TOPICS, "topic-frames"),
    ("no-ack-subscription", "producer", BASIC, "subscriptions"),
    ("no-fetch-subscription", "producer", BASIC, "subscriptions"),
    ("no-record-subscription-store", "store", BASIC, "subscriptions"),
    ("no-head-subscription-store", "store", BASIC, "subscriptions"),
    ("no-direct-record-subscription-store", "store", BASIC, "subscriptions"),
    ("no-fetch-subscription-store", "store", BASIC, "subscriptions"),
    ("no-get-heads-subscription", "store", BASIC, "subscriptions"),
    ("no-hello-subscription", "store", BASIC, "subscriptions"),
    ("no-record-subscription-consumer", "early", BASIC, "subscriptions"),
    ("no-head-subscription-consumer", "early", BASIC, "subscriptions"),
    ("no-direct-record-subscription-consumer", "early", BASIC, "subscriptions"),
    ("no-direct-head-subscription", "early", BASIC, "subscriptions"),
    ("no-store-hello-subscription", "early", BASIC, "subscriptions"),
    ("no-tower-sockets", "store", BASIC, "tower-links"),
    ("deaf-to-tower", "store", BASIC, "tower-links"),
    ("mute-to-tower", "early", BASIC, "tower-links"),
    ("no-head", "producer", BASIC, "intervals"),
    ("beacon-once", "early", BASIC, "intervals"),
    ("no-store-hello", "store", BASIC, "answers"),
    ("no-get-heads", "early", BASIC, "answers"),
    ("ignores-get-heads", "producer", BASIC, "answers"),
    ("no-fetch-store", "store", DROPS, "answers"),
    ("fetch-from-zero", "store", DROPS, "answers"),
    ("head-next-offset", "producer", BASIC, "producer-claims"),
    ("other-beacon-id", "producer", BASIC, "producer-claims"),
    ("records-as-direct", "producer", BASIC, "topic-frames"),
    ("no-hello-reply", "early", BASIC, "hello-reply"),  # a SHOULD: basic.yaml names the check
]


# A mutant whose message breaks the topic rule of the command it is sent as before anything else:
# records-as-direct publishes its records as DIRECT-RECORDs on the topic name, not a requestor's.
ALSO = {"records-as-direct": "dafka.wire.topic-direct-record"}


def _text(scenario: Path | str) -> str:
    return scenario.read_text() if isinstance(scenario, Path) else scenario


@pytest.mark.parametrize("mutant,node,scenario,check", CASES,
                         ids=[c[0] + ("-zproto" if c[2] is ZPROTO else "") for c in CASES])
def test_check_catches_mutant(mutant: str, node: str, scenario: Path | str, check: str) -> None:
    role, factory, clause = MUTANTS[mutant]
    got = failing(run(_text(scenario), f"{mutant}.yaml", **{node: factory}))
    assert got.get(check) == ALSO.get(mutant, clause), f"{check} missed {mutant} (failing: {got})"


@pytest.mark.parametrize("scenario", [BASIC, STORE_RESTART, TOPICS, DROPS, FAULTS, ZPROTO],
                         ids=["basic", "store-restart", "topics", "drops", "faults", "zproto"])
def test_reference_nodes_pass(scenario: Path | str) -> None:
    for seed in (1, 2):
        r = run(_text(scenario), "reference.yaml", seed)
        assert not failing(r), [v.to_dict() for v in r.failed]
        judged = {v.check: v.detail for v in r.verdicts if v.check in NEW_CHECKS}
        assert set(judged) == set(NEW_CHECKS)
        assert not any(d.startswith(("0 ", "not judged")) for d in judged.values()), judged


def test_hello_reply_is_a_should_that_the_reference_consumers_answer() -> None:
    """The opt-in check judges the SHOULD only where a file names it, and says so in its verdict."""
    v = next(v for v in run(BASIC.read_text(), "basic.yaml").verdicts if v.check == "hello-reply")
    assert v.ok and v.level == "SHOULD" and not v.detail.startswith("0 "), v.detail
    bad = run(BASIC.read_text(), "basic.yaml", early=MUTANTS["no-hello-reply"][1])
    v = next(v for v in bad.verdicts if v.check == "hello-reply")
    assert not v.ok and v.level == "SHOULD" and "owed a CONSUMER-HELLO" in v.detail
