"""DCP: one broker, workers that register services, clients that make requests.

Wire tables: `harness.protocols.dcp`; clauses: `harness.protocols.dcp_clauses`; reference nodes
and mutants: `reference_nodes.dcp`; checkers: `harness.checkers.dcp`; conformance suites:
`harness.packages.dcp.suites`."""

from __future__ import annotations

from typing import Any, Callable

from harness.checkers.dcp_heartbeat import HeartbeatAnswers, WorkerInterval
from harness.checkers.dcp_register import Registers
from harness.checkers import dcp as checks
from harness.checkers import dcp_external as wire_checks
from harness.checkers.external import external_nodes, noting_external
from harness.packages.base import (
    HANDOVER, CaptureHints, Check, Operation, ProtocolPackage, Role, Setting, TargetView, as_int, as_ms,
    as_positive_int, as_str, running_with_role, senders_by_role, transit_ns,
)
from harness.packages.dcp.paths import (
    COUNT_DAMAGE, DAMAGE, LOSS, REPLY_DAMAGE, fault_between, may_lose_requests, nodes_with_role, path_cut_until,
    rule_touching,
)
from harness.packages.dcp.suites import SUITES
from harness.protocols.dcp import TABLES
from harness.protocols.dcp_clauses import CATALOGUE
from reference_nodes.dcp.broker import Broker
from reference_nodes.dcp.client import DEFAULT_TIMEOUT_MS, Client
from reference_nodes.dcp.mutants import MUTANTS
from reference_nodes.dcp.worker import Worker

DEFAULT_HEARTBEAT_MS = 1000
DEFAULT_LIVENESS = 3


def _behaviour(v: Any) -> str:
    s = as_str(v)
    if s in ("echo", "upper", "reverse") or (s.startswith("forward:") and len(s) > len("forward:")):
        return s
    raise ValueError(f"expected echo, upper, reverse or forward:<service>, got {s!r}")


