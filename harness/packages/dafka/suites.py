"""Dafka's conformance suites, one per role under test (producer, store, consumer): the harness
plays a tower and the other nodes of a Dafka cluster; docs/conformance-dafka.md. The cases are
scenarios/dafka/conformance/<role>/*.yaml.

The peers of a case are mesh nodes, built per case by `_dafka_plan`, which returns the
conductor's `PeerPlan`: it imports `harness.conformance.plan` when it is called (by the
conformance runner), so that importing this package imports nothing above it.
"""

from __future__ import annotations

from typing import Any, Callable

from harness.node import SocketType
from harness.packages.base import RoleSuite

# The harness plays a tower and the other nodes of a Dafka cluster (docs/conformance-dafka.md).
# The tower: an XPUB at {tower_pub} (welcome "W") whose TOWER-BEACONs announce every scripted
# node, and an XSUB at {tower_sub} subscribed to "B" that receives the IUT's BEACONs. Each
# scripted node: an XPUB bound at its own endpoint, announced by the tower, on which it sends
# and sees the IUT's subscriptions; and a SUB connected to the IUT's XPUB ({endpoint}) that
# receives everything (subscription "") plus its role's own subscriptions, which the IUT may
# act on (a consumer's "L" + address makes a store send STORE-HELLO).

DAFKA_SEND_WAIT_NS = 4_000_000_000  # a send waits this long for the IUT's subscription
DAFKA_PEER_BEACON_NS = 300_000_000  # the tower announces every scripted node this often


def dafka_address(peer: str) -> str:
    """A scripted Dafka node's address: 32 uppercase hex digits, like a UUID in zeromq/dafka's
    form (E-DAFKA-12), derived from the peer's name so that it is the same in every run."""
    import hashlib

    return hashlib.md5(peer.encode()).hexdigest().upper()


def _dafka_peer_subscriptions(role: str, address: str) -> tuple[bytes, ...]:
    from harness.protocols.dafka import subscription as sub

    everything = b""
    if role == "consumer":  # Consumer Subscriptions, without topics (everything covers them)
        return (everything, sub("STORE-HELLO", address), sub("DIRECT-RECORD", address), sub("DIRECT-HEAD", address))
    if role == "store":  # Store Subscriptions
        return (everything, sub("RECORD"), sub("HEAD"), sub("DIRECT-RECORD", address), sub("FETCH"),
                sub("GET-HEADS"), sub("CONSUMER-HELLO"))
    # producer: Producer Subscriptions, and GET-HEADS (E-DAFKA-15)
    return (everything, sub("ACK", address), sub("FETCH", address), sub("GET-HEADS"))


def _dafka_plan(iut_role: str) -> Callable[..., Any]:
    def build(case: Any, values: dict[str, Any], alloc: Callable[[], str]) -> Any:
        from harness.conformance.plan import Announcement, PeerLink, PeerPlan, PeerSocket
        from harness.protocols.dafka import BEACON_ID, FROM_TOWER, PEER, TO_TOWER, WELCOME_ID

        names = list(case.peers)
        tower = next((n for n in names if n.split(".")[0] == "tower"), "tower.t")
        peers: dict[str, PeerSocket] = {tower: PeerSocket(
            tower, SocketType.XPUB, values["tower_pub"], True, welcome=WELCOME_ID, channel=FROM_TOWER,
            recv=PeerLink(SocketType.XSUB, values["tower_sub"], True, subscribe=(BEACON_ID,), channel=TO_TOWER),
            blame={"silent": "dafka.interconnect.tower-sockets",
                   "unsubscribed": "dafka.interconnect.tower-sub-connect",
                   "recv-silent": "dafka.interconnect.tower-pub-connect"})}
        announce = []
        # Nothing at all from the IUT's XPUB: unreachable, for a producer, which publishes by
        # itself. Stores and consumers only answer: their silence is judged on what they owe.
        blame = {"unsubscribed": "dafka.interconnect.connect-on-discovery"}
        if iut_role == "producer":
            blame["recv-silent"] = "dafka.interconnect.xpub-bind"
        for name in names:
            role = name.split(".")[0]
            if role == "tower":
                continue
            address, endpoint = dafka_address(name), alloc()
            # Its SUB connects to {endpoint} (None: the IUT binds ports of its own) and to every
            # endpoint the IUT's beacons announce, as a real Dafka node does.
            peers[name] = PeerSocket(
                name, SocketType.XPUB, endpoint, True, address=address, channel=PEER,
                recv=PeerLink(SocketType.SUB, values["endpoint"], False,
                              subscribe=_dafka_peer_subscriptions(role, address), channel=PEER, follow=True),
                blame=blame,
                discovered_via=tower)
            announce.append(Announcement(tower, "TOWER-BEACON", {"sender": address, "endpoint": endpoint},
                                         DAFKA_PEER_BEACON_NS, about=name))
        shown = {k: v for k, v in values.items() if k != "python"}
        # "{port}" in a step: the port it was given; any port when it chose its own (what it
        # announces is followed, so an announced port it does not listen on leaves it unheard).
        shown["port"] = int(values["port"]) if values.get("port") else {"any": True}
        optional = {"producer": {"GET-HEADS": "a producer need not subscribe to GET-HEADS (E-DAFKA-15)"},
                    "consumer": {"ACK": "a consumer MAY subscribe to ACKs (dafka.subscription.consumer-ack)"},
                    }.get(iut_role, {})
        return PeerPlan(peers, announce, shown, DAFKA_SEND_WAIT_NS, optional,
                        announced=_beacon_endpoint(values.get("endpoint") or f"tcp://{values['host']}:0"))

    return build


