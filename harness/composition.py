"""Turn a scenario into a run: nodes + runtime + workload + nemesis + checkers.

`run_sim(scenario, seed, out_dir)` runs one seed in the deterministic simulator and returns a
`RunResult` (verdicts, statistics, paths of the trace and verdict files). The live variant is
in `harness.live_run`.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from fault_injection import nemesis
from fault_injection.naming import codec_fields
from harness.checkers.base import CRASH, RESTART, Checker, NoNodeErrors, Observer, Verdict
from harness.probe import probed
from harness.protocols import codec
from harness.registry import package
from harness.scenario import Scenario, WorkloadItem
from harness.sim.network import LatencyModel
from harness.sim.runtime import Simulation
from harness.trace import VERDICT, RunInfo, TraceWriter

HARNESS = "harness"  # the node column of verdict rows


@dataclass
class RunResult:
    scenario: str
    seed: int
    mode: str  # "sim" or "live"
    verdicts: list[Verdict]
    stats: dict[str, Any] = field(default_factory=dict)
    trace_path: str | None = None
    result_path: str | None = None

    @property
    def ok(self) -> bool:
        return all(v.ok for v in self.verdicts)

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.ok]

    def to_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "seed": self.seed, "mode": self.mode, "ok": self.ok,
                "verdicts": [v.to_dict() for v in self.verdicts], "stats": self.stats,
                "trace": self.trace_path}


def build_checkers(scenario: Scenario) -> list[Checker]:
    pkg = package(scenario.protocol)
    out: list[Checker] = [NoNodeErrors()]
    for name, params in scenario.checks:
        out.append(pkg.checks[name].factory(scenario, **params))
    return out


def node_configs(scenario: Scenario, endpoint: Callable[[str, str], str]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every node's (role, config), wired by the protocol's package (its `wire`)."""
    nodes: dict[str, tuple[str, dict[str, Any]]] = {}
    for g in scenario.groups.values():
        for n in g.nodes:
            cfg = dict(g.config)
            cfg.setdefault("dialect", scenario.dialect)
            nodes[n] = (g.role, cfg)
    package(scenario.protocol).wire(nodes, endpoint)
    return nodes


def workload_streams(scenario: Scenario, seed: int) -> list[Iterator[tuple[int, str, dict[str, Any]]]]:
    """One time-ordered stream of (time, node, command) per workload item and node.

    Arrivals are a Poisson process per node and workload item, drawn from generators derived
    from the seed, so the same seed gives the same workload. Streams are lazy: the simulator
    draws each operation when the previous one of its stream is due, so a long workload never
    sits in memory all at once."""
    pkg = package(scenario.protocol)

    def stream(i: int, item: WorkloadItem, node: str) -> Iterator[tuple[int, str, dict[str, Any]]]:
        rng = random.Random(f"{seed}/workload/{i}/{node}")
        t = item.start_ns
        k = 0
        while True:
            t += int(rng.expovariate(item.rate) * 1e9)
            if t >= item.end_ns or (item.limit is not None and k >= item.limit):
                return
            yield t, node, pkg.command(item.op, node, item.params, k, rng)
            k += 1

    return [stream(i, item, node) for i, item in enumerate(scenario.workload) for node in item.nodes]


def workload_schedule(scenario: Scenario, seed: int) -> list[tuple[int, str, dict[str, Any]]]:
    """(time, node, command) for every operation of the workload, in time order (ties in
    stream order)."""
    out = [(t, s, node, cmd) for s, stream in enumerate(workload_streams(scenario, seed)) for t, node, cmd in stream]
    out.sort(key=lambda x: (x[0], x[1]))
    return [(t, n, c) for t, _, n, c in out]


class _ObservedTarget:
    """The simulator as a nemesis target, reporting crashes and restarts to the checkers."""

    def __init__(self, sim: Simulation, observer: Observer) -> None:
        self.sim = sim
        self.observer = observer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sim, name)

    def crash(self, node: str) -> None:
        self.sim.crash(node)
        self.observer.emit(self.sim.now_ns, node, CRASH)

    def restart(self, node: str) -> None:
        self.sim.restart(node)
        self.observer.emit(self.sim.now_ns, node, RESTART)


