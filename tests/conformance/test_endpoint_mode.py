"""`zmq-harness conform ... --endpoint`: one implementation that is already running serves every
case; per-case service names keep the cases apart, and cases that need their own settings are
skipped with the reason."""

from __future__ import annotations

import sys

import pytest

from harness.conformance.runner import load_suite, run_suite
from harness.live.supervisor import ManagedProcess, ReadyLine, free_port

pytestmark = [pytest.mark.live, pytest.mark.timeout(180)]


def broker(endpoint: str, mutant: str | None = None) -> ManagedProcess:
    cmd = [sys.executable, "-m", "harness.cli", "node", "dcp", "broker", "--bind", endpoint, "--set", "heartbeat=1s"]
    return ManagedProcess(cmd + (["--mutant", mutant] if mutant else []), ready=ReadyLine("READY"))


def test_a_running_reference_broker_passes_every_case_it_can_serve() -> None:
    ep = f"tcp://127.0.0.1:{free_port()}"
    with broker(ep):
        results = run_suite(load_suite("dcp", "broker"), endpoint=ep)
    verdicts = {r.case.id: r.verdict for r in results}
    assert "fail" not in verdicts.values() and "error" not in verdicts.values(), verdicts
    skipped = [r for r in results if r.verdict == "skipped"]
    assert all("--cmd" in r.reason for r in skipped) and len(skipped) < len(results) // 3


def test_a_running_broken_broker_fails_on_its_clause() -> None:
    ep = f"tcp://127.0.0.1:{free_port()}"
    with broker(ep, "no-pong"):
        results = run_suite(load_suite("dcp", "broker", only=["ping-pong"]), endpoint=ep)
    assert [(r.verdict, r.clause) for r in results] == [("fail", "dcp.heartbeat.pong")]
