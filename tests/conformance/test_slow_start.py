"""An implementation that starts slowly, and is two processes (a shell and its program), is
judged from when it has connected to the harness: no step's ``within`` counts from before
(docs/conformance.md, "How the implementation and the harness meet"). Before, the first
expectation of a worker or client case counted from the moment the command was started, so a
program needing more than its 5 s to start failed every case of its role."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from harness.conformance.runner import load_suite, run_suite
from harness.live.procnet import connects_to
from harness.registry import suite

WORKER = suite("dcp", "worker").reference_cmd


@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_worker_that_starts_after_its_first_expectation_would_have_ended_passes() -> None:
    # 6 s before the program even starts (the case allows 5 s for the REGISTER); no exec, so
    # the shell and the program are two processes of one group
    slow = f"sh -c 'sleep 6; {WORKER}'"
    [r] = run_suite(load_suite("dcp", "worker", only=["registers"]), cmd=slow)
    assert r.verdict == "pass", (r.clause, r.reason)


@pytest.mark.live
@pytest.mark.timeout(120)
def test_an_implementation_that_never_connects_fails_the_case_once_its_start_time_is_up() -> None:
    t0 = time.monotonic()
    [r] = run_suite(load_suite("dcp", "worker", only=["registers"]), cmd="sleep 60", start_timeout=0.5)
    assert (r.verdict, r.clause) == ("fail", "dcp.worker.register"), r.reason
    assert "within 5000 ms" in r.reason
    assert time.monotonic() - t0 < 30  # not the 60 s of the command: it is stopped and reaped


def test_a_connection_is_seen_for_the_process_group_that_holds_it() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        code = (f"import socket, time\ns = socket.create_connection(('127.0.0.1', {port}))\n"
                "print('up', flush=True)\ntime.sleep(30)\n")
        # a shell leading the group, the connecting Python its child
        proc = subprocess.Popen(["sh", "-c", f"{sys.executable} -c \"{code}\"; true"], stdout=subprocess.PIPE,
                                text=True, start_new_session=True)
        idle = subprocess.Popen(["sleep", "30"], start_new_session=True)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
            assert connects_to(proc.pid, {port})
            assert not connects_to(proc.pid, {port + 1 if port < 65535 else port - 1})
            assert not connects_to(idle.pid, {port})
            assert not connects_to(proc.pid, set())
        finally:
            for p in (proc, idle):
                p.kill()
                p.wait(timeout=10)
