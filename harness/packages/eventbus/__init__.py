"""Event BUS (Clone pattern / CHP): one server, or a primary and its backup, and clients that
subscribe to subtrees of the topics and publish events.

Wire tables: `harness.protocols.eventbus` (strict and ``eventbus:micro-toolkit``); clauses:
`harness.protocols.eventbus_clauses`; reference nodes and mutants: `reference_nodes.eventbus`;
checkers: `harness.checkers.eventbus`; conformance suites: `harness.packages.eventbus.suites`.
docs/eventbus.md says how to use them.

Symbolic fault target ``primary``: the running server whose latest ``ha-state`` note says
``{"state": "primary"}``. The contract for servers (the reference server keeps it; a probe of an
implementation under test would have to): a server emits ``Note("ha-state", {"state": S})``
whenever its state changes, and once at start, with S ``primary`` while it serves clients and
``backup`` while it stands by. A single server is always primary."""

from __future__ import annotations

import fnmatch
from typing import Any, Callable

from fault_injection.nemesis import Crash, Partition, Pause, SlowLink
from fault_injection.rules import LOSSY_EFFECTS
from harness.checkers import eventbus as checks
from harness.checkers import eventbus_client as client_checks
from harness.checkers import eventbus_server as server_checks
from harness.checkers.external import corrupts, fifo, rule_effects
from harness.packages.base import (
    HANDOVER, CaptureHints, Check, Operation, ProtocolPackage, Role, Setting, TargetView, as_int, as_ms,
    as_positive_int, as_str, fault_ends_ns, one_of, senders_by_role, transit_ns,
)
from harness.packages.eventbus.suites import SUITES
from harness.protocols.eventbus import TABLES
from harness.protocols.eventbus_clauses import CATALOGUE
from reference_nodes.eventbus.client import (
    DEFAULT_PUBLISH_TIMEOUT_MS, DEFAULT_RESYNC_MS, DEFAULT_SYNC_TIMEOUT_MS, Client,
)
from reference_nodes.eventbus.common import subtrees_value
from reference_nodes.eventbus.mutants import MUTANTS
from reference_nodes.eventbus.server import FEED, REPLICA, REPLICA_PREFIX, Server


def _subtrees(v: Any) -> Any:
    """A list of subtrees, or one string joined by the dialect's separator (checked by the node,
    which knows its dialect); nothing (``--set subtrees=``) is every topic."""
    if v is None:
        return []
    if isinstance(v, str) or (isinstance(v, list) and all(isinstance(s, str) for s in v)):
        return v
    raise ValueError(f"expected a list of subtrees or one string, got {v!r}")


def _strings(v: Any) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, list) and v and all(isinstance(s, str) for s in v):
        return list(v)
    raise ValueError(f"expected a topic or a non-empty list of topics, got {v!r}")


def _servers(v: Any) -> list[Any]:
    """``tcp://host:P`` (one server), or a list of them (a primary, then its backup)."""
    if isinstance(v, str):
        return [e.strip() for e in v.split(",") if e.strip()]
    if isinstance(v, list) and v:
        return list(v)
    raise ValueError(f"expected a server endpoint or a list of them, got {v!r}")


