"""Deterministic simulation of sans-IO nodes over virtual ZeroMQ sockets (see runtime.py)."""

from harness.sim.errors import NodeError, SimulationError, SocketUsageError
from harness.sim.network import DEFAULT_LATENCY, LatencyModel
from harness.sim.events import SimStats
from harness.sim.runtime import NEMESIS, RECONNECT_IVL_NS, Simulation

__all__ = [
    "DEFAULT_LATENCY",
    "LatencyModel",
    "NEMESIS",
    "NodeError",
    "RECONNECT_IVL_NS",
    "SimStats",
    "Simulation",
    "SimulationError",
    "SocketUsageError",
]
