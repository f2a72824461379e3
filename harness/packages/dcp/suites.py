"""DCP's conformance suites, one per role: who the harness plays (scripted DEALER workers and
clients for a broker under test, a scripted ROUTER broker for a worker or a client), how the
implementation under test is wired, and the reference command that starts a reference node as
one. The cases are scenarios/dcp/conformance/<role>/*.yaml; docs/conformance.md."""

from __future__ import annotations

from typing import Any, Callable

from harness.node import SocketType
from harness.packages.base import RoleSuite


def _dcp_config(role: str) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    def build(endpoint: str, values: dict[str, Any]) -> dict[str, Any]:
        cfg: dict[str, Any] = {"dialect": values.get("dialect", "strict")}
        if role == "broker":
            cfg.update(bind=[endpoint], heartbeat_ms=int(values["heartbeat_ms"]), liveness=int(values["liveness"]))
        elif role == "worker":
            cfg.update(connect=endpoint, service=values["service"], behaviour=values["behaviour"],
                       heartbeat_ms=int(values["heartbeat_ms"]), liveness=int(values["liveness"]),
                       service_time_ms=int(values["service_time_ms"]), identity=b"iut")
        else:
            cfg.update(connect=endpoint, requests=int(values["requests"]), service=values["service"],
                       data=values["data"], timeout_ms=int(values["timeout_ms"]),
                       max_attempts=int(values["max_attempts"]), identity=b"iut")
        return cfg

    return build


_NODE = "{python} -m harness.cli node dcp"
SUITES: dict[str, RoleSuite] = {
    "broker": RoleSuite(
        "dcp", "broker",
        peers={"worker": ("worker", SocketType.DEALER, False), "client": ("client", SocketType.DEALER, False)},
        iut_binds=True,
        isolate_fields=("service",),
        reference_cmd=_NODE + " broker --bind {endpoint} --dialect {dialect} --set heartbeat={heartbeat_ms}ms "
                              "--set liveness={liveness}",
        # A long default interval: a scripted worker that stays silent for a short case is not
        # expired; the cases about heartbeats and expiry set their own (iut: {heartbeat_ms: ...}).
        placeholders={"heartbeat_ms": 1000, "liveness": 3},
        iut_config=_dcp_config("broker"),
    ),
    "worker": RoleSuite(
        "dcp", "worker",
        peers={"broker": ("broker", SocketType.ROUTER, True)},
        iut_binds=False,
        reference_cmd=_NODE + " worker --connect {endpoint} --dialect {dialect} --identity iut --set service={service} "
                              "--set behaviour={behaviour} --set heartbeat={heartbeat_ms}ms --set liveness={liveness} "
                              "--set service_time={service_time_ms}ms",
        # liveness: intervals without a word from the broker before the worker gives it up and
        # registers afresh (E-DCP-09). Long by default, so that only the broker-silence case,
        # which sets its own, sees a worker re-register by itself.
        placeholders={"service": "echo", "behaviour": "echo", "heartbeat_ms": 200, "liveness": 10,
                      "service_time_ms": 0},
        iut_config=_dcp_config("worker"),
    ),
    "client": RoleSuite(
        "dcp", "client",
        peers={"broker": ("broker", SocketType.ROUTER, True)},
        iut_binds=False,
        reference_cmd=_NODE + " client --connect {endpoint} --dialect {dialect} --identity iut --set requests={requests} "
                              "--set service={service} --set data={data} --set timeout={timeout_ms}ms "
                              "--set max_attempts={max_attempts}",
        placeholders={"requests": 1, "service": "echo", "data": "hello", "timeout_ms": 300, "max_attempts": 3},
        iut_config=_dcp_config("client"),
        completes=True,  # a client may exit 0 once every request is answered
    ),
}
