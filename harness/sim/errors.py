"""Errors the simulator raises. They all derive from ``SimulationError``."""

from __future__ import annotations


class SimulationError(Exception):
    """A misuse of the simulator or a broken topology (e.g. an endpoint bound twice)."""


class NodeError(SimulationError):
    """A node raised while handling an input; the cause is chained."""


class SocketUsageError(SimulationError, TypeError):
    """A node used a socket in a way its type does not allow (send on SUB, Subscribe on ROUTER)."""