def _latency(scenario: Scenario) -> LatencyModel:
    lat = scenario.latency
    links = {}
    for link in lat.get("links", []) or []:
        links[(link["from"], link["to"])] = link["latency"]
    if "default" in lat:
        return LatencyModel(lat["default"], links)
    return LatencyModel(links=links)


def trace_path(out_dir: str, scenario: Scenario, seed: int, mode: str = "sim") -> str:
    return os.path.join(out_dir, _slug(scenario.name), f"{mode}-seed-{seed}.parquet")


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name.lower()).strip("-") or "scenario"


def run_sim(scenario: Scenario, seed: int, out_dir: str | None = None, *,
            factories: dict[str, Any] | None = None, checks: bool = True) -> RunResult:
    """Run one seed of a scenario in simulation. ``factories`` may replace the node factory of
    some nodes (by node name) — how tests put a mutant in place of a reference node.
    ``checks=False`` runs without probes and checkers (benchmarks of the bare simulation)."""
    pkg = package(scenario.protocol)
    trace = None
    tpath = None
    if out_dir is not None:
        tpath = trace_path(out_dir, scenario, seed)
        trace = TraceWriter(tpath, RunInfo(f"{scenario.name}/{seed}", seed, scenario.name, scenario.protocol))
        trace.register_node(HARNESS, HARNESS, "")
    try:
        sim = Simulation(seed, trace, latency=_latency(scenario), rules=scenario.rules,
                         record_frames=scenario.record_frames,
                         fields_of=codec_fields(scenario.protocol, scenario.dialect))
        roles = {n: scenario.role_of(n) for n in scenario.node_names}
        observer = Observer(build_checkers(scenario), codec(scenario.protocol, scenario.dialect), roles)
        clock = lambda: sim.now_ns  # noqa: E731 - the observer's clock is virtual time
        ports: dict[str, int] = {}

        def endpoint(node: str, purpose: str) -> str:
            key = f"{node}/{purpose}"
            ports.setdefault(key, 5000 + len(ports))
            return f"tcp://{node}:{ports[key]}"

        for name, (role, cfg) in node_configs(scenario, endpoint).items():
            group = scenario.group_of(name)
            factory = (factories or {}).get(name) or pkg.roles[role].factory
            impl = "reference" if (factories or {}).get(name) is None else getattr(factory, "implementation", "mutant")
            sim.add_node(name, probed(factory, observer, clock) if checks else factory, role=role, config=cfg,
                         implementation=impl if group.implementation == "reference" else group.implementation,
                         start_at_ns=group.start_ns)
        for stream in workload_streams(scenario, seed):
            sim.command_stream(stream)
        nemesis.install(scenario.faults, _ObservedTarget(sim, observer))
        end = scenario.duration_ns + scenario.settle_ns
        for name in scenario.node_names:  # checkers that judge final state ask for it last
            if scenario.role_of(name) in pkg.final_status:
                sim.command(end - 1, name, {"op": "status"})
        sim.run(end)
        verdicts = observer.finish(sim.now_ns)
        stats = {"sent": sim.stats.sent, "delivered": sim.stats.delivered, "dropped": dict(sim.stats.dropped),
                 "events": sim.stats.events, "observed": observer.count, "virtual_ns": sim.now_ns}
        if trace is not None:
            for v in verdicts:
                trace.emit(HARNESS, VERDICT, sim.now_ns, verdict="pass" if v.ok else "fail", clause=v.clause or v.check,
                           msg_type=v.check, detail=v.detail)
        result = RunResult(scenario.name, seed, "sim", verdicts, stats, tpath)
    finally:
        if trace is not None:
            trace.close()
    if out_dir is not None:
        result.result_path = os.path.join(out_dir, _slug(scenario.name), f"sim-seed-{seed}.json")
        with open(result.result_path, "w") as f:
            json.dump(result.to_dict(), f, indent=2, default=str)
    return result
