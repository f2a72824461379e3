"""Raft over ZeroMQ: peers that replicate a log, clients that run a key-value application on it.

Wire tables: `harness.protocols.raft` (strict and ``raft:zmq-raft``); clauses:
`harness.protocols.raft_clauses`; reference nodes and mutants: `reference_nodes.raft`;
checkers: `harness.checkers.raft`. docs/raft.md is the user guide.

Symbolic fault target ``leader``: the running peer whose latest ``role`` note says it leads,
in the highest term. The contract for peers (reference nodes, or a probe of an implementation
under test): a peer emits ``Note("role", {"role": R, "term": T})`` whenever its role or its term
changes, and once at start, with R one of ``follower``, ``candidate``, ``leader`` and T its
current term (an int)."""

from __future__ import annotations

from typing import Any, Callable

from harness.checkers.raft.elections import LINK_PREFIX  # a reference peer's DEALER to peer ID: "peer:ID"
from harness.packages.base import (
    CaptureHints, Operation, ProtocolPackage, Role, Setting, TargetView, as_bool, as_int, as_ms, as_positive_int, as_str,
    one_of,
)
from harness.packages.raft.checks import CHECKS, DEFAULT_CHECKS
from harness.packages.raft.suites import SUITES
from harness.protocols.codec import Codec
from harness.protocols.errors import DecodeError
from harness.protocols.raft import TABLES
from harness.protocols.raft_clauses import CATALOGUE
from reference_nodes.raft.client import Client
from reference_nodes.raft.common import DEFAULT_ELECTION_MAX_MS, DEFAULT_ELECTION_MIN_MS, peer_list
from reference_nodes.raft.mutants import MUTANTS
from reference_nodes.raft.peer import ROUTER as PEER_ROUTER, Peer
from reference_nodes.raft.tap import ROLE as TAP_ROLE, Tap, tap_of


def leader(view: TargetView) -> list[str]:
    """The running peer whose latest ``role`` note says ``leader`` with the highest term; [] when
    none claims to lead (an election is under way). Two peers claiming the same highest term
    (what election safety forbids) are both named, in scenario order."""
    best: int | None = None
    found: list[str] = []
    for name in view.node_names():
        if view.role_of(name) != "peer" or not view.is_running(name):
            continue
        note = view.last_note(name, "role")
        if not note or note.get("role") != "leader":
            continue
        term = note.get("term")
        if not isinstance(term, int) or isinstance(term, bool):
            continue
        if best is None or term > best:
            best, found = term, [name]
        elif term == best:
            found.append(name)
    return found


def wire_notes(raft: Codec, frames: list[bytes]) -> list[tuple[str, dict[str, Any]]]:
    """The ``role`` note a reference peer would write, from a request an external peer sent:
    AppendEntries or InstallSnapshot of term T only a leader of T sends; RequestVote of T, a
    candidate. (A deposed leader goes on looking like the leader of its old term until it asks
    for votes; `leader` prefers the highest term, so a newer leader wins once it has sent one.)"""
    try:
        msg = raft.decode(frames, channel="request")
    except DecodeError:
        return []
    if msg.name in ("AppendEntries", "InstallSnapshot"):
        return [("role", {"role": "leader", "term": msg["term"]})]
    if msg.name == "RequestVote":
        return [("role", {"role": "candidate", "term": msg["term"]})]
    return []


def resolve_target(name: str, view: TargetView) -> list[str] | None:
    if name == "leader":
        return leader(view)
    return None


CLUSTER = Setting("cluster", as_str, "cluster ident, the same on every peer and client (default empty)")


def _peers(v: Any) -> list[list[str]]:
    return [list(p) for p in peer_list(v)]


# How a standalone node (`zmq-harness node raft peer --set ...`) is wired; scenarios assign these
# themselves (`wire`), over anything set here.
PEERS = Setting("peers", _peers, "standalone: every peer as ID=URL,ID=URL (itself included)")
NODE_WIRING = {
    "id": Setting("id", as_str, "standalone: this peer's PEER ID"),
    "endpoint": Setting("endpoint", as_str, "standalone: the ROUTER URL it binds"),
    "broadcast_url": Setting("broadcast", as_str, "standalone: the StateBroadcast PUB URL it binds"),
    "peers": PEERS,
}