STANDALONE = "standalone (zmq-harness node): "
ROLES = {
    "server": Role("server", Server, {
        "ha": Setting("ha", one_of("primary", "backup"), "dual-server role (two servers: primary, then backup)"),
        "poll": Setting("poll_ms", as_ms, "a passive server asks the active one for news this often"),
        "ha_timeout": Setting("ha_timeout_ms", as_ms, "peer silence after which a passive server may take over"),
        "check": Setting("check_ms", as_ms, "how long a starting primary asks whether its peer took over"),
        "hwm": Setting("hwm", as_int, "high-water mark of its sockets in messages (default 1000, 0: none)"),
        "handover": HANDOVER,
        "bind": Setting("bind", as_str, STANDALONE + "the snapshot endpoint tcp://host:P (P+1, P+2 follow)"),
        "peer": Setting("peer", as_str, STANDALONE + "the other server's snapshot endpoint"),
    }, "the bus: snapshot ROUTER (P), publisher PUB (P+1), collector ROUTER (P+2)"),
    "client": Role("client", Client, {
        "subtrees": Setting("subtrees", _subtrees, "subtrees it synchronises and subscribes to (default: all)"),
        "sync_timeout": Setting("sync_timeout_ms", as_ms, "SYNCSTART unanswered this long: again (next server)"),
        "resync": Setting("resync_ms", as_ms, "synchronise again this often (0: never)"),
        "publish_timeout": Setting("publish_timeout_ms", as_ms, "resend an own event not seen back (0: never)"),
        "producer": Setting("producer", as_str, "producer id in its PUBs (default: the node name)"),
        "publish": Setting("publish", as_int, STANDALONE + "events it publishes after its first sync"),
        "topic": Setting("topic", as_str, STANDALONE + "the topic of those events"),
        "interval": Setting("interval_ms", as_ms, STANDALONE + "one event every interval"),
        "servers": Setting("servers", _servers, STANDALONE + "server snapshot endpoints, primary first"),
    }, "subscribes, synchronises, applies events once, publishes"),
}

OPERATIONS = {
    "publish": Operation("publish", ("client",), {
        "topic": Setting("topic", as_str, "topic of the event (default /bus/<node>)"),
        "topics": Setting("topics", _strings, "pick the topic of each event from these"),
        "size": Setting("size", as_positive_int, "bytes of random data in the event (default 32)"),
    }, "a client application publishes an event"),
}


def client_subtrees(scenario: Any) -> dict[str, list[str]]:
    """Client node -> its subtrees, parsed in the scenario's dialect."""
    from harness.protocols import codec

    ftype = codec("eventbus", scenario.dialect).table.fields["subtrees"].type
    out = {}
    for g in scenario.groups.values():
        if g.role == "client":
            for n in g.nodes:
                out[n] = subtrees_value(g.config.get("subtrees"), ftype)
    return out


def server_names(scenario: Any) -> list[str]:
    """Servers in the clients' order: the primary first (`wire`)."""
    servers = [(n, g.config.get("ha")) for g in scenario.groups.values() if g.role == "server" for n in g.nodes]
    return [n for n, ha in sorted(servers, key=lambda s: s[1] == "backup")]


def external_clients(scenario: Any) -> list[str]:
    """Client nodes that run as external processes (``command:`` groups): they report no
    deliveries, so the checks of what clients apply name them as not judged."""
    return [n for g in scenario.groups.values() if g.role == "client" and g.command for n in g.nodes]


def lossy(scenario: Any) -> bool:
    """Whether the scenario's message rules may drop or damage messages (`_ClientHoldings`)."""
    return bool(rule_effects(scenario) & {"drop", "corrupt"})


def last_loss_ns(scenario: Any) -> int | None:
    """The latest moment (ns of the run) the file's faults may lose or hold up a message to or
    from a server, or None if they never may: a message rule that drops, delays, reorders or
    corrupts (all run long), or a time-bounded fault (`faults_over_ns`)."""
    if any(getattr(r.effect, "name", "") in LOSSY_EFFECTS for r in scenario.rules.rules):
        return scenario.duration_ns + scenario.settle_ns
    return faults_over_ns(scenario)


def faults_over_ns(scenario: Any) -> int | None:
    """When the file's time-bounded faults no longer hold up messages to or from a server (None
    if it has none): a partition, slow link or pause when it ends, a crash of a node that may be a
    server when it comes back (at the crash when it never does: the clients fail over, or nothing
    taken after it is owed). A client's crash loses nothing the bus owes the others; a clock's
    skew loses nothing. Unlike a message rule's losses, which strike each message as it is sent,
    such a fault holds up older events too (a cut client's resynchronisations), so their repair
    begins only when it is over."""
    from harness.live_faults import nodes_of  # noqa: PLC0415 - it imports the registry, which imports this

    end = scenario.duration_ns + scenario.settle_ns
    servers = set(server_names(scenario))
    last: int | None = None
    for fault in scenario.faults:
        if not isinstance(fault, (Partition, SlowLink, Pause, Crash)) or (
                isinstance(fault, Crash) and not nodes_of(scenario, fault.target) & servers):
            continue
        ends = fault_ends_ns(fault, end)
        until = fault.at if ends is None else ends
        last = until if last is None else max(last, until)
    return last


