"""An implementation that floods the harness (issue: bad input loses nothing): a case still ends
in its own time with a verdict, its exchange stays bounded, and the evidence is what came just
before the failure — the harness's own sends and the last messages — not only the first
messages of the case. Before, the exchange kept its first 500 entries and dropped the rest: in
this case it ended 48 ms into a case that failed at 524 ms, and the reason's "received: ..."
named PONGs of those first milliseconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.conformance import conductor
from harness.conformance.exchange_log import GAP, HEAD, SENDS, TAIL
from harness.conformance.runner import load_suite, run_suite

STANDINS = Path(__file__).resolve().parents[1] / "standins"
FLOODING_BROKER = f"{{python}} {STANDINS / 'dcp_broker_floods.py'} --bind {{endpoint}} --seconds 20"


@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_flooding_broker_fails_with_the_messages_around_the_failure_as_evidence() -> None:
    [r] = run_suite(load_suite("dcp", "broker", only=["data-unmodified"]), cmd=FLOODING_BROKER)
    assert r.verdict == "fail" and r.clause == "dcp.broker.route-by-service", (r.clause, r.reason)
    assert r.elapsed_ms < 5000, "the case ends when its step's deadline passes, flood or not"
    assert "received: PONG" in r.reason  # the last messages from the worker's peer
    assert len(r.exchange) <= HEAD + TAIL + SENDS + 1
    [gap] = [e for e in r.exchange if e["dir"] == GAP]
    assert gap["fields"]["messages"] > 0
    sent = [e["message"] for e in r.exchange if e["dir"] == "out"]
    assert "REQUEST" in sent, "the harness's own sends are kept: the REQUEST the broker never routed"
    times = [e["t_ms"] for e in r.exchange if e["dir"] != GAP]
    assert times == sorted(times)
    # the tail holds the messages near the failure: nothing newer than what it kept was dropped
    # (before, the newest were; a time bound against the case's end failed once when the flooding
    # process, beside the full suite, sent nothing for its last 290 ms)
    assert r.exchange[-1]["t_ms"] >= gap["fields"]["to_ms"], (r.exchange[-1], gap)


@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_case_stops_with_an_error_once_the_flood_passes_what_it_keeps_in_memory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Each message a case takes in stays in memory for its expectations; past the cap (lowered
    # here from 200,000 so the flood reaches it at once) the case ends instead of growing.
    monkeypatch.setattr(conductor, "MAX_RECEIVED", 300)
    [r] = run_suite(load_suite("dcp", "broker", only=["data-unmodified"]), cmd=FLOODING_BROKER)
    assert r.verdict == "error", (r.verdict, r.clause, r.reason)
    assert "flooded the harness: more than 300 messages in this case" in r.reason
    assert "to worker.a, the last a PONG" in r.reason
    assert r.elapsed_ms < 400, "it stopped at the cap, not at the step's deadline"
