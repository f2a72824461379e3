"""The Dafka run checks that judge what a node does (harness/checkers/dafka_topics.py,
dafka_links.py): each catches the mutants (reference_nodes/dafka/mutants.py) of its clauses in a
plain simulated run, on the clause the mutant breaks, and passes the reference nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.composition import RunResult, run_sim
from harness.scenario import parse_scenario
from reference_nodes.dafka.mutants import MUTANTS

BASIC = Path("scenarios/dafka/explore/basic.yaml")
LOSSY = Path("scenarios/dafka/chaos/lossy.yaml")
STORE_RESTART = Path("scenarios/dafka/chaos/store-restart.yaml")
# basic.yaml with a consumer that has no topic (a hello from it breaks a clause)
TOPICLESS = BASIC.read_text().replace(
    "workload:", "  idle: {role: consumer, config: {beacon: 100ms}}\nworkload:")
NEW_CHECKS = ("topic-frames", "hello-subjects", "subscriptions", "tower-links")


def run(text: str, name: str, seed: int = 1, **factories) -> RunResult:
    return run_sim(parse_scenario(text, name), seed, factories=factories)


def failing(result: RunResult) -> dict[str, str]:
    return {v.check: v.clause for v in result.verdicts if not v.ok}


# (mutant, node it replaces, scenario text, check that must fail)
CASES = [
    ("record-by-address", "producer", BASIC, "topic-frames"),
    ("head-by-partition", "producer", BASIC, "topic-frames"),
    ("direct-record-by-sender", "producer", LOSSY, "topic-frames"),
    ("direct-head-by-sender", "producer", BASIC, "topic-frames"),
    ("ack-by-topic", "store", BASIC, "topic-frames"),
    ("store-hello-to-itself", "store", BASIC, "topic-frames"),
    ("fetch-by-requestor", "store", STORE_RESTART, "topic-frames"),
    ("heads-by-address", "late", BASIC, "topic-frames"),
    ("consumer-hello-to-itself", "early", BASIC, "topic-frames"),
    ("empty-hello", "early", BASIC, "hello-subjects"),
    ("hello-without-subscription", "idle", TOPICLESS, "hello-subjects"),
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
]


def _text(scenario: Path | str) -> str:
    return scenario.read_text() if isinstance(scenario, Path) else scenario


@pytest.mark.parametrize("mutant,node,scenario,check", CASES, ids=[c[0] for c in CASES])
def test_check_catches_mutant(mutant: str, node: str, scenario: Path | str, check: str) -> None:
    role, factory, clause = MUTANTS[mutant]
    got = failing(run(_text(scenario), f"{mutant}.yaml", **{node: factory}))
    assert got.get(check) == clause, f"{check} missed {mutant} (failing: {got})"


@pytest.mark.parametrize("scenario", [BASIC, STORE_RESTART, TOPICLESS], ids=["basic", "store-restart", "topicless"])
def test_reference_nodes_pass(scenario: Path | str) -> None:
    for seed in (1, 2):
        r = run(_text(scenario), "reference.yaml", seed)
        assert not failing(r), [v.to_dict() for v in r.failed]
        judged = {v.check: v.detail for v in r.verdicts if v.check in NEW_CHECKS}
        assert set(judged) == set(NEW_CHECKS)
        assert not any(d.startswith(("0 ", "not judged")) for d in judged.values()), judged
