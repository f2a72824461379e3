"""How each protocol's roles are tested: who the harness plays, which sockets its scripted
peers use, how the implementation under test (IUT) is wired, and the reference command that
starts a reference node as an IUT."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from harness.node import SocketType


@dataclass(frozen=True)
class RoleSuite:
    protocol: str
    role: str
    # scripted peer prefix -> (peer role, socket type, the peer binds?)
    peers: dict[str, tuple[str, SocketType, bool]]
    iut_binds: bool  # True: the IUT binds {endpoint} and peers connect; False: a peer binds it
    reference_cmd: str  # the reference node as an IUT (used by tests and docs)
    placeholders: dict[str, Any] = field(default_factory=dict)  # defaults for the --cmd template
    iut_config: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None  # in-process IUT config

    @property
    def peer_roles(self) -> dict[str, str]:
        return {prefix: spec[0] for prefix, spec in self.peers.items()}

    def cases_dir(self, root: str = "scenarios") -> str:
        return os.path.join(root, self.protocol, "conformance", self.role)

    def case_paths(self, root: str = "scenarios") -> list[str]:
        return sorted(glob.glob(os.path.join(self.cases_dir(root), "*.yaml")))


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
DCP = {
    "broker": RoleSuite(
        "dcp", "broker",
        peers={"worker": ("worker", SocketType.DEALER, False), "client": ("client", SocketType.DEALER, False)},
        iut_binds=True,
        reference_cmd=_NODE + " broker --bind {endpoint} --dialect {dialect} --set heartbeat={heartbeat_ms}ms "
                              "--set liveness={liveness}",
        placeholders={"heartbeat_ms": 200, "liveness": 3},
        iut_config=_dcp_config("broker"),
    ),
    "worker": RoleSuite(
        "dcp", "worker",
        peers={"broker": ("broker", SocketType.ROUTER, True)},
        iut_binds=False,
        reference_cmd=_NODE + " worker --connect {endpoint} --dialect {dialect} --identity iut --set service={service} "
                              "--set behaviour={behaviour} --set heartbeat={heartbeat_ms}ms --set liveness={liveness} "
                              "--set service_time={service_time_ms}ms",
        placeholders={"service": "echo", "behaviour": "echo", "heartbeat_ms": 200, "liveness": 3,
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
    ),
}

SUITES: dict[str, dict[str, RoleSuite]] = {"dcp": DCP}


def suite(protocol: str, role: str) -> RoleSuite:
    try:
        return SUITES[protocol][role]
    except KeyError:
        have = ", ".join(f"{p}:{r}" for p, roles in SUITES.items() for r in roles)
        raise KeyError(f"no conformance suite for {protocol}:{role} (suites: {have})") from None


def peer_roles_for(protocol: str) -> dict[str, dict[str, str]]:
    return {role: s.peer_roles for role, s in SUITES.get(protocol, {}).items()}
