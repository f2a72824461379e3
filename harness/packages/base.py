"""What a protocol package is made of (`ProtocolPackage`), the types its parts are built from,
and the parsers of scenario values.

Every protocol is one package under ``harness/packages/<protocol>/`` exposing ``PACKAGE``, a
`ProtocolPackage`; ``harness.registry`` maps protocol names to those packages. Scenarios
(`harness.scenario`), runs (`harness.composition`), conformance
(`harness.conformance`) and the command line reach a protocol only through its package. How to
add one: docs/adding-a-protocol.md.

Layering: this module and the packages use the ground floor (`harness.protocols`,
`harness.node`) and the second layer (`reference_nodes`, `harness.checkers`,
`fault_injection`) only, so that `harness.scenario` and everything above can import them.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from fault_injection.distributions import Distribution
from fault_injection.nemesis import ClockSkew, Crash, Partition, Pause, SlowLink
from fault_injection.rules import LOSSY_EFFECTS, parse_duration, parse_probability
from harness.node import NodeFactory, SocketType
from harness.protocols.clauses import Catalogue
from harness.protocols.codec import Codec
from harness.protocols.table import Table

Parser = Callable[[Any], Any]


def as_int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"expected a whole number, got {v!r}")
    return v


def as_positive_int(v: Any) -> int:
    n = as_int(v)
    if n < 1:
        raise ValueError(f"expected a whole number >= 1, got {v!r}")
    return n


def as_str(v: Any) -> str:
    if not isinstance(v, (str, int, float)) or isinstance(v, bool):
        raise ValueError(f"expected a string, got {v!r}")
    return str(v)


def as_bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"expected true or false, got {v!r}")
    return v


def as_ms(v: Any) -> int:
    """A duration with its unit ("250ms", "2s") as whole milliseconds (a bare number is an
    error: one rule for every duration in a file)."""
    ns = parse_duration(v)
    if ns < 0:
        raise ValueError(f"duration {v!r} is negative")
    return ns // 1_000_000


def as_duration(v: Any) -> int:
    """A duration with its unit ("250ms", "2s") in ns (a bare number is an error)."""
    ns = parse_duration(v)
    if ns < 0:
        raise ValueError(f"duration {v!r} is negative")
    return ns


def as_rate(v: Any) -> float:
    """Operations per second: 20, "20/s", "300/min", "1/100ms"."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if v <= 0:
            raise ValueError("rate must be positive")
        return float(v)
    if isinstance(v, str) and "/" in v:
        count, per = v.split("/", 1)
        per = per.strip()
        per_ns = {"s": 1e9, "sec": 1e9, "min": 60e9, "ms": 1e6}.get(per)
        if per_ns is None:
            per_ns = float(parse_duration(per))
        rate = float(count) * 1e9 / per_ns
        if rate <= 0:
            raise ValueError("rate must be positive")
        return rate
    raise ValueError(f"not a rate: {v!r} (use e.g. 20/s, 300/min)")


def one_of(*choices: str) -> Parser:
    def parse(v: Any) -> str:
        if v not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {v!r}")
        return v

    return parse


def as_probability(v: Any) -> float:
    return parse_probability(v)


@dataclass(frozen=True)
class Setting:
    """One setting of a role: the node config key it becomes, its parser and its meaning."""

    key: str
    parse: Parser
    doc: str = ""


# A reference ROUTER's handling of a peer that reconnects with its routing id: the newest
# connection takes it (ZMQ_ROUTER_HANDOVER, the default). false keeps libzmq's default, which many
# implementations keep: the newcomer is ignored while the old connection holds unread messages,
# so the clients of the harness are shown to recover from it (docs/live.md).
HANDOVER = Setting("handover", as_bool, "a peer back with its routing id takes it over at once (default true; "
                   "false: libzmq's default, the newcomer ignored while its old connection holds unread messages)")


@dataclass(frozen=True)
class Role:
    name: str
    factory: NodeFactory
    settings: dict[str, Setting]
    doc: str = ""


