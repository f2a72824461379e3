"""Helpers shared by the simulator tests (kept apart from the sans-IO test nodes)."""

from __future__ import annotations

from typing import Any

from harness.node import NS_PER_MS, Action, SocketSpec
from harness.sim import LatencyModel, Simulation
from harness.trace import RunInfo, TraceWriter, read_trace
from tests.sim.sim_test_nodes import Scripted

MS = NS_PER_MS
FIXED_1MS = LatencyModel(("fixed", MS))  # every link 1 ms: handshakes take 2 ms


def fixed_sim(seed: int = 1, trace: TraceWriter | None = None, **kwargs: Any) -> Simulation:
    return Simulation(seed, trace, latency=kwargs.pop("latency", FIXED_1MS), **kwargs)


def writer(tmp_path: Any, name: str = "trace.parquet", seed: int = 1) -> TraceWriter:
    return TraceWriter(str(tmp_path / name), RunInfo(f"test/{seed}", seed, "test", "sim"))


def scripted(sim: Simulation, name: str, *sockets: SocketSpec, start_at: int = 0,
             **config: Any) -> None:
    sim.add_node(name, Scripted, role="scripted", config={"sockets": list(sockets), **config},
                 start_at_ns=start_at)


def send(sim: Simulation, at: int, node: str, socket: str, *frames: bytes, msg_type: str = "",
         meta: dict[str, Any] | None = None) -> None:
    sim.command(at, node, {"op": "send", "socket": socket, "frames": list(frames),
                           "msg_type": msg_type, "meta": meta})


def do(sim: Simulation, at: int, node: str, *actions: Action) -> None:
    sim.command(at, node, {"op": "do", "actions": list(actions)})


def log(sim: Simulation, node: str, socket: str | None = None) -> list[list[bytes]]:
    n = sim.node(node)
    assert isinstance(n, Scripted), f"{node} is not running"
    return [f for s, f, _ in n.log if socket is None or s == socket]


def rows(path: str, **where: Any) -> list[dict[str, Any]]:
    out = read_trace(path).to_pylist()
    return [r for r in out if all(r[k] == v for k, v in where.items())]


def run_expecting_failure(sim: Simulation, until_ns: int, node: str, match: str) -> None:
    """Run; the node misbehaves, so the simulator crashes it (one policy for every node that
    raises or asks for the impossible), records why, and goes on."""
    import re

    sim.run(until_ns)
    failures = [f for f in sim.failures if f.node == node]
    assert failures, f"{node} did not fail"
    assert re.search(match, failures[0].error), failures[0].error
    assert not sim.is_running(node)
