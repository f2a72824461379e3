"""Event BUS conformance suites, one per role (docs/conformance-eventbus.md); the cases are
scenarios/eventbus/conformance/<role>/*.yaml.

Every scripted peer is one socket, named after the server port it belongs to (E-EVENTBUS-16):

* server under test (it binds P, P+1 and P+2): the harness plays clients, each with up to three
  sockets ``snapshot.<x>`` (DEALER to P, identity ``snapshot.<x>``), ``publisher.<x>`` (SUB to
  P+1, subscribed to everything) and ``collector.<x>`` (DEALER to P+2);
* client under test (it connects to P, P+1 and P+2): the harness plays the server, binding
  ``snapshot.<x>`` (ROUTER at P), ``publisher.<x>`` (XPUB at P+1: a BROADCAST waits until the
  client's subscription lets it through) and ``collector.<x>`` (ROUTER at P+2).

The peers are built per case by `_plan`, which returns the conductor's `PeerPlan`; it imports
`harness.conformance.conductor` when it is called (by the conformance runner), so that
importing this package imports nothing above it.
"""

from __future__ import annotations

from typing import Any, Callable

from harness.node import SocketType
from harness.packages.base import RoleSuite

PORTS = {"snapshot": 0, "publisher": 1, "collector": 2}  # peer prefix -> port offset from P
SEND_WAIT_NS = 4_000_000_000  # a BROADCAST to a client under test waits this long for its subscription
SEPARATORS = {"strict": ";", "eventbus:micro-toolkit": ","}


def _endpoint(values: dict[str, Any], prefix: str) -> str:
    base, _, port = str(values["endpoint"]).rpartition(":")
    return f"{base}:{int(port) + PORTS[prefix]}"


def subtree_list(value: Any, dialect: str) -> list[str]:
    """{subtrees} as a case gives it (a list, or one string joined by the dialect's separator)."""
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return [str(s) for s in value]
    return str(value).split(SEPARATORS.get(dialect, ";"))


def _fill(values: dict[str, Any]) -> None:
    """{subtrees} on a command line: joined with the dialect's separator ('' for everything)."""
    if "subtrees" in values:
        values["subtrees"] = SEPARATORS.get(values.get("dialect", "strict"), ";").join(
            subtree_list(values["subtrees"], values.get("dialect", "strict")))


def _plan(iut_role: str) -> Callable[..., Any]:
    def build(case: Any, values: dict[str, Any], alloc: Callable[[], str]) -> Any:
        from harness.conformance.plan import PeerPlan, PeerSocket

        peers = {}
        for name in case.peers:
            prefix = name.split(".")[0]
            endpoint = _endpoint(values, prefix)
            if iut_role == "server":  # the harness plays clients
                if prefix == "publisher":
                    peers[name] = PeerSocket(name, SocketType.SUB, endpoint, False, subscribe=(b"",), channel=prefix)
                else:
                    peers[name] = PeerSocket(name, SocketType.DEALER, endpoint, False, name.encode(), channel=prefix)
            else:  # the harness plays the server
                stype = SocketType.XPUB if prefix == "publisher" else SocketType.ROUTER
                blame = {"unsubscribed": "eventbus.client.connections"} if prefix == "publisher" else {}
                peers[name] = PeerSocket(name, stype, endpoint, True, channel=prefix, blame=blame)
        shown = {"topic": values.get("topic"), "port": int(values["port"]),
                 "subtrees": subtree_list(values.get("subtrees"), values.get("dialect", "strict"))}
        return PeerPlan(peers, values=shown, send_wait_ns=SEND_WAIT_NS if iut_role == "client" else 0)

    return build


def _server_config(endpoint: str, values: dict[str, Any]) -> dict[str, Any]:
    return {"dialect": values.get("dialect", "strict"), "bind": endpoint}


def _client_config(endpoint: str, values: dict[str, Any]) -> dict[str, Any]:
    return {"dialect": values.get("dialect", "strict"), "connect": endpoint, "subtrees": values["subtrees"],
            "publish": int(values["publish"]), "topic": str(values["topic"]),
            "sync_timeout_ms": int(values["sync_timeout_ms"]), "identity": "iut"}


_NODE = "{python} -m harness.cli node eventbus "
SUITES: dict[str, RoleSuite] = {
    "server": RoleSuite(
        "eventbus", "server",
        peers={p: ("client", SocketType.SUB if p == "publisher" else SocketType.DEALER, False) for p in PORTS},
        iut_binds=True,
        # the store in {tmpdir}: the reference keeps its sequence across restart_iut (E-EVENTBUS-10)
        reference_cmd=_NODE + "server --bind tcp://{host}:{port} --dialect {dialect} --store {tmpdir}/bus.store",
        iut_config=_server_config,
        build_peers=_plan("server"),
        ports=3,
    ),
    "client": RoleSuite(
        "eventbus", "client",
        peers={p: ("server", SocketType.XPUB if p == "publisher" else SocketType.ROUTER, True) for p in PORTS},
        iut_binds=False,
        reference_cmd=_NODE + "client --connect {endpoint} --dialect {dialect} --identity iut "
                              "--set subtrees={subtrees} --set publish={publish} --set topic={topic} "
                              "--set sync_timeout={sync_timeout_ms}ms",
        # {subtrees}: what it synchronises and subscribes to, joined with the dialect's separator;
        # {publish}: events it publishes on {topic} once it has synchronised, one every 100 ms;
        # {topic} is outside {subtrees}, so the harness, which does not broadcast them back, sees
        # each event once (a client may resend what it does not see come back, same UUID).
        placeholders={"subtrees": "/conformance/", "publish": 0, "topic": "/published/event",
                      "sync_timeout_ms": 500},
        iut_config=_client_config,
        build_peers=_plan("client"),
        ports=3,
        fill_values=_fill,
        # A client given {publish} events may exit 0 once they are out, as a publishing tool does
        # (the document asks no client to run for ever); expectations of silence then hold.
        completes=True,
    ),
}
