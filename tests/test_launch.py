"""Endpoints of a run: live, a node's first endpoints are consecutive ports (an Event BUS
server's P, P+1, P+2), the same (node, purpose) always gets the same endpoint."""

from __future__ import annotations

from harness.launch import PORTS_PER_NODE, EndpointAllocator


def port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def test_live_endpoints_of_a_node_are_consecutive() -> None:
    alloc = EndpointAllocator("live")
    ports = [port(alloc("bus", p)) for p in ("snapshot", "publisher", "collector")]
    assert ports == [ports[0], ports[0] + 1, ports[0] + 2] and PORTS_PER_NODE == 3
    assert alloc("bus", "publisher") == f"tcp://127.0.0.1:{ports[1]}"
    assert port(alloc("bus", "extra")) not in ports  # beyond the block: a port of its own
    assert port(alloc("other", "x")) not in ports
    assert alloc.of("bus")[:3] == [f"tcp://127.0.0.1:{p}" for p in ports]


def test_sim_endpoints_are_virtual() -> None:
    alloc = EndpointAllocator("sim")
    assert alloc("bus", "snapshot") == "tcp://bus:5000" and alloc("bus", "publisher") == "tcp://bus:5001"
