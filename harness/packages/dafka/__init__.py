"""Dafka: towers for discovery, producers (one partition each), stores and consumers, all meshed
over PUB/SUB; the harness assigns every endpoint.

Wire tables: `harness.protocols.dafka`; clauses: `harness.protocols.dafka_clauses`; reference
nodes and mutants: `reference_nodes.dafka`; checkers: `harness.checkers.dafka`; conformance
suites: `harness.packages.dafka.suites`. Dafka has no distinguished node (no leader, no primary),
so it defines no symbolic fault targets."""

from __future__ import annotations

from typing import Any, Callable

from harness.checkers import dafka as checks
from harness.checkers.external import corrupts, external_nodes, noting_external
from harness.checkers import dafka_answers as answers
from harness.checkers.dafka_input import StoreInput
from fault_injection import nemesis
from harness.checkers import dafka_links as links
from harness.checkers.dafka_seen import SeenNodes, starts_of
from harness.checkers import dafka_topics as topic_checks
from harness.packages.base import (
    CaptureHints, Check, Operation, ProtocolPackage, Role, Setting, as_bool, as_int, as_ms, as_str, faults_may_lose,
    one_of, senders_by_role, touched_until_ns,
)
from harness.packages.dafka.suites import SUITES
from harness.protocols.dafka import TABLES
from harness.protocols.dafka_clauses import CATALOGUE
from reference_nodes.dafka.common import (
    DEFAULT_BEACON_MS, DEFAULT_FETCH_RETRY_MS, DEFAULT_HEAD_MS, TOWER_SUB, tagged_content,
)
from reference_nodes.dafka.consumer import Consumer
from reference_nodes.dafka.mutants import MUTANTS
from reference_nodes.dafka.producer import Producer
from reference_nodes.dafka.store import Store
from reference_nodes.dafka.tap import ROLE as TAP_ROLE, Tap, tap_of
from reference_nodes.dafka.tower import Tower


def topics_of(v: Any) -> list[str]:
    """A topic or a list of topics, as a consumer's ``topics`` setting takes them."""
    if isinstance(v, str):
        return [v]
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return list(v)
    raise ValueError(f"expected a topic or a list of topics, got {v!r}")


def _towers(v: Any) -> list[list[str]]:
    """``[[xsub, xpub], ...]``, one ``[xsub, xpub]`` pair, or the text ``xsub,xpub`` (pairs
    separated by ``;``), as ``zmq-harness node dafka ... --set towers=...`` gives it."""
    if isinstance(v, str):
        v = [[e.strip() for e in pair.split(",")] for pair in v.split(";") if pair.strip()]
    if isinstance(v, list) and len(v) == 2 and all(isinstance(e, str) for e in v):
        v = [v]
    if not (isinstance(v, list) and v and all(isinstance(p, list) and len(p) == 2
                                               and all(isinstance(e, str) and e for e in p) for p in v)):
        raise ValueError(f"expected tower endpoint pairs [[xsub, xpub], ...] or 'xsub,xpub', got {v!r}")
    return [list(p) for p in v]


BEACON = Setting("beacon_ms", as_ms, "interval of the node's beacon to the towers")
EXPIRY = Setting("peer_expiry_ms", as_ms, "forget a peer after this long without a beacon (0: never)")
# How a standalone node (`zmq-harness node dafka ROLE --set ...`) is wired; scenarios assign
# these themselves (`wire`).
NODE_WIRING = {
    "bind": Setting("bind", as_str, "the XPUB endpoint tcp://host:port it binds and announces"),
    "towers": Setting("towers", _towers, "towers to connect to: 'xsub,xpub' or [[xsub, xpub], ...]"),
    "advertise": Setting("advertise", as_str, "the endpoint it announces in beacons, if not the one it binds"),
    "address": Setting("address", as_str, "a fixed node address (default: a new UUID)"),
}


def _simple(cls: type) -> Callable[..., Any]:
    return lambda scenario, **params: cls(**params)


def _consumer_topics(scenario: Any) -> dict[str, list[str]]:
    """Each consumer node's ``topics`` setting."""
    return {n: list(g.config.get("topics", [])) for g in scenario.groups.values() if g.role == "consumer"
            for n in g.nodes}


