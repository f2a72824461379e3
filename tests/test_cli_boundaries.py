"""The command line at its boundaries (issue 11, items 7-9 and 11): bad input gets one line and
exit status 2, never a traceback; `conform` reports as it goes, gives up on an implementation
that does not start, works from any directory and keeps its exit status through a pipe; the
main script fails when anything it runs fails; `--help` says what the tool does."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main

ROOT = Path(__file__).resolve().parents[1]
BIN = str(Path(sys.executable).parent / "zmq-harness")


def zh(*args: str, cwd: Path | str = ROOT) -> subprocess.CompletedProcess[str]:
    """`zmq-harness ARGS` in this process (a subprocess costs seconds of imports)."""
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as e:  # argparse's --help and usage errors
                code = int(e.code or 0)
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess([BIN, *args], code, out.getvalue(), err.getvalue())


def one_line_error(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert lines and all(n in lines[0] for n in needles), r.stderr


CLEAN = (ROOT / "scenarios/dcp/clean.yaml").read_text()


def scenario(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return str(path)


# ---- item 7: one-line errors ---------------------------------------------------------------------


@pytest.mark.parametrize("name,nodes,needle", [
    ("two-brokers", "  broker: {role: broker, count: 2}\n  c: {role: client}\n", "exactly one broker"),
    ("no-broker", "  w: {role: worker}\n  c: {role: client}\n", "exactly one broker"),
])
def test_a_topology_the_protocol_refuses_is_an_error_of_the_file(tmp_path: Path, name: str, nodes: str,
                                                                  needle: str) -> None:
    path = scenario(tmp_path, name, f"protocol: dcp\nname: {name}\nduration: 1s\nnodes:\n{nodes}")
    one_line_error(zh("run", path, "--seed", "1", "--out", str(tmp_path)), f"{name}.yaml:4: nodes:", needle)
    one_line_error(zh("run", path, "--live", "--out", str(tmp_path)), f"{name}.yaml:4: nodes:", needle)


def test_a_dafka_scenario_without_a_tower_is_an_error_of_the_file(tmp_path: Path) -> None:
    path = scenario(tmp_path, "no-tower", "protocol: dafka\nname: t\nduration: 1s\nnodes:\n"
                                          "  p: {role: producer, config: {topic: t}}\n")
    one_line_error(zh("run", path, "--out", str(tmp_path)), "no-tower.yaml:4: nodes:", "at least one tower")


@pytest.mark.parametrize("cmd,needle", [
    ("mybroker --bind {endpoint} --hb {heartbeat}", "unknown placeholder(s) {heartbeat}"),
    ("mybroker --bind {endpoint", "single '{'"),
    ("mybroker --bind {endpoint} }", "single '}'"),
    ("mybroker --name 'a b", "No closing quotation"),
])
def test_a_command_line_that_cannot_run_is_a_usage_error(cmd: str, needle: str) -> None:
    r = zh("conform", "dcp", "broker", "--cmd", cmd)
    one_line_error(r, "zmq-harness conform: --cmd:", needle)
    assert "}}}}" not in r.stderr


def test_node_on_a_port_in_use_is_one_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = zh("node", "dcp", "broker", "--bind", f"tcp://127.0.0.1:{port}")
    one_line_error(r, "zmq-harness node:", "Address already in use")


def external_broker(command: str, ready: str = "{line: READY}") -> str:
    return CLEAN.replace("broker: {role: broker, config: {heartbeat: 250ms, liveness: 3}}",
                         f'broker: {{role: broker, command: "{command}", ready: {ready}}}')


@pytest.mark.live
@pytest.mark.parametrize("command,ready,needle", [
    ("no-such-program --bind {endpoint}", "{line: READY}", "No such file or directory: 'no-such-program'"),
    (f"{sys.executable} -c 'import time; time.sleep(30)' {{endpoint}}", "{line: READY, timeout: 1s}",
     "no output line matching 'READY' within 1.0s"),
])
def test_a_live_command_that_is_missing_or_never_ready_is_one_line(tmp_path: Path, command: str, ready: str,
                                                                    needle: str) -> None:
    path = scenario(tmp_path, "external", external_broker(command, ready))
    r = zh("run", path, "--live", "--out", str(tmp_path))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("error: ") and "the implementation broker did not start" in r.stderr
    assert needle in r.stderr


def test_a_scenario_command_with_an_unknown_placeholder_is_one_line_and_starts_nothing(tmp_path: Path) -> None:
    """The placeholders a node gets depend on its wiring, so the file parses; the run stops
    before any process, proxy or capture starts, and names the group and the known ones."""
    path = scenario(tmp_path, "placeholder", external_broker("mybroker --bind {endpoint} --hb {heartbeat}"))
    one_line_error(zh("run", path, "--live", "--out", str(tmp_path)), "error:", "group 'broker'",
                   "unknown placeholder(s) {heartbeat}", "known: ")


def test_a_workload_naming_an_external_group_is_an_error_of_the_file(tmp_path: Path) -> None:
    """An external process has no command channel: asking it to send requests would fail
    mid-run (it did: a KeyError after every process had started)."""
    text = CLEAN.replace("clients: {role: client, count: 8, config: {timeout: 500ms, max_attempts: 10}}",
                         'clients: {role: client, count: 8, command: "myclient {endpoint}"}')
    assert text != CLEAN
    path = scenario(tmp_path, "driven", text)
    one_line_error(zh("run", path, "--live", "--out", str(tmp_path)), "driven.yaml:", "workload[0].nodes:",
                   "group 'clients', which runs an external command")


def test_run_live_of_what_the_live_runtime_cannot_do_is_one_line(tmp_path: Path) -> None:
    """The clock of an external process (the host's) cannot be moved; an in-process node's can."""
    workers = "workers: {role: worker, count: 4, config: {service: echo, behaviour: echo, service_time: 2ms}}"
    assert workers in CLEAN
    external = CLEAN.replace(workers, 'workers: {role: worker, count: 4, command: "my-worker {connect}"}')
    path = scenario(tmp_path, "skewed", external + 'faults:\n  - {at: 1s, clock_skew: "workers.*", offset: -50ms}\n')
    one_line_error(zh("run", path, "--live", "--out", str(tmp_path)), "skewed.yaml:", "clock", "external command")


def test_live_runs_once_so_several_seeds_are_refused(tmp_path: Path) -> None:
    one_line_error(zh("run", str(ROOT / "scenarios/dcp/clean.yaml"), "--live", "--seeds", "1-5"),
                   "--live runs a scenario once", "5 seeds")


def test_a_fault_that_would_end_after_the_run_is_refused(tmp_path: Path) -> None:
    text = CLEAN + "faults:\n  - {at: 5s, crash: broker, restart_after: 2s}\n"
    r = zh("run", scenario(tmp_path, "late", text), "--seed", "1", "--out", str(tmp_path))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "faults[0].restart_after" in r.stderr and "its restart at 7s comes after the end of the run" in r.stderr


# ---- item 8: conform ------------------------------------------------------------------------------


def test_conform_gives_up_on_an_implementation_that_never_starts(tmp_path: Path) -> None:
    r = zh("conform", "dcp", "broker", "--cmd", "false {endpoint}", "--out", str(tmp_path))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert "did not start for 3 cases in a row; the other 15 case(s) were not run" in r.stderr
    assert r.stdout.count("ERROR") == 3 and "0 passed, 0 failed, 3 errors" in r.stdout
    assert len(json.loads((tmp_path / "dcp-broker" / "results.json").read_text())["cases"]) == 3


@pytest.mark.parametrize("role", ["worker", "client"])
def test_endpoint_for_an_implementation_that_connects_is_a_usage_error(role: str) -> None:
    one_line_error(zh("conform", "dcp", role, "--endpoint", "tcp://127.0.0.1:5555"),
                   "--endpoint is for an implementation that is already up", "start it with --cmd")


def test_conform_works_from_any_directory_with_the_shipped_suites(tmp_path: Path) -> None:
    r = zh("conform", "dcp", "broker", "--sim", "--case", "ping-pong", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr


def test_suite_dir_runs_ones_own_cases(tmp_path: Path) -> None:
    mine = tmp_path / "mine" / "dcp" / "conformance" / "broker"
    mine.mkdir(parents=True)
    shutil.copy(ROOT / "scenarios/dcp/conformance/broker/ping-pong.yaml", mine / "my-ping.yaml")
    r = zh("conform", "dcp", "broker", "--sim", "--suite-dir", str(tmp_path / "mine"), "--out", str(tmp_path / "o"),
           cwd=tmp_path)
    assert r.returncode == 0 and "dcp broker: 1 case(s)" in r.stdout and "my-ping" in r.stdout, r.stdout + r.stderr


def test_every_scenario_file_ships_with_the_package() -> None:
    """The package-data patterns of pyproject.toml cover every file under scenarios/."""
    import tomllib

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["harness"]
    shipped = {p.resolve() for pat in patterns for p in (ROOT / "harness").glob(pat)}
    assert shipped == {p.resolve() for p in (ROOT / "scenarios").rglob("*.yaml")}


def test_conform_keeps_its_exit_status_through_a_pipe(tmp_path: Path) -> None:
    cmd = f"set -o pipefail; {BIN} conform dcp broker --sim --mutant no-pong --out {tmp_path} | head -1"
    r = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stdout == "dcp broker: 18 case(s)\n", (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "Broken pipe" not in r.stderr, r.stderr


@pytest.mark.live
def test_control_characters_from_the_implementation_are_escaped(tmp_path: Path) -> None:
    iut = "sh -c 'printf \"\\033[2J\\033[31mboom\\007\\n\"; sleep 0.5; exit 3' {endpoint}"
    r = zh("conform", "dcp", "worker", "--cmd", iut, "--case", "registers", "--out", str(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "\\x1b[2J\\x1b[31mboom\\x07" in r.stdout and "harness.robustness" in r.stdout


# ---- item 9: scripts/main ---------------------------------------------------------------------------


@pytest.mark.live
def test_the_main_script_fails_when_a_live_run_fails(tmp_path: Path) -> None:
    broken = scenario(tmp_path, "broken", external_broker("no-such-program {endpoint}"))
    r = subprocess.run([str(ROOT / "scripts/main")], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "SCENARIOS": "", "LIVE_SCENARIOS": broken, "NO_REPORT": "1", "NO_SETUP": "1",
                            "OUT": str(tmp_path / "runs")})
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"scripts/main: FAILED: {broken} (live)" in r.stderr


def test_run_keeps_its_exit_status_through_a_pipe(tmp_path: Path) -> None:
    # the broker strips the requests' metadata: no reply finds its request, exactly-once fails (a
    # broker dead from 1 s on no longer fails it: its clients' requests are still in flight)
    text = CLEAN.replace("broker: {role: broker,", "broker: {role: broker, mutant: strips-metadata,")
    assert "strips-metadata" in text
    path = scenario(tmp_path, "bad-broker", text)
    cmd = f"set -o pipefail; {BIN} run {path} --seed 1 --out {tmp_path} | true"
    r = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "Broken pipe" not in r.stderr, r.stderr


# ---- item 11: --help ---------------------------------------------------------------------------------


def test_help_says_what_the_tool_does_and_lists_roles() -> None:
    top = zh("--help").stdout
    assert "conformance and chaos-testing harness" in top and "``" not in top  # plain text, not reST
    assert "dcp       roles: broker, worker, client; suites: broker, worker, client" in top
    clauses = zh("clauses", "--help").stdout
    assert "Every MUST / SHOULD / MAY statement" in clauses and "--write" in clauses and "dafka     roles:" in clauses
    assert "dcp: broker, worker, client" in zh("conform", "--help").stdout


def test_a_node_command_imports_only_its_own_protocol() -> None:
    # every live conformance case starts a node process: other protocols' packages, the explore
    # driver (hypothesis) and pyarrow's compute functions would more than double its start-up
    # (1.25 s of CPU to READY before, 0.51 s after, measured 2026-11-27)
    probe = ("import sys\n"
             "from harness.cli import main\n"
             "sys.exit(main(['node', 'dcp', 'broker', '--bind', 'tcp://127.0.0.1:1', '--set', 'no_such=1']))\n")
    code = (f"import atexit, sys\n"
            f"atexit.register(lambda: print(sorted(m for m in sys.modules if m.startswith(("
            f"'harness.packages.', 'hypothesis', 'harness.explore.', 'pyarrow.compute'))), flush=True))\n{probe}")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    loaded = out.stdout.strip().splitlines()[-1]
    assert "harness.packages.dcp" in loaded, (out.stdout, out.stderr)
    for other in ("harness.packages.raft", "harness.packages.dafka", "harness.packages.eventbus",
                  "harness.packages.pppp", "hypothesis", "harness.explore.driver", "pyarrow.compute"):
        assert other not in loaded, (other, loaded)
    assert out.returncode == 2 and "heartbeat, liveness" in out.stderr, out.stderr  # the node command itself ran


def test_the_help_still_lists_every_protocols_roles() -> None:
    out = subprocess.run([sys.executable, "-m", "harness.cli", "node", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0
    for text in ("dcp: broker, worker, client", "raft: peer, client"):
        assert text in " ".join(out.stdout.split()), out.stdout
