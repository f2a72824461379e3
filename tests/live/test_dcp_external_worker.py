"""A DCP worker run as an external process, its heartbeat interval judged from its sends as the
chaos proxy read them (harness/checkers/dcp_heartbeat.py, ``worker-interval``): the two mutants
that ping too seldom or never are caught on their clause; the reference worker and the stand-in
written from the document alone (tests/standins/dcp_standin.py) pass, judged."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.composition import RunResult, run_live
from harness.scenario import parse_scenario

pytestmark = [pytest.mark.live, pytest.mark.slow]

FILE = """protocol: dcp
name: dcp-external-worker
duration: 3s
nodes:
  broker: {role: broker, config: {heartbeat: 200ms, liveness: 5}}
  outside: {role: worker, command: "WORKER", config: {heartbeat: 200ms, liveness: 5}}
  clients: {role: client, count: 2, config: {timeout: 1500ms, max_attempts: 10}}
workload:
  - {nodes: clients, op: request, service: echo, rate: 5/s, from: 300ms, until: 1000ms, size: 16}
check: [exactly-once, worker-interval, worker-registers]
"""
REFERENCE = ("{zmq_harness} node dcp worker --connect {connect} --identity {name} --set service=echo "
             "--set heartbeat=200ms --set liveness=5")
STANDIN = ("{python} " + str(Path(__file__).parents[1] / "standins" / "dcp_standin.py") +
           " worker --connect {connect} --service echo --heartbeat-ms 200 --liveness 5")


def run(worker: str, tmp_path: Path) -> RunResult:
    return run_live(parse_scenario(FILE.replace("WORKER", worker), "dcp-external-worker.yaml"), 1, str(tmp_path))


@pytest.mark.parametrize("mutant", ["no-ping", "slow-ping"])
def test_an_external_worker_that_pings_too_seldom_is_caught_as_the_proxy_read_it(mutant: str, tmp_path: Path) -> None:
    r = run(f"{REFERENCE} --mutant {mutant}", tmp_path)
    failed = {v.check: v for v in r.failed}
    assert set(failed) == {"worker-interval"}, [v.to_dict() for v in r.failed]
    v = failed["worker-interval"]
    assert v.clause == "dcp.heartbeat.worker-interval" and "outside sent the broker nothing" in v.detail, v.detail
    assert "seen by the proxy" in v.detail and v.evidence[0]["seen_by"] == "proxy"


@pytest.mark.parametrize("worker", [REFERENCE, STANDIN], ids=["reference", "standin"])
def test_a_correct_external_worker_passes_and_is_judged(worker: str, tmp_path: Path) -> None:
    r = run(worker, tmp_path)
    assert r.ok, [v.to_dict() for v in r.failed]
    said = next(v.detail for v in r.verdicts if v.check == "worker-interval")
    assert "not judged" not in said and "outside +50 ms" in said, said
    assert not said.startswith("0 gap"), said