def _roles(scenario: Any) -> dict[str, str]:
    return {n: g.role for g in scenario.groups.values() for n in g.nodes}


def _complete(scenario: Any, **params: Any) -> checks.CompleteDelivery:
    # a lost record shows at the next RECORD or HEAD of its producer, and its FETCH is retried:
    # in a lossy file, what was produced in the last three such rounds may still be on its way
    heads = [g.config.get("head_ms", DEFAULT_HEAD_MS) for g in scenario.groups.values() if g.role == "producer"]
    retries = [g.config.get("fetch_retry_ms", DEFAULT_FETCH_RETRY_MS) for g in scenario.groups.values()
               if g.role == "consumer"]
    rounds_ms = 3 * (max(heads, default=DEFAULT_HEAD_MS) + max(retries, default=DEFAULT_FETCH_RETRY_MS))
    in_flight_ms = rounds_ms if faults_may_lose(scenario) else 0
    roles = _roles(scenario)
    others = {n for n, r in roles.items() if r != "consumer"}
    healed = {n: touched_until_ns(scenario, n, others) for n, r in roles.items() if r == "consumer"}
    return checks.CompleteDelivery(topics=_consumer_topics(scenario), external_consumers=external_nodes(
        scenario, "consumer"), external_producers=external_nodes(scenario, "producer"), corrupts=corrupts(scenario),
        in_flight_ms=in_flight_ms, healed_ns=healed, catch_up_ms=rounds_ms,
        late_starters=frozenset(n for g in scenario.groups.values() if g.role == "consumer" and g.start_ns > 0
                                for n in g.nodes), **params)


def _of_external(cls: type, *roles: str) -> Callable[..., Any]:
    """A check told which nodes of ``roles`` are external (what it cannot see of them it names)."""
    return lambda scenario, **params: cls(external=frozenset().union(*(external_nodes(scenario, r) for r in roles)),
                                          **params)


def _fetch_ascending(scenario: Any, **params: Any) -> checks.FetchAscending:
    external = frozenset().union(*(external_nodes(scenario, r) for r in ("producer", "store")))
    return checks.FetchAscending(external=external, observed=_seen(scenario) is not None, **params)


def _hello_subjects(scenario: Any, **params: Any) -> topic_checks.HelloSubjects:
    external = external_nodes(scenario, "consumer")  # (what they send is judged as received, unless corrupted)
    hello = topic_checks.HelloSubjects(topics=_consumer_topics(scenario), external=frozenset() if corrupts(scenario)
                                       else external, **params)
    return noting_external(hello, scenario, ("consumer",), "their CONSUMER-HELLOs (a corrupt rule may damage what "
                                                           "is received)") if corrupts(scenario) else hello


def _with_topics(cls: type) -> Callable[..., Any]:
    return lambda scenario, **params: cls(topics=_consumer_topics(scenario), **params)


def _topic_frames(scenario: Any, **params: Any) -> topic_checks.TopicFrames:
    """External producers' RECORDs and HEADs are judged as received, unless a rule corrupts messages."""
    producers = frozenset() if corrupts(scenario) else external_nodes(scenario, "producer")
    tapped = frozenset().union(*(external_nodes(scenario, r) for r in NODES))  # (heard straight from them)
    return topic_checks.TopicFrames(roles=_roles(scenario), topics=_consumer_topics(scenario),
                                    external_producers=producers, tapped=tapped, **params)


def tap(configs: dict[str, tuple[str, dict[str, Any]]], external: frozenset[str]) -> tuple[str, Any, dict] | None:
    """A live run's passive listener on its external nodes' XPUBs (reference_nodes.dafka.tap)."""
    cfg = tap_of(configs, external)
    return (TAP_ROLE, Tap, cfg) if cfg is not None else None


def _senders(role: str, socket: str, frames: list[bytes]) -> tuple[str, ...] | str | None:
    """The tap's socket is named after the one node it listens to."""
    return socket if role == TAP_ROLE else _BY_ROLE(role, socket, frames)


def _seen(scenario: Any) -> SeenNodes | None:
    """The external nodes as the chaos proxy will see them, when the run observes them."""
    external = frozenset().union(*(external_nodes(scenario, r) for r in NODES))
    if not external or not scenario.observe:
        return None
    return SeenNodes(_roles(scenario), external, starts_of(scenario, external))


