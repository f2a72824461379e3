"""How a conformance run judges an implementation's process that ends during a case (issue 11,
items 1-2), against stand-ins of real programs (tests/standins, docs/real-implementations.md):

* a role that runs to completion (a DCP client with a count of requests) may exit 0 once its
  work is done: its cases pass, and expectations of silence hold after it is gone;
* any other exit (non-zero, by a signal, or status 0 of a role that does not run to completion)
  is a crash: its own verdict, ``harness.robustness`` at MUST level, at once (not when the
  waiting step times out), with how it ended, the last messages and its last output.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from harness.conformance.conductor import ROBUSTNESS
from harness.conformance.runner import load_suite, run_suite
from harness.live.external import describe_exit

STANDINS = Path(__file__).resolve().parents[1] / "standins"
CLIENT = (f"{{python}} {STANDINS / 'dcp_client_exits.py'} --connect {{endpoint}} --requests {{requests}} "
          "--timeout-ms {timeout_ms} --service {service}")
SEGFAULTING_BROKER = (f"{{python}} {STANDINS / 'dcp_broker_segfaults.py'} --bind {{endpoint}} "
                      "--heartbeat-ms {heartbeat_ms} --liveness {liveness}")


def test_describe_exit_names_signals_also_through_a_shell() -> None:
    assert describe_exit(0) == "status 0"
    assert describe_exit(-signal.SIGSEGV) == "signal SIGSEGV (11)"
    assert describe_exit(134) == "status 134 (128 + 6: SIGABRT in a shell)"
    assert describe_exit(2) == "status 2"


@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_client_that_exits_0_once_answered_passes_the_cases_of_silence() -> None:
    # Before: each failed with "the implementation exited (status 0) during the case", on
    # dcp.heartbeat.client-no-heartbeat, dcp.client.pipelining and dcp.client.retry.
    cases = load_suite("dcp", "client", only=["no-heartbeat", "pipelining", "retry"])
    results = run_suite(cases, cmd=CLIENT)
    assert [(r.case.id, r.verdict) for r in results] == [(c.id, "pass") for c in cases], \
        [(r.case.id, r.clause, r.reason) for r in results]


@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_client_that_exits_non_zero_has_crashed() -> None:
    [r] = run_suite(load_suite("dcp", "client", only=["no-heartbeat"]), cmd=CLIENT + " --status 3")
    assert (r.verdict, r.clause, r.level) == ("fail", ROBUSTNESS, "MUST"), r.reason
    assert "exited with status 3 during the case" in r.reason
    assert "1 of 1 request(s) answered" in r.iut_output  # its last output
    assert r.elapsed_ms < 1500, "judged when it died, not when the waiting step ran out"


@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_broker_that_segfaults_fails_robustness_not_the_waiting_should_clause() -> None:
    # Before: filed under dcp.broker.service-queue (SHOULD), the clause of the step that was
    # waiting when DagBox's broker died, 500 ms later, with "status -11" in a parenthesis.
    [r] = run_suite(load_suite("dcp", "broker", only=["worker-expiry"]), cmd=SEGFAULTING_BROKER)
    assert (r.verdict, r.clause, r.level) == ("fail", ROBUSTNESS, "MUST"), r.reason
    assert "signal SIGSEGV (11)" in r.reason
    assert "routing a request for 'echo' to a worker" in r.iut_output
    sent = [e["message"] for e in r.exchange if e["dir"] == "out"]
    assert sent[-1] == "REQUEST", "the last messages before the crash are its evidence"


@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_broker_that_exits_0_has_crashed_too() -> None:
    # A broker does not run to completion: even status 0 in the middle of a case is a crash.
    cmd = f"{sys.executable} -c 'import time; time.sleep(0.8)'"
    [r] = run_suite(load_suite("dcp", "broker", only=["ping-pong"]), cmd=cmd + " # {endpoint}")
    assert r.verdict == "error", "it never listened at {endpoint}: did not start"
    [r] = run_suite(load_suite("dcp", "worker", only=["ping"]), cmd=cmd + " # {endpoint}")
    assert (r.verdict, r.clause) == ("fail", ROBUSTNESS), r.reason
    assert "status 0 during the case (a worker does not run to completion)" in r.reason


def test_a_crash_seen_only_after_the_waiting_step_timed_out_is_still_the_verdict() -> None:
    """Under load, a mutant that dies on malformed input was once filed under the clause of the
    step that timed out waiting for it (eventbus.wire.grammar), because its exit was seen after
    the timeout: the crash is the verdict, the step's failure stays in the reason."""
    from types import SimpleNamespace

    from harness.conformance.runner import CaseResult, _with_process

    case = load_suite("dcp", "broker")[0]
    iut = SimpleNamespace(process=SimpleNamespace(tail=lambda n: "last words"))
    timed_out = CaseResult(case, "fail", "expected PONG within 1000 ms; received: nothing", "dcp.heartbeat.pong")
    r = _with_process(timed_out, iut, -signal.SIGSEGV, completes=False)
    assert (r.verdict, r.clause, r.level) == ("fail", ROBUSTNESS, "MUST")
    assert "signal SIGSEGV" in r.reason and "received: nothing [dcp.heartbeat.pong]" in r.reason
    assert r.iut_output == "last words"
    # a role that runs to completion and exited 0 keeps the step's verdict
    kept = _with_process(CaseResult(case, "fail", "x", "dcp.heartbeat.pong"), iut, 0, completes=True)
    assert kept.clause == "dcp.heartbeat.pong"
