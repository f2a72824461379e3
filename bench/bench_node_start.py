"""Start-up of a `zmq-harness node` process: wall and CPU time from exec to its READY line.

    .venv/bin/python bench/bench_node_start.py [--starts 5] [--no-record]

Every live conformance case starts one such process per implementation it stands in for, and a
slow start eats the case's waits, so this is measured for one role of each protocol, next to
the floor in the same run: a Python process that imports pyzmq and msgpack and prints READY
(what no node process can beat). The starts are interleaved (one of each command per round)
and each figure is the median of ``--starts``. CPU time is the process's user + system time
read from /proc at the moment its READY line arrives.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script from anywhere

from bench.common import command_line, record  # noqa: E402
from harness.live.supervisor import free_port  # noqa: E402

FLOOR = "python -c 'import zmq, msgpack' (floor)"
READY_TIMEOUT_S = 30.0


def commands() -> dict[str, list[str]]:
    """One role per protocol, with the settings it needs to bind and print READY."""
    node = [sys.executable, "-m", "harness.cli", "node"]

    def url(count: int = 1) -> str:
        return f"tcp://127.0.0.1:{free_port(count=count)}"

    raft = url()
    towers = f"{url()},{url()}"
    return {
        FLOOR: [sys.executable, "-c", "import zmq, msgpack; print('READY', flush=True)"],
        "dcp broker": [*node, "dcp", "broker", "--bind", url()],
        "pppp publisher": [*node, "pppp", "publisher", "--bind", url(), "--set", "channels=a"],
        "raft peer": [*node, "raft", "peer", "--set", "id=p1", "--set", f"endpoint={raft}",
                      "--set", f"peers=p1={raft}"],
        "eventbus server": [*node, "eventbus", "server", "--bind", url(3)],
        "dafka store": [*node, "dafka", "store", "--set", f"bind={url()}", "--set", f"towers={towers}"],
    }


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def start_once(cmd: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) from exec to the READY line; the process is stopped and reaped after."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        deadline = t0 + READY_TIMEOUT_S
        while True:
            line = proc.stdout.readline()  # a node prints nothing before READY
            if line.startswith("READY"):
                wall = time.perf_counter() - t0
                return wall, cpu_seconds(proc.pid)
            if not line or time.perf_counter() > deadline:
                raise RuntimeError(f"no READY from {' '.join(cmd)} (exit {proc.poll()})")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--no-record", action="store_true")
    args = ap.parse_args(argv)
    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    for _ in range(args.starts):
        for name, cmd in commands().items():  # fresh ports each round
            wall, cpu = start_once(cmd)
            walls.setdefault(name, []).append(wall)
            cpus.setdefault(name, []).append(cpu)
    floor_cpu = statistics.median(cpus[FLOOR])
    rows = ["| process | wall s to READY | CPU s to READY | CPU over the floor |", "|---|---|---|---|"]
    for name in walls:
        cpu = statistics.median(cpus[name])
        rows.append(f"| {name} | {statistics.median(walls[name]):.2f} | {cpu:.2f} | {cpu - floor_cpu:+.2f} |")
    load = os.getloadavg()[0]
    body = "\n".join([
        f"Median of {args.starts} starts each, interleaved; load average {load:.1f} at the end.", "", *rows, "",
        "Before 2026-11-27 a node process needed 1.25 s of CPU to READY (the parser built help listing every "
        "protocol's roles, importing all five packages; hypothesis and pyarrow.compute were imported eagerly); "
        "tests/test_cli_boundaries.py keeps a node importing only its own protocol's package."])
    print(body)
    if not args.no_record:
        record("Node processes: start-up to READY", body, command_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