ROLES = {
    "peer": Role("peer", Peer, {
        "election_min": Setting("election_min_ms", as_ms, "ELECTION_TIMEOUT_MIN (default 200ms)"),
        "election_max": Setting("election_max_ms", as_ms, "ELECTION_TIMEOUT_MAX (default 300ms)"),
        "rpc_timeout": Setting("rpc_timeout_ms", as_ms, "repeat an unanswered peer request after this (50ms)"),
        "heartbeat": Setting("heartbeat_ms", as_ms, "leader's AppendEntries heartbeat (70ms)"),
        "client_heartbeat": Setting("client_heartbeat_ms", as_ms, "empty StateBroadcast interval (500ms)"),
        "max_entries": Setting("max_entries", as_positive_int, "entries per AppendEntries / RequestEntries (64)"),
        "snapshot_every": Setting("snapshot_every", as_int, "compact the log after this many applied entries "
                                                            "(0: never, the default)"),
        "snapshot_keep": Setting("snapshot_keep", as_int, "applied entries kept in the log after compaction (0)"),
        "chunk_size": Setting("chunk_size", as_positive_int, "snapshot chunk bytes (4096)"),
        "update_ttl": Setting("update_ttl_ms", as_ms, "REQUEST_UPDATE_TTL (8h)"),
        "entries_pipeline": Setting("entries_pipeline", as_positive_int, "REQUEST_ENTRIES_PIPELINES (5)"),
        "broadcast": Setting("broadcast_enabled", as_bool, "run the BroadcastStateMachine's PUB (default true)"),
        "state_machine": Setting("state_machine", one_of("kv", "none"), "kv (default) or none"),
        "cluster": CLUSTER,
        "outsider": Setting("outsider", as_bool, "a peer of another cluster on the same endpoints: its own `cluster`, "
                                                 "which the others' need not share (default false)"),
        **NODE_WIRING,
    }, "a Raft peer: ROUTER for requests, one DEALER per other peer, PUB for StateBroadcast"),
    "client": Role("client", Client, {
        "response_ttl": Setting("response_ttl_ms", as_ms, "SERVER_RESPONSE_TTL (500ms)"),
        "election_grace": Setting("election_grace_ms", as_ms, "SERVER_ELECTION_GRACE_MS (300ms)"),
        "op_timeout": Setting("op_timeout_ms", as_ms, "give an operation up (status info) after this (10s)"),
        "max_queue": Setting("max_queue", as_positive_int, "operations waiting their turn (1000)"),
        "subscribe": Setting("subscribe", as_bool, "follow the leader's StateBroadcast (default false)"),
        "updates": Setting("updates", as_int, "standalone: put this many values (v1, v2, ...) on 'key' at start "
                                              "(default 0)"),
        "key": Setting("key", as_str, "standalone: the key of those puts (default k)"),
        "cluster": CLUSTER, "peers": PEERS,
    }, "a key-value client: every operation a RequestUpdate, results from the replayed log"),
}

KV_PARAMS = {
    "keys": Setting("keys", as_positive_int, "keys k0..k(N-1) drawn uniformly (default 4)"),
    "size": Setting("size", as_positive_int, "characters of a value (default 8)"),
    "values": Setting("values", as_positive_int, "distinct values drawn uniformly (default 5, so cas often "
                                                 "matches)"),
}


def _op(name: str, doc: str) -> Operation:
    return Operation(name, ("client",), dict(KV_PARAMS), doc)


OPERATIONS = {
    "put": _op("put", "write a value"),
    "get": _op("get", "read a key (through the log)"),
    "cas": _op("cas", "compare-and-set: write a value if the key holds the expected one"),
    "delete": _op("delete", "remove a key"),
}


def wire(nodes: dict[str, tuple[str, dict[str, Any]]], endpoint: Callable[[str, str], str]) -> None:
    """Each peer gets ``id``, ``endpoint`` (ROUTER), ``broadcast`` (PUB), its election timeouts
    (the defaults written out), every node ``peers`` and ``cluster``: what an external peer's
    command line gets as ``{id}``, ``{endpoint}``, ``{endpoint1}``, ``{election_min_ms}``,
    ``{election_max_ms}``, ``{peers}``, ``{cluster}`` (`harness.launch.placeholders`)."""
    peers = [n for n, (role, _) in nodes.items() if role == "peer"]
    if not peers:
        raise ValueError("a Raft scenario needs at least one peer")
    listing = [[n, endpoint(n, "router")] for n in peers]
    # As text "ID=URL,ID=URL": what an implementation's command line gets as {peers}.
    text = ",".join(f"{n}={url}" for n, url in listing)
    # An outsider is a peer of another cluster sharing the endpoints (E-RAFT-10: the others ignore it).
    clusters = {nodes[n][1].get("cluster", "") for n in peers if not nodes[n][1].get("outsider")}
    if len(clusters) > 1:
        raise ValueError(f"every peer of a cluster needs the same cluster ident, got {sorted(clusters)} "
                         f"(a peer of another cluster says 'outsider: true')")
    cluster = clusters.pop() if clusters else ""
    for name, (role, cfg) in nodes.items():
        cfg["peers"] = text
        cfg.pop("outsider", None)
        cfg.setdefault("cluster", cluster)
        if role == "peer":
            cfg["id"] = name
            cfg["endpoint"] = endpoint(name, "router")
            cfg.setdefault("election_min_ms", DEFAULT_ELECTION_MIN_MS)
            cfg.setdefault("election_max_ms", DEFAULT_ELECTION_MAX_MS)
            if cfg.pop("broadcast_enabled", True):
                cfg["broadcast"] = endpoint(name, "pub")


