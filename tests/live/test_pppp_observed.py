"""PPPP checks judge an external node from what the chaos proxy saw of its traffic with the
harness's nodes (harness.live_observe): the shipped lossy chaos file with the publisher, or the
subscribers, run as `zmq-harness node pppp ... --mutant NAME` processes (real sockets, loopback).
Before, a publisher under test was judged only through its subscribers' deliveries: a publisher
that numbered from 0, never heartbeated or spoke first passed every publisher check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.chaos_standins import ENTRIES, scenario_text
from harness.composition import RunResult, run_live
from harness.scenario import parse_scenario

pytestmark = [pytest.mark.live, pytest.mark.timeout(180)]
ROOT = Path(__file__).resolve().parents[2]


def run(entry: str, tmp_path: Path, mutant: str | None = None, seed: int = 1) -> RunResult:
    """The entry's file with its group run as the reference node's command, ``mutant`` broken."""
    e = ENTRIES[entry]
    text = scenario_text(e, "reference")
    if mutant is not None:
        role = "publisher" if "node pppp publisher" in text else "subscriber"
        text = text.replace(f"node pppp {role} ", f"node pppp {role} --mutant {mutant} ", 1)
    return run_live(parse_scenario(text, f"{entry}.yaml"), seed, str(tmp_path))


def failed(result: RunResult) -> dict[str, Any]:
    return {v.check: v for v in result.failed}


def test_an_external_publisher_that_numbers_from_zero_fails_sequence_numbers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_thread_leak: None) -> None:
    monkeypatch.chdir(ROOT)
    result = run("pp-lossy-pub", tmp_path, "numbers-from-zero")
    bad = failed(result)
    assert set(bad) == {"sequence-numbers"}, [v.to_dict() for v in result.failed]
    assert "#0 (numbers start at 1)" in bad["sequence-numbers"].detail
    assert "judged from what the chaos proxy saw: publisher" in bad["sequence-numbers"].detail
    assert result.stats["observed_traffic"]["by_node"] == {"publisher": result.stats["observed_traffic"]["sends"]}
    assert result.stats["observed_traffic"]["receives"] > 0  # the subscribers' messages, as handed to it


@pytest.mark.slow
@pytest.mark.parametrize(("entry", "mutant", "check"), [
    ("pp-lossy-pub", None, None),
    ("pp-lossy-pub", "publisher-no-heartbeat", "publisher-heartbeats"),
    ("pp-lossy-pub", "ignores-nacks", "resend-nacked"),
    ("pp-lossy-pub", "renumbers-resends", "resend-nacked"),
    ("pp-lossy-subs", None, None),
    ("pp-lossy-subs", "heartbeat-first", "subscribe-first"),
    ("pp-lossy-subs", "never-acks", "ack-timing"),
    ("pp-lossy-subs", "subscriber-no-heartbeat", "subscriber-heartbeats"),
    # a heartbeat every two intervals, or the first one after the whole idle time: caught in
    # simulation, and live once the slack is half an interval (one interval let them pass)
    ("pp-lossy-pub", "publisher-slow-heartbeat", "publisher-heartbeats"),
    ("pp-lossy-pub", "publisher-slow-first-heartbeat", "publisher-heartbeats"),
    ("pp-lossy-subs", "subscriber-slow-heartbeat", "subscriber-heartbeats"),
    ("pp-lossy-subs", "subscriber-slow-first-heartbeat", "subscriber-heartbeats"),
    ("pp-pubrestart-pub", None, None),  # killed and started again: its last words come before its crash
    ("pp-subrestart-subs", None, None),
])
def test_external_nodes_are_judged_from_the_proxys_view(entry: str, mutant: str | None, check: str | None,
                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = run(entry, tmp_path, mutant)
    if check is None:
        assert result.ok, [v.to_dict() for v in result.failed]
        assert result.stats["observed_traffic"]["sends"] > 0
        return
    assert check in failed(result), [v.to_dict() for v in result.verdicts]
    assert "no-node-errors" not in failed(result)