@dataclass(frozen=True)
class Operation:
    """A workload operation: who performs it and which parameters it takes."""

    name: str
    roles: tuple[str, ...]
    params: dict[str, Setting]
    doc: str = ""


@dataclass(frozen=True)
class Check:
    name: str
    factory: Callable[..., Any]  # (scenario, params) -> checker
    params: dict[str, Setting] = field(default_factory=dict)
    doc: str = ""
    clause: str = ""
    checker: type | None = None  # the checker class the factory builds (docs, the registry test)


# ---- conformance suites ------------------------------------------------------------------------

# The suites that ship with the package (harness/scenarios: in the source tree a link to the
# repository's scenarios/, in an installed package a copy), so `conform` works from any
# directory; `--suite-dir` names a tree of one's own (<protocol>/conformance/<role>/*.yaml).
SUITES_ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scenarios")


@dataclass(frozen=True)
class RoleSuite:
    """How one role is tested: who the harness plays, which sockets its scripted peers use, how
    the implementation under test (IUT) is wired, and the reference command that starts a
    reference node as an IUT. The cases are ``scenarios/<protocol>/conformance/<role>/*.yaml``."""

    protocol: str
    role: str
    # scripted peer prefix -> (peer role, socket type, the peer binds?)
    peers: dict[str, tuple[str, SocketType, bool]]
    iut_binds: bool  # True: the IUT binds {endpoint} and peers connect; False: a peer binds it
    reference_cmd: str  # the reference node as an IUT (used by tests and docs)
    placeholders: dict[str, Any] = field(default_factory=dict)  # defaults for the --cmd template
    iut_config: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None  # in-process IUT config
    # Placeholders naming endpoints the harness binds and the IUT connects to (e.g. a tower's),
    # filled per run; and, for peers that are mesh nodes, the builder of the conductor's peers
    # (case, placeholder values, endpoint allocator) -> harness.conformance.plan.PeerPlan.
    harness_endpoints: tuple[str, ...] = ()
    build_peers: Callable[..., Any] | None = None
    # Placeholders naming further endpoints the IUT binds besides {endpoint} (a Raft peer's
    # StateBroadcast PUB, {broadcast_url}), allocated per run like harness_endpoints. The IUT
    # is not waited for on them: a socket of an optional feature may come up late, or never.
    iut_endpoints: tuple[str, ...] = ()
    # Fields whose text values get a per-case suffix when one running implementation serves
    # every case (--endpoint), so that what one case registers cannot answer the next.
    isolate_fields: tuple[str, ...] = ()
    # Consecutive ports from {port} that belong to the IUT (an Event BUS server binds P, P+1, P+2;
    # an Event BUS client connects to them): live runs reserve them all.
    ports: int = 1
    # Placeholder values derived from the others once per case (e.g. a list joined with the
    # dialect's separator); changes the dict in place.
    fill_values: Callable[[dict[str, Any]], None] | None = None
    # The role may run to completion (a client with a count of requests, a producer with a count
    # of records): exit status 0 once its work is done is not a crash, and expectations of
    # silence then hold. Any other exit of the IUT during a case is a robustness failure.
    completes: bool = False
    # The IUT announces the endpoints it binds (Dafka beacons): one whose command line names
    # neither {endpoint} nor {port} binds ports of its own choosing and is reached through what
    # it announces (PeerLink.follow), like a real node of the protocol would reach it.
    announces_endpoint: bool = False
    # Scripted peer prefix -> the decode channel of what the IUT sends it, for protocols whose
    # messages are told apart by direction (PPPP: "to-subscriber" / "to-publisher").
    peer_channels: dict[str, str] = field(default_factory=dict)

    @property
    def peer_roles(self) -> dict[str, str]:
        return {prefix: spec[0] for prefix, spec in self.peers.items()}

    def cases_dir(self, root: str | None = None) -> str:
        return os.path.join(root or SUITES_ROOT, self.protocol, "conformance", self.role)

    def case_paths(self, root: str | None = None) -> list[str]:
        return sorted(glob.glob(os.path.join(self.cases_dir(root), "*.yaml")))


