"""SIGTERM and SIGINT to `zmq-harness conform` and `run --live` (issue 11, item 6): what CI
time-outs, `timeout` and container stops send. The harness stops and reaps every process it
started (each in a session of its own, so nothing else would), writes what it has (the trace,
and for `conform` results.json and JUnit of the cases that finished), prints its summary and
exits 128 + the signal (143, 130), without a traceback. Before, SIGTERM killed the harness
outright: the implementation under test stayed up, bound to its port, and the trace was lost.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable

import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.live, pytest.mark.timeout(120)]

BIN = str(Path(sys.executable).parent / "zmq-harness")


def pid_recording(pids: Path, cmd: str) -> str:
    """``cmd`` started through a shell that first appends its pid (kept by exec) to ``pids``."""
    return f"sh -c 'echo $$ >> {pids}; exec \"$0\" \"$@\"' {cmd}"


def wait_for_line(proc: subprocess.Popen[str], needle: str, timeout: float) -> list[str]:
    assert proc.stdout is not None
    seen: list[str] = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            line = proc.stdout.readline()
            seen.append(line)
            if needle in line:
                return seen
    raise AssertionError(f"no line with {needle!r} in {timeout}s: {seen}")


def interrupted(args: list[str], when: Callable[[subprocess.Popen[str]], None], sig: int, status: int
                ) -> tuple[str, str]:
    """Start zmq-harness ARGS, send it ``sig`` once ``when`` returns; (stdout, stderr) of a
    process that then exited with ``status`` and no traceback."""
    proc = subprocess.Popen([BIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        when(proc)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == status, stdout + stderr
    assert "Traceback" not in stderr, stderr
    return stdout, stderr


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def assert_reaped(pids: Path) -> None:
    listed = [int(x) for x in pids.read_text().split()]
    assert listed, "the implementation never started"
    assert not [p for p in listed if alive(p)], f"left running: {listed}"


def test_sigterm_to_conform_stops_reaps_and_writes_the_finished_cases(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    broker = pid_recording(pids, "{python} -m harness.cli node dcp broker --bind {endpoint} "
                                 "--set heartbeat={heartbeat_ms}ms --set liveness={liveness}")
    out = tmp_path / "out"

    def first_case_done(proc: subprocess.Popen[str]) -> None:
        wait_for_line(proc, "  pass ", 60)  # printed as it finished; the next case is running
        assert proc.poll() is None

    stdout, stderr = interrupted(["conform", "dcp", "broker", "--cmd", broker, "--out", str(out)], first_case_done,
                                 signal.SIGTERM, 143)
    assert "stopped by SIGTERM after" in stderr, stderr
    assert "passed," in stdout, "the summary is printed"
    results = json.loads((out / "dcp-broker" / "results.json").read_text())
    finished = len(results["cases"])
    assert 1 <= finished < 18
    junit = ET.parse(out / "dcp-broker" / "junit.xml").getroot()
    assert junit.get("tests") == str(finished)
    assert_reaped(pids)


def test_sigint_to_run_live_reaps_the_external_node_and_keeps_the_trace(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    text = Path("scenarios/dcp/clean.yaml").read_text().replace(
        "broker: {role: broker, config: {heartbeat: 250ms, liveness: 3}}",
        'broker: {role: broker, command: "' + pid_recording(pids, "{python} -m harness.cli node dcp broker "
                                                                 "--bind {endpoint} --set heartbeat=250ms")
        .replace('"', '\\"') + '", ready: {line: READY}}')
    scenario = tmp_path / "clean.yaml"
    scenario.write_text(text)
    out = tmp_path / "out"

    def under_way(proc: subprocess.Popen[str]) -> None:
        end = time.monotonic() + 30
        while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < end:
            time.sleep(0.1)
        time.sleep(3.5)  # the broker is up (about a second) and requests flow

    _, stderr = interrupted(["run", str(scenario), "--live", "--out", str(out)], under_way, signal.SIGINT, 130)
    assert "stopped by SIGINT" in stderr, stderr
    assert_reaped(pids)
    [trace] = list(out.rglob("live-seed-1.parquet"))
    assert pq.read_table(trace).num_rows > 100, "the trace of the interrupted run is flushed and readable"