def _factor(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 1:
        raise ValueError(f"expected a number >= 1 (a multiple of the interval), got {v!r}")
    return float(v)


HEARTBEAT = Setting("heartbeat_ms", as_ms, "heartbeat interval agreed between broker and workers")
LIVENESS = Setting("liveness", as_positive_int, "missed heartbeat intervals before a peer counts as dead")


def _broker_settings(scenario: Any) -> dict[str, Any]:
    for g in scenario.groups.values():
        if g.role == "broker":
            return g.config
    return {}


def _expiry(scenario: Any, **params: Any) -> checks.WorkerExpiry:
    cfg = _broker_settings(scenario)
    return checks.WorkerExpiry(heartbeat_ms=cfg.get("heartbeat_ms", DEFAULT_HEARTBEAT_MS),
                               liveness=cfg.get("liveness", DEFAULT_LIVENESS),
                               external_brokers=external_nodes(scenario, "broker"),
                               external_workers=external_nodes(scenario, "worker"), **params)


def _exactly_once(scenario: Any, **params: Any) -> checks.ExactlyOnce:
    behaviours = {}
    for g in scenario.groups.values():
        if g.role == "worker":
            behaviours[g.config.get("service", "echo")] = g.config.get("behaviour", "echo")
    # a request is in flight for several timeouts only where the file's faults may take an attempt
    timeouts = {n: g.config.get("timeout_ms", DEFAULT_TIMEOUT_MS) for g in scenario.groups.values()
                if g.role == "client" for n in g.nodes if may_lose_requests(scenario, n)}
    return checks.ExactlyOnce(behaviours=behaviours, external_clients=external_nodes(scenario, "client"),
                              external_workers=external_nodes(scenario, "worker"), timeouts_ms=timeouts,
                              cut_until_ns={n: path_cut_until(scenario, n) for n in timeouts},
                              transit_ns=transit_ns(scenario, 4), **params)  # client, broker, worker and back


def _worker_interval(scenario: Any, **params: Any) -> WorkerInterval:
    """Each worker's agreed interval: its own setting, else the broker's (as `wire` gives it).
    External workers are judged from their sends as the chaos proxy read them, when it observes
    them and no partition may cut them off from a broker (their messages would wait unread)."""
    default = _broker_settings(scenario).get("heartbeat_ms", DEFAULT_HEARTBEAT_MS)
    heartbeats = {n: g.config.get("heartbeat_ms", default) for g in scenario.groups.values() if g.role == "worker"
                  for n in g.nodes}
    external = external_nodes(scenario, "worker")
    brokers = frozenset(nodes_with_role(scenario, "broker"))
    cut = fault_between(scenario, external, brokers, slow=False) if external else ""
    judged = external if scenario.observe and not cut else frozenset()
    checker = WorkerInterval(heartbeat_ms=heartbeats, default_ms=default, external=judged, brokers=brokers, **params)
    if judged:
        return checker
    why = f" ({cut})" if cut else " (the run does not observe them)"
    return noting_external(checker, scenario, ("worker",), f"the gaps between their messages{why}")


def _registers(scenario: Any, **params: Any) -> Registers:
    return Registers(external_workers=external_nodes(scenario, "worker"), observed=scenario.observe, **params)


def _metadata_unchanged(scenario: Any, **params: Any) -> checks.MetadataUnchanged:
    return checks.MetadataUnchanged(external_clients=external_nodes(scenario, "client"), **params)


def _heartbeat_answers(scenario: Any, **params: Any) -> HeartbeatAnswers:
    clients = external_nodes(scenario, "client")
    brokers = external_nodes(scenario, "broker")
    if not brokers:
        return HeartbeatAnswers(external_clients=clients, **params)
    # an external broker: its answers as the harness's workers receive them, or, where the file
    # may lose or delay them on the way, where the chaos proxy that observes the broker stands
    ours, default = _in_process(scenario, "worker"), _broker_settings(scenario).get("heartbeat_ms", DEFAULT_HEARTBEAT_MS)
    unsound = (rule_touching(scenario, LOSS, ours, brokers, ("PING", "REGISTER"))
               or rule_touching(scenario, LOSS, brokers, ours, ("PONG", "RECONNECT", "REGISTER"))
               or fault_between(scenario, ours, brokers))
    # (a damaged PING or REGISTER may still decode and ask for what the worker did not; a partition
    # may cut the connection a PONG was for, which the broker's ROUTER then drops unseen)
    observed = bool(unsound and scenario.observe
                    and not rule_touching(scenario, DAMAGE, ours, brokers, ("PING", "REGISTER"))
                    and not fault_between(scenario, ours, brokers, slow=False))
    checker = wire_checks.PingAnswersAsWorkersGetThem(
        heartbeat_ms={n: g.config.get("heartbeat_ms", default) for g in scenario.groups.values()
                      if g.role == "worker" for n in g.nodes}, default_ms=default, unsound="" if observed else unsound,
        brokers=brokers, external_clients=clients, observed=observed, workers=frozenset(ours), **params)
    return noting_external(checker, scenario, ("worker",), "the answers to their PINGs (the broker is external too)")


def _one_request_per_worker(scenario: Any, **params: Any) -> Any:
    brokers = external_nodes(scenario, "broker")
    if not brokers:
        return checks.OneRequestPerWorker(**params)
    ours = _in_process(scenario, "worker")
    unsound = (rule_touching(scenario, COUNT_DAMAGE, brokers, ours, ("REQUEST",))
               or rule_touching(scenario, COUNT_DAMAGE, ours, brokers, checks.READY_SIGNALS))
    return wire_checks.RequestsAsWorkersGetThem(external_workers=external_nodes(scenario, "worker"),
                                                unsound=unsound and f"the requests it gives workers ({unsound})",
                                                **params)


def _reply_unchanged(scenario: Any, **params: Any) -> Any:
    brokers = external_nodes(scenario, "broker")
    if not brokers:
        return checks.ReplyUnchanged(**params)
    unsound = rule_touching(scenario, REPLY_DAMAGE, scenario.node_names, scenario.node_names, ("REPLY",))
    return wire_checks.RepliesAsClientsGetThem(external_workers=external_nodes(scenario, "worker"),
                                               unsound=unsound and f"the replies it forwards ({unsound})", **params)


def _in_process(scenario: Any, role: str) -> list[str]:
    return [n for g in scenario.groups.values() if g.role == role and not g.command for n in g.nodes]


def _simple(cls: type) -> Callable[..., Any]:
    return lambda scenario, **params: cls(**params)


def _check(name: str, cls: type, factory: Callable[..., Any] | None = None,
           params: dict[str, Setting] | None = None, unseen: tuple[str, str] | None = None) -> Check:
    """``unseen``: the role whose external nodes the check does not judge, and what of them."""
    make = factory or _simple(cls)
    if unseen is not None:
        make = _noting(make, *unseen)
    return Check(name, make, params or {}, doc=cls.__doc__ or "", clause=cls.clause, checker=cls)


def _noting(make: Callable[..., Any], role: str, what: str) -> Callable[..., Any]:
    return lambda scenario, **params: noting_external(make(scenario, **params), scenario, (role,), what)


ROLES = {
    "broker": Role("broker", Broker, {
        "heartbeat": HEARTBEAT, "liveness": LIVENESS,
        "queue_limit": Setting("queue_limit", as_positive_int, "requests queued per service"),
        "handover": HANDOVER,
    }, "the ROUTER in the middle; exactly one per scenario"),
    "worker": Role("worker", Worker, {
        "service": Setting("service", as_str, "service name it registers"),
        "behaviour": Setting("behaviour", _behaviour, "echo | upper | reverse | forward:<service>"),
        "service_time": Setting("service_time_ms", as_ms, "time to process one request"),
        "heartbeat": HEARTBEAT, "liveness": LIVENESS,
    }, "registers one service and serves requests one at a time"),
    "client": Role("client", Client, {
        "timeout": Setting("timeout_ms", as_ms, "retry a request after this long without a reply"),
        "max_attempts": Setting("max_attempts", as_positive_int, "attempts before giving up"),
        "requests": Setting("requests", as_int, "requests to send at start (standalone clients)"),
        "service": Setting("service", as_str, "service of the requests sent at start"),
        "data": Setting("data", as_str, "data of the requests sent at start"),
    }, "sends requests, retries, hides duplicate replies"),
}

OPERATIONS = {
    "request": Operation("request", ("client",), {
        "service": Setting("service", as_str, "service to call (default echo)"),
        "size": Setting("size", as_int, "bytes of request data (default 16)"),
        "parts": Setting("parts", as_positive_int, "data parts (default 1)"),
    }, "a client application asks a service for something"),
}

CHECKS = {
    "exactly-once": _check("exactly-once", checks.ExactlyOnce, _exactly_once),
    "metadata-unchanged": _check("metadata-unchanged", checks.MetadataUnchanged, _metadata_unchanged),
    "one-request-per-worker": _check("one-request-per-worker", checks.OneRequestPerWorker,
                                     _one_request_per_worker),
    "worker-expiry": _check("worker-expiry", checks.WorkerExpiry, _expiry),
    "heartbeat-answers": _check("heartbeat-answers", HeartbeatAnswers, _heartbeat_answers),
    "reply-unchanged": _check("reply-unchanged", checks.ReplyUnchanged, _reply_unchanged),
    "worker-interval": _check("worker-interval", WorkerInterval, _worker_interval, {
        "factor": Setting("factor", _factor, "the tolerance factor on the agreed interval (default 2.5)"),
        "tolerance": Setting("tolerance_ms", as_ms, "slack for a live run's scheduling (default 20ms)"),
        "external_slack": Setting("external_slack_ms", as_ms, "more slack on the bound of an external worker, whose "
                                  "sends are seen when the chaos proxy reads them (default a quarter of its "
                                  "interval, at most 1s)")}),
    "worker-registers": _check("worker-registers", Registers, _registers, {
        "grace": Setting("grace_ms", as_ms, "running time a worker has to register, after its first message or a "
                                            "RECONNECT (default 2s)")}),
}


def wire(nodes: dict[str, tuple[str, dict[str, Any]]], endpoint: Callable[[str, str], str]) -> None:
    brokers = [n for n, (role, _) in nodes.items() if role == "broker"]
    if len(brokers) != 1:
        raise ValueError(f"DCP needs exactly one broker (dcp.broker.single), found {len(brokers)}")
    broker = brokers[0]
    bcfg = nodes[broker][1]
    addr = endpoint(broker, "frontend")
    bcfg["bind"] = [addr]
    # the interval broker and workers agree on (E-DCP-09), also as an external broker's
    # {heartbeat_ms} and {liveness}, so its command line can take what the harness's workers use
    bcfg.setdefault("heartbeat_ms", DEFAULT_HEARTBEAT_MS)
    bcfg.setdefault("liveness", DEFAULT_LIVENESS)
    for name, (role, cfg) in nodes.items():
        if role in ("worker", "client"):
            cfg["connect"] = addr
            cfg.setdefault("identity", name.encode())  # readable ids; checkers map them to nodes
        if role == "worker":
            cfg.setdefault("heartbeat_ms", bcfg["heartbeat_ms"])
            cfg.setdefault("liveness", bcfg["liveness"])


def command(op: str, node: str, params: dict[str, Any], k: int, rng: Any) -> dict[str, Any]:
    size = params.get("size", 16)
    parts = params.get("parts", 1)
    data = [rng.randbytes(size) for _ in range(parts)]
    rid = f"{node}-{k}"  # the request's id, and its correlation id in the trace (the reply names it too)
    return {"op": "request", "service": params.get("service", "echo"), "data": data, "id": rid, "corr": rid}


def resolve_target(name: str, view: TargetView) -> list[str] | None:
    if name == "broker":
        return running_with_role(view, "broker")
    return None


def wire_role(socket_type: str, sent: frozenset[str]) -> str | None:
    """The role of an endpoint in a capture: the broker is the ROUTER; a DEALER that registers
    or pings is a worker; one that only sends requests is a client."""
    if socket_type == "ROUTER":
        return "broker"
    if socket_type == "DEALER":
        if sent & {"REGISTER", "PING"}:
            return "worker"
        if "REQUEST" in sent:
            return "client"
    return None


PACKAGE = ProtocolPackage(
    name="dcp",
    tables=TABLES,
    catalogue=CATALOGUE,
    roles=ROLES,
    operations=OPERATIONS,
    checks=CHECKS,
    # exactly-once, one-request-per-worker and worker-expiry judge SHOULDs: opt-in (every shipped
    # file names them)
    default_checks=("metadata-unchanged", "heartbeat-answers", "reply-unchanged", "worker-registers"),
    mutants=MUTANTS,
    suites=SUITES,
    wire=wire,
    command=command,
    targets={"broker": "the running broker (DCP has exactly one: dcp.broker.single)"},
    resolve_target=resolve_target,
    capture=CaptureHints(channels={("DEALER", "ROUTER"): "to-broker"}, role=wire_role),
    senders=senders_by_role({"broker": ("worker", "client"), "worker": ("broker",), "client": ("broker",)}),
    # Every check reads an external node's traffic as the chaos proxy saw it, or leaves it out
    # (``ev.via``): an external worker's own sends are how ``worker-registers`` judges it.
    observed_checks=True,
    observed_links="all",
)
