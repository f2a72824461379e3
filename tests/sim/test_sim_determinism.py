"""DESIGN rule 3: one seed fixes the whole run — byte-identical Parquet traces, also across
processes with different hash seeds; another seed gives another trace."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fault_injection.nemesis import (
    ClockSkew,
    Crash,
    Partition,
    Pause,
    SlowLink,
    install,
)
from fault_injection.rules import Distribution, RuleSet
from harness.sim import LatencyModel, Simulation
from harness.trace import RunInfo, TraceWriter, read_trace
from tests.sim.sim_test_nodes import EchoServer, PingClient, Proxy, Subscriber, Ticker

MS = 1_000_000
ROOT = Path(__file__).resolve().parents[2]


def run_scenario(seed: int, path: str) -> dict[str, int]:
    """Echo server and clients, an XPUB ticker behind an XSUB/XPUB proxy with subscribers,
    random latency, every kind of message rule and every kind of nemesis fault."""
    trace = TraceWriter(path, RunInfo(f"determinism/{seed}", seed, "determinism", "sim"), row_group_rows=4096)
    rules = RuleSet.from_dicts([
        {"message": "request", "from": "client-0", "drop": "10%"},
        {"message": "reply", "delay": "uniform(1ms, 5ms)", "probability": 0.2},
        {"message": "tick", "to": "proxy", "duplicate": "10%"},
        {"message": "forward", "reorder": {"window": "3ms"}, "probability": 0.1},
    ])
    sim = Simulation(seed, trace, latency=LatencyModel(("uniform", 200_000, 2 * MS),
                                                       links={("sub-*", "proxy"): ("exponential", MS)}),
                     rules=rules)
    sim.add_node("server", EchoServer, role="echo")
    for i in range(3):
        sim.add_node(f"client-{i}", PingClient, role="client",
                     config={"endpoints": ["tcp://server:5555"], "count": 10**6, "window": 2,
                             "think_ns": 3 * MS},
                     start_at_ns=i * 7 * MS)
    sim.add_node("ticker", Ticker, role="publisher",
                 config={"type": "XPUB", "bind": ["tcp://ticker:1"], "topics": [b"a", b"b", b"c"],
                         "period_ns": 4 * MS, "welcome": b"hello"})
    sim.add_node("proxy", Proxy, role="proxy",
                 config={"upstream": ["tcp://ticker:1"], "downstream": "tcp://proxy:2"})
    for i, topics in enumerate(([b"a"], [b"b", b"c"], [b""])):
        sim.add_node(f"sub-{i}", Subscriber, role="subscriber",
                     config={"connect": ["tcp://proxy:2"], "topics": topics}, start_at_ns=i * 50 * MS)
    install([
        Crash(200 * MS, "server", restart_after=100 * MS),
        Crash(250 * MS, "sub-1", restart_after=30 * MS),
        Partition(400 * MS, 600 * MS, (("client-1",), ("server",))),
        Partition(450 * MS, 500 * MS, (("proxy",), ("sub-*",)), one_way=True),
        Pause(300 * MS, 350 * MS, "proxy"),
        ClockSkew(100 * MS, "client-2", offset=5 * MS, drift=0.01),
        SlowLink(700 * MS, 800 * MS, "client-0", "server", Distribution.parse("fixed(10ms)")),
    ], sim, lambda target: [target])
    for i in range(3):
        sim.command(900 * MS, f"client-{i}", {"op": "status", "corr": f"status-{i}"})
    sim.run(1_000 * MS)
    trace.close()
    return {"delivered": sim.stats.delivered, "dropped": sim.stats.dropped_total, "rows": trace.rows_written}


def test_same_seed_gives_byte_identical_traces_and_another_seed_does_not(tmp_path: Path) -> None:
    paths = [str(tmp_path / f"run{i}.parquet") for i in range(3)]
    stats = [run_scenario(seed, p) for seed, p in zip((42, 42, 43), paths, strict=True)]
    assert stats[0]["delivered"] > 2_000 and stats[0]["dropped"] > 20  # a non-trivial run
    blobs = [Path(p).read_bytes() for p in paths]
    assert blobs[0] == blobs[1]
    assert blobs[0] != blobs[2]
    kinds = set(read_trace(paths[0]).column("kind").to_pylist())
    assert {"send", "recv", "drop", "fault", "crash", "restart", "pause", "resume", "deliver",
            "command", "connect", "disconnect"} <= kinds
    faults = set(read_trace(paths[0]).column("fault").to_pylist())
    assert {"drop:rule-0", "delay:rule-1", "duplicate:rule-2", "reorder:rule-3", "partition",
            "heal", "crash", "clock", "slow-link", "hwm"} - faults <= {"hwm"}


def test_trace_does_not_depend_on_the_process_hash_seed(tmp_path: Path) -> None:
    here = str(tmp_path / "here.parquet")
    run_scenario(7, here)
    there = str(tmp_path / "there.parquet")
    code = ("import sys; from tests.sim.test_sim_determinism import run_scenario; "
            "run_scenario(7, sys.argv[1])")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    subprocess.run([sys.executable, "-c", code, there], cwd=ROOT, env=env, check=True, timeout=120)
    assert Path(here).read_bytes() == Path(there).read_bytes()