# ---- symbolic fault targets --------------------------------------------------------------------


class TargetView(Protocol):
    """What a resolver of symbolic fault targets may ask about a run in progress. The run driver
    provides it (over the simulator or the live runtime); tests use a hand-made one."""

    def node_names(self) -> list[str]:
        """Every node of the run, in scenario order."""
        ...

    def role_of(self, name: str) -> str:
        ...

    def is_running(self, name: str) -> bool:
        """Started, and neither crashed nor stopped (a paused node is running)."""
        ...

    def last_note(self, name: str, kind: str) -> dict[str, Any] | None:
        """The data of the latest ``Note`` of this kind the node emitted since it last started
        (a restart forgets the notes of its previous life), or None."""
        ...


# (target name, view) -> the nodes it names now ([] when none does, e.g. no leader during an
# election), or None when the protocol defines no target of that name.
Resolver = Callable[[str, TargetView], "list[str] | None"]
# (nodes: name -> (role, config), endpoint(node, purpose) -> endpoint) -> None; fills configs in place
Wire = Callable[[dict[str, tuple[str, dict[str, Any]]], Callable[[str, str], str]], None]
# (operation, node, parameters, k, rng) -> the application command of the k-th operation
Command = Callable[[str, str, dict[str, Any], int, Any], dict[str, Any]]


def senders_by_role(roles: dict[str, tuple[str, ...]],
                    sockets: dict[tuple[str, str], tuple[str, ...]] | None = None
                    ) -> Callable[[str, str, list[bytes]], "tuple[str, ...] | str | None"]:
    """A package's ``senders`` from the roles that send each role messages (``sockets``: for
    one (role, socket), when it hears fewer of them); a role it does not name may hear any."""
    by_socket = dict(sockets or {})

    def senders(role: str, socket: str, frames: list[bytes]) -> tuple[str, ...] | str | None:
        return by_socket.get((role, socket), roles.get(role))

    return senders


def faults_may_lose(scenario: Any) -> bool:
    """Whether the file's faults may lose or hold up messages, so that what is still on its way
    when the run ends is not yet owed (the delivery checks' horizon): a message rule that drops,
    delays, reorders or corrupts, or any fault of the nemesis but a clock's."""
    if any(getattr(r.effect, "name", "") in LOSSY_EFFECTS for r in scenario.rules.rules):
        return True
    return any(not isinstance(f, ClockSkew) for f in scenario.faults)


TRANSIT_SLACK_NS = 100_000_000  # a node's own work and a live run's scheduling, on top of the network's


def transit_ns(scenario: Any, hops: int) -> int:
    """How long ``hops`` messages in a row may take on the file's network, no fault acting: each
    the slowest latency it configures (`Distribution.high`; the simulator's default where it sets
    none), plus `TRANSIT_SLACK_NS`. What was sent less than this before the end may still be on its
    way, however sound the nodes."""
    from harness.sim.network import DEFAULT_LATENCY  # noqa: PLC0415 - the packages load before the simulator

    lat = scenario.latency or {}
    specs = [lat.get("default", DEFAULT_LATENCY)] + [link["latency"] for link in lat.get("links", []) or []]
    return hops * max(Distribution.parse(spec).high() for spec in specs) + TRANSIT_SLACK_NS


def fault_ends_ns(fault: Any, run_end_ns: int) -> int | None:
    """When a time-bounded fault stops holding messages up: a partition, slow link or pause when
    it ends (the run's end if it never does), a crash when its node comes back (None if it never
    does: what it lost, it lost at its crash); None for a fault of no such span (a clock's)."""
    if isinstance(fault, (Partition, SlowLink, Pause)):
        return run_end_ns if fault.end is None else fault.end
    if isinstance(fault, Crash):
        return None if fault.restart_after is None else fault.at + fault.restart_after
    return None


