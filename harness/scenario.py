"""Scenario files: validated YAML describing a topology, a workload, faults and checks.

`load_scenario(path)` returns a `Scenario` or raises `ScenarioError`, whose message names the
file, the line and the field. The format is documented in docs/scenarios.md.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from fault_injection import nemesis
from fault_injection.rules import Distribution, FaultSpecError, Rule, RuleSet
from harness.packages.base import ProtocolPackage, as_duration, as_positive_int, as_rate, as_str
from harness.registry import REGISTRY, package
from harness.targets import Targets
from harness.yamlsrc import Locations, SourceError, load, loads

ScenarioError = SourceError

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
TOP_KEYS = {
    "protocol", "name", "description", "duration", "seeds", "dialect", "nodes", "network",
    "workload", "faults", "check", "settle", "record_frames", "explore", "live",
}
LIVE_KEYS = {"observe"}


@dataclass
class NodeGroup:
    name: str
    role: str
    count: int | None  # None: one node named like the group; else nodes name.0 .. name.(n-1)
    config: dict[str, Any]
    command: str | None = None  # an external implementation (live runs)
    ready: dict[str, Any] | None = None
    implementation: str = "reference"
    start_ns: int = 0  # when the group's nodes start (late joiners)
    mutant: str | None = None  # a shipped mutant (the package's ``mutants``) instead of the reference node

    @property
    def nodes(self) -> list[str]:
        return [self.name] if self.count is None else [f"{self.name}.{i}" for i in range(self.count)]


@dataclass
class WorkloadItem:
    nodes: list[str]
    op: str
    params: dict[str, Any]
    rate: float  # operations per second per node
    start_ns: int
    end_ns: int
    limit: int | None = None  # at most this many operations per node


@dataclass
class Scenario:
    path: str
    protocol: str
    name: str
    description: str
    duration_ns: int
    seeds: list[int]
    dialect: str
    groups: dict[str, NodeGroup]
    latency: dict[str, Any]
    rules: RuleSet
    faults: list[Any]
    workload: list[WorkloadItem]
    checks: list[tuple[str, dict[str, Any]]]
    settle_ns: int
    targets: Targets
    record_frames: bool = True
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    # live runs: the chaos proxy reports the external nodes' side of their traffic to the checkers
    # (``live: {observe: false}`` turns it off; harness.live_observe); by default it does for a
    # protocol whose checks were reviewed for it (`ProtocolPackage.observed_checks`)
    observe: bool = True
    # The run's start in seconds since the Unix epoch, for nodes that stamp wall-clock times (Raft
    # reqids, which a peer refuses once older than REQUEST_UPDATE_TTL by its own clock): a live run
    # sets it (`harness.composition.run_scenario`) and every node's config gets it as ``epoch_s``;
    # None in simulation, where each node keeps its fixed default (byte-identical traces).
    epoch_s: int | None = None

    @property
    def node_names(self) -> list[str]:
        return [n for g in self.groups.values() for n in g.nodes]

    def role_of(self, node: str) -> str:
        for g in self.groups.values():
            if node in g.nodes:
                return g.role
        raise KeyError(node)

    def group_of(self, node: str) -> NodeGroup:
        for g in self.groups.values():
            if node in g.nodes:
                return g
        raise KeyError(node)

    @property
    def external(self) -> list[NodeGroup]:
        return [g for g in self.groups.values() if g.command]


def parse_seeds(value: Any) -> list[int]:
    """``7``, ``"1-500"``, ``[1, 2, 9]`` or ``"1-3,10"``."""
    if isinstance(value, bool):
        raise ValueError("seeds must be numbers")
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        out = []
        for v in value:
            out.extend(parse_seeds(v))
        return out
    if isinstance(value, str):
        out = []
        for part in value.split(","):
            part = part.strip()
            m = re.fullmatch(r"(\d+)\s*-\s*(\d+)", part)
            if m:
                lo, hi = int(m.group(1)), int(m.group(2))
                if hi < lo:
                    raise ValueError(f"seed range {part!r} runs backwards")
                if hi - lo > 1_000_000:
                    raise ValueError(f"seed range {part!r} is too long")
                out.extend(range(lo, hi + 1))
            elif part.isdigit():
                out.append(int(part))
            else:
                raise ValueError(f"not a seed or seed range: {part!r} (use 7, 1-500 or 1-3,10)")
        return out
    raise ValueError(f"not seeds: {value!r}")


class _Validator:
    def __init__(self, data: Any, locs: Locations) -> None:
        self.data = data
        self.locs = locs

    def fail(self, path: tuple[Any, ...], message: str) -> SourceError:
        return self.locs.error(path, message)

    def get(self, mapping: dict[str, Any], path: tuple[Any, ...], key: str, parse: Callable[[Any], Any],
            default: Any = ..., ) -> Any:
        if key not in mapping:
            if default is ...:
                raise self.fail(path, f"missing required field '{key}'")
            return default
        try:
            return parse(mapping[key])
        except (ValueError, TypeError) as e:
            raise self.fail(path + (key,), str(e)) from None

    def mapping(self, value: Any, path: tuple[Any, ...], what: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"{what} must be a mapping, got {type(value).__name__}")
        return value

    def known(self, mapping: dict[str, Any], path: tuple[Any, ...], keys: set[str] | dict[str, Any]) -> None:
        for k in mapping:
            if k not in keys:
                hint = _closest(str(k), list(keys))
                raise self.fail(path + (k,), f"unknown field{hint} (known: {', '.join(sorted(map(str, keys)))})")


Validator = _Validator  # for tools that validate their own section of a scenario file


def _closest(word: str, options: list[str]) -> str:
    import difflib

    m = difflib.get_close_matches(word, options, n=1)
    return f"; did you mean '{m[0]}'?" if m else ""


def _scenario_from(data: Any, locs: Locations, path: str) -> Scenario:
    v = _Validator(data, locs)
    top = v.mapping(data, (), "a scenario")
    v.known(top, (), TOP_KEYS)
    protocol = v.get(top, (), "protocol", as_str)
    if protocol not in REGISTRY:
        raise v.fail(("protocol",), f"unknown protocol {protocol!r} (known: {', '.join(REGISTRY)})")
    pkg = package(protocol)
    if not pkg.roles:
        raise v.fail(("protocol",), f"no scenario profile for {protocol!r} yet")
    name = v.get(top, (), "name", as_str)
    duration = v.get(top, (), "duration", as_duration)
    if duration <= 0:
        raise v.fail(("duration",), "must be positive")
    seeds = v.get(top, (), "seeds", parse_seeds, [1])
    dialect = v.get(top, (), "dialect", as_str, "strict")
    if dialect not in pkg.dialects:
        raise v.fail(("dialect",), f"{protocol} has no dialect {dialect!r} (known: {', '.join(pkg.dialects)})")
    groups = _groups(v, top, pkg)
    _check_topology(v, pkg, groups)
    node_names = [n for g in groups.values() for n in g.nodes]

    def resolve(pattern: Any, where: tuple[Any, ...]) -> list[str]:
        if not isinstance(pattern, str):
            raise v.fail(where, f"expected a node or group name, got {pattern!r}")
        if pattern in groups:
            return groups[pattern].nodes
        hits = [n for n in node_names if fnmatch.fnmatchcase(n, pattern)]
        if not hits:
            raise v.fail(where, f"no node or group named {pattern!r}{_closest(pattern, node_names + list(groups))}")
        return hits

    network = v.mapping(top.get("network", {}), ("network",), "network")
    v.known(network, ("network",), {"latency"})
    latency = v.mapping(network.get("latency", {}), ("network", "latency"), "network.latency")
    v.known(latency, ("network", "latency"), {"default", "links"})
    if "default" in latency:
        v.get(latency, ("network", "latency"), "default", Distribution.from_yaml)
    for i, link in enumerate(latency.get("links", []) or []):
        lp = ("network", "latency", "links", i)
        link = v.mapping(link, lp, "a link")
        v.known(link, lp, {"from", "to", "latency"})
        resolve(v.get(link, lp, "from", as_str), lp + ("from",))
        resolve(v.get(link, lp, "to", as_str), lp + ("to",))
        v.get(link, lp, "latency", Distribution.from_yaml)

    targets = Targets({g.name: g.nodes for g in groups.values()},
                      {n: g.role for g in groups.values() for n in g.nodes}, pkg)
    settle = v.get(top, (), "settle", as_duration, 0)
    rules, faults = _faults(v, top, targets, duration, set(pkg.tables[dialect].fields), settle)
    workload = _workload(v, top, pkg, groups, resolve, duration)
    checks = _checks(v, top, pkg)
    record = v.get(top, (), "record_frames", lambda x: bool(x), True)
    live = v.mapping(top.get("live", {}), ("live",), "live")
    v.known(live, ("live",), LIVE_KEYS)
    observe = v.get(live, ("live",), "observe", _as_bool, pkg.observed_checks)
    return Scenario(path, protocol, name, str(top.get("description", "")), duration, seeds, dialect, groups,
                    latency, rules, faults, workload, checks, settle, targets, record, raw=top, observe=observe)


def _as_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _check_topology(v: _Validator, pkg: ProtocolPackage, groups: dict[str, NodeGroup]) -> None:
    """A topology the protocol's wiring refuses (two DCP brokers, a Dafka cluster without a
    tower) is an error of the file's ``nodes``, found before anything runs."""
    if pkg.wire is None:
        return
    nodes = {n: (g.role, dict(g.config)) for g in groups.values() for n in g.nodes}
    try:
        pkg.wire(nodes, lambda node, purpose: f"tcp://{node}:1")
    except ValueError as e:
        raise v.fail(("nodes",), str(e)) from None


