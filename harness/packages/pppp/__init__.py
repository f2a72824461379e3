"""PPPP (Paranoid Pirate Publishing Protocol): one publisher, a pool of subscribers.

Wire table: `harness.protocols.pppp`; clauses: `harness.protocols.pppp_clauses`; reference
nodes and mutants: `reference_nodes.pppp`; checkers: `harness.checkers.pppp`; conformance
suites: `harness.packages.pppp.suites`; docs/pppp.md.

Symbolic fault target ``publisher``: the running node of role ``publisher`` (PPPP connects a
single publisher and a pool of subscribers), whatever its group is called."""

from __future__ import annotations

from typing import Any, Callable

from harness.checkers import pppp as checks
from harness.checkers import pppp_optin
from harness.checkers.external import corrupts
from harness.checkers.pppp_common import PpppExternalWire
from harness.packages.base import (
    HANDOVER, Check, Operation, ProtocolPackage, Role, Setting, TargetView, as_int, as_ms, as_rate, as_str,
    faults_may_lose, one_of, partition_spans, running_with_role, senders_by_role,
)
from harness.packages.pppp.suites import SUITES
from harness.protocols.pppp import TABLES
from harness.protocols.pppp_clauses import CATALOGUE
from reference_nodes.correlation import tagged_content
from reference_nodes.pppp.common import (
    DEFAULT_FIRST_IDLE_MS, DEFAULT_GRACE_MS, DEFAULT_IDLE_MS, DEFAULT_LIVENESS, channel_list, channel_name,
    delivery_line,
)
from reference_nodes.pppp.mutants import MUTANTS
from reference_nodes.pppp.publisher import Publisher
from reference_nodes.pppp.subscriber import Subscriber

TIMING_KEYS = ("first_idle_ms", "idle_ms", "liveness", "grace_ms")
DEFAULTS = {"first_idle_ms": DEFAULT_FIRST_IDLE_MS, "idle_ms": DEFAULT_IDLE_MS, "liveness": DEFAULT_LIVENESS,
            "grace_ms": DEFAULT_GRACE_MS}


def liveness(v: Any) -> int:
    """The "multiple" of E-PPPP-12: 3 to 5."""
    n = as_int(v)
    if not 3 <= n <= 5:
        raise ValueError(f"the multiple must be 3, 4 or 5 (E-PPPP-12: 'usually 3-5'), got {v!r}")
    return n


def channels(v: Any) -> list[bytes]:
    """A channel, a list of them, or 'a,b,c' ("" is every channel for a subscriber)."""
    return channel_list(v, "channels")


TIMING = {
    "first_idle": Setting("first_idle_ms", as_ms, "the shorter first idle time: ACK/NACK and first heartbeat due"),
    "idle": Setting("idle_ms", as_ms, "the idle time: heartbeats after it; disconnect after liveness x idle"),
    "liveness": Setting("liveness", liveness, "the multiple (3-5) of idle / first idle before acting on silence"),
    "grace": Setting("grace_ms", as_ms, "a disconnected subscriber's backlog is kept this long"),
}

ROLES = {
    "publisher": Role("publisher", Publisher, {
        "bind": Setting("bind", as_str, "endpoint of its ROUTER (scenarios assign it)"),
        "channels": Setting("channels", channels, "standalone: channels it publishes on by itself"),
        "count": Setting("count", as_int, "standalone: messages per channel, from the first SUBSCRIBE on"),
        "rate": Setting("rate", as_rate, "standalone: messages per second per channel"),
        "reply_channel": Setting("reply_channel", as_str, "publish each CUSTOM's payload back on this channel"),
        "handover": HANDOVER,
        **TIMING,
    }, "one ROUTER; keeps every message until every subscriber ACKed it; exactly one per scenario"),
    "subscriber": Role("subscriber", Subscriber, {
        "connect": Setting("connect", as_str, "the publisher's endpoint (scenarios assign it)"),
        "channels": Setting("channels", channels, "channel prefixes it subscribes to (default: every channel)"),
        "ack_delay": Setting("ack_delay_ms", as_ms, "ACK/NACK this long after a PUBLISH (less than first_idle)"),
        **TIMING,
    }, "one DEALER; ACK/NACK, heartbeats, re-SUBSCRIBE; delivers each message exactly once"),
}

OPERATIONS = {
    "publish": Operation("publish", ("publisher",), {
        "channel": Setting("channels", channels, "channel, or list of channels picked at random (default news)"),
        "size": Setting("size", as_int, "payload bytes (default 64)"),
    }, "the publisher's application publishes a message"),
    "custom": Operation("custom", ("subscriber",), {
        "size": Setting("size", as_int, "payload bytes (default 16)"),
    }, "a subscriber's application sends the publisher a CUSTOM message"),
}


def timing_of(scenario: Any) -> dict[str, int]:
    """The agreed-upon times of a scenario: the publisher's settings, else the defaults."""
    out = dict(DEFAULTS)
    for g in scenario.groups.values():
        if g.role == "publisher":
            out.update({k: g.config[k] for k in TIMING_KEYS if k in g.config})
    return out


def reply_channel_of(scenario: Any) -> dict[str, Any]:
    """The publisher's ``reply_channel``, for the custom-reply check (none: any channel)."""
    for g in scenario.groups.values():
        if g.role == "publisher" and g.config.get("reply_channel") is not None:
            return {"reply_channel": channel_name(g.config["reply_channel"])}
    return {}