def partition_spans(scenario: Any) -> tuple[tuple[int, int], ...]:
    """The file's partitions, (start, heal) in ns, the heal the run's end for one that never
    heals: behind the chaos proxy a connection opened while one holds waits for the heal, and what
    was sent on it meanwhile is read only then."""
    return tuple((f.start, fault_ends_ns(f, scenario.duration_ns)) for f in scenario.faults
                 if isinstance(f, Partition))


def touched_until_ns(scenario: Any, node: str, peers: set[str]) -> int:
    """The latest moment (ns of the run) a fault may still hold up messages between ``node`` and
    one of ``peers`` (0 if none may): a partition or slow link between them until it ends, a
    pause of one of them until it resumes, a crash of one until it comes back (one that never does
    lost what it lost at its crash). Targets are read as the live proxy places them (a dynamic
    one may be any node)."""
    from harness.live_faults import nodes_of  # noqa: PLC0415 - it imports the registry, which imports this

    end = scenario.duration_ns + scenario.settle_ns
    ours, theirs = {node}, set(peers)
    until = 0
    for f in scenario.faults:
        if isinstance(f, Partition):
            sides = [set().union(*(nodes_of(scenario, t) for t in side)) for side in f.sides]
            touches = any(ours & a and theirs & b for i, a in enumerate(sides) for j, b in enumerate(sides) if i != j)
        elif isinstance(f, SlowLink):
            a, b = nodes_of(scenario, f.src), nodes_of(scenario, f.dst)
            touches = bool(a & ours and b & theirs or a & theirs and b & ours)
        elif isinstance(f, (Pause, Crash)):
            touches = bool(nodes_of(scenario, f.target) & (ours | theirs))
        else:
            continue
        if touches:
            ends = fault_ends_ns(f, end)
            until = max(until, f.at if ends is None else ends)
    return until


def running_with_role(view: TargetView, role: str) -> list[str]:
    """The running nodes of a role, in scenario order."""
    return [n for n in view.node_names() if view.role_of(n) == role and view.is_running(n)]


# ---- reading captures ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CaptureHints:
    """How `zmq-harness pcap` reads this protocol's traffic (harness.capture); all optional.

    ``channels``: (sender's ZMTP socket type, receiver's) -> the wire table channel the message
    travels on (or several, tried in order), for layouts only the channel tells apart. ``role``: (an endpoint's ZMTP socket
    type, the names of the messages it sent) -> its role, or None when that does not tell.
    ``subscriber``: a subscription prefix -> the key of the node that subscribes (when the
    prefix names it). ``announces``: a decoded message of one of the ``announcing`` kinds ->
    (the key of its sender, the ``host:port`` it listens on, or ""). Connections with the same
    key are one node. Requests and their responses are paired from the table (``answers``):
    with ``correlation_frame``, a response answers the request of the same link whose frame at
    that index (its id) it repeats; else the oldest unanswered one. ``repeats``: responses one
    request may get several of (a Raft RequestUpdate is answered "accepted", then "committed";
    RequestEntries answers in a pipeline)."""

    channels: dict[tuple[str, str], "str | tuple[str, ...]"] = field(default_factory=dict)
    role: Callable[[str, frozenset[str]], "str | None"] | None = None
    subscriber: Callable[[bytes], "str | None"] | None = None
    announcing: frozenset[str] = frozenset()
    announces: Callable[[Any], "tuple[str, str] | None"] | None = None
    correlation_frame: int | None = None
    repeats: frozenset[str] = frozenset()