def in_flight_windows(scenario: Any) -> dict[str, int]:
    """In-process client node -> how long (ms) before the end an event may still be on its way to
    it, or it still synchronising (`_ClientHoldings`): its sync timeout (at least the PUB's and the
    BROADCAST's way on the file's network, `transit_ns`); and where the file's faults may lose a
    message so late that the repair is not done by the end, also two of its resynchronisations
    (which repair a lost BROADCAST) and twice the longest PUB timeout of the in-process publishers
    (which resend a lost PUB)."""
    end = scenario.duration_ns + scenario.settle_ns
    last = last_loss_ns(scenario)
    clients = [g for g in scenario.groups.values() if g.role == "client" and not g.command]
    publishing = {n for item in scenario.workload if item.op == "publish" for n in item.nodes}
    resend = max((g.config.get("publish_timeout_ms", DEFAULT_PUBLISH_TIMEOUT_MS) for g in clients
                  if g.config.get("publish") or publishing & set(g.nodes)), default=0)
    out = {}
    transit_ms = transit_ns(scenario, 2) // 1_000_000  # PUB to the server, BROADCAST to the client
    for g in clients:
        window = max(g.config.get("sync_timeout_ms", DEFAULT_SYNC_TIMEOUT_MS), transit_ms)
        repair = 2 * g.config.get("resync_ms", DEFAULT_RESYNC_MS) + 2 * resend
        if last is not None and last + (window + repair) * 1_000_000 > end:
            window += repair
        for n in g.nodes:
            out[n] = window
    return out


def _with_clients(cls: type) -> Callable[..., Any]:
    return lambda scenario, **params: cls(subtrees=client_subtrees(scenario), external=external_clients(scenario),
                                          lossy=lossy(scenario), in_flight_ms=in_flight_windows(scenario),
                                          healed_ns=faults_over_ns(scenario) or 0, **params)


def pub_loss(scenario: Any) -> str:
    """Why the scenario's faults may lose a PUB ("" when they cannot): a message rule that drops
    or damages PUBs, or a partition (`CompleteDelivery` with external servers)."""
    rules = [r.name for r in scenario.rules.rules if getattr(r.effect, "name", "") in ("drop", "corrupt")
             and fnmatch.fnmatchcase("PUB", r.match.msg_type)]
    if rules:
        return f"the rules may drop or damage PUBs: {', '.join(rules)}"
    if any(isinstance(f, Partition) for f in scenario.faults):
        return "a partition may cut clients off"
    return ""


def external_servers(scenario: Any) -> dict[int, str]:
    """Index in the clients' order (`server_names`) -> server node, of the servers that run as
    external processes: the server checks read them from what the in-process clients exchange
    with them."""
    return {i: n for i, n in enumerate(server_names(scenario)) if scenario.group_of(n).command}


def in_process_identities(scenario: Any) -> frozenset[str]:
    """The routing identities the nodes the harness runs give their DEALERs: a client its node
    name (`wire`), a server's replica connection ``replica:<name>``."""
    names = [n for n in scenario.node_names if not scenario.group_of(n).command]
    replicas = [REPLICA_PREFIX.decode() + n for n in names if scenario.group_of(n).role == "server"]
    return frozenset(names + replicas)


def _with_external(cls: type) -> Callable[..., Any]:
    return lambda scenario, **params: cls(external=external_clients(scenario), **params)


def _check(name: str, cls: type, factory: Callable[..., Any] | None = None) -> Check:
    return Check(name, factory or (lambda scenario, **params: cls(**params)), doc=cls.__doc__ or "",
                 clause=cls.clause, checker=cls)