def _groups(v: _Validator, top: dict[str, Any], pkg: ProtocolPackage) -> dict[str, NodeGroup]:
    nodes = v.mapping(v.get(top, (), "nodes", lambda x: x), ("nodes",), "nodes")
    if not nodes:
        raise v.fail(("nodes",), "no nodes")
    groups: dict[str, NodeGroup] = {}
    for gname, spec in nodes.items():
        p = ("nodes", gname)
        if not isinstance(gname, str) or not _NAME.match(gname):
            raise v.fail(p, "node names start with a letter and hold letters, digits, '-' and '_'")
        spec = v.mapping(spec, p, f"node {gname!r}")
        v.known(spec, p, {"role", "count", "config", "command", "ready", "implementation", "start", "mutant"})
        role = v.get(spec, p, "role", as_str)
        if role not in pkg.roles:
            raise v.fail(p + ("role",), f"{pkg.name} has no role {role!r} (roles: {', '.join(pkg.roles)})")
        mutant = v.get(spec, p, "mutant", as_str, None)
        if mutant is not None:
            try:
                check_mutant(pkg, role, mutant)
            except ValueError as e:
                raise v.fail(p + ("mutant",), str(e)) from None
        count = v.get(spec, p, "count", as_positive_int, None)
        cfg_in = v.mapping(spec.get("config", {}) or {}, p + ("config",), "config")
        settings = pkg.roles[role].settings
        v.known(cfg_in, p + ("config",), settings)
        config = {}
        for key, value in cfg_in.items():
            s = settings[key]
            try:
                config[s.key] = s.parse(value)
            except (ValueError, TypeError) as e:
                raise v.fail(p + ("config", key), str(e)) from None
        command = v.get(spec, p, "command", as_str, None)
        ready = spec.get("ready")
        if ready is not None:
            ready = v.mapping(ready, p + ("ready",), "ready")
            v.known(ready, p + ("ready",), {"line", "port", "delay", "timeout"})
        impl = v.get(spec, p, "implementation", as_str, "external" if command else "reference")
        start = v.get(spec, p, "start", as_duration, 0)
        if mutant is not None and command:
            raise v.fail(p + ("mutant",), "a group runs either an external command or a mutant, not both")
        groups[gname] = NodeGroup(gname, role, count, config, command, ready,
                                  f"mutant:{mutant}" if mutant and impl == "reference" else impl, start, mutant)
    return groups


