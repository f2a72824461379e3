"""A DCP broker run as an external process, judged from the wire (harness/checkers/dcp_external.py):
what the harness's workers and clients sent it and received from it. The mutants that passed
every check as the external broker (their checks read a reference broker's own sends) are caught
on their clause; the reference broker and the stand-in written from the document alone
(tests/standins/dcp_standin.py) pass the same file.

The file overloads two slow workers for a second (40 requests/s for 33/s of capacity), so that
requests wait and a broker that hands them to busy workers shows it in the counts; the workers
give the broker 10 intervals before they reconnect, so their connections last long enough for a
PING's answer to be owed (2 intervals + 1 s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.composition import RunResult, run_live
from harness.scenario import parse_scenario

pytestmark = [pytest.mark.live, pytest.mark.slow]

FILE = """protocol: dcp
name: dcp-external-broker
duration: 3s
nodes:
  broker: {role: broker, command: "BROKER", config: {heartbeat: 200ms, liveness: 3}}
  workers: {role: worker, count: 2, config: {service: echo, behaviour: echo, service_time: 60ms, heartbeat: 200ms, liveness: 10}}
  clients: {role: client, count: 2, config: {timeout: 1500ms, max_attempts: 10}}
workload:
  - {nodes: clients, op: request, service: echo, rate: 20/s, from: 300ms, until: 1300ms, size: 32}
check: [exactly-once, metadata-unchanged, one-request-per-worker, heartbeat-answers, reply-unchanged]
"""
# Heartbeats lost on the way both ways: the workers' side cannot tell a broker that did not answer
# from an answer lost, so heartbeat-answers is judged where the chaos proxy observes the broker.
LOSSY = """faults:
  - rule: {message: PING, drop: 25%}
  - rule: {message: PONG, drop: 25%}
"""
REFERENCE = "{zmq_harness} node dcp broker --bind {endpoint} --set heartbeat={heartbeat_ms}ms --set liveness={liveness}"
STANDIN = ("{python} " + str(Path(__file__).parents[1] / "standins" / "dcp_standin.py") +
           " broker --bind {endpoint} --heartbeat-ms {heartbeat_ms} --liveness {liveness}")


def run(broker: str, tmp_path: Path, faults: str = "") -> RunResult:
    text = FILE.replace("BROKER", broker) + faults
    return run_live(parse_scenario(text, "dcp-external-broker.yaml"), 1, str(tmp_path))


@pytest.mark.parametrize("mutant,check,clause", [
    ("no-pong", "heartbeat-answers", "dcp.heartbeat.pong"),
    ("busy-worker", "one-request-per-worker", "dcp.broker.one-request-per-worker"),
    ("readdresses-reply", "reply-unchanged", "dcp.reply.format"),
    ("no-register-echo", "heartbeat-answers", "dcp.broker.register-confirm"),
])
def test_a_mutant_external_broker_is_caught_from_the_wire(mutant: str, check: str, clause: str,
                                                           tmp_path: Path) -> None:
    r = run(f"{REFERENCE} --mutant {mutant}", tmp_path)
    failed = {v.check: v for v in r.failed}
    assert set(failed) == {check}, [v.to_dict() for v in r.failed]
    assert failed[check].clause == clause, failed[check].detail
    assert failed[check].evidence, failed[check].detail


@pytest.mark.parametrize("broker", [REFERENCE, STANDIN], ids=["reference", "standin"])
def test_a_correct_external_broker_passes_and_is_judged(broker: str, tmp_path: Path) -> None:
    r = run(broker, tmp_path)
    assert r.ok, [v.to_dict() for v in r.failed]
    said = {v.check: v.detail for v in r.verdicts}
    for check in ("heartbeat-answers", "reply-unchanged"):
        assert "not judged" not in said[check], said[check]
    # (the counts are judged; a busy worker with signals to spare is named as not judged)
    assert "never more than the ready signals" in said["one-request-per-worker"], said["one-request-per-worker"]
    assert "judged as its workers received" in said["heartbeat-answers"]
    assert not said["heartbeat-answers"].startswith("0 PING"), said["heartbeat-answers"]


@pytest.mark.parametrize("mutant,clause", [("no-pong", "dcp.heartbeat.pong"),
                                           ("no-register-echo", "dcp.broker.register-confirm")])
def test_on_a_lossy_file_a_mutant_external_broker_is_caught_where_the_proxy_sees_it(mutant: str, clause: str,
                                                                                     tmp_path: Path) -> None:
    r = run(f"{REFERENCE} --mutant {mutant}", tmp_path, LOSSY)
    failed = {v.check: v for v in r.failed}
    assert set(failed) == {"heartbeat-answers"}, [v.to_dict() for v in r.failed]
    assert failed["heartbeat-answers"].clause == clause and "handed to it" in failed["heartbeat-answers"].detail
    assert failed["heartbeat-answers"].evidence[0]["seen_by"] == "proxy"


@pytest.mark.parametrize("broker", [REFERENCE, STANDIN], ids=["reference", "standin"])
def test_on_a_lossy_file_a_correct_external_broker_passes_and_is_judged(broker: str, tmp_path: Path) -> None:
    r = run(broker, tmp_path, LOSSY)
    assert r.ok, [v.to_dict() for v in r.failed]
    said = next(v.detail for v in r.verdicts if v.check == "heartbeat-answers")
    assert "not judged" not in said and "where the proxy handed it the PINGs" in said, said
    assert not said.startswith("0 PING"), said
    assert r.stats["proxy"]["effects"], r.stats["proxy"]  # the rules did lose heartbeats
