"""`zmq-harness run --live`: the clean DCP scenario over real loopback sockets, with the
reference nodes in-process and with the broker as an external process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.live.supervisor import running_processes
from harness.composition import LiveRunError, run_live
from harness.scenario import load_scenario, parse_scenario

pytestmark = [pytest.mark.live, pytest.mark.timeout(120)]


def short(text: str) -> str:
    return text.replace("duration: 6s", "duration: 2500ms").replace("until: 5s", "until: 2s")


def test_clean_scenario_passes_live(tmp_path: Path) -> None:
    scenario = parse_scenario(short(Path("scenarios/dcp/clean.yaml").read_text()), "clean.yaml")
    r = run_live(scenario, 1, str(tmp_path))
    assert r.ok, [v.to_dict() for v in r.failed]
    once = [v for v in r.verdicts if v.check == "exactly-once"][0]
    assert int(once.detail.split()[0]) > 50
    assert Path(r.trace_path).stat().st_size > 0
    # the harness's own garbage collections on its loop, for whoever reads a timing failure
    gcs = r.stats["collections"]
    assert gcs["count"] > 0 and 0 <= gcs["longest_ms"] <= gcs["cpu_ms"], gcs


def test_external_broker_process(tmp_path: Path) -> None:
    text = short(Path("scenarios/dcp/clean.yaml").read_text()).replace(
        "broker: {role: broker, config: {heartbeat: 250ms, liveness: 3}}",
        f'broker: {{role: broker, command: "{sys.executable} -m harness.cli node dcp broker --bind {{endpoint}} '
        f'--set heartbeat=250ms", ready: {{line: READY}}}}',
    )
    scenario = parse_scenario(text, "external.yaml")
    assert scenario.groups["broker"].command
    r = run_live(scenario, 1, str(tmp_path))
    assert r.ok, [v.to_dict() for v in r.failed]
    assert not [p for p in running_processes() if p.running]


def test_clock_skew_of_an_external_process_is_refused_with_a_one_line_reason(tmp_path: Path) -> None:
    """In-process nodes' clocks move live (tests/live/test_runtime_clock.py); a process's is the host's."""
    text = short(Path("scenarios/dcp/clean.yaml").read_text()).replace(
        "broker: {role: broker, config: {heartbeat: 250ms, liveness: 3}}",
        'broker: {role: broker, command: "zmq-harness node dcp broker --bind {endpoint}"}',
    ) + "faults:\n  - {clock_skew: broker, offset: 50ms}\n"
    with pytest.raises(LiveRunError, match="^clock_skew of 'broker' cannot run live: broker run.s. an external "
                                           "command, .*host's clock") as err:
        run_live(parse_scenario(text, "skew.yaml"), 1, str(tmp_path))
    assert "\n" not in str(err.value)


def test_cli_live_exit_status(tmp_path: Path) -> None:
    path = tmp_path / "clean.yaml"
    path.write_text(short(Path("scenarios/dcp/clean.yaml").read_text()))
    r = subprocess.run([str(Path(sys.executable).parent / "zmq-harness"), "run", str(path), "--live", "--out",
                        str(tmp_path / "out")], capture_output=True, text=True, timeout=100)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS dcp-clean seed 1 (live)" in r.stdout


@pytest.mark.parametrize("name", [pytest.param("clean", marks=pytest.mark.slow), "store-restart"])  # the time budget
def test_dafka_scenarios_pass_live(name: str, tmp_path: Path) -> None:
    r = run_live(load_scenario(f"scenarios/dafka/chaos/{name}.yaml"), 1, str(tmp_path))
    assert r.ok, [v.to_dict() for v in r.failed]
    if name == "store-restart":
        assert "across a restart" in next(v for v in r.verdicts if v.check == "acked-retrievable").detail
