"""A checker that raises is a harness bug: its verdict fails naming the error, the node whose
event it was reading runs on, and `no-node-errors` does not blame that node."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import SEND, Checker, Event, Verdict
from harness.composition import run_sim
from harness.scenario import load_scenario


class RaisesOnTheThirdSend(Checker):
    name = "raises-on-the-third-send"
    kinds = frozenset({SEND})

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.seen = 0

    def on_event(self, ev: Event) -> None:
        self.seen += 1
        if self.seen == 3:
            raise KeyError("a bug in the checker")

    def finish(self, end_ns: int) -> list[Verdict]:
        return [self.ok(f"{self.seen} sends")]


def test_a_checker_that_raises_fails_its_own_verdict_and_blames_no_node() -> None:
    result = run_sim(load_scenario("scenarios/dcp/clean.yaml"), 1, observers=[RaisesOnTheThirdSend()])
    verdicts = {v.check: v for v in result.verdicts}
    broken = verdicts["raises-on-the-third-send"]
    assert not broken.ok and "the checker itself failed" in broken.detail and "a bug in the checker" in broken.detail
    assert broken.evidence and broken.evidence[0]["kind"] == SEND  # the event it was reading
    assert verdicts["no-node-errors"].ok  # the node it was reading goes on, unblamed
    assert verdicts["exactly-once"].ok  # the other checks still judge the whole run
    assert not result.ok