def _partitioned(scenario: Any) -> tuple[frozenset[str], frozenset[str]]:
    """The nodes some partition of the scenario may put on another side than a tower, and than
    any other node (each side: the nodes its targets may name, as the proxy's placement reads them)."""
    from harness.live_faults import nodes_of  # noqa: PLC0415 - it imports the registry, which imports this

    roles = _roles(scenario)
    cut: set[str] = set()
    apart: set[str] = set()
    for f in scenario.faults:
        if not isinstance(f, nemesis.Partition):
            continue
        sides = [set().union(*(nodes_of(scenario, t) for t in side)) for side in f.sides]
        for i, side in enumerate(sides):
            if any(roles.get(n) == "tower" for n in side):
                cut |= {n for j, other in enumerate(sides) if j != i for n in other}
            apart |= side
    return frozenset(cut), frozenset(apart)


def _unless_observed(make: Callable[..., Any], roles: tuple[str, ...], what: str) -> Callable[..., Any]:
    """A check built by ``make(scenario, seen, **params)`` that judges the external nodes of
    ``roles`` from what the proxy sees of them when the run observes them (``seen``), and names
    ``what`` it does not judge of them when it does not."""

    def factory(scenario: Any, **params: Any) -> Any:
        seen = _seen(scenario)
        check = make(scenario, seen, **params)
        return check if seen is not None else noting_external(check, scenario, roles, what)

    return factory


def _subscriptions(scenario: Any, seen: SeenNodes | None, **params: Any) -> links.Subscriptions:
    return links.Subscriptions(topics=_consumer_topics(scenario), seen=seen, **params)


def _tower_links(scenario: Any, seen: SeenNodes | None, **params: Any) -> links.TowerLinks:
    cut_from_towers, cut_off = _partitioned(scenario)
    return links.TowerLinks(seen=seen, cut_from_towers=cut_from_towers, cut_off=cut_off, **params)


def _answers(scenario: Any, seen: SeenNodes | None, **params: Any) -> answers.Answers:
    roles = _roles(scenario)
    external = {n: roles[n] for n in seen.external} if seen is not None else None
    return answers.Answers(topics=_consumer_topics(scenario), external=external, **params)


def _offsets(scenario: Any, **params: Any) -> checks.Offsets:
    """An external producer's RECORDs as the tap hears them (a live run with external nodes has one)."""
    return checks.Offsets(external=external_nodes(scenario, "producer"), tapped=True, **params)


def _producer_claims(scenario: Any, seen: SeenNodes | None, **params: Any) -> answers.ProducerClaims:
    return answers.ProducerClaims(external=external_nodes(scenario, "producer") if seen else frozenset(), **params)


def _intervals(scenario: Any, seen: SeenNodes | None, **params: Any) -> answers.Intervals:
    """Each node's beacon interval and each producer's HEAD interval, as configured."""
    configs = {n: g.config for g in scenario.groups.values() if g.role != "tower" for n in g.nodes}
    return answers.Intervals(beacon_ms={n: c.get("beacon_ms", DEFAULT_BEACON_MS) for n, c in configs.items()},
                             head_ms={n: c.get("head_ms", DEFAULT_HEAD_MS) for n, c in configs.items()},
                             external=seen.external if seen is not None else frozenset(), **params)


def _check(name: str, cls: type, factory: Callable[..., Any] | None = None,
           unseen: tuple[tuple[str, ...], str] | None = None) -> Check:
    """``unseen``: the roles whose external nodes the check does not judge, and what of them."""
    make = factory or _simple(cls)
    if unseen is not None:
        make = _noting(make, *unseen)
    return Check(name, make, doc=cls.__doc__ or "", clause=cls.clause, checker=cls)


def _noting(make: Callable[..., Any], roles: tuple[str, ...], what: str) -> Callable[..., Any]:
    return lambda scenario, **params: noting_external(make(scenario, **params), scenario, roles, what)


NODES = ("producer", "store", "consumer")


