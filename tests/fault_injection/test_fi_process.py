"""Process faults on a real subprocess (SIGKILL and restart with the same data directory,
SIGSTOP/SIGCONT) and on in-process reference nodes, through one interface."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from fault_injection.netfaults import FaultEvent
from fault_injection.process import ProcessFaultError, ProcessFaults
from harness.live.runtime import LiveRuntime
from harness.live.supervisor import ManagedProcess, ReadyLine
from tests.fault_injection.zmtp_peers import wait_until
from tests.live.live_test_nodes import Ticker
from tests.live.test_runtime import kinds
from tests.live.test_supervisor import assert_reaped, proc_state

pytestmark = [pytest.mark.live, pytest.mark.timeout(60)]

# Counts its boots in DATADIR/boots, then prints a numbered tick every 20 ms.
TICKER = """
import os, sys, time
path = os.path.join(sys.argv[1], "boots")
boots = int(open(path).read()) + 1 if os.path.exists(path) else 1
open(path, "w").write(str(boots))
print("READY", boots, flush=True)
i = 0
while True:
    i += 1
    print("tick", i, flush=True)
    time.sleep(0.02)
"""


def ticks(proc: ManagedProcess) -> int:
    return sum(1 for line in proc.output("stdout").splitlines() if line.startswith("tick"))


def test_external_process_kill_restart_pause_resume(tmp_path: Path) -> None:
    datadir = tmp_path / "data"
    datadir.mkdir()
    proc = ManagedProcess([sys.executable, "-c", TICKER, "{datadir}"], values={"datadir": str(datadir)},
                          ready=ReadyLine("READY"), name="ext")
    events: list[FaultEvent] = []
    faults = ProcessFaults(None, {"ext": proc}, clock=time.monotonic_ns, on_event=events.append)
    proc.start()
    try:
        faults.pause("ext")
        assert wait_until(lambda: proc_state(proc.pid) == "T")  # type: ignore[arg-type]
        before = ticks(proc)
        time.sleep(0.3)
        assert ticks(proc) <= before + 1, "a stopped process prints nothing"
        faults.resume("ext")
        time.sleep(0.3)
        assert ticks(proc) > before + 3
        first = proc.pid
        faults.crash("ext")
        assert not proc.running and proc.returncode == -9
        assert_reaped(first)  # type: ignore[arg-type]
        faults.restart("ext")
        assert proc.running and proc.pid != first
        assert proc.ready_match is not None and proc.ready_match.string.split()[1] == "2", \
            "the same data directory: it counted its second boot"
        faults.pause("ext")
        faults.restart("ext")  # a paused process is killed and started again
        assert proc_state(proc.pid) in ("S", "R")  # type: ignore[arg-type]
    finally:
        proc.stop()
    assert [(e.node, e.kind, e.fault) for e in events] == [
        ("ext", "pause", "pause"), ("ext", "resume", "resume"), ("ext", "crash", "crash"),
        ("ext", "restart", "restart"), ("ext", "pause", "pause"), ("ext", "restart", "restart")]
    assert "SIGKILL" in events[2].detail  # type: ignore[operator]


def test_in_process_nodes_through_the_same_interface(no_thread_leak: None) -> None:
    with LiveRuntime() as rt:
        rt.add_node("t", Ticker, role="ticker", config={"period_ms": 10, "ticks": 10_000})
        rt.start()
        faults = ProcessFaults(rt, {}, clock=rt.now)
        rt.wait_for(lambda ds: len(kinds(ds, "tick")) >= 3, timeout=5)
        faults.pause("t")
        assert rt.is_paused("t")
        faults.resume("t")
        faults.resume("t")  # not paused: nothing to do
        faults.crash("t")
        assert rt.is_crashed("t")
        faults.restart("t")
        n = len(kinds(rt.deliveries, "tick"))
        rt.wait_for(lambda ds: len(kinds(ds, "tick")) > n + 2, timeout=5)
    with pytest.raises(ProcessFaultError):
        ProcessFaults(None, {}, clock=time.monotonic_ns).crash("nobody")
