"""run_standalone in a real subprocess: READY line, real echo, clean exit on SIGTERM/SIGINT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import pytest
import zmq

from harness.trace import read_trace

pytestmark = [pytest.mark.live, pytest.mark.timeout(30)]

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standalone_echo.py")


def launch(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, SCRIPT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )


def read_ready(proc: subprocess.Popen[str]) -> list[str]:
    assert proc.stdout is not None
    line = proc.stdout.readline()  # bounded by the test timeout; the node prints it at once
    assert line.startswith("READY "), (line, proc.stderr.read() if proc.poll() is not None else "")
    return line.split()


def echo_once(endpoint: str, body: bytes, wait_ms: int = 5000) -> bytes | None:
    ctx = zmq.Context()
    try:
        sock = ctx.socket(zmq.DEALER)
        sock.connect(endpoint)
        sock.send(body)
        reply = sock.recv() if sock.poll(wait_ms) else None
        sock.close(linger=1000)  # let an unanswered message leave before the context ends
        return reply
    finally:
        ctx.term()


def finish(proc: subprocess.Popen[str], sig: int) -> tuple[int, str]:
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return proc.returncode, err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_ready_line_echo_and_clean_exit(sig: int, tmp_path: Any) -> None:
    trace = str(tmp_path / "node.parquet")
    proc = launch("--trace", trace)
    try:
        words = read_ready(proc)
        assert words[1] == "echo" and len(words) == 3
        endpoint = words[2]
        assert endpoint.startswith("tcp://127.0.0.1:") and not endpoint.endswith(":*")
        assert echo_once(endpoint, b"ping") == b"ping"
    finally:
        code, err = finish(proc, sig)
    assert code == 0, err
    rows = read_trace(trace).to_pylist()
    assert {r["kind"] for r in rows} >= {"recv", "send", "deliver"}
    assert {r["protocol"] for r in rows} == {"test"} and {r["node"] for r in rows} == {"echo"}


def test_node_exception_exits_1_with_traceback() -> None:
    proc = launch()
    try:
        endpoint = read_ready(proc)[2]
        assert echo_once(endpoint, b"boom", wait_ms=0) is None  # the node dies instead
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 1
    assert "asked to explode" in err and "ValueError" in err


def test_bind_conflict_exits_nonzero_with_reason() -> None:
    ctx = zmq.Context()
    holder = ctx.socket(zmq.ROUTER)
    try:
        holder.bind("tcp://127.0.0.1:*")
        taken = holder.getsockopt_string(zmq.LAST_ENDPOINT)
        proc = launch("--bind", taken)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode != 0 and "cannot bind" in err and taken in err
    finally:
        holder.close(linger=0)
        ctx.term()
