"""What an external Raft peer's command line gets: the placeholders issue 12 names."""

from __future__ import annotations

from typing import Any

import pytest

from harness.launch import EndpointAllocator, placeholders
from harness.packages.raft import wire


def wired(config: dict[str, Any] | None = None, endpoints: EndpointAllocator | None = None
          ) -> dict[str, tuple[str, dict[str, Any]]]:
    nodes = {"a": ("peer", dict(config or {})), "b": ("peer", {}), "c": ("client", {})}
    wire(nodes, endpoints or EndpointAllocator("sim"))
    return nodes


def test_a_peer_command_gets_every_placeholder_of_the_issue() -> None:
    endpoints = EndpointAllocator("sim")
    nodes = wired({"election_min_ms": 150, "election_max_ms": 180}, endpoints)
    values = placeholders("a", endpoints.of("a"), 7, nodes["a"][1], datadir="/tmp/x")
    line = ("{id} {endpoint} {peers} {data_dir} {datadir} {election_min_ms} {election_max_ms} {seed} "
            "{endpoint1}").format(**values)
    router_a, router_b = endpoints("a", "router"), endpoints("b", "router")
    assert line == (f"a {router_a} a={router_a},b={router_b} /tmp/x /tmp/x 150 180 7 "
                    f"{endpoints('a', 'pub')}")


def test_election_timeouts_default_to_the_documents_preferred_values() -> None:
    cfg = wired()["b"][1]
    assert (cfg["election_min_ms"], cfg["election_max_ms"]) == (200, 300)
    assert "election_min_ms" not in wired()["c"][1]  # clients have none


def test_an_outsider_keeps_its_own_cluster_and_a_second_ident_needs_it() -> None:
    """A peer of another cluster sharing the endpoints (E-RAFT-10) says so; without it, two
    idents among the peers are a mistake in the file."""
    nodes = {"a": ("peer", {"cluster": "kv"}), "b": ("peer", {"cluster": "kv"}),
             "x": ("peer", {"cluster": "other", "outsider": True}), "c": ("client", {})}
    wire(nodes, EndpointAllocator("sim"))
    assert [nodes[n][1]["cluster"] for n in "abxc"] == ["kv", "kv", "other", "kv"]
    assert "outsider" not in nodes["x"][1] and nodes["x"][1]["peers"] == nodes["a"][1]["peers"]
    with pytest.raises(ValueError, match="outsider: true"):
        wire({"a": ("peer", {"cluster": "kv"}), "x": ("peer", {"cluster": "other"})}, EndpointAllocator("sim"))