CHECKS = {
    "convergence": _check("convergence", checks.Convergence, _with_clients(checks.Convergence)),
    "complete-delivery": _check("complete-delivery", checks.CompleteDelivery,
                                lambda scenario, **params: checks.CompleteDelivery(
                                    subtrees=client_subtrees(scenario), servers=server_names(scenario),
                                    external=external_clients(scenario), lossy=lossy(scenario),
                                    in_flight_ms=in_flight_windows(scenario), healed_ns=faults_over_ns(scenario) or 0,
                                    external_servers=len(external_servers(scenario)) == len(server_names(scenario)),
                                    pub_loss=pub_loss(scenario), **params)),
    "client-sequence": _check("client-sequence", checks.ClientSequence, _with_external(checks.ClientSequence)),
    "applied-once": _check("applied-once", checks.AppliedOnce, _with_external(checks.AppliedOnce)),
    "syncend-sequence": _check("syncend-sequence", checks.SyncEndSequence,
                               lambda scenario, **params: checks.SyncEndSequence(
                                   dialect=scenario.dialect, external_servers=external_servers(scenario),
                                   observed_history=len(server_names(scenario)) == 1, **params)),
    "server-sequence": _check("server-sequence", checks.ServerSequence,
                              lambda scenario, **params: checks.ServerSequence(
                                  external=list(external_servers(scenario).values()),
                                  from_clients=len(server_names(scenario)) == 1 and fifo(scenario), **params)),
    "snapshot-filter": _check("snapshot-filter", server_checks.SnapshotFilter,
                              lambda scenario, **params: server_checks.SnapshotFilter(
                                  dialect=scenario.dialect, external_servers=external_servers(scenario), **params)),
    "forward-unchanged": _check("forward-unchanged", server_checks.ForwardUnchanged,
                                lambda scenario, **params: server_checks.ForwardUnchanged(
                                    dialect=scenario.dialect, external_servers=external_servers(scenario), **params)),
    "external-wire": _check("external-wire", server_checks.EventBusExternalWire,
                            lambda scenario, **params: server_checks.EventBusExternalWire(
                                clients=[c for c in client_subtrees(scenario) if c not in external_clients(scenario)],
                                external_servers=external_servers(scenario), damaged=corrupts(scenario),
                                external_clients=bool(external_clients(scenario)),
                                any_external=bool(scenario.external), **params)),
    "syncstart-first": _check("syncstart-first", client_checks.SyncStartFirst,
                              lambda scenario, **params: client_checks.SyncStartFirst(
                                  in_process=in_process_identities(scenario),
                                  external_clients=frozenset(external_clients(scenario)),
                                  external_servers=bool(external_servers(scenario)), **params)),
    # SHOULDs of the client, opt-in (never defaults): a file that names them says its clients claim them
    "client-subtrees": _check("client-subtrees", checks.ClientSubtrees, _with_clients(checks.ClientSubtrees)),
    "producer-id": _check("producer-id", client_checks.ProducerId),
    "client-connections": _check("client-connections", client_checks.ClientConnections),
}


def wire(nodes: dict[str, tuple[str, dict[str, Any]]], endpoint: Callable[[str, str], str]) -> None:
    """Each server binds its snapshot, publisher and collector endpoints (consecutive ports when
    the run hands them out so); two servers are a primary and its backup, each the other's peer;
    every client knows every server, the primary first, and has its node name as identity. An
    external client's command line gets ``{server}`` (the primary's snapshot endpoint P) and
    ``{snapshots}`` (every server's, primary first, joined with ``,``)."""
    servers = [n for n, (role, _) in nodes.items() if role == "server"]
    if len(servers) not in (1, 2):
        raise ValueError(f"an Event BUS has one server, or a primary and a backup; found {len(servers)}")
    bound = {}
    for s in servers:
        cfg = nodes[s][1]
        bound[s] = [endpoint(s, "snapshot"), endpoint(s, "publisher"), endpoint(s, "collector")]
        cfg["bind"] = list(bound[s])
    if len(servers) == 2:
        roles = [nodes[s][1].get("ha") for s in servers]
        if roles in ([None, None], ["primary", None], [None, "backup"]):
            roles = ["primary", "backup"]
        elif roles in (["backup", None], [None, "primary"]):
            roles = ["backup", "primary"]
        if sorted(roles) != ["backup", "primary"]:
            raise ValueError(f"two Event BUS servers are a primary and a backup (ha: primary / backup); got {roles}")
        for s, other, ha in ((servers[0], servers[1], roles[0]), (servers[1], servers[0], roles[1])):
            nodes[s][1].update(ha=ha, peer=list(bound[other]))
        servers.sort(key=lambda s: nodes[s][1]["ha"] == "backup")
    elif nodes[servers[0]][1].get("ha"):
        raise ValueError("a single Event BUS server has no peer: drop its 'ha' setting")
    for name, (role, cfg) in nodes.items():
        if role == "client":
            cfg["servers"] = [list(bound[s]) for s in servers]
            # for an external client's command line ({server}, {snapshots}): the snapshot port P of
            # the primary, and of every server (primary first); the document puts the rest at P+1, P+2
            cfg["server"] = bound[servers[0]][0]
            cfg["snapshots"] = [bound[s][0] for s in servers]
            cfg.setdefault("identity", name)


