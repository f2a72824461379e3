"""``explore --live`` against an implementation of one's own: a DCP broker runs as a ``command``
node (an external process: here the reference broker started with a mutant that crashes on
malformed input), explore draws corrupt rules that the chaos proxy applies on real sockets,
finds the failure, shrinks it, and the written file (naming the command) replays it live.
Slow: every live run takes its duration in wall time plus the process's start."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.explore import explore
from harness.scenario import load_scenario

pytestmark = [pytest.mark.live, pytest.mark.slow, pytest.mark.timeout(600)]

MY_BROKER = """# A broker of your own: any program that speaks DCP and prints READY once bound.
protocol: dcp
name: my-broker
duration: 1200ms
seeds: 1
nodes:
  broker:
    role: broker
    command: "{zmq_harness} node dcp broker --bind {endpoint} --set heartbeat=100ms --set liveness=3 --mutant crash-on-malformed"
    ready: {line: READY, timeout: 10s}
  workers: {role: worker, count: 2, config: {service: echo, heartbeat: 100ms, liveness: 3}}
  clients: {role: client, count: 1, config: {timeout: 300ms, max_attempts: 20}}
workload:
  - {nodes: clients, op: request, service: echo, rate: 10/s, from: 200ms, until: 700ms}
explore:
  max_faults: 1
  kinds: [rule]
  messages: [PING]
  effects: {corrupt: 5%}
  quiet: 400ms
check: [exactly-once]
"""


def test_live_explore_finds_shrinks_and_replays_a_failure_of_an_external_broker(tmp_path: Path) -> None:
    path = tmp_path / "my-broker.yaml"
    path.write_text(MY_BROKER)
    report = explore(str(path), budget=4, live=True, out_dir=str(tmp_path / "out"), shrink_runs=4)
    assert report.failed and report.shrunk is not None and report.written is not None, report.notes
    assert report.prop is not None and report.prop.check in ("exactly-once", "process-alive")
    assert report.search is not None and report.search.runs <= 4
    faults = report.shrunk.candidate.faults
    assert len(faults) == 1 and faults[0]["rule"]["message"] == "PING" and faults[0]["rule"]["corrupt"] is True
    written = load_scenario(report.written)
    assert "--mutant crash-on-malformed" in (written.groups["broker"].command or "")
    assert "--live" in report.replay
    assert report.replayed, "the written file, run live again from disk, failed the same property"
