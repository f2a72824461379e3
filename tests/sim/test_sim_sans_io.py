"""A node that imports nothing of zmq or simpy runs under the simulator unchanged."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from harness.sim import Simulation
from tests.sim import sim_test_nodes
from tests.sim.sim_test_nodes import EchoServer, PingClient

ROOT = Path(__file__).resolve().parents[2]


def test_test_nodes_import_only_the_node_contract_and_the_standard_library() -> None:
    tree = ast.parse(Path(sim_test_nodes.__file__).read_text())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert modules <= {"__future__", "typing", "harness.node"}, modules


def test_nodes_load_with_zmq_and_simpy_unimportable() -> None:
    code = (
        "import sys\n"
        "sys.modules['zmq'] = None; sys.modules['simpy'] = None  # any import of them now fails\n"
        "from tests.sim.sim_test_nodes import EchoServer, PingClient, Scripted, Ticker, Proxy\n"
        "assert 'simpy' not in [m for m, v in sys.modules.items() if v is not None]\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_sans_io_node_runs_in_the_simulator() -> None:
    sim = Simulation(3)
    sim.add_node("server", EchoServer, role="echo")
    sim.add_node("client", PingClient, role="client", config={"endpoints": ["tcp://server:5555"], "count": 5})
    sim.run(1_000_000_000)
    assert sim.node("client").replies == [0, 1, 2, 3, 4]  # type: ignore[union-attr]