def check_mutant(pkg: ProtocolPackage, role: str, name: str) -> None:
    """Raise ValueError unless ``name`` is a shipped mutant of ``role``."""
    if name not in pkg.mutants:
        of_role = [m for m, (r, _, _) in pkg.mutants.items() if r == role]
        raise ValueError(f"{pkg.name} has no mutant {name!r}{_closest(name, list(pkg.mutants))} "
                         f"({role} mutants: {', '.join(of_role) or 'none'})")
    if pkg.mutants[name][0] != role:
        raise ValueError(f"mutant {name!r} is a {pkg.mutants[name][0]}, not a {role}")


def mutant_groups(scenario: Scenario, specs: dict[str, str]) -> dict[str, str]:
    """Group -> mutant for ``--mutant ROLE=NAME`` options: the left side names a role (every
    group of it) or a group. ValueError saying what is wrong."""
    pkg = package(scenario.protocol)
    out: dict[str, str] = {}
    for who, name in specs.items():
        groups = [g for g in scenario.groups.values() if who in (g.role, g.name)]
        if not groups:
            known = sorted({g.role for g in scenario.groups.values()} | set(scenario.groups))
            raise ValueError(f"--mutant {who}={name}: no role or group named {who!r} in {scenario.name} "
                             f"(roles and groups: {', '.join(known)})")
        for g in groups:
            if g.command:
                raise ValueError(f"--mutant {who}={name}: group {g.name!r} runs an external command")
            check_mutant(pkg, g.role, name)
            out[g.name] = name
    return out


