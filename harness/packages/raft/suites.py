"""Raft conformance suites, one per role (docs/conformance-raft.md); the cases are
scenarios/raft/conformance/<role>/*.yaml.

**Peer under test.** It binds its ROUTER at ``{endpoint}`` and is one of a cluster of
``{peer_count}`` peers (3 by default, 1 for cases that need a leader of its own): itself, ``{id}``
(``iut``), and the harness's scripted peers ``b`` and ``c``. Each scripted peer has two sockets,
as the document's topology gives every peer: ``router.<p>``, a ROUTER bound at the peer's URL in
``{peers}`` (the IUT's DEALER connects there and sends its RequestVote/AppendEntries, which the
case answers), and ``dealer.<p>``, a DEALER connected to the IUT's ROUTER (the case's own
RequestVote/AppendEntries as peer ``p``). ``client.<x>`` is a client's DEALER.

**Client under test.** The harness plays the cluster: ``peer.<p>`` is a ROUTER bound at peer
``p``'s URL (``a``, ``b``, ``c`` in ``{peers}``); the client is given ``{peers}`` and finds the
leader itself.

**Dialects.** Cases are written with the strict table's field names. A client request's id is
``reqid`` (12 bytes) in strict and ``request_id`` (a uint32) in ``raft:zmq-raft`` for every
client RPC but RequestUpdate: `dialect_case` renames it by the dialect's table (the first field
of the message) and converts the value (the last three bytes of the reqid). A RequestUpdate
reqid whose first four bytes (seconds since the Unix epoch) are zero gets the run's time
(``{epoch_s}``), so it is fresh (``raft.update.reqid-freshness``).

The peers are built per case by `_plan` (the conductor's `PeerPlan`); it imports
`harness.conformance` when called (by the runner), so that importing this package imports
nothing above it.
"""

from __future__ import annotations

import copy
import time
from typing import Any, Callable

from harness.node import SocketType
from harness.packages.base import RoleSuite
from harness.protocols import codec
from harness.protocols.table import fields_of

SCRIPTED = ("b", "c")  # the harness's peers when a peer is under test
CLUSTER = ("a", "b", "c")  # the harness's peers when a client is under test


def _id_field(c: Any, message: str) -> str:
    return fields_of(c.table.message(message))[0]


def dialect_case(case: Any, dialect: str, epoch_s: int) -> Any:
    """The case as played in ``dialect``: client request ids renamed and converted, RequestUpdate
    reqids made fresh (module docstring)."""
    strict, dial = codec("raft", "strict"), codec("raft", dialect)
    out = copy.deepcopy(case)
    captured: dict[str, str] = {}  # capture name -> message

    def rename(message: str | None) -> tuple[str, str] | None:
        if message is None:
            return None
        old, new = _id_field(strict, message), _id_field(dial, message)
        return (old, new) if old != new else None

    def fix_ref(v: Any) -> Any:
        if isinstance(v, dict) and set(v) == {"ref"}:
            cap, _, fname = str(v["ref"]).partition(".")
            r = rename(captured.get(cap))
            if r is not None and fname == r[0]:
                return {"ref": f"{cap}.{r[1]}"}
        if isinstance(v, dict) and len(v) == 1:
            (k, inner), = v.items()
            if k in ("not", "gt"):
                return {k: fix_ref(inner)}
            if k == "has":  # a mapping of an element's fields, or a matcher
                from harness.conformance.matchers import is_field_mapping

                return {k: {f: fix_ref(x) for f, x in inner.items()} if is_field_mapping(inner) else fix_ref(inner)}
            if k == "one_of" and isinstance(inner, list):
                return {k: [fix_ref(x) for x in inner]}
        return v

    for step in out.steps:
        fields = {k: _plain(fix_ref(v)) for k, v in step.fields.items()}
        r = rename(step.message)
        if r is not None and r[0] in fields:
            v = fields.pop(r[0])
            fields[r[1]] = int.from_bytes(v[-3:], "big") if isinstance(v, bytes) else v
            if r[0] in step.field_clauses:
                step.field_clauses[r[1]] = step.field_clauses.pop(r[0])
        if isinstance(fields.get("reqid"), bytes) and fields["reqid"][:4] == bytes(4):  # sent or matched
            fields["reqid"] = epoch_s.to_bytes(4, "big") + fields["reqid"][4:]
        step.fields = fields
        if step.frames:  # send_raw: a captured request id, renamed like a field's
            step.frames = [fix_ref(f) for f in step.frames]
        if step.capture and step.message:
            captured[step.capture] = step.message
    return out