# ---- the package -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProtocolPackage:
    """Everything the harness knows about one protocol. Parts a protocol does not have yet stay
    empty (``zmq-harness protocols`` lists what each one lacks)."""

    name: str
    tables: dict[str, Table]  # dialect -> wire table ("strict" = the document plus errata)
    catalogue: Catalogue
    roles: dict[str, Role] = field(default_factory=dict)  # with their reference node factories
    operations: dict[str, Operation] = field(default_factory=dict)  # workload operations
    checks: dict[str, Check] = field(default_factory=dict)
    default_checks: tuple[str, ...] = ()  # a scenario without 'check:' gets these
    final_status: tuple[str, ...] = ()  # roles asked {"op": "status"} just before the checks are judged
    # mutant name -> (role, factory, the clause id it breaks)
    mutants: dict[str, tuple[str, NodeFactory, str]] = field(default_factory=dict)
    suites: dict[str, RoleSuite] = field(default_factory=dict)  # role under test -> its suite
    wire: Wire | None = None  # fills in endpoints (and identities) of a scenario's nodes
    command: Command | None = None  # the application command of a workload operation
    targets: dict[str, str] = field(default_factory=dict)  # symbolic fault target -> what it names
    resolve_target: Resolver | None = None
    # The standard-output line of an application delivery, (kind, data) -> line or None: what a
    # reference node run standalone (`zmq-harness node`) prints, and what conformance cases
    # read back from any implementation (expect_output).
    output: Callable[[str, dict[str, Any]], str | None] | None = None
    capture: CaptureHints = field(default_factory=CaptureHints)  # reading its traffic from a pcap
    # Config key of an endpoint a node binds -> config key of the endpoint it announces to its
    # peers for them to connect to (discovery). A live run behind the chaos proxy announces the
    # proxy's listener there, so peers that learn the endpoint at run time connect through it.
    advertised: dict[str, str] = field(default_factory=dict)
    # Whether its checks were reviewed for the events the chaos proxy reports of external nodes
    # (their times bound a send from above and a receipt from below only, harness.live_observe):
    # a live run observes the traffic of external nodes by default only then
    # (``live: {observe: true}`` asks for it anyway).
    observed_checks: bool = False
    # Which traffic of an external node the proxy reports then: "between" external nodes only,
    # or "all" of it, with the harness's nodes too (its checks were reviewed for an external
    # node's sends to an in-process node being seen as its own as well as the receiver's receipt)
    observed_links: str = "between"
    # Whether the purpose each endpoint of a node was handed out for (``endpoint(node, purpose)``
    # in `wire`) is the name of the socket the node binds there, as its probe would report it:
    # the proxy then names an external node's bound sockets by it (an Event BUS server's two
    # ROUTERs, ``snapshot`` and ``collector``), not by their ZMTP type.
    named_endpoints: bool = False
    # What a message an external node sent (frames as its socket handed them over, without a
    # routing id) says about it, as notes a reference node would write: ``[(kind, data)]`` (Raft:
    # an AppendEntries of term T, ``("role", {"role": "leader", "term": T})``). The live runtime
    # keeps the latest per kind, so symbolic fault targets (``crash: leader``) name external
    # nodes too when the proxy observes them.
    wire_notes: Callable[[Codec, list[bytes]], list[tuple[str, dict[str, Any]]]] | None = None
    # (a receiving node's role, its socket, the frames it received, a ROUTER's routing id left out)
    # -> the roles whose nodes may have sent it that (None: any role), or the name of the one node
    # the wiring connects that socket to: ``wire-conformance`` names
    # the external node that sent a probed node a message by it (harness.checkers.wire_receipts),
    # so it must name every role that may, or a message is blamed on the wrong node.
    senders: Callable[[str, str, list[bytes]], "tuple[str, ...] | str | None"] | None = None
    # A passive node a live run with external nodes adds, to hear what they send that no node
    # subscribes to (a PUB filters at the sender): (node configs, external node names) ->
    # (role, factory, config) or None. Its receipts reach the checks as that role's.
    tap: Callable[[dict[str, tuple[str, dict[str, Any]]], frozenset[str]],
                  "tuple[str, NodeFactory, dict[str, Any]] | None"] | None = None

    @property
    def dialects(self) -> list[str]:
        return list(self.tables)

    def peer_roles(self) -> dict[str, dict[str, str]]:
        """Role under test -> {scripted peer prefix: peer role}, what case files are checked against."""
        return {role: s.peer_roles for role, s in self.suites.items()}

    def resolve(self, name: str, view: TargetView) -> list[str] | None:
        """The nodes a symbolic target names now; None when the protocol has no such target."""
        if self.resolve_target is None or name not in self.targets:
            return None
        return self.resolve_target(name, view)