def parse_mutant_options(items: list[str]) -> dict[str, str]:
    """``["broker=busy-worker", ...]`` -> {"broker": "busy-worker"}; ValueError on bad syntax."""
    out: dict[str, str] = {}
    for item in items:
        who, sep, name = item.partition("=")
        if not sep or not who.strip() or not name.strip():
            raise ValueError(f"--mutant takes ROLE=NAME (or GROUP=NAME), got {item!r}")
        out[who.strip()] = name.strip()
    return out


def with_mutants(scenario: Scenario, specs: dict[str, str]) -> Scenario:
    """The scenario with the groups ``--mutant`` options name running those mutants."""
    import dataclasses

    chosen = mutant_groups(scenario, specs)
    groups = {name: dataclasses.replace(g, mutant=chosen[name], implementation=f"mutant:{chosen[name]}")
              if name in chosen else g for name, g in scenario.groups.items()}
    return dataclasses.replace(scenario, groups=groups)


def _faults(v: _Validator, top: dict[str, Any], targets: Targets, duration: int,
            field_names: set[str], settle: int = 0) -> tuple[RuleSet, list[Any]]:
    """Message rules and scheduled faults, each parsed by its kind's ``from_yaml`` (one schema:
    `fault_injection.nemesis`); targets are checked here and resolved when a fault fires."""
    items = top.get("faults", []) or []
    if not isinstance(items, list):
        raise v.fail(("faults",), "faults must be a list")
    rules: list[Rule] = []
    faults: list[Any] = []
    for i, item in enumerate(items):
        p = ("faults", i)
        try:
            fault = nemesis.parse_fault(item, f"fault {i}", targets.check)
        except FaultSpecError as e:
            raise v.fail(p + e.path, e.reason) from None
        if isinstance(fault, Rule):
            for name, _ in fault.match.fields:  # a rule on a field no message has would never act
                if name not in field_names:
                    raise v.fail(p + ("rule", "fields", name), f"no message has a field {name!r}"
                                 f"{_closest(name, sorted(field_names))} (fields: {', '.join(sorted(field_names))})")
            rules.append(fault)
            continue
        if isinstance(fault, nemesis.Partition):
            both = targets.overlap(fault.sides)
            if both:
                raise v.fail(p + ("partition",), f"node(s) on both sides: {both}")
        start, end = nemesis.window_of(fault)
        if start >= duration:
            when = "at" if "at" in item else "from"
            raise v.fail(p + (when,), f"starts at or after the end of the scenario ({duration / 1e9:g}s): "
                                      "it would never act")
        if end is not None and end > duration + settle:
            field_ = "restart_after" if "restart_after" in item else "until"
            undo = "restart" if field_ == "restart_after" else "end"
            raise v.fail(p + (field_,), f"its {undo} at {end / 1e9:g}s comes after the end of the run "
                                        f"({duration / 1e9:g}s + settle {settle / 1e9:g}s): it would never happen "
                                        f"(end it earlier, lengthen 'duration' or 'settle', or drop '{field_}')")
        faults.append(fault)
    return RuleSet(rules), faults