def lossy_of(scenario: Any) -> dict[str, Any]:
    """Whether the file's faults may lose or hold up messages (exactly-once's horizon)."""
    return {"lossy": faults_may_lose(scenario)}


# What a check takes from the scenario besides the agreed-upon times.
FROM_SCENARIO: dict[str, Callable[[Any], dict[str, Any]]] = {"custom-reply": reply_channel_of,
                                                              "exactly-once": lossy_of}


def external_nodes(scenario: Any) -> dict[str, str]:
    """Node -> role of the nodes run as external processes (``command:`` groups)."""
    return {n: g.role for g in scenario.groups.values() if g.command for n in g.nodes}


def _timed(cls: type) -> Callable[..., Any]:
    extra = FROM_SCENARIO.get(cls.name, lambda scenario: {})
    return lambda scenario, **params: cls(**timing_of(scenario), **extra(scenario),
                                          external=external_nodes(scenario), observed=scenario.observe,
                                          cuts=partition_spans(scenario), **params)


TOLERANCE = {"tolerance": Setting("tolerance_ms", as_ms, "timing slack on top of the agreed times (default 25ms)"),
             "external_slack": Setting("external_slack_ms", as_ms, "more slack on the deadlines of an external node, "
                                       "judged from what the chaos proxy saw (default: idle, at most 1000ms)")}
EXTRA_PARAMS = {"exactly-once": {"sync": Setting("sync", one_of("backlog", "full-dump"),
                                                 "how the publisher syncs a returning subscriber (default backlog)")}}


def _check(name: str, cls: type) -> Check:
    return Check(name, _timed(cls), params={**TOLERANCE, **EXTRA_PARAMS.get(name, {})}, doc=cls.__doc__ or "",
                 clause=cls.clause, checker=cls)


def _external_wire(scenario: Any, **params: Any) -> PpppExternalWire:
    external = external_nodes(scenario)
    subscribers = [n for g in scenario.groups.values() if g.role == "subscriber" for n in g.nodes if n not in external]
    publisher = next((n for n, role in external.items() if role == "publisher"), "")
    return PpppExternalWire(subscribers=subscribers, external_publisher=publisher, damaged=corrupts(scenario),
                            any_external=bool(external), **params)


CHECKS = {c.name: _check(c.name, c) for c in (*checks.ALL, *pppp_optin.OPT_IN)}
CHECKS["external-wire"] = Check("external-wire", _external_wire, doc=PpppExternalWire.__doc__ or "",
                                checker=PpppExternalWire)
# The opt-in checks (harness/checkers/pppp_optin.py, and stop-to-disconnected, a SHOULD) judge what
# only some implementations do: a file that names them in `check:` says its nodes claim it.
DEFAULT_CHECKS = (*(c.name for c in checks.ALL if c.level == "MUST"), "external-wire")


def wire(nodes: dict[str, tuple[str, dict[str, Any]]], endpoint: Callable[[str, str], str]) -> None:
    pubs = [n for n, (role, _) in nodes.items() if role == "publisher"]
    if len(pubs) != 1:
        raise ValueError(f"PPPP connects a single publisher and a pool of subscribers; found {len(pubs)} publishers")
    pcfg = nodes[pubs[0]][1]
    addr = endpoint(pubs[0], "router")
    pcfg["bind"] = [addr]
    for name, (role, cfg) in nodes.items():
        if role == "subscriber":
            cfg["connect"] = addr
            cfg.setdefault("identity", name.encode())  # the same identity after a restart
            for key in TIMING_KEYS:  # the agreed-upon times (E-PPPP-12)
                if key in pcfg:
                    cfg.setdefault(key, pcfg[key])


def command(op: str, node: str, params: dict[str, Any], k: int, rng: Any) -> dict[str, Any]:
    if op == "custom":
        return {"op": "custom", "payload": [rng.randbytes(params.get("size", 16))]}
    options = params.get("channels") or [b"news"]
    channel = options[0] if len(options) == 1 else options[rng.randrange(len(options))]
    # The payload carries the command's correlation id, so each subscriber's delivery of the
    # message pairs with this command in the trace (end-to-end latency in the report).
    corr = f"{node}-{k}"
    payload = tagged_content(corr, rng.randbytes(params.get("size", 64)))
    return {"op": "publish", "channel": channel, "payload": [payload], "corr": corr}


def resolve_target(name: str, view: TargetView) -> list[str] | None:
    if name == "publisher":
        return running_with_role(view, "publisher")
    return None


PACKAGE = ProtocolPackage(
    name="pppp",
    tables=TABLES,
    catalogue=CATALOGUE,
    roles=ROLES,
    operations=OPERATIONS,
    checks=CHECKS,
    default_checks=DEFAULT_CHECKS,
    mutants=MUTANTS,
    suites=SUITES,
    wire=wire,
    command=command,
    targets={"publisher": "the running publisher (PPPP connects a single publisher)"},
    resolve_target=resolve_target,
    output=delivery_line,
    senders=senders_by_role({"publisher": ("subscriber",), "subscriber": ("publisher",)}),
    observed_checks=True,
    observed_links="all",
)