def command(op: str, node: str, params: dict[str, Any], k: int, rng: Any) -> dict[str, Any]:
    keys, size, values = params.get("keys", 4), params.get("size", 8), params.get("values", 5)
    rid = f"{node}-{op}-{k}"  # the operation's id, and its correlation id in the trace (its "op" delivery names it)
    req: dict[str, Any] = {"op": op, "key": f"k{rng.randrange(keys)}", "id": rid, "corr": rid}
    if op in ("put", "cas"):
        req["value"] = f"{rng.randrange(values):0{size}d}"
    if op == "cas":
        req["expected"] = f"{rng.randrange(values):0{size}d}"
    return req


def wire_role(socket_type: str, sent: frozenset[str]) -> str | None:
    """The role of an endpoint in a capture: peers bind ROUTERs, send the peer RPCs and the
    StateBroadcast; a DEALER that sends only client RPCs is a client."""
    if socket_type in ("ROUTER", "PUB") or sent & {"RequestVote", "AppendEntries", "InstallSnapshot", "StateBroadcast"}:
        return "peer"
    if socket_type == "DEALER" and sent:
        return "client"
    return None


# Every Raft request and response starts with its id (message_id, reqid); RequestUpdate is
# answered "accepted", then "committed", and RequestEntries in a pipeline of responses. Requests
# go from a DEALER (client, or a peer's link) to a peer's ROUTER, responses back.
CAPTURE = CaptureHints(channels={("PUB", "SUB"): "broadcast", ("PUB", "XSUB"): "broadcast",
                                 ("DEALER", "ROUTER"): "request", ("ROUTER", "DEALER"): "response"}, role=wire_role,
                       correlation_frame=0, repeats=frozenset({"RequestUpdateResponse", "RequestEntriesResponse"}))




def tap(configs: dict[str, tuple[str, dict[str, Any]]], external: frozenset[str]) -> tuple[str, Any, dict] | None:
    """A live run's passive listener on its external peers' StateBroadcast PUBs (reference_nodes.raft.tap)."""
    cfg = tap_of(configs, external)
    return (TAP_ROLE, Tap, cfg) if cfg is not None else None


def raft_senders(role: str, socket: str, frames: list[bytes]) -> tuple[str, ...] | str:
    """Who may send a Raft node what it received there: a peer's ROUTER hears peers and clients;
    its DEALER ``peer:<ID>`` the peer with that id (`wire` makes the node name the id); a client's
    sockets hear peers; the tap's socket is named after the one peer it listens to."""
    if role == TAP_ROLE:
        return socket
    if role != "peer":
        return ("peer",)
    if socket == PEER_ROUTER:
        return ("peer", "client")
    return socket[len(LINK_PREFIX):] if socket.startswith(LINK_PREFIX) else ("peer",)


PACKAGE = ProtocolPackage(
    name="raft",
    tables=TABLES,
    catalogue=CATALOGUE,
    roles=ROLES,
    operations=OPERATIONS,
    checks=CHECKS,
    default_checks=DEFAULT_CHECKS,
    mutants=MUTANTS,
    wire=wire,
    command=command,
    targets={"leader": "the running peer whose latest 'role' note says leader, in the highest term"},
    resolve_target=resolve_target,
    suites=SUITES,
    capture=CAPTURE,
    observed_checks=True,
    wire_notes=wire_notes,  # tests/test_live_observe.py, tests/checkers/test_raft_term_update_*.py
    senders=raft_senders,
    tap=tap,  # hears the StateBroadcasts of external peers (broadcast-state judges them)
)