def _plain(v: Any) -> Any:
    """An expect step's ``{hex: ...}`` matcher as the bytes it matches (sends have them already)."""
    if isinstance(v, dict) and set(v) == {"hex"}:
        return bytes.fromhex(str(v["hex"]).replace(" ", ""))
    return v


SIM_ENDPOINT_PREFIXES = ("tcp://iut:", "tcp://harness:")  # the conformance runner's simulated endpoints
SIM_EPOCH_S = 1_795_000_000  # 2026-11-18: the simulated cases' "now" for request ids


def _fill(prefix: str, scripted: tuple[str, ...], own: bool) -> Callable[[dict[str, Any]], None]:
    """{peers} (``ID=URL`` joined by commas) from the endpoints the harness bound, and the run's
    time {epoch_s}."""

    def fill(values: dict[str, Any]) -> None:
        count = int(values.get("peer_count", len(scripted) + own))
        others = scripted[: count - 1] if own else scripted[:count]
        listing = ([f"{values['id']}={values['endpoint']}"] if own else []) + \
                  [f"{p}={values[prefix + p]}" for p in others]
        values["peers"] = ",".join(listing)
        if not values.get("epoch_s"):
            # live: the wall clock, as an implementation judges a reqid's freshness by it; in
            # simulation a fixed epoch, so a case's bytes are the same every run
            live = not str(values.get("endpoint", "")).startswith(SIM_ENDPOINT_PREFIXES)
            values["epoch_s"] = int(time.time()) if live else SIM_EPOCH_S

    return fill


def _plan(iut_role: str) -> Callable[..., Any]:
    def build(case: Any, values: dict[str, Any], alloc: Callable[[], str]) -> Any:
        from harness.conformance.plan import PeerPlan, PeerSocket

        peers: dict[str, PeerSocket] = {}
        if iut_role == "peer":
            for p in SCRIPTED:
                peers[f"router.{p}"] = PeerSocket(f"router.{p}", SocketType.ROUTER, values[f"router_{p}"], True,
                                                  channel="request")
                peers[f"dealer.{p}"] = PeerSocket(f"dealer.{p}", SocketType.DEALER, values["endpoint"], False,
                                                  identity=f"dealer.{p}".encode(), channel="response")
            for name in case.peers:
                if name.startswith("client."):
                    peers[name] = PeerSocket(name, SocketType.DEALER, values["endpoint"], False,
                                             identity=name.encode(), channel="response")
                elif name.startswith("sub."):  # a StateBroadcast subscriber of the IUT's PUB
                    peers[name] = PeerSocket(name, SocketType.SUB, values["broadcast_url"], False,
                                             subscribe=(_cluster(values),), channel="broadcast",
                                             blame={"silent": "raft.broadcast.pub-socket"})
        else:
            for p in CLUSTER:
                peers[f"peer.{p}"] = PeerSocket(f"peer.{p}", SocketType.ROUTER, values[f"peer_{p}"], True,
                                                channel="request")
        shown = {k: values[k] for k in ("id", "key", *(f"peer_{p}" for p in CLUSTER)) if k in values}
        return PeerPlan(peers, values=shown, case=dialect_case(case, values.get("dialect", "strict"),
                                                               int(values["epoch_s"])))

    return build


def _cluster(values: dict[str, Any]) -> bytes:
    """The cluster ident (empty in every case): a StateBroadcast's first frame, so the topic a
    subscriber subscribes to (E-RAFT-10)."""
    return str(values.get("cluster", "")).encode()


def _peer_config(endpoint: str, values: dict[str, Any]) -> dict[str, Any]:
    from reference_nodes.raft.common import peer_list

    return {"dialect": values.get("dialect", "strict"), "id": values["id"], "endpoint": endpoint,
            "broadcast": values["broadcast_url"],
            "peers": peer_list(values["peers"]), "election_min_ms": int(values["election_min_ms"]),
            "election_max_ms": int(values["election_max_ms"]), "epoch_s": int(values["epoch_s"]),
            "max_entries": int(values.get("max_entries", 64)),
            "entries_pipeline": int(values.get("entries_pipeline", 5)),
            "snapshot_every": int(values.get("snapshot_every", 0))}