def command(op: str, node: str, params: dict[str, Any], k: int, rng: Any) -> dict[str, Any]:
    if "topics" in params:
        topic = params["topics"][rng.randrange(len(params["topics"]))]
    else:
        topic = params.get("topic", f"/bus/{node}")
    return {"op": "publish", "topic": topic, "data": {"k": k, "from": node, "pad": rng.randbytes(params.get("size", 32))}}


def wire_role(socket_type: str, sent: frozenset[str]) -> str | None:
    """The role of an endpoint in a capture, from what it sent."""
    if sent & {"SYNC", "SYNCEND", "BROADCAST"}:
        return "server"
    if sent & {"SYNCSTART", "PUB"}:
        return "client"
    return None


def primary(view: TargetView) -> list[str]:
    """Every running server whose latest ``ha-state`` note says primary (one, unless both
    servers believe they are primary), in scenario order; [] when none does."""
    out = []
    for name in view.node_names():
        if view.role_of(name) == "server" and view.is_running(name):
            note = view.last_note(name, "ha-state")
            if note and note.get("state") == "primary":
                out.append(name)
    return out


def resolve_target(name: str, view: TargetView) -> list[str] | None:
    if name == "primary":
        return primary(view)
    return None


PACKAGE = ProtocolPackage(
    name="eventbus",
    tables=TABLES,
    catalogue=CATALOGUE,
    roles=ROLES,
    operations=OPERATIONS,
    checks=CHECKS,
    default_checks=("convergence", "complete-delivery", "client-sequence", "applied-once", "syncend-sequence",
                    "server-sequence", "snapshot-filter", "forward-unchanged", "external-wire", "syncstart-first"),
    final_status=("server",),  # convergence compares the clients with the active server's holdings
    mutants=MUTANTS,
    suites=SUITES,
    wire=wire,
    command=command,
    targets={"primary": "the running server whose latest 'ha-state' note says primary"},
    resolve_target=resolve_target,
    # BROADCAST and PUB have the same frames: PUB -> SUB is the publisher port. DEALER -> ROUTER
    # carries both the snapshot commands and PUBs, which the socket types cannot tell apart.
    capture=CaptureHints(channels={("PUB", "SUB"): "publisher", ("PUB", "XSUB"): "publisher",
                                    # a client's DEALERs: SYNCSTART to the snapshot ROUTER, PUB to the collector
                                    ("DEALER", "ROUTER"): ("snapshot", "collector")}, role=wire_role),
    # a server's replica DEALER and feed SUB hear the server they follow; its ROUTERs, clients and
    # the servers that replicate it
    senders=senders_by_role({"client": ("server",), "server": ("client", "server")},
                            {("server", REPLICA): ("server",), ("server", FEED): ("server",)}),
    # The checks were reviewed for what the proxy reports of external nodes: server-sequence and
    # syncend-sequence judge an external server from what it sent as the proxy read it (before any
    # rule of the file acts on it); the others leave such events out (docs/eventbus.md).
    observed_checks=True,
    observed_links="all",
    named_endpoints=True,  # snapshot, publisher, collector: the server's two ROUTERs told apart
)
