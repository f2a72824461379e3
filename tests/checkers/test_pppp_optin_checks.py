"""The PPPP checks a scenario opts into (harness/checkers/pppp_optin.py): each catches its mutant
on the exploration file that names it, none is a package default, the reference nodes pass them,
and conformant nodes that act at the other end of "usually 3-5" raise no alarm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.checkers.base import Verdict
from harness.checkers.pppp_optin import OPT_IN
from harness.composition import RunResult, run_sim
from harness.registry import package
from harness.scenario import parse_scenario
from reference_nodes.pppp.mutants import MUTANTS
from tests.reference_nodes.pppp_variants import Multiple5Publisher, Multiple5Subscriber

STREAM = Path("scenarios/pppp/explore/stream.yaml").read_text()
SPARSE = Path("scenarios/pppp/explore/sparse.yaml").read_text()
LOST_SUBSCRIBES = "  - rule: {message: SUBSCRIBE, drop: 40%}"
assert LOST_SUBSCRIBES in STREAM
# subs.0 is down for 200 ms while the stream goes on, and SUBSCRIBEs again when it comes back
SUB_RESTART = STREAM.replace(LOST_SUBSCRIBES, "  - {at: 1s, crash: subs.0, restart_after: 200ms}")
# ... and the publisher stops for 800 ms (longer than 3 x idle): every subscriber SUBSCRIBEs again
PUB_PAUSE = SUB_RESTART.replace("faults:\n", "faults:\n  - {from: 1500ms, until: 2300ms, pause: publisher}\n")

# (mutant, scenario, seed, the check that catches it, words of its detail)
CAUGHT = [
    ("only-heartbeats-count", STREAM, 1, "implicit-heartbeat", "but never #"),
    ("subscriber-only-heartbeats-count", STREAM, 1, "implicit-heartbeat", "again"),
    ("talks-first", STREAM, 1, "subscribe-first", "which had not subscribed"),
    ("no-replay", SUB_RESTART, 2, "backlog-sync", "before replaying"),
    ("no-custom-reply", STREAM, 1, "custom-reply", "no message published on b'replies'"),
    ("resends-first", SPARSE, 1, "resend-prefer-last", "not the last"),
]


def run(text: str, seed: int = 1, **factories: Any) -> RunResult:
    return run_sim(parse_scenario(text, "optin.yaml"), seed, factories=factories)


def verdict(result: RunResult, check: str) -> Verdict:
    return next(v for v in result.verdicts if v.check == check)


def test_the_opt_in_checks_are_no_defaults_and_the_mays_and_shoulds_say_so() -> None:
    pkg = package("pppp")
    levels = {c.name: c.level for c in OPT_IN}
    assert levels == {"implicit-heartbeat": "MUST", "backlog-sync": "MAY", "custom-reply": "MAY",
                      "resend-prefer-last": "SHOULD"}
    assert not set(levels) & set(pkg.default_checks) and set(levels) <= set(pkg.checks)
    assert set(levels) <= {c[3] for c in CAUGHT}


@pytest.mark.parametrize("mutant,text,seed,check,words", CAUGHT, ids=[c[0] for c in CAUGHT])
def test_check_catches_mutant(mutant: str, text: str, seed: int, check: str, words: str) -> None:
    role, factory, clause = MUTANTS[mutant]
    nodes = ["publisher"] if role == "publisher" else ["subs.0", "subs.1"]
    result = run(text, seed, **{n: factory for n in nodes})
    bad = verdict(result, check)
    assert not bad.ok and bad.clause == clause and words in bad.detail and bad.evidence, bad.detail


@pytest.mark.parametrize("text,seed", [(STREAM, 1), (PUB_PAUSE, 1), (SPARSE, 1)],
                         ids=["stream", "stream-sub-restart-pub-pause", "sparse"])
def test_the_reference_nodes_pass(text: str, seed: int) -> None:
    result = run(text, seed)
    assert result.ok, [(v.check, v.detail) for v in result.failed]
    judged = {v.check: v.detail for v in result.verdicts}
    if text is PUB_PAUSE:  # the pause made every subscriber SUBSCRIBE again, and subs.0's return
        assert "0 re-SUBSCRIBE(s)" not in judged["implicit-heartbeat"]
        assert "0 SUBSCRIBE(s)" not in judged["backlog-sync"]


def test_nodes_acting_at_5_x_idle_raise_no_alarm() -> None:
    result = run(PUB_PAUSE, 1, publisher=Multiple5Publisher, **{"subs.0": Multiple5Subscriber})
    assert result.ok, [(v.check, v.detail) for v in result.failed]


# explore (an opt-in copy of scenarios/pppp/explore/basic.yaml, seed 230) found implicit-heartbeat
# counting a corrupted PUBLISH as hearing from the publisher: the subscriber drops it unheard
# (E-PPPP-05), and its re-SUBSCRIBE 44 ms later, after 600 ms without a message that decodes, was
# taken for one to a live publisher.
CORRUPT_AFTER_SILENCE = """protocol: pppp
name: optin-corrupt-after-silence
duration: 1700ms
settle: 2s
nodes:
  publisher: {role: publisher, config: {idle: 200ms, first_idle: 50ms, liveness: 3}}
  subs: {role: subscriber, count: 1, config: {channels: [news, weather]}}
workload:
  - {nodes: publisher, op: publish, rate: 15/s, from: 500ms, until: 700ms, channel: [news, weather], size: 32, limit: 2}
faults:
  - {from: 230ms, until: 570ms, partition: [[publisher], [rest]], one_way: true}
  - rule: {message: PUBLISH, corrupt: true, nth: 2}
check: [exactly-once, subscribe-first, resubscribe, implicit-heartbeat]
"""


def test_a_malformed_message_is_not_heard() -> None:
    result = run(CORRUPT_AFTER_SILENCE, 230)
    v = verdict(result, "implicit-heartbeat")
    assert v.ok and "2 re-SUBSCRIBE(s)" in v.detail, v.detail  # news and weather