ROLES = {
    "tower": Role("tower", Tower, {
        # (the harness wires them; `zmq-harness node dafka tower --set bind_sub=... --set bind_pub=...`)
        "bind_sub": Setting("bind_sub", as_str, "the XSUB endpoint it binds (nodes' PUB sockets connect there)"),
        "bind_pub": Setting("bind_pub", as_str, "the XPUB endpoint it binds (nodes' SUB sockets connect there)"),
    }, "discovery rendezvous: XSUB in, XPUB out"),
    "producer": Role("producer", Producer, {
        "topic": Setting("topic", as_str, "the topic it publishes to"),
        "head": Setting("head_ms", as_ms, "HEAD interval after the first record"),
        "release_acked": Setting("release_acked", as_bool, "drop records once a store ACKed them"),
        "records": Setting("records", as_int, "standalone: produce this many records itself"),
        "delay": Setting("delay_ms", as_ms, "standalone: the first record this long after start"),
        "interval": Setting("interval_ms", as_ms, "standalone: one record every interval"),
        "content": Setting("content", as_str, "standalone: record k has content <content>-<k>"),
        "beacon": BEACON, "peer_expiry": EXPIRY, **NODE_WIRING,
    }, "publishes RECORDs on one partition named by its UUID"),
    "store": Role("store", Store, {
        "fetch_retry": Setting("fetch_retry_ms", as_ms, "re-FETCH a gap after this long"),
        "beacon": BEACON, "peer_expiry": EXPIRY, **NODE_WIRING,
    }, "stores every record durably, ACKs, answers FETCH and GET-HEADS"),
    "consumer": Role("consumer", Consumer, {
        "topics": Setting("topics", topics_of, "topics it subscribes to"),
        "offset_reset": Setting("offset_reset", one_of("earliest", "latest"), "where a new partition starts"),
        "fetch_retry": Setting("fetch_retry_ms", as_ms, "re-FETCH a gap after this long"),
        "get_heads": Setting("get_heads_ms", as_ms, "re-send GET-HEADS this often (0: never)"),
        "beacon": BEACON, "peer_expiry": EXPIRY, **NODE_WIRING,
    }, "delivers each record of each partition once, in order"),
}

OPERATIONS = {
    "produce": Operation("produce", ("producer",), {
        "topic": Setting("topic", as_str, "topic (default: the producer's)"),
        "size": Setting("size", as_int, "bytes of content (default 100)"),
    }, "a producer application publishes a record"),
}

CHECKS = {
    "offsets": _check("offsets", checks.Offsets, _offsets),
    "consumer-order": _check("consumer-order", checks.ConsumerOrder, _of_external(checks.ConsumerOrder, "consumer")),
    "complete-delivery": _check("complete-delivery", checks.CompleteDelivery, _complete),
    "acked-retrievable": _check("acked-retrievable", checks.AckedRetrievable,
                                _of_external(checks.AckedRetrievable, "store")),
    "keep-until-ack": _check("keep-until-ack", checks.KeepUntilAck, _of_external(checks.KeepUntilAck, "producer")),
    "fetch-ascending": _check("fetch-ascending", checks.FetchAscending, _fetch_ascending),
    "topic-frames": _check("topic-frames", topic_checks.TopicFrames, _topic_frames),
    "hello-subjects": _check("hello-subjects", topic_checks.HelloSubjects, _hello_subjects),
    "subscriptions": _check("subscriptions", links.Subscriptions,
                            _unless_observed(_subscriptions, NODES, "their subscriptions")),
    "tower-links": _check("tower-links", links.TowerLinks,
                          _unless_observed(_tower_links, NODES, "their sockets to the towers")),
    "intervals": _check("intervals", answers.Intervals,
                        _unless_observed(_intervals, NODES, "their BEACON and HEAD intervals")),
    "answers": _check("answers", answers.Answers, _unless_observed(_answers, NODES, "their answers")),
    "producer-claims": _check("producer-claims", answers.ProducerClaims,
                              _unless_observed(_producer_claims, ("producer",), "their HEADs")),
    "store-input": _check("store-input", StoreInput, unseen=(("store",), "what they take in")),
    "hello-reply": _check("hello-reply", answers.HelloReply, _with_topics(answers.HelloReply),
                          (("consumer",), "their replies to STORE-HELLO")),
}