def _client_config(endpoint: str, values: dict[str, Any]) -> dict[str, Any]:
    from reference_nodes.raft.common import peer_list

    return {"dialect": values.get("dialect", "strict"), "peers": peer_list(values["peers"]),
            "updates": int(values["updates"]), "key": str(values["key"]), "epoch_s": int(values["epoch_s"]),
            "subscribe": _flag(values.get("subscribe", False))}


def _flag(v: Any) -> bool:
    """A yes/no placeholder: true / false, as a case's ``iut:`` or the defaults give it."""
    return v is True or str(v).lower() == "true"


_NODE = "{python} -m harness.cli node raft "
SUITES: dict[str, RoleSuite] = {
    "peer": RoleSuite(
        "raft", "peer",
        peers={"router": ("peer", SocketType.ROUTER, True), "dealer": ("peer", SocketType.DEALER, False),
               "client": ("client", SocketType.DEALER, False), "sub": ("client", SocketType.SUB, False)},
        iut_binds=True,
        reference_cmd=_NODE + "peer --dialect {dialect} --set id={id} --set endpoint={endpoint} --set peers={peers} "
                              "--set election_min={election_min_ms}ms --set election_max={election_max_ms}ms "
                              "--set max_entries={max_entries} --set entries_pipeline={entries_pipeline} "
                              "--set broadcast_url={broadcast_url} --set snapshot_every={snapshot_every} "
                              "--store {data_dir}/raft.store --seed {seed}",
        # Long election timeouts: a case that wants the IUT to stay a follower has seconds for
        # its script; the cases about elections set short ones (iut:). {max_entries}: the most
        # entries the reference puts in one message, a hint an implementation without such a
        # setting ignores (entries-stop sets 1, so that its log needs several responses);
        # {entries_pipeline}: REQUEST_ENTRIES_PIPELINES, the document's default 5.
        # {snapshot_every}: compact the log once this many applied entries lie beyond the last
        # snapshot (0: never); compaction is optional, so the case that needs it (entries-snapshot)
        # declares needs: [snapshot_every] and is skipped for a command line that does not name it.
        placeholders={"id": "iut", "peers": "", "peer_count": 3, "election_min_ms": 3000, "election_max_ms": 4000,
                      "seed": 1, "epoch_s": 0, "max_entries": 64, "entries_pipeline": 5, "snapshot_every": 0},
        iut_config=_peer_config,
        harness_endpoints=tuple(f"router_{p}" for p in SCRIPTED),
        # {broadcast_url}: where it binds its StateBroadcast PUB, if it has a BroadcastStateMachine
        # (optional, E-RAFT-27): the cases about it declare needs: [broadcast_url] and are skipped
        # for a command line that does not name it.
        iut_endpoints=("broadcast_url",),
        build_peers=_plan("peer"),
        fill_values=_fill("router_", SCRIPTED, own=True),
    ),
    "client": RoleSuite(
        "raft", "client",
        peers={"peer": ("peer", SocketType.ROUTER, True)},
        iut_binds=False,
        reference_cmd=_NODE + "client --dialect {dialect} --set peers={peers} --set updates={updates} --set key={key} "
                              "--set subscribe={subscribe}",
        # {peers}: the cluster as the client first knows it, only peer a (the cases' RequestConfig
        # answers tell it of b and c, as the document's client learns them); {updates}: puts it
        # makes on {key} by itself, one after the other.
        # {subscribe}: true in the StateBroadcast cases, which a client that cannot subscribe skips.
        placeholders={"peers": "", "peer_count": 1, "updates": 1, "key": "k", "epoch_s": 0, "subscribe": "false"},
        iut_config=_client_config,
        harness_endpoints=tuple(f"peer_{p}" for p in CLUSTER),
        build_peers=_plan("client"),
        fill_values=_fill("peer_", CLUSTER, own=False),
        completes=True,  # a client may exit 0 once its updates are done
    ),
}
