"""PPPP's conformance suites, one per role: for a publisher under test the harness plays
subscribers (DEALERs connecting to the publisher's {endpoint}), for a subscriber under test it
plays the publisher (a ROUTER bound at {endpoint}). The cases are
scenarios/pppp/conformance/<role>/*.yaml; docs/conformance-pppp.md.

What a subscriber hands its application is read from its standard output, one JSON line per
message (`reference_nodes.pppp.common.delivery_line`), by the cases' ``expect_output`` steps.
"""

from __future__ import annotations

from typing import Any, Callable

from harness.node import SocketType
from harness.packages.base import RoleSuite
from harness.protocols.pppp import TO_PUBLISHER, TO_SUBSCRIBER

# The agreed-upon times the cases are written for (E-PPPP-12): the first idle time well apart
# from the idle time, so that a heartbeat or an ACK/NACK that comes after the wrong one of
# them is told apart over real sockets on a loaded machine too. Cases about disconnection set a
# shorter idle time of their own (iut: {idle_ms: ...}).
TIMES = {"first_idle_ms": 100, "idle_ms": 600, "dead_multiple": 3, "grace_ms": 30000}
_TIMES_CMD = ("--set first_idle={first_idle_ms}ms --set idle={idle_ms}ms --set liveness={dead_multiple}")


def _config(role: str) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    def build(endpoint: str, values: dict[str, Any]) -> dict[str, Any]:
        from reference_nodes.pppp.common import channel_list

        cfg: dict[str, Any] = {"dialect": values.get("dialect", "strict"),
                               "first_idle_ms": int(values["first_idle_ms"]), "idle_ms": int(values["idle_ms"]),
                               "liveness": int(values["dead_multiple"]),
                               "channels": channel_list(str(values["channels"]), "channels")}
        if role == "publisher":
            cfg.update(bind=[endpoint], count=int(values["count"]), rate=float(values["rate"]),
                       grace_ms=int(values["grace_ms"]))
        else:
            cfg.update(connect=endpoint, identity=b"iut")
        return cfg

    return build


_NODE = "{python} -m harness.cli node pppp"
SUITES: dict[str, RoleSuite] = {
    "publisher": RoleSuite(
        "pppp", "publisher",
        peers={"subscriber": ("subscriber", SocketType.DEALER, False)},
        iut_binds=True,
        peer_channels={"subscriber": TO_SUBSCRIBER},
        reference_cmd=_NODE + " publisher --bind {endpoint} --dialect {dialect} --set channels={channels} "
                              "--set count={count} --set rate={rate} " + _TIMES_CMD + " --set grace={grace_ms}ms",
        # The publisher publishes {count} messages on each of {channels}, {rate} per second per
        # channel, from the first SUBSCRIBE it gets (docs/conformance-pppp.md).
        placeholders={"channels": "news,weather", "count": 5, "rate": 20, **TIMES},
        iut_config=_config("publisher"),
    ),
    "subscriber": RoleSuite(
        "pppp", "subscriber",
        peers={"publisher": ("publisher", SocketType.ROUTER, True)},
        iut_binds=False,
        peer_channels={"publisher": TO_PUBLISHER},
        reference_cmd=_NODE + " subscriber --connect {endpoint} --dialect {dialect} --set channels={channels} "
                              + _TIMES_CMD,
        placeholders={"channels": "news", **{k: v for k, v in TIMES.items() if k != "grace_ms"}},
        iut_config=_config("subscriber"),
    ),
}