def wire(nodes: dict[str, tuple[str, dict[str, Any]]], endpoint: Callable[[str, str], str]) -> None:
    towers = [n for n, (role, _) in nodes.items() if role == "tower"]
    if not towers:
        raise ValueError("Dafka needs at least one tower for discovery")
    pairs = []
    for t in towers:
        cfg = nodes[t][1]
        cfg["bind_sub"], cfg["bind_pub"] = endpoint(t, "xsub"), endpoint(t, "xpub")
        pairs.append([cfg["bind_sub"], cfg["bind_pub"]])
    for name, (role, cfg) in nodes.items():
        if role != "tower":
            cfg["towers"] = [list(p) for p in pairs]
            cfg["bind"] = endpoint(name, "xpub")


def command(op: str, node: str, params: dict[str, Any], k: int, rng: Any) -> dict[str, Any]:
    # The record carries the request's correlation id, so each consumer's delivery of it pairs
    # with this command in the trace (end-to-end latency, the report's requests table).
    corr = f"{node}-{k}"
    content = tagged_content(corr, rng.randbytes(params.get("size", 100)))
    req: dict[str, Any] = {"op": "produce", "content": content, "corr": corr}
    if "topic" in params:
        req["topic"] = params["topic"]
    return req


def wire_role(socket_type: str, sent: frozenset[str]) -> str | None:
    """The role of an endpoint in a capture, from what its XPUB publishes (a node's SUB and
    tower PUB connections say nothing of their node's role)."""
    if sent & {"TOWER-BEACON", "TOWER-WELCOME"}:
        return "tower"
    if socket_type != "XPUB":
        return None
    if sent & {"RECORD", "HEAD"}:
        return "producer"
    if sent & {"ACK", "STORE-HELLO"}:
        return "store"
    if sent & {"CONSUMER-HELLO", "GET-HEADS"}:
        return "consumer"
    return None


# Subscriptions whose topic is the subscriber's own address (its ACKs and FETCHes as a producer,
# what it fetched or was greeted with as a requester or consumer).
OWN_ADDRESS_SUBSCRIPTIONS = (b"K", b"F", b"D", b"E", b"L")


def wire_subscriber(prefix: bytes) -> str | None:
    """The address a subscription names as its subscriber's own, or None."""
    if len(prefix) > 1 and prefix[:1] in OWN_ADDRESS_SUBSCRIPTIONS:
        return prefix[1:].decode("utf-8", "surrogateescape")
    return None


def wire_announces(msg: Any) -> tuple[str, str] | None:
    """A BEACON names its sender's address and the XPUB endpoint it listens on."""
    if msg.name == "BEACON":
        return str(msg["sender"]), f"{msg['host']}:{msg['port']}"
    return None


NODE_ROLES = ("producer", "store", "consumer")
_BY_ROLE = senders_by_role({"tower": NODE_ROLES, "producer": NODE_ROLES, "store": NODE_ROLES, "consumer": NODE_ROLES},
                           {(r, TOWER_SUB): ("tower",) for r in NODE_ROLES})

PACKAGE = ProtocolPackage(
    name="dafka",
    tables=TABLES,
    catalogue=CATALOGUE,
    roles=ROLES,
    operations=OPERATIONS,
    checks=CHECKS,
    default_checks=("offsets", "consumer-order", "complete-delivery", "acked-retrievable", "keep-until-ack",
                    "fetch-ascending", "topic-frames", "hello-subjects", "subscriptions", "tower-links", "intervals",
                    "answers", "producer-claims", "store-input"),
    final_status=("store",),  # acked-retrievable reads the stores' holdings at the end
    mutants=MUTANTS,
    suites=SUITES,
    wire=wire,
    command=command,
    capture=CaptureHints(channels={("PUB", "XSUB"): "to-tower"}, role=wire_role, subscriber=wire_subscriber,
                         announcing=frozenset({"BEACON"}), announces=wire_announces),
    advertised={"bind": "advertise"},  # BEACON host and port (E-DAFKA-13)
    # a node's tower SUB hears towers; its peer SUB any node but a tower; a tower's XSUB any node
    # (what a message is does not narrow it: a broken node may send any command id)
    senders=_senders,
    tap=tap,  # judges what external nodes publish that no node subscribes to
    # the proxy reports an external node's side of all its traffic, its subscriptions too
    # (harness.live_observe): the checks were reviewed for it
    observed_checks=True,
    observed_links="all",
)