def _beacon_endpoint(given: str) -> Callable[[Any], tuple[str, str] | None]:
    """(address, endpoint) of a BEACON of the IUT. An empty host (zeromq/dafka's default) is
    the connection's host, as zeromq/dafka's tower substitutes it: the host of ``given``
    (the IUT's endpoint; 127.0.0.1 live, where everything runs on loopback)."""
    connection_host = given.split("://", 1)[-1].rsplit(":", 1)[0]

    def announced(msg: Any) -> tuple[str, str] | None:
        if msg.name != "BEACON":
            return None
        host = msg["host"] or connection_host
        return str(msg["sender"]), f"tcp://{host}:{msg['port']}"

    return announced


def _dafka_config(role: str) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    def build(endpoint: str, values: dict[str, Any]) -> dict[str, Any]:
        cfg: dict[str, Any] = {"dialect": values.get("dialect", "strict"), "bind": endpoint,
                               "towers": [[values["tower_sub"], values["tower_pub"]]],
                               "beacon_ms": int(values["beacon_ms"]),
                               "peer_expiry_ms": int(values["peer_expiry_ms"])}
        if role == "producer":
            cfg.update(topic=str(values["topic"]), records=int(values["records"]),
                       delay_ms=int(values["delay_ms"]), interval_ms=int(values["interval_ms"]),
                       content=str(values["content"]), head_ms=int(values["head_ms"]))
        elif role == "store":
            cfg.update(fetch_retry_ms=int(values["fetch_retry_ms"]))
        else:
            import yaml

            from harness.packages.dafka import topics_of

            topics = values["topics"]
            cfg.update(topics=topics_of(yaml.safe_load(topics) if isinstance(topics, str) else topics),
                       fetch_retry_ms=int(values["fetch_retry_ms"]))
        return cfg

    return build


_DAFKA_NODE = ("{python} -m harness.cli node dafka %s --dialect {dialect} --set bind={endpoint} "
               "--set towers={tower_sub},{tower_pub} --set beacon={beacon_ms}ms --set peer_expiry={peer_expiry_ms}ms")
_DAFKA_COMMON = {"beacon_ms": 200, "peer_expiry_ms": 4000}


def _dafka_suite(role: str, peer_roles: tuple[str, ...], cmd: str, placeholders: dict[str, Any],
                 completes: bool = False) -> RoleSuite:
    peers = {r: (r, SocketType.XPUB, True) for r in ("tower", *peer_roles)}
    # iut_binds: the IUT starts first and binds {endpoint}, so that the harness's SUB sockets are
    # connected to it before it learns of them (PUB/SUB drops what goes out before that); one
    # whose command names neither {endpoint} nor {port} binds ports of its own and is found
    # through its beacons (announces_endpoint).
    return RoleSuite("dafka", role, peers=peers, iut_binds=True, announces_endpoint=True,
                     reference_cmd=(_DAFKA_NODE % role) + cmd,
                     placeholders={**_DAFKA_COMMON, **placeholders}, iut_config=_dafka_config(role),
                     harness_endpoints=("tower_sub", "tower_pub"), build_peers=_dafka_plan(role),
                     completes=completes)


SUITES: dict[str, RoleSuite] = {
    "producer": _dafka_suite(
        "producer", ("consumer", "store", "producer"),
        " --set topic={topic} --set records={records} --set delay={delay_ms}ms --set interval={interval_ms}ms "
        "--set content={content} --set head={head_ms}ms",
        # The producer produces by itself: {records} records, the first {delay_ms} after start
        # (the harness's nodes have connected by then), one every {interval_ms}.
        {"topic": "weather", "records": 20, "delay_ms": 500, "interval_ms": 100, "content": "record",
         "head_ms": 200},
        completes=True),  # a producer with a count may exit 0 once it has published them
    "store": _dafka_suite("store", ("producer", "consumer", "store"), " --set fetch_retry={fetch_retry_ms}ms",
                          {"fetch_retry_ms": 500}),
    # {topics}: what the consumer subscribes to, as a YAML list ("[]": none, for the case
    # no-hello-without-topics); {topic}: the one the cases publish to.
    "consumer": _dafka_suite("consumer", ("producer", "store"),
                             " --set topics={topics} --set fetch_retry={fetch_retry_ms}ms",
                             {"topic": "weather", "topics": "[weather]", "fetch_retry_ms": 500}),
}
