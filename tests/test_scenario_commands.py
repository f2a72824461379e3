"""A scenario's ``command`` runs this installation's harness (issue 11, item 11): ``{python}``
is this Python, as in ``conform --cmd``, and a command whose first word is ``zmq-harness``
runs the one beside it, so neither needs the virtual environment on PATH (nor the repository
as the working directory)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.launch import own_zmq_harness, placeholders, zmq_harness_command

CLEAN = Path("scenarios/dcp/clean.yaml").resolve()
BROKER = "broker: {role: broker, config: {heartbeat: 250ms, liveness: 3}}"


def test_placeholders_name_this_python_and_this_zmq_harness() -> None:
    values = placeholders("broker", ["tcp://127.0.0.1:5555"], 1)
    assert values["python"].strip("'") == sys.executable
    assert values["zmq_harness"] == zmq_harness_command()
    assert Path(zmq_harness_command().split()[0].strip("'")).parent == Path(sys.executable).parent
    assert own_zmq_harness("zmq-harness node dcp broker") == "{zmq_harness} node dcp broker"
    assert own_zmq_harness("zmq-harness-other x") == "zmq-harness-other x"  # only the word itself


@pytest.mark.live
@pytest.mark.timeout(120)
@pytest.mark.parametrize("start", ["zmq-harness node",
                                   pytest.param("{python} -m harness.cli node", marks=pytest.mark.slow)])  # time budget
def test_a_scenario_command_runs_without_the_venv_on_path(tmp_path: Path, start: str) -> None:
    broker = (f'broker: {{role: broker, command: "{start} dcp broker --bind {{endpoint}} --set heartbeat=250ms '
              f'--set liveness=3", ready: {{line: READY}}}}')
    text = CLEAN.read_text()
    assert BROKER in text
    text = text.replace(BROKER, broker).replace("duration: 6s", "duration: 2500ms").replace("until: 5s", "until: 2s")
    path = tmp_path / "external-broker.yaml"
    path.write_text(text)
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # no virtual environment on it
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(path), "--live", "--out", str(tmp_path / "out")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=110)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    assert "PASS dcp-clean" in r.stdout


def test_an_external_brokers_command_gets_the_interval_the_harness_workers_use() -> None:
    """The broker and its workers agree on the heartbeat interval (E-DCP-09): the harness's
    workers take the broker group's setting, or the default, and an external broker's command
    line gets the same as {heartbeat_ms} and {liveness} (before, only when the file set them)."""
    from harness.registry import package

    for broker_cfg, want in (({}, ("1000", "3")), ({"heartbeat_ms": 100, "liveness": 5}, ("100", "5"))):
        nodes = {"broker": ("broker", dict(broker_cfg)), "w": ("worker", {}), "c": ("client", {})}
        package("dcp").wire(nodes, lambda node, purpose: f"tcp://127.0.0.1:{5000 + len(node)}")
        values = placeholders("broker", ["tcp://127.0.0.1:5006"], 1, nodes["broker"][1])
        assert (values["heartbeat_ms"], values["liveness"]) == want
        assert (nodes["w"][1]["heartbeat_ms"], nodes["w"][1]["liveness"]) == (int(want[0]), int(want[1]))