def _workload(v: _Validator, top: dict[str, Any], pkg: ProtocolPackage, groups: dict[str, NodeGroup],
              resolve: Callable[..., list[str]], duration: int) -> list[WorkloadItem]:
    items = top.get("workload", []) or []
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        raise v.fail(("workload",), "workload must be a list of operations")
    out = []
    for i, item in enumerate(items):
        p = ("workload", i)
        item = v.mapping(item, p, "a workload item")
        op = v.get(item, p, "op", as_str)
        if op not in pkg.operations:
            raise v.fail(p + ("op",), f"{pkg.name} has no operation {op!r} (operations: {', '.join(pkg.operations)})")
        spec = pkg.operations[op]
        v.known(item, p, {"nodes", "op", "rate", "from", "until", "limit", *spec.params})
        nodes = resolve(v.get(item, p, "nodes", as_str), p + ("nodes",))
        for n in nodes:
            group = next(g for g in groups.values() if n in g.nodes)
            role = group.role
            if group.command:
                # An external process has no command channel: its own program decides what it does.
                raise v.fail(p + ("nodes",), f"node {n} is of group {group.name!r}, which runs an external command: "
                                             f"the harness cannot ask it to {op} (its program does its own work); "
                                             f"name only groups of reference nodes here")
            if role not in spec.roles:
                raise v.fail(p + ("nodes",), f"node {n} is a {role}; {op} is done by {', '.join(spec.roles)}")
        rate = v.get(item, p, "rate", as_rate)
        start = v.get(item, p, "from", as_duration, 0)
        end = v.get(item, p, "until", as_duration, duration)
        if end <= start:
            raise v.fail(p + ("until",), "must be after 'from'")
        if end > duration:
            raise v.fail(p + ("until",), "is after the scenario's duration")
        limit = v.get(item, p, "limit", as_positive_int, None)
        params = {}
        for key, s in spec.params.items():
            if key in item:
                try:
                    params[s.key] = s.parse(item[key])
                except (ValueError, TypeError) as e:
                    raise v.fail(p + (key,), str(e)) from None
        out.append(WorkloadItem(nodes, op, params, rate, start, end, limit))
    return out


def _checks(v: _Validator, top: dict[str, Any], pkg: ProtocolPackage) -> list[tuple[str, dict[str, Any]]]:
    items = top.get("check", list(pkg.default_checks))
    if not isinstance(items, list):
        raise v.fail(("check",), "check must be a list of property names")
    out = []
    for i, item in enumerate(items):
        p = ("check", i)
        if isinstance(item, str):
            name, given = item, {}
        elif isinstance(item, dict) and len(item) == 1:
            name, given = next(iter(item.items()))
            p = p + (name,)
            if not isinstance(given, dict):
                given = {"value": given}
        else:
            raise v.fail(p, "each check is a name or {name: {parameters}}")
        if name not in pkg.checks:
            raise v.fail(p, f"{pkg.name} has no check {name!r}{_closest(str(name), list(pkg.checks))}"
                            f" (checks: {', '.join(pkg.checks)})")
        spec = pkg.checks[name]
        v.known(given, p, spec.params)
        params = {}
        for key, value in given.items():
            try:
                params[spec.params[key].key] = spec.params[key].parse(value)
            except (ValueError, TypeError) as e:
                raise v.fail(p + (key,), str(e)) from None
        out.append((name, params))
    return out


def load_scenario(path: str) -> Scenario:
    data, locs = load(path)
    return _scenario_from(data, locs, path)


def load_scenario_source(path: str) -> tuple[Scenario, Locations]:
    """The scenario and where each of its values sits in the file (for tools that read more of
    the file than the scenario, such as ``explore``'s section), errors as `load_scenario`."""
    data, locs = load(path)
    return _scenario_from(data, locs, path), locs


def parse_scenario(text: str, path: str = "<string>") -> Scenario:
    data, locs = loads(text, path)
    return _scenario_from(data, locs, path)
